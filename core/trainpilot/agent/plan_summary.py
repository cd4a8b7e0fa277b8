"""What a person reads of a decision: every plan once in short form, each reason said once.

The agent's trace says everything (one line per plan, every reason; --verbose and --jsonl keep it).
A person reads this instead: the timed plans as rows sorted by the objective, the one thing that
sets each apart, what every plan shares said once beside them, the excluded plans grouped by their
reason with what would lift it, and the decision with at most three short reasons.

Built once where the agent decides (agent/orchestrator.py puts it in the decision step's data,
agent/planning.py in `headless plan --json`), as plain data, so the CLI and the app draw the same
words at their own widths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trainpilot.energy.objective import rank, score
from trainpilot.energy.reading import EST, joules_text
from trainpilot.plans import CHANNELS_LAST, Decision, Plan, PlanPrediction
from trainpilot.units import seconds

MAX_REASONS = 3
NEAR_TIE = 0.01  # a margin the reasons call a tie rather than "0% faster"
# An exclusion names what lifts it as its last words: "... (`trainpilot headless calibrate --compile`)".
_LIFT = re.compile(r"\s*\(`([^`]+)`\)\s*$")
# The rule cascade's line (predict/first_estimate.py): "rule cascade: <why> -> <backend> (confidence c)".
_CASCADE = re.compile(r"rule cascade: (.*) -> \S+ \(confidence [\d.]+\)$")
_THE_OBJECTIVE = {"time": "faster than", "energy": "less energy than", "edp": "lower energy x time than"}


@dataclass(frozen=True)
class Row:
    """One timed plan."""

    plan: dict[str, Any]
    short: str
    label: str
    predicted_s: float
    low_s: float | None
    high_s: float | None
    energy_j: float | None
    energy_estimated: bool
    source: str  # estimate | roofline | history
    relative_error: float | None
    note: str  # what sets this plan apart from the others ("" when nothing does)
    chosen: bool
    basis: str = ""  # what its prediction rests on, where the plans differ in that ("history: 3 run(s)")


@dataclass(frozen=True)
class Excluded:
    """Plans that cannot run, for one reason."""

    reason: str
    lift: str | None  # the command that would lift it, where the reason names one
    plans: tuple[str, ...]  # their short labels

    @property
    def text(self) -> str:
        """'4 compiled plans: torch.compile not measured here yet — trainpilot headless calibrate --compile'."""
        return f"{plans_named(self.plans)}: {self.reason}" + (f" — {self.lift}" if self.lift else "")


@dataclass(frozen=True)
class PlanSummary:
    rows: tuple[Row, ...]
    excluded: tuple[Excluded, ...]
    shared: tuple[str, ...]  # what every timed plan shares, said once
    decision: str  # 'split 1+1 · cl — 2.5 s (1.1–5.6), 25.3 J est., confidence 0.71 (cost model)'
    reasons: tuple[str, ...]  # at most MAX_REASONS
    chosen: str  # the chosen plan's short label
    confidence: float
    objective: str = "time"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["excluded"] = [dict(asdict(group), text=group.text) for group in self.excluded]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanSummary:
        return cls(
            rows=tuple(Row(**row) for row in data.get("rows", ())),
            excluded=tuple(
                Excluded(g["reason"], g.get("lift"), tuple(g.get("plans", ()))) for g in data.get("excluded", ())
            ),
            shared=tuple(data.get("shared", ())),
            decision=str(data.get("decision", "")),
            reasons=tuple(data.get("reasons", ())),
            chosen=str(data.get("chosen", "")),
            confidence=float(data.get("confidence", 0.0)),
            objective=str(data.get("objective", "time")),
            extra=dict(data.get("extra", {})),
        )


def shorten(text: str, plans: Sequence[Plan]) -> str:
    """`text` with every plan's long label replaced by its short one (the longest first, so
    'cpu (1 thread, channels_last)' is not read as 'cpu (1 thread' plus the rest)."""
    for plan in sorted({p for p in plans}, key=lambda p: len(p.label), reverse=True):
        if plan.label != plan.short_label:
            text = text.replace(plan.label, plan.short_label)
    return text


def summarize(
    predictions: Sequence[PlanPrediction],
    decision: Decision,
    objective: str = "time",
    *,
    context: Sequence[str] = (),
    settings_reasons: Sequence[str] = (),
) -> PlanSummary:
    """The summary of one decision. `context`: what the agent said before the plans (the layouts
    and precisions weighed, how batches load), said once with what the plans share;
    `settings_reasons`: why the chosen plan has its layout, precision and compilation."""
    timed = [p for p in predictions if not p.excluded and p.predicted_s is not None]
    ordered = rank(timed, objective) + [p for p in timed if score(p, objective) is None]
    facts = {id(p): _facts(p) for p in ordered}
    common = set.intersection(*(set(f) for f in facts.values())) if facts else set()
    all_estimated = bool(ordered) and all(_estimated(p) for p in ordered)
    rows = tuple(
        Row(
            plan=p.plan.to_dict(),
            short=p.plan.short_label,
            label=p.plan.label,
            predicted_s=float(p.predicted_s or 0.0),
            low_s=_bound(p, "low_s"),
            high_s=_bound(p, "high_s"),
            energy_j=p.detail.get("energy_j"),
            energy_estimated=_estimated(p),
            source=p.source,
            relative_error=p.detail.get("relative_error"),
            note="; ".join(f for f in facts[id(p)][1:] if f not in common),
            chosen=p.plan == decision.plan,
            basis="" if facts[id(p)][0] in common else facts[id(p)][0],
        )
        for p in ordered
    )
    shared = [*context]
    # in the order the first row says them, so the lines read the same from run to run
    shared += [f for f in facts[id(ordered[0])] if f in common] if ordered else []
    energy = sorted({source for p in ordered for source in _energy_sources(p)})
    if energy:
        shared.append(("energy (est.): " if all_estimated else "energy: ") + "; ".join(energy))
    if any(p.plan.memory_format == CHANNELS_LAST for p in ordered):
        shared.append("cl = channels_last")
    mine = next((p for p in ordered if p.plan == decision.plan), None)
    return PlanSummary(
        rows=rows,
        excluded=_excluded(predictions),
        shared=tuple(shared),
        decision=_decision_text(decision, mine, objective),
        reasons=_reasons(decision, ordered, mine, objective, [*settings_reasons]),
        chosen=decision.plan.short_label,
        confidence=decision.confidence,
        objective=objective,
        extra={"all_energy_estimated": all_estimated},
    )


# ---------------------------------------------------------------- the parts


def _bound(p: PlanPrediction, key: str) -> float | None:
    value = (p.detail.get("interval") or {}).get(key)
    return None if value is None else float(value)


def _estimated(p: PlanPrediction) -> bool:
    return bool(p.detail.get("energy_estimated", True)) if p.detail.get("energy_j") is not None else False


def _energy_sources(p: PlanPrediction) -> list[str]:
    """The figures an energy estimate starts from, without the plan's own thread count
    ('est.: 5 W per busy core (generic figure) x 2 thread(s)' -> '5 W per busy core (generic figure)');
    a split plan's, one per worker ('cpu (1 thread): est.: ... + cpu (1 thread): est.: ...')."""
    out = []
    for part in str(p.detail.get("energy_source") or "").split(" + "):
        for head in (f"{EST}: ", "measured: "):  # after the worker's label, where a split names one
            if head in part:
                part = part.split(head, 1)[1]
        if part.strip():
            out.append(part.split(" x ")[0].strip())
    return out


def _facts(p: PlanPrediction) -> list[str]:
    """What the prediction of one plan rests on, as short facts, its basis (the source) first:
    those every plan shares are said once under the table, the rest in the plan's own row."""
    out = [_source_fact(p)]
    split = p.detail.get("split") or {}
    if split.get("shares"):
        worker_ms = "/".join(f"{s * 1e3:.0f}" for s in split.get("worker_step_s", ()))
        out.append(f"shares {'+'.join(map(str, split['shares']))}" + (f", {worker_ms} ms a step" if worker_ms else ""))
    compiling = (p.detail.get("breakdown_s") or {}).get("compile")
    if compiling:
        out.append(f"compiling ~{seconds(float(compiling))}")
    out += [n.strip() for n in str(p.detail.get("notes") or "").split("; ") if n.strip()]
    drift = p.detail.get("drift") or {}
    if drift.get("recent_runs") and abs(float(drift.get("factor", 1.0)) - 1.0) >= 0.01:
        out.append(f"x{float(drift['factor']):.2f} for the last {drift['recent_runs']} run(s)")
    return [f for f in out if f]


def _source_fact(p: PlanPrediction) -> str:
    if p.source == "history":
        runs = p.detail.get("history_runs") or {}
        similar = runs.get("similar", 0)
        return f"history: {runs.get('same_workload', 0)} run(s)" + (f" + {similar} similar" if similar else "")
    if p.source == "roofline":
        return "roofline: calibration only, no comparable runs yet"
    if p.source == "estimate":
        return "first estimate: this machine is not calibrated yet"
    return p.source


def plans_named(plans: Sequence[str]) -> str:
    """'ane', '4 compiled plans', '3 plans'."""
    if len(plans) == 1:
        return plans[0]
    if all(" · compiled" in s for s in plans):
        return f"{len(plans)} compiled plans"
    if all(s.startswith("split") for s in plans):
        return f"{len(plans)} split plans"
    return f"{len(plans)} plans"


def split_lift(why: str) -> tuple[str, str | None]:
    """An exclusion's reason and the command that lifts it, where it names one:
    'torch.compile not measured here yet (`trainpilot headless calibrate --compile`)' ->
    ('torch.compile not measured here yet', 'trainpilot headless calibrate --compile')."""
    found = _LIFT.search(why)
    return (why[: found.start()], found.group(1)) if found else (why, None)


def _excluded(predictions: Sequence[PlanPrediction]) -> tuple[Excluded, ...]:
    groups: dict[tuple[str, str | None], list[str]] = {}
    for p in predictions:
        why = p.excluded_reason if p.excluded else ("no time estimate yet" if p.predicted_s is None else None)
        if why is None:
            continue
        groups.setdefault(split_lift(why), []).append(p.plan.short_label)
    return tuple(Excluded(reason, lift, tuple(plans)) for (reason, lift), plans in groups.items())


def _figures(p: PlanPrediction | None, fallback_s: float | None) -> str:
    if p is None:
        return seconds(fallback_s) if fallback_s is not None else "no time estimate"
    from trainpilot.units import predicted

    text = predicted(p.predicted_s, p.detail.get("interval"))
    if p.detail.get("energy_j") is not None:
        text += f", {joules_text(float(p.detail['energy_j']))}" + (f" {EST}" if _estimated(p) else "")
    return text


def _score_text(p: PlanPrediction, objective: str) -> str:
    if objective == "energy" and p.detail.get("energy_j") is not None:
        return joules_text(float(p.detail["energy_j"]))
    return seconds(p.predicted_s)


def _decision_text(decision: Decision, mine: PlanPrediction | None, objective: str) -> str:
    # the cost model is how the agent decides; the rule cascade (an uncalibrated machine) is said
    how = [] if decision.policy == "cost-model" else ["rule cascade"]
    how += [] if objective == "time" else [f"objective {objective}"]
    return (
        f"{decision.plan.short_label} — {_figures(mine, decision.predicted_s)},"
        f" confidence {decision.confidence:.2f}" + (f" ({', '.join(how)})" if how else "")
    )


def _reasons(
    decision: Decision,
    ordered: Sequence[PlanPrediction],
    mine: PlanPrediction | None,
    objective: str,
    settings: list[str],
) -> tuple[str, ...]:
    """Why this plan (against the runner-up, by the objective), how sure (the confidence's basis),
    and why its layout, precision or compilation: at most MAX_REASONS, each once."""
    plans = [p.plan for p in ordered] + [decision.plan]
    out: list[str] = []
    cascade = next((found for line in decision.reasoning if (found := _CASCADE.match(line))), None)
    if decision.policy != "cost-model" and cascade:
        out.append("not calibrated yet, so rules decide: " + shorten(cascade.group(1), plans))
    others = [p for p in ordered if p.plan != decision.plan and score(p, objective) is not None]
    if mine is not None and others and score(mine, objective):
        runner = others[0]
        ahead = score(runner, objective) / score(mine, objective) - 1.0  # type: ignore[operator]
        runner_text = f"{runner.plan.short_label} ({_score_text(runner, objective)})"
        if ahead >= NEAR_TIE:
            out.append(
                f"predicted {ahead:.0%} {_THE_OBJECTIVE.get(objective, 'better than')} the next plan, {runner_text}"
            )
        elif ahead >= 0:
            out.append(f"a near tie with {runner_text}: within {NEAR_TIE:.0%} by prediction")
    elif mine is not None and not others:
        out.append("the only plan that can run here")
    sure = next((line for line in decision.reasoning if line.startswith("confidence ")), None)
    if sure:
        out.append(shorten(sure, plans))
    out += [shorten(line, plans) for line in settings]
    return tuple(out[:MAX_REASONS])
