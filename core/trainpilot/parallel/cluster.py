"""Scale-out predicted before buying it: a cluster file names the machines (hardware profiles, or
this machine as calibrated), the ranks on each and the link between them; the cost model predicts
each rank's step on its machine, the ring all-reduce of the gradients over the link, and whether
the whole beats the best single machine. What `trainpilot headless plan --cluster FILE` prints.

File format (see profiles/clusters/):

    name = "two RTX 4090 workstations, 10 GbE"
    description = "..."                       # optional
    [link]                                    # the slowest link between any two ranks
    bandwidth_gb_per_s = 1.17                 # decimal GB/s (10 GbE ~ 1.17 after framing)
    latency_us = 50
    [[nodes]]
    profile = "linux-cuda-rtx4090"            # a shipped profile, a .toml path (relative to this
    ranks = 1                                 #   file), or "this" (this machine, calibrated)

A node with one rank uses its fastest plan; with several ranks, the ranks share its cores (each
gets logical_cpus // ranks CPU threads): a hardware profile describes one accelerator, which ranks
of one node cannot each have. Any other key, a wrong type or a bad value is a ConfigError naming
the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainpilot.errors import ConfigError
from trainpilot.parallel.link import Link
from trainpilot.parallel.rank_plans import MultiRankPrediction, RankSpec, predict_from_costs
from trainpilot.plans import Plan, PlanPrediction
from trainpilot.predict.step_cost import StepCost, step_cost
from trainpilot.tomlfile import read_toml

THIS_MACHINE = "this"
_TOP = {"name": str, "description": str, "link": dict, "nodes": list}
_LINK = {"bandwidth_gb_per_s": (int, float), "latency_us": (int, float)}
_NODE = {"profile": str, "ranks": int}
_OPTIONAL = {"description"}


@dataclass(frozen=True)
class ClusterNode:
    profile: str  # as written: a shipped name, a path, or "this"
    ranks: int
    path: Path | None  # the profile file, None for "this" or a shipped name


@dataclass(frozen=True)
class Cluster:
    name: str
    description: str
    link: Link
    nodes: tuple[ClusterNode, ...]
    path: Path

    @property
    def ranks(self) -> int:
        return sum(n.ranks for n in self.nodes)


def _check(table: dict[str, Any], spec: dict[str, Any], where: str, path: Path) -> None:
    for key in table:
        if key not in spec:
            raise ConfigError(f"unknown key '{where}{key}' (expected {', '.join(where + k for k in spec)})", path)
    for key, kind in spec.items():
        if key not in table:
            if key in _OPTIONAL:
                continue
            raise ConfigError(f"missing required key '{where}{key}'", path)
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            want = (
                "a number"
                if isinstance(kind, tuple)
                else {str: "a string", int: "an integer", dict: "a table", list: "an array of tables"}[kind]
            )
            raise ConfigError(f"'{where}{key}' must be {want}, got {value!r}", path)


def load_cluster(path: str | Path) -> Cluster:
    path = Path(path)
    if not path.is_file():
        raise ConfigError("cluster file not found", path)
    data = read_toml(path, "cluster")
    _check(data, _TOP, "", path)
    _check(data["link"], _LINK, "link.", path)
    bandwidth, latency = float(data["link"]["bandwidth_gb_per_s"]), float(data["link"]["latency_us"])
    if not 0 < bandwidth < 1e6:
        raise ConfigError(f"'link.bandwidth_gb_per_s' must be a positive figure, got {bandwidth!r}", path)
    if not 0 <= latency < 1e9:
        raise ConfigError(f"'link.latency_us' must be 0 or more, got {latency!r}", path)
    if not data["nodes"]:
        raise ConfigError("'nodes' must list at least one node ([[nodes]] tables)", path)
    nodes = []
    for i, node in enumerate(data["nodes"]):
        where = f"nodes[{i}]."
        if not isinstance(node, dict):
            raise ConfigError(f"'nodes[{i}]' must be a table", path)
        _check(node, _NODE, where, path)
        if node["ranks"] < 1:
            raise ConfigError(f"'{where}ranks' must be at least 1, got {node['ranks']}", path)
        ref = node["profile"].strip()
        local = (path.parent / ref) if ref.endswith(".toml") else None
        nodes.append(ClusterNode(ref, node["ranks"], local))
    if not data["name"].strip():
        raise ConfigError("'name' must not be empty", path)
    link = Link(bandwidth * 1e9, latency * 1e-6, f"cluster file {path.name}")
    cluster = Cluster(data["name"].strip(), str(data.get("description", "")).strip(), link, tuple(nodes), path)
    for i, node in enumerate(cluster.nodes):  # every profile must load now: one error, before any work
        _target(node, i, path)
    return cluster


def _target(node: ClusterNode, index: int, path: Path) -> Any:
    from trainpilot.machine.target_profiles import resolve_target

    if node.profile == THIS_MACHINE:
        return None
    try:
        return resolve_target(node.path if node.path is not None else node.profile)
    except ConfigError as exc:
        raise ConfigError(f"'nodes[{index}].profile' = {node.profile!r}: {exc}", path) from None


@dataclass(frozen=True)
class NodePlan:
    node: ClusterNode
    machine: str
    cost: Any
    plan: Plan  # what each of its ranks runs
    single: PlanPrediction  # its best plan for the whole job alone


def _node_plan(node: ClusterNode, index: int, cluster: Cluster, profile: Any, load: Any, home: Any) -> NodePlan:
    from trainpilot.predict import CostModel

    target = _target(node, index, cluster.path)
    cost = CostModel.open(home, hardware=target)
    if cost.calibration is None:
        raise ValueError(
            f"nodes[{index}] is this machine, which is not calibrated yet (`trainpilot headless calibrate`)"
        )
    machine = target.name if target is not None else "this machine"
    plans = [p for p in cost.plans() if not p.is_compiled and p.backend in ("cpu", "cuda", "mps")]
    predictions = [cost.predict(profile, p, load) for p in plans]
    timed = [p for p in predictions if p.predicted_s is not None and not p.excluded]
    if not timed:
        raise ValueError(f"nothing can be predicted on nodes[{index}] ({machine})")
    single = min(timed, key=lambda p: p.predicted_s)  # type: ignore[arg-type, return-value]
    if node.ranks == 1:
        return NodePlan(node, machine, cost, single.plan, single)
    per_rank = max(cost.logical_cpus // node.ranks, 1)
    cpu = [p for p in timed if p.plan.backend == "cpu" and (p.plan.threads or 0) <= per_rank]
    plan = max(cpu, key=lambda p: p.plan.threads or 0).plan if cpu else Plan("cpu", threads=per_rank)
    return NodePlan(node, machine, cost, plan, single)


def _rank_cost(np_: NodePlan, profile: Any, load: Any, feats: Any) -> StepCost:
    threads = float(np_.plan.threads or 1) if np_.plan.backend == "cpu" else 1.0
    observed = 0.0 if np_.cost.is_described else float(getattr(load, "busy_cores", 0.0) or 0.0)
    busy = observed + (np_.node.ranks - 1) * threads  # the node's other ranks; other nodes are elsewhere
    sc = step_cost(feats, np_.plan, busy, np_.cost.calibration)
    if sc is None:
        raise ValueError(f"{np_.plan.label} cannot be predicted on {np_.machine}")
    prediction = np_.cost.predict(profile, np_.plan, load)
    return sc.scaled(float(prediction.detail.get("correction", 1.0)))


def plan_cluster(cluster: Cluster, profile: Any, load: Any = None, home: Any = None) -> dict[str, Any]:
    """Everything `headless plan --cluster --json` prints."""
    from trainpilot.predict.features import features_of

    if load is None:
        from trainpilot.machine.monitor import measure_load

        load = measure_load(0.3)
    feats = features_of(profile)
    nodes = [_node_plan(n, i, cluster, profile, load, home) for i, n in enumerate(cluster.nodes)]
    ranks, costs, where = [], [], []
    for i, np_ in enumerate(nodes):
        cost = _rank_cost(np_, profile, load, feats)
        for _r in range(np_.node.ranks):
            ranks.append(RankSpec(np_.plan))
            costs.append(cost)
            where.append(i)
    multi: MultiRankPrediction = predict_from_costs(feats, tuple(ranks), costs, cluster.link)
    best = min(nodes, key=lambda n: n.single.predicted_s)  # type: ignore[arg-type, return-value]
    best_s = float(best.single.predicted_s)  # type: ignore[arg-type]
    pays = multi.run_s < best_s
    verdict = (
        f"scaling out pays: {best_s / multi.run_s:.2f}x faster than the best single node"
        f" ({best.machine}, {best.single.plan.label})"
        if pays
        else f"scaling out does not pay: {multi.run_s / best_s:.2f}x the time of the best single node"
        f" ({best.machine}, {best.single.plan.label})"
    )
    described = any(n.cost.is_described for n in nodes)
    return {
        "cluster": {
            "name": cluster.name,
            "description": cluster.description,
            "file": str(cluster.path),
            "ranks": cluster.ranks,
            "link": cluster.link.to_dict(),
        },
        "ranks": [
            {
                "rank": r,
                "node": where[r],
                "machine": nodes[where[r]].machine,
                "profile": nodes[where[r]].node.profile,
                "plan": ranks[r].plan.to_dict(),
                "label": ranks[r].plan.label,
                "share": multi.shares[r],
                "compute_s": multi.compute_s[r],
            }
            for r in range(len(ranks))
        ],
        "allreduce_s": multi.allreduce_s,
        "gradient_bytes": multi.gradient_bytes,
        "step_s": multi.step_s,
        "predicted_s": multi.run_s,
        "best_single": {
            "node": nodes.index(best),
            "machine": best.machine,
            "label": best.single.plan.label,
            "plan": best.single.plan.to_dict(),
            "predicted_s": best_s,
        },
        "single_nodes": [
            {"node": i, "machine": n.machine, "label": n.single.plan.label, "predicted_s": n.single.predicted_s}
            for i, n in enumerate(nodes)
        ],
        "scaling_pays": pays,
        "speedup": best_s / multi.run_s,
        "verdict": verdict,
        "workload": profile.to_dict(),
        "notes": (["predicted for described machines (their published figures, not measurements)"] if described else [])
        + [
            "start-up of the ranks not included (unknown for a cluster); gradients all-reduced in fp32 after each"
            " step, no overlap with backward"
        ],
    }
