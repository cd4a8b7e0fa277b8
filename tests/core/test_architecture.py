"""The architecture as checks: the layers and the core/UI boundary (import-linter's contracts in
pyproject.toml), and no import cycle in the core — between its top-level units or between its
files — counting the imports inside functions, which a cycle would otherwise hide behind."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core" / "trainpilot"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(CORE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_checking_imports(tree: ast.Module) -> set[ast.AST]:
    """The import statements under `if TYPE_CHECKING:`: annotations only, never executed."""
    out: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {n for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return out


def core_imports(*, annotations: bool = True) -> dict[str, set[str]]:
    """module -> the core modules it imports, wherever in the file (inside functions too; under
    TYPE_CHECKING unless `annotations` is False)."""
    modules = {module_name(p): p for p in CORE.rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = set() if annotations else type_checking_imports(tree)
        for node in ast.walk(tree):
            targets: list[str] = []
            if node in skipped:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
                targets = submodules or [base]  # `from pkg import module` imports the module, `from m import name` m
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


def unit(module: str) -> str:
    """The top-level unit a module belongs to: trainpilot.run.session -> trainpilot.run."""
    return ".".join(module.split(".")[:2])


def test_the_import_graph_is_read():
    edges = core_imports()
    assert "trainpilot.run.epoch_loop" in edges["trainpilot.run.session"]
    assert "trainpilot.predict.model" in edges["trainpilot.predict.auto"]


def test_no_cycle_between_top_level_units():
    units: dict[str, set[str]] = defaultdict(set)
    for a, targets in core_imports().items():
        units[unit(a)] |= {unit(b) for b in targets if unit(b) != unit(a)}
    units.pop("trainpilot", None)  # the package's lazy __init__ names the public API of every layer
    assert cycles(units) == []


def test_no_cycle_between_files():
    """Between files, an annotation may name its owner (a collaborator of the session names the
    session's type): those imports never run, so they do not count here."""
    assert cycles(core_imports(annotations=False)) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_import_contracts_are_kept():
    """import-linter's contracts (pyproject.toml): the layers, and the core never imports a UI."""
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("import-linter is not installed (it comes with the test extra)")
    out = subprocess.run([command, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "broken" in out.stdout and "0 broken" in out.stdout
