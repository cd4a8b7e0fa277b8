"""What benchmarks/unseen.py prints from its runs: each job's figures, the table, the summary and
a verdict per target. Pure functions of the measured runs (no torch), so a test can check the
verdicts on runs it writes itself."""

from __future__ import annotations

import math
import statistics
from typing import Any

from paired import bootstrap_median  # benchmarks/paired.py: the paired benchmarks' 90 % interval

SPEEDUP_TARGET = 1.10  # agent / default, median over the jobs
INTERVAL_FLOOR = 0.95  # no job's whole interval below it
REGRET_TARGET = 3.0  # %, median
COLD_MEDIAN_TARGET = 20.0  # %, |cold predicted - actual| / actual
COLD_P90_TARGET = 40.0
LOADED_SHARE_TARGET = 0.90  # of loaded pairs, adaptive faster than adapt off
LOADED_WORST_TARGET = 1.05  # adaptive time / off time, never above

AGENT, DEFAULT, ADAPTIVE, OFF = "agent", "default", "adaptive", "off"


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p90(values: list[float]) -> float:
    """The nearest-rank 90th percentile (of 12 values: the second largest)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def paired(runs: list[dict[str, Any]], slow: str, fast: str) -> list[tuple[float, float]]:
    """(slow s, fast s) per round where both variants ran: the pairs of one comparison."""
    by_round: dict[int, dict[str, float]] = {}
    for r in runs:
        if r["variant"] in (slow, fast) and r.get("ok", True):
            by_round.setdefault(r["round"], {})[r["variant"]] = r["actual_s"]
    return [(v[slow], v[fast]) for _k, v in sorted(by_round.items()) if slow in v and fast in v]


def speedup(pairs: list[tuple[float, float]]) -> dict[str, Any] | None:
    """The median of the paired ratios (slow s / fast s: above 1 the second is faster) and the
    90 % bootstrap interval of that median (benchmarks/paired.py). With 3 pairs that interval is
    the range of the three ratios, which holds the true median with 75 % (sign test, 1 - 2/2^3):
    the figure of the spread, not a promise of 90 %."""
    if not pairs:
        return None
    ratios = [s / f for s, f in pairs]
    low, high = bootstrap_median(ratios)
    return {
        "ratio": statistics.median(ratios),
        "low": low,
        "high": high,
        "pairs": len(ratios),
        "ratios": ratios,
        "range_confidence": 1.0 - 2.0 / 2.0 ** len(ratios),
    }


def job_figures(job: dict[str, Any]) -> dict[str, Any]:
    """A job's figures from its runs: agent / default with its interval, the best measured plan and
    the regret against it, the cold prediction's error, and for a loaded job adaptive / off."""
    runs = [r for r in job["runs"] if r.get("ok", True)]
    agent = [r for r in runs if r["variant"] == AGENT]
    times: dict[str, list[float]] = {}
    for r in runs:
        if r.get("forced"):
            times.setdefault(r["variant"], []).append(r["actual_s"])
    plan_s = {label: med(v) for label, v in times.items()}
    best = min(plan_s, key=lambda k: plan_s[k]) if plan_s else None
    agent_s = med([r["actual_s"] for r in agent])
    errors = [
        100.0 * (r["predicted_s"] - r["actual_s"]) / r["actual_s"] for r in agent if r.get("predicted_s") is not None
    ]
    firsts = [r["first_plan"] for r in agent]
    shorts = {r["first_plan"]: r.get("first_plan_short", r["first_plan"]) for r in agent}
    out: dict[str, Any] = {
        "agent_s": agent_s,
        "default_s": med(times.get(DEFAULT, [])),
        "agent_plan": max(firsts, key=firsts.count) if firsts else "-",  # the most common, the earliest of a tie
        "agent_plan_short": shorts.get(max(firsts, key=firsts.count), "-") if firsts else "-",
        "agent_plans": firsts,
        "agent_moves": sum(len(r.get("moves", [])) for r in agent),
        "cold_predicted_s": med([r["predicted_s"] for r in agent if r.get("predicted_s") is not None]),
        "cold_error_pct": med(errors),  # signed: above 0 the prediction was too slow
        "agent_vs_default": speedup(paired(runs, DEFAULT, AGENT)),
        "plans_s": plan_s,
        "best_plan": best,
        "best_s": plan_s.get(best) if best else None,
        "regret_pct": 100.0 * (agent_s / plan_s[best] - 1.0) if best and agent else float("nan"),
        "adaptive_vs_off": speedup(paired(runs, OFF, ADAPTIVE)) if job["spec"].get("loaded") else None,
    }
    return out


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def summary(figures: list[dict[str, Any]]) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """The summary over the jobs and the verdict rows (target, measured, verdict)."""
    ratios = [f["agent_vs_default"]["ratio"] for f in figures if f.get("agent_vs_default")]
    below = [f for f in figures if f.get("agent_vs_default") and f["agent_vs_default"]["high"] < INTERVAL_FLOOR]
    regrets = [f["regret_pct"] for f in figures if not math.isnan(f.get("regret_pct", float("nan")))]
    cold = [abs(f["cold_error_pct"]) for f in figures if not math.isnan(f.get("cold_error_pct", float("nan")))]
    loaded = [f["adaptive_vs_off"] for f in figures if f.get("adaptive_vs_off")]
    pair_ratios = [r for lo in loaded for r in lo["ratios"]]  # off s / adaptive s, one per loaded pair
    faster = sum(1 for r in pair_ratios if r > 1.0)
    worst = max((1.0 / r for r in pair_ratios), default=float("nan"))  # adaptive s / off s
    out = {
        "agent_vs_default_median": med(ratios),
        "intervals_below_floor": len(below),
        "regret_median_pct": med(regrets),
        "cold_error_median_pct": med(cold),
        "cold_error_p90_pct": p90(cold),
        "loaded_pairs": len(pair_ratios),
        "loaded_faster_share": faster / len(pair_ratios) if pair_ratios else float("nan"),
        "loaded_job_medians": [lo["ratio"] for lo in loaded],
        "loaded_worst_time_ratio": worst,
    }
    rows = [
        (
            f"agent / default median >= {SPEEDUP_TARGET:.2f}x",
            f"{out['agent_vs_default_median']:.2f}x over {len(ratios)} jobs",
            verdict(bool(ratios) and out["agent_vs_default_median"] >= SPEEDUP_TARGET),
        ),
        (
            f"no job's interval wholly below {INTERVAL_FLOOR:.2f}x",
            f"{len(below)} job(s)" + (": " + ", ".join(f["job"] for f in below) if below else ""),
            verdict(bool(ratios) and not below),
        ),
        (
            f"regret against the best measured plan, median <= {REGRET_TARGET:.0f} %",
            f"{out['regret_median_pct']:.1f} %",
            verdict(bool(regrets) and out["regret_median_pct"] <= REGRET_TARGET),
        ),
        (
            f"cold prediction error, median <= {COLD_MEDIAN_TARGET:.0f} %",
            f"{out['cold_error_median_pct']:.1f} %",
            verdict(bool(cold) and out["cold_error_median_pct"] <= COLD_MEDIAN_TARGET),
        ),
        (
            f"cold prediction error, p90 <= {COLD_P90_TARGET:.0f} %",
            f"{out['cold_error_p90_pct']:.1f} %",
            verdict(bool(cold) and out["cold_error_p90_pct"] <= COLD_P90_TARGET),
        ),
        (
            f"loaded: adaptive faster than adapt off in >= {LOADED_SHARE_TARGET:.0%} of pairs",
            f"{faster} of {len(pair_ratios)} pairs"
            + (f" ({out['loaded_faster_share']:.0%})" if pair_ratios else "")
            + (f"; per job {', '.join(f'{r:.2f}x' for r in out['loaded_job_medians'])}" if loaded else ""),
            verdict(bool(pair_ratios) and out["loaded_faster_share"] >= LOADED_SHARE_TARGET) if pair_ratios else "-",
        ),
        (
            f"loaded: adaptive never slower than off by > {100 * (LOADED_WORST_TARGET - 1):.0f} %",
            f"worst adaptive / off time {worst:.3f}" if pair_ratios else "no loaded pairs",
            verdict(worst <= LOADED_WORST_TARGET) if pair_ratios else "-",
        ),
    ]
    return out, rows


def interval_text(s: dict[str, Any] | None) -> str:
    return "-" if not s else f"{s['ratio']:.2f}x [{s['low']:.2f}-{s['high']:.2f}]"


def table(rows: list[list[str]], head: list[str]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()

    return [line(head), "-" * len(line(head)), *(line(r) for r in rows)]


def job_row(job: dict[str, Any], f: dict[str, Any]) -> list[str]:
    spec = job["spec"]
    if job.get("error"):
        return [job["job"], "-", str(spec["batch"]), f"failed: {job['error'][:60]}", "-", "-", "-", "-"]
    n = len(f["agent_plans"])
    same = f["agent_plans"].count(f["agent_plan"])
    first = f"{f['agent_plan_short']}" + (f" ({same} of {n} runs)" if same < n else "")
    moves = f", {f['agent_moves']} move(s)" if f["agent_moves"] else ""
    short = job.get("short_labels", {})
    pred, act, err = f["cold_predicted_s"], f["agent_s"], f["cold_error_pct"]
    return [
        job["job"],
        f"{spec['depth']}x{spec['width']}, {job.get('params') or '?'} params",
        str(spec["batch"]),
        f"{first}{moves}",
        f"{pred:.1f}/{act:.1f} s ({err:+.0f} %)" if not math.isnan(err) else "-",
        interval_text(f["agent_vs_default"]),
        f"{f['regret_pct']:+.1f} % ({short.get(f['best_plan'], f['best_plan'])})" if f["best_plan"] else "-",
        interval_text(f["adaptive_vs_off"]) if spec.get("loaded") else "",
    ]


HEAD = [
    "job",
    "size",
    "batch",
    "agent's plan",
    "cold pred/actual s",
    "agent/default [90 %]",
    "regret (best forced)",
    "loaded adaptive/off",
]
LEGEND = (
    "agent/default and adaptive/off are speed-ups (default s / agent s, off s / adaptive s: above 1x the agent is"
    " faster), the median of the paired rounds with its 90 % bootstrap interval; cold: the agent run's first"
    " decision's prediction for the whole run against its training time (median of its runs, error signed);"
    " regret: the agent's median time over the best forced plan's, - 1"
)
