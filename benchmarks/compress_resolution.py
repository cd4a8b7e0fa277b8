"""How finely can one run tell two pruned configurations apart? The dense model trained as
benchmarks/compress.py trains it, then fixed per-layer channel counts each given the deployment
fine-tune (several seeds) and scored on the validation split (what the deployment controller
chooses by) and on the test split (what the benchmark reports).

    pip install scikit-learn
    python benchmarks/compress_resolution.py                                  # small_cnn on digits, five configurations
    python benchmarks/compress_resolution.py --dataset demo --kept 8/14 8/16 7/15
    python benchmarks/compress_resolution.py --splits --seeds 6 --kept 8/16 12/16 12/12   # each seed its own split
    python benchmarks/compress_resolution.py --splits --seeds 6 --time 5 --kept 8/16 9/18 10/20 8/24 10/16 6/32
    python benchmarks/compress_resolution.py --splits --seeds 6 --kept 7/14 8/16 --dense-epochs 48 --deploy-epochs 24   # the old recipe
    python benchmarks/compress_resolution.py --time-only 7 --kept 4/16 4/24 4/32 8/8 8/16 12/8 16/8   # speed only, seconds
    python benchmarks/compress_resolution.py --time-only 4 --timing-batch 64 --kept 8/16 8/8 4/8 3/16   # at the CLI's batch

With --time N every configuration is also timed against the dense model (all of them interleaved
in one run, as compress.py times its finalists, repeated N times), and each configuration that is
not uniform (not the same share of every layer) is set beside the most accurate uniform one that
stepped at least as fast: whether any allocation among those given beats uniform pruning at
equal measured speed on this machine. --time-only N only times (no training: untrained weights step
as fast), in groups of at most GROUP configurations each interleaved with the dense model: a quick
map of which counts are fast enough before giving the candidates the fine-tune.

Where the configurations' test drops differ by a sample or two and the validation ordering is not
the test ordering, which configuration "loses less" is decided by the test split's size, not by
the allocation.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))


GROUP = 12  # configurations timed together with the dense model. With 256 interleaved (one
# exploratory run) each step found the cache full of the others' weights, and a full-width copy
# timed 0.77x against the dense model it equals


def kept_counts(parser: argparse.ArgumentParser, text: str, channels: list[int]) -> list[int]:
    """`text` like 8/16 as one kept count per prunable layer of `channels`, or a parser error."""
    kept = [int(v) for v in text.split("/")] if all(v.isdigit() for v in text.split("/")) else []
    if len(kept) != len(channels) or not all(0 < k <= c for k, c in zip(kept, channels)):
        parser.error(f"--kept {text}: give one count per prunable layer, each 1..{'/'.join(map(str, channels))}")
    return kept


def pruned_to(dense: Any, layers: Any, full: dict[str, int], kept: list[int], shape: tuple[int, ...]) -> Any:
    """`dense` pruned to `kept` channels per prunable layer (in the order of `full`): a PrunedModel."""
    from trainpilot.compress.grow import sparsity_for
    from trainpilot.compress.prune import prune

    return prune(dense, layers, sparsity_for(dict(zip(full, kept)), full), shape)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="small_cnn", choices=("small_cnn", "wide_cnn"))
    parser.add_argument("--dataset", default="digits", choices=("digits", "demo"))
    parser.add_argument("--demo-samples", type=int, default=None, help="size of the generated demo set (default: compress.py's full run)")
    parser.add_argument("--kept", nargs="+", default=["8/11", "7/15", "8/16", "10/16", "12/16"],
                        help="channels kept per prunable layer, e.g. 8/16 (one number per layer)")
    parser.add_argument("--seeds", type=int, default=3, help="fine-tune seeds per configuration")
    parser.add_argument("--splits", action="store_true",
                        help="each seed also draws its own train/validation/test split and trains its own dense model"
                             " (as compress.py --seeds does): the test split's luck averages out, not only the fine-tune's")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dense-epochs", type=float, default=None,
                        help="train the dense models this many epochs (default: the job's rule, compress/budget.py)")
    parser.add_argument("--deploy-epochs", type=float, default=None,
                        help="fine-tune each configuration this many epochs (default: half the dense model's steps);"
                             " --dense-epochs 48 --deploy-epochs 24 is the recipe before budgets were counted in steps")
    parser.add_argument("--time", type=int, default=0, metavar="N",
                        help="also time every configuration against the dense model, N interleaved timings of 21 steps each")
    parser.add_argument("--timing-batch", type=int, default=None,
                        help="the batch --time and --time-only step at (default: compress.py's for the set, 64 on demo and 512 on"
                             " digits; `trainpilot headless compress` times at its --batch-size, 64, unless given --timing-batch)")
    parser.add_argument("--time-only", type=int, default=0, metavar="N",
                        help=f"only time the configurations (no training), N timings each, in groups of {GROUP} beside the dense model")
    args = parser.parse_args()

    import torch

    from compress import DEMO_SAMPLES, TIMING_BATCH, digits  # the benchmark's own data and timing batch
    from trainpilot.compress.budget import budget_for
    from trainpilot.compress.deploy import deployment_fine_tune
    from trainpilot.compress.finetune import accuracy, mean_loss, tensors
    from trainpilot.compress.job import split_three, train_dense
    from trainpilot.compress.prune import check_prunable
    from trainpilot.job.data import demo_dataset
    from trainpilot.job.models import build_model

    data = digits() if args.dataset == "digits" else demo_dataset(args.demo_samples or DEMO_SAMPLES["full"])
    shape, batch, threads = data.sample_shape, 64, args.threads

    def dense_for(split_seed: int) -> tuple:
        train, val, test = (tensors(s) for s in split_three(data, split_seed))
        torch.manual_seed(split_seed)
        dense = build_model(args.model, shape, data.num_classes)
        layers = check_prunable(dense, shape)
        budget = budget_for(len(train), batch, dense_epochs=args.dense_epochs, deploy_epochs=args.deploy_epochs)
        train_dense(dense, train, steps=budget.dense_steps, batch=batch, seed=split_seed, threads=threads)
        return train, val, test, dense, layers, accuracy(dense, test, threads=threads), budget

    # the counts are checked against the model's layers before any training; --time-only times this
    # untrained model's prunings (untrained weights step as fast)
    torch.manual_seed(0)
    untrained = build_model(args.model, shape, data.num_classes)
    untrained_layers = check_prunable(untrained, shape)
    full = {layer.name: layer.out_channels for layer in untrained_layers.prunable}
    channels = list(full.values())
    kept_of = {text: kept_counts(parser, text, channels) for text in args.kept}
    timing_batch = args.timing_batch or TIMING_BATCH[args.dataset]
    if args.time_only:
        return time_only(args, untrained, untrained_layers, full, kept_of, shape, data.num_classes, batch=timing_batch)
    train, val, test, dense, layers, dense_test, budget = dense_for(0)
    what = "seeds, each its own split and dense model" if args.splits else "fine-tune seeds each"
    print(f"{args.model} / {args.dataset}: dense {dense_test:.1%} on {len(test)} test samples (1 sample = {100 / len(test):.2f} pt),"
          f" {len(val)} validation; dense {budget.dense_steps} steps, fine-tune {budget.deploy_steps}; prunable layers {'/'.join(map(str, channels))} channels; {args.seeds} {what}")
    scores: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kept_of}  # (test drop, val acc, val loss) per seed
    dense_accuracies = [dense_test]
    for seed in range(args.seeds):
        if args.splits and seed > 0:
            train, val, test, dense, layers, dense_test, budget = dense_for(seed)
            dense_accuracies.append(dense_test)
        for kept_text, kept in kept_of.items():
            pruned = deployment_fine_tune(pruned_to(dense, layers, full, kept, shape), train, steps=budget.deploy_steps, batch=batch, seed=seed, threads=threads, teacher=dense)
            scores[kept_text].append(((dense_test - accuracy(pruned.model, test, threads=threads)) * 100.0,
                                      accuracy(pruned.model, val, threads=threads), mean_loss(pruned.model, val, threads=threads)))
    if args.splits:
        print(f"dense test accuracy, per split: {' '.join(f'{a:.1%}' for a in dense_accuracies)}"
              f" (mean {statistics.mean(dense_accuracies):.2%}); a configuration's mean accuracy is that mean minus its mean drop")
    print(f"{'kept':<10} {'mean drop':<10} {'test drop (pt), per seed':<36} {'val acc, per seed':<36} {'val loss, per seed':<48}")
    for kept_text, rows in scores.items():
        drops = [r[0] for r in rows]
        print(f"{kept_text:<10} {sum(drops) / len(drops):<+10.2f} {' '.join(f'{d:+.2f}' for d in drops):<36}"
              f" {' '.join(f'{r[1]:.3f}' for r in rows):<36} {' '.join(f'{r[2]:.4f}' for r in rows):<48}", flush=True)
    if args.time:
        mean_drop = {k: sum(r[0] for r in rows) / len(rows) for k, rows in scores.items()}
        speedups = time_configurations(dense, layers, full, kept_of, shape, data.num_classes, batch=timing_batch,
                                       threads=threads, timings=args.time)
        print_frontier(kept_of, channels, mean_drop, speedups, batch=timing_batch, threads=threads)
    return 0


def time_configurations(dense, layers, full: dict[str, int], kept_of: dict[str, list[int]], shape, num_classes: int, *,
                        batch: int, threads: int, timings: int) -> dict[str, list[float]]:
    """Each configuration's measured speed-up over the dense model in each of `timings` runs, all of
    them and the dense model interleaved in every run (the untrained weights time alike)."""
    from trainpilot.compress.cycles import measure_steps

    models = {"dense": dense, **{k: pruned_to(dense, layers, full, kept, shape).model for k, kept in kept_of.items()}}
    out: dict[str, list[float]] = {k: [] for k in kept_of}
    for _ in range(timings):
        times = measure_steps(models, shape, num_classes, batch=batch, threads=threads, repeats=21)
        for k in kept_of:
            out[k].append(times.speedup(k))
        print(f"  timed: dense {times.seconds['dense'] * 1e3:.2f} ms; median speed-up {statistics.median(out[next(iter(out))]):.2f}x so far"
              f" for {next(iter(out))}", file=sys.stderr, flush=True)
    return out


def time_only(args: argparse.Namespace, dense: Any, layers: Any, full: dict[str, int], kept_of: dict[str, list[int]],
              shape: tuple[int, ...], num_classes: int, *, batch: int) -> int:
    """Each configuration's measured speed-up over the (untrained) dense model, GROUP at a time."""
    channels, texts = list(full.values()), list(kept_of)
    speedups: dict[str, list[float]] = {}
    for start in range(0, len(texts), GROUP):
        group = {k: kept_of[k] for k in texts[start:start + GROUP]}
        speedups.update(time_configurations(dense, layers, full, group, shape, num_classes, batch=batch,
                                            threads=args.threads, timings=args.time_only))
    print(f"{args.model} / {args.dataset}: measured speed-up over dense (batch {batch}, {args.threads} threads; median of"
          f" {args.time_only} timings [lowest, highest], each in a group of at most {GROUP} beside the dense model)")
    for k in sorted(speedups, key=lambda k: -statistics.median(speedups[k])):
        kind = "uniform" if is_uniform(kept_of[k], channels) else "non-uniform"
        print(f"{k:<10} {kind:<12} {statistics.median(speedups[k]):.2f}x [{min(speedups[k]):.2f}, {max(speedups[k]):.2f}]")
    return 0


def is_uniform(kept: list[int], channels: list[int]) -> bool:
    """The same share of every layer, to within the one-channel rounding of the smallest layer."""
    shares = [k / c for k, c in zip(kept, channels)]
    return max(shares) - min(shares) <= 1.0 / min(channels)


def print_frontier(kept_of: dict[str, list[int]], channels: list[int], mean_drop: dict[str, float],
                   speedups: dict[str, list[float]], *, batch: int, threads: int) -> None:
    speed = {k: statistics.median(v) for k, v in speedups.items()}
    print(f"\nmeasured speed-up over dense (batch {batch}, {threads} threads; median of {len(next(iter(speedups.values())))}"
          f" interleaved timings [lowest, highest]) and the most accurate uniform configuration at least as fast:")
    print(f"{'kept':<10} {'kind':<12} {'speed-up':<24} {'mean drop':<10} {'uniform as fast':<16} {'its drop':<10} {'verdict'}")
    uniform = [k for k in kept_of if is_uniform(kept_of[k], channels)]
    for k in sorted(kept_of, key=lambda k: -speed[k]):
        low, high = min(speedups[k]), max(speedups[k])
        cell = f"{speed[k]:.2f}x [{low:.2f}, {high:.2f}]"
        if k in uniform:
            print(f"{k:<10} {'uniform':<12} {cell:<24} {mean_drop[k]:<+10.2f}")
            continue
        rivals = [u for u in uniform if speed[u] >= speed[k]]
        if not rivals:
            print(f"{k:<10} {'non-uniform':<12} {cell:<24} {mean_drop[k]:<+10.2f} {'none given':<16} {'':<10} no uniform as fast among those given")
            continue
        best = min(rivals, key=lambda u: mean_drop[u])
        verdict = "beats uniform" if mean_drop[k] < mean_drop[best] else "uniform as good or better"
        print(f"{k:<10} {'non-uniform':<12} {cell:<24} {mean_drop[k]:<+10.2f} {best:<16} {mean_drop[best]:<+10.2f} {verdict}")


if __name__ == "__main__":
    sys.exit(main())
