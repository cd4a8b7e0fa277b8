"""Hardware-aware compression, measured: does the agent's pruned model really run faster at the
same accuracy, and does it beat the simple heuristics at the same measured speed-up? One run, one table.

    pip install scikit-learn                 # load_digits: the benchmark's second real image set
    python benchmarks/compress.py            # ~11-14 min on 2 cores
    python benchmarks/compress.py --quick    # under 3 minutes (fewer episodes, shorter training)
    python benchmarks/compress.py --seeds 3  # every case three times (its own split, dense model and search), summarised

Cases: small_cnn and wide_cnn, each on the bundled demo set (generated 28x28 images: 4800, --quick 2400) and on
scikit-learn's load_digits (1797 real 8x8 handwritten digits, shipped inside the package), at the
agent's thread plan. Per case, in one process: train the dense model, search (TD3) for the
per-layer sparsity that reaches --target-speedup, deploy (the search's finalists re-measured and
deployment-fine-tuned beside uniform and L1 pruning at the target speed, the lowest validation loss
chosen, and which kind won printed; test accuracy on a split neither the search nor that choice
saw, with its 95 % paired interval), then, independently of those finalists, match two baselines to the agent's model by bisection on their overall
ratio (the least pruning whose measured step is as fast as the agent's model's, the two timed side by side) — uniform (the same sparsity in every layer) and an L1-magnitude heuristic (one
global L1 ranking of channels) — give them the same fine-tune, and finally time dense, agent,
uniform and L1 together, interleaved step by step (median of repeated steps; this machine is
noisy). Printed: measured step times and speed-ups, accuracy drops with their 95 % paired
intervals (the same test samples scored by the dense and the pruned model), the speed-up the cost model
predicts on apple-m2 and linux-cuda-rtx4090 (labelled predicted: no such device here), and the
search time.

On 8x8 digits a step at batch 64 is ~2 ms, mostly per-step overhead that no pruning removes
(measured: 1.23x from halving every layer of small_cnn at batch 64, 1.56x at batch 512), so the
digits cases time steps at batch 512; the demo cases at batch 64.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

MODELS = ("small_cnn", "wide_cnn")
TIMING_BATCH = {"demo": 64, "digits": 512}
# The full run trains as `trainpilot headless compress` does by default (compress/budget.py: 48 epochs but at
# least 2400 steps for the dense model, half that for the deployment fine-tune); --quick gives fixed short ones.
FULL = dict(episodes=24, search_seconds=45.0, dense_epochs=None, finetune_steps=100, deploy_epochs=None, search_repeats=6, deploy_repeats=21)
QUICK = dict(episodes=8, search_seconds=0.0, dense_epochs=16.0, finetune_steps=20, deploy_epochs=8.0, search_repeats=6, deploy_repeats=9)
PREDICT_ON = ("apple-m2", "linux-cuda-rtx4090")
# The demo generator's size for the full run. At its default 2400 the test split is 360 samples:
# 1 sample = 0.28 pt, and the binomial spread of a ~94 % accuracy is +/-1.25 pt, as wide as the
# 1-point threshold itself, so "drop <= 1 pt" was decided by a few test samples. 4800 (720 test
# samples) halves the resolution step; --quick keeps the default to stay under 3 minutes.
DEMO_SAMPLES = {"full": 4800, "quick": 2400}


def digits() -> Any:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print("error: benchmarks/compress.py needs scikit-learn for its second image set (load_digits):"
              " pip install scikit-learn", file=sys.stderr)
        sys.exit(1)
    import numpy as np

    from trainpilot.job.data import Dataset

    d = load_digits()
    return Dataset((d.images / 16.0).astype(np.float32)[:, None], d.target.astype(np.int64), "sklearn load_digits", 10)


def run_case(model: str, name: str, data: Any, budget: dict[str, Any], args: argparse.Namespace, seed: int) -> dict[str, Any]:
    from trainpilot.compress import CompressConfig, run_compression
    from trainpilot.compress.baselines import compare
    from trainpilot.compress.search import best

    config = CompressConfig(model=model, dataset=data, target_speedup=args.target_speedup, max_accuracy_drop=args.max_drop,
                            timing_batch=TIMING_BATCH[name], export=False, predict_on=PREDICT_ON, seed=seed, **budget)
    start = time.perf_counter()
    label = f"{model} / {name}" + (f" (seed {seed})" if args.seeds > 1 else "")
    report = run_compression(config, on_event=_progress(label.replace(" / ", "/")))
    rows, times, matched = compare(report, repeats=budget["deploy_repeats"], final_repeats=budget["deploy_repeats"])
    by = {r.name: r for r in rows}
    data_out = report.to_dict()
    return {
        "case": label, "group": f"{model} / {name}", "threads": report.threads, "batch": TIMING_BATCH[name],
        "dense_ms": times.seconds["dense"] * 1e3, "agent_ms": times.seconds["agent"] * 1e3,
        "agent": by["agent"], "uniform": by["uniform"], "l1": by["l1-global"],
        "dense_acc": report.dense_accuracy, "deployed": report.deployed,
        "pred_m2": data_out["predicted"]["apple-m2"]["speedup"], "pred_4090": data_out["predicted"]["linux-cuda-rtx4090"]["speedup"],
        "search_s": report.search_seconds, "case_s": time.perf_counter() - start, "episodes": len(report.evaluations),
        "kept": by["agent"].kept, "kept_uniform": by["uniform"].kept, "kept_l1": by["l1-global"].kept,
        "reason": report.verdict.reason, "test_n": report.samples["test"],
        "deploy_x": data_out["speedup_measured"] if report.measured else float("nan"),
        "deploy_iv": report.measured.interval("pruned") if report.measured else None,
        "search_best": best(report.evaluations, args.target_speedup, report.aim.aim if report.aim else 1.0),
        "aim": report.aim.aim if report.aim else float("nan"),
        "finalists": [f for f in report.finalists if f.tuned], "chosen_kept": dict(report.tuned.pruned.kept) if report.tuned else {},
        "chosen_kind": report.chosen_kind, "resolution": report.resolution,
    }


def _progress(label: str) -> Any:
    from trainpilot.compress import events as ev

    last: list[Any] = []

    def show(event: Any) -> None:
        if isinstance(event, ev.StageStarted):
            if event.stage == "deploy" and last and last[-1].best is not None:
                b = last.pop()
                print(f"[{label}] search done: {b.episode} episodes, best {b.best.speedup_text()} at {b.best.accuracy:.1%} validation",
                      file=sys.stderr, flush=True)
            print(f"[{label}] {event.stage}: {event.text}", file=sys.stderr, flush=True)
        elif isinstance(event, ev.EpisodeEvaluated):
            last[:] = [event]
    return show


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer episodes and shorter training (under 3 minutes)")
    parser.add_argument("--target-speedup", type=float, default=1.5)
    parser.add_argument("--max-drop", type=float, default=1.0, help="accuracy points")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1,
                        help="run every case this many times, seeds --seed, --seed+1, ... (each its own split, dense model and"
                             " search), and summarise each case over them: one run's comparison is decided by a few test samples")
    parser.add_argument("--model", choices=MODELS, action="append", help="only this model (repeatable; default both)")
    parser.add_argument("--dataset", choices=("demo", "digits"), action="append", help="only this set (repeatable; default both)")
    parser.add_argument("--demo-samples", type=int, default=None,
                        help=f"size of the generated demo set (default {DEMO_SAMPLES['full']}, --quick {DEMO_SAMPLES['quick']})")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    wanted = args.dataset or ["demo", "digits"]
    sets = {"digits": digits()} if "digits" in wanted else {}  # first: a missing scikit-learn stops the run before any work
    from trainpilot.job.data import demo_dataset

    demo_n = args.demo_samples or DEMO_SAMPLES["quick" if args.quick else "full"]
    sets = {**({"demo": demo_dataset(demo_n)} if "demo" in wanted else {}), **sets}
    budget = QUICK if args.quick else FULL
    start = time.perf_counter()
    results = [run_case(m, n, d, budget, args, seed) for n, d in sets.items() for m in (args.model or MODELS)
               for seed in range(args.seed, args.seed + args.seeds)]
    total = time.perf_counter() - start
    _table(results, args, total)
    return 0


def _table(results: list[dict[str, Any]], args: argparse.Namespace, total: float) -> None:
    print(f"\nHardware-aware compression: target >= {args.target_speedup:g}x measured step-time speed-up at <= {args.max_drop:g} pt"
          f" accuracy drop (test split). Step times measured here, median of interleaved steps; apple-m2 / rtx4090 predicted.")
    head = ("case", "thr", "batch", "dense acc", "dense ms", "agent ms", "agent x [95% int.]", "search best x [95% int.]",
            "at deploy x [95% int.]", "aim", "agent drop [95% int.]",
            "uniform x / drop [95% int.]", "L1 x / drop [95% int.]", "m2 x (pred.)", "4090 x (pred.)", "search s", "deployed (kind)")
    rows = []
    for r in results:
        a, u, l1 = r["agent"], r["uniform"], r["l1"]
        searched = r["search_best"].speedup_text().replace("x", "", 1) if r["search_best"] is not None else "-"
        rows.append((r["case"], str(r["threads"]), str(r["batch"]), f"{r['dense_acc']:.1%}", f"{r['dense_ms']:.2f}", f"{r['agent_ms']:.2f}", _speed(a),
                     searched, _interval(r["deploy_iv"]), f"{r['aim']:.3f}",
                     _drop(a), f"{_speed(u)} / {_drop(u)}", f"{_speed(l1)} / {_drop(l1)}",
                     f"{r['pred_m2']:.2f}", f"{r['pred_4090']:.2f}", f"{r['search_s']:.0f}", f"{'yes' if r['deployed'] else 'no'} ({r['chosen_kind']})"))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    print("channels kept (agent | uniform | L1): " + "; ".join(
        f"{r['case']}: {'/'.join(map(str, r['kept'].values()))} | {'/'.join(map(str, r['kept_uniform'].values()))} | {'/'.join(map(str, r['kept_l1'].values()))}"
        for r in results))
    print("finalists fine-tuned (search's channels -> with the free channels taken back, or the baseline at the target speed:"
          " speed-up, validation loss; * deployed):")
    for r in results:
        print(f"  {r['case']}: " + "; ".join(
            f"{_origin(f)} -> {'/'.join(map(str, f.kept.values()))}: {f.speedup:.2f}x, {f.val_loss:.4f}"
            f"{' *' if f.kept == r['chosen_kept'] else ''}" for f in r["finalists"]))
    print(f"test split (accuracy resolution; the half-width of a 95% interval at a drop of exactly {args.max_drop:g} pt, no gains): " + "; ".join(
        f"{r['case']}: {r['test_n']} samples, 1 sample = {100 / r['test_n']:.2f} pt" + _resolution(r) for r in results))
    kinds = _kinds(results)
    print("deployed configuration by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    hit = sum(1 for r in results if _at_target(r, args))
    beat = sum(1 for r in results if _against_better_baseline(r) < 0)
    tie = sum(1 for r in results if _against_better_baseline(r) == 0)
    unit = "runs" if args.seeds > 1 else "cases"
    print(f"agent >= {args.target_speedup:g}x at <= {args.max_drop:g} pt: {hit}/{len(results)} {unit};"
          f" lost less accuracy than both baselines: {beat}/{len(results)} (tied with the better one: {tie});"
          f" median search {statistics.median(r['search_s'] for r in results):.0f} s; whole run {total:.0f} s")
    deployed = [r for r in results if r["deployed"]]
    kept_speed = sum(1 for r in deployed if r["deploy_x"] >= args.target_speedup)
    print(f"deployed runs whose deployment measurement clears {args.target_speedup:g}x: {kept_speed}/{len(deployed)}")
    print("'agent x' is timed with the baselines at the end; 'search best x' is the search's best configuration as"
          " the search timed it (6 rounds); 'at deploy x' is the deployment controller's own measurement of the"
          " deployed model, timed until its interval decides against the target, which decided 'deployed'. Each is"
          " the median of the paired rounds' ratios with its 95 % order-statistic interval (compress/speedup_interval.py);"
          " 'aim' is the factor past the target the search aimed at (the dense model timed against itself).")
    for r in results:
        if not r["deployed"]:
            print(f"  {r['case']}: {r['reason']}")
    if args.seeds > 1:
        _over_seeds(results, args)


def _speed(row: Any) -> str:
    return _interval(row.interval) if row.interval is not None else f"{row.speedup:.2f}"


def _interval(iv: Any) -> str:
    return "-" if iv is None else f"{iv.ratio:.2f} [{iv.low:.2f}, {iv.high:.2f}]"


def _drop(row: Any) -> str:
    d = row.drop
    return f"{d.drop:+.2f} [{d.low:+.2f}, {d.high:+.2f}]"


def _origin(finalist: Any) -> str:
    e = finalist.evaluation
    return "/".join(map(str, e.kept.values())) if e is not None else finalist.kind


def _resolution(r: dict[str, Any]) -> str:
    res = r["resolution"]
    if res is None:
        return ""
    return f", ±{res.half_width:.2f} pt ({'resolved' if res.resolved else f'not resolved: about {res.samples_needed} needed'})"


def _kinds(results: list[dict[str, Any]]) -> dict[str, int]:
    """How many runs deployed (or, not deployed, chose) each kind of configuration, in order of first appearance."""
    return dict(Counter(str(r["chosen_kind"]) for r in results))


def _at_target(r: dict[str, Any], args: argparse.Namespace) -> bool:
    return r["agent"].speedup >= args.target_speedup and r["agent"].accuracy_drop <= args.max_drop


def _against_better_baseline(r: dict[str, Any]) -> int:
    """-1 when the agent lost less accuracy than both baselines of this run, 0 level with the better one, 1 more."""
    better = min(r["uniform"].accuracy_drop, r["l1"].accuracy_drop)
    return (r["agent"].accuracy_drop > better) - (r["agent"].accuracy_drop < better)


def _over_seeds(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Each case over its seeds: mean accuracy drops, and how often the agent lost less than both baselines."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(r["group"], []).append(r)
    print(f"\nover {args.seeds} seeds (accuracy drop, test split, mean [min, max]; agent against the better baseline of each run):")
    better = 0
    for case, runs in groups.items():
        drops = {k: [r[k].accuracy_drop for r in runs] for k in ("agent", "uniform", "l1")}
        mean = {k: statistics.mean(v) for k, v in drops.items()}
        below = sum(1 for r in runs if _against_better_baseline(r) < 0)
        level = sum(1 for r in runs if _against_better_baseline(r) == 0)
        hit = sum(1 for r in runs if _at_target(r, args))
        better += mean["agent"] < min(mean["uniform"], mean["l1"])
        print(f"  {case}: agent {mean['agent']:+.2f} [{min(drops['agent']):+.2f}, {max(drops['agent']):+.2f}],"
              f" uniform {mean['uniform']:+.2f} [{min(drops['uniform']):+.2f}, {max(drops['uniform']):+.2f}],"
              f" L1 {mean['l1']:+.2f} [{min(drops['l1']):+.2f}, {max(drops['l1']):+.2f}];"
              f" agent below both {below}, level {level}, above {len(runs) - below - level};"
              f" >= {args.target_speedup:g}x at <= {args.max_drop:g} pt {hit}/{len(runs)};"
              f" chosen: {', '.join(f'{k} {n}' for k, n in _kinds(runs).items())}")
    print(f"cases whose mean drop is below both baselines' means: {better}/{len(groups)}")


if __name__ == "__main__":
    sys.exit(main())
