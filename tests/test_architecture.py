"""The package's import graph has no cycles, imports only down the layers (docs/ARCHITECTURE.md), and no
module reaches into another module's private names.

Read with `ast`, not by importing: every `import` statement counts as an edge, at module level and
inside functions alike (a function-level import is how a cycle usually hides: it works until someone
moves it to the top). `from explorer.x import y` is an edge to `explorer.x.y` when `y` is a module,
else to `explorer.x`. The test fails with the cycle it found, so the fix is to move the shared piece
down to the module both sides can import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "explorer"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(tree: ast.AST, name: str) -> list[tuple[str, str | None, ast.AST]]:
    """(module, imported name or None, node) for every import statement anywhere in `tree`."""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found += [(base, a.name, node) for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "engine_module"
              and node.args and isinstance(node.args[0], ast.Constant)):
            found.append((node.args[0].value, None, node))  # a page's engine module, imported on first use
    return found


def edges(name: str) -> set[str]:
    """The explorer modules `name` imports."""
    out = set()
    for module, item, _ in imported(ast.parse(MODULES[name].read_text()), name):
        if item and f"{module}.{item}" in MODULES:
            out.add(f"{module}.{item}")
        elif module in MODULES:
            out.add(module)
    out.discard(name)
    return out


GRAPH = {name: edges(name) for name in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path that starts and ends at the same module, or None (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_the_package():
    assert "explorer.training.train" in GRAPH["explorer.jobs"]
    assert "explorer.app.views" in GRAPH["explorer.app.pages.explore"], "engine_module(...) counts as an import"
    assert "explorer.engine.model" in GRAPH["explorer.engine.decoding"]


def test_find_cycle_reports_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_names_imported_from_another_module(name):
    private = [f"{module}.{item} (line {node.lineno})"
               for module, item, node in imported(ast.parse(MODULES[name].read_text()), name)
               if item and item.startswith("_") and not item.startswith("__") and module.startswith("explorer")]
    assert not private, f"{name} imports private names: {', '.join(private)}"


def reach_ins(name: str) -> list[str]:
    """`x._name` (or getattr(x, "_name")) where x is not self, cls, super() or a module from outside the package:
    another object's private attribute, whose owner may rename it at will."""
    tree = ast.parse(MODULES[name].read_text())
    outside = {(a.asname or a.name).split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names if not a.name.startswith("explorer")}
    outside |= {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and not (node.module or "").startswith("explorer") and not node.level for a in node.names}

    def private(attr: str) -> bool:
        return attr.startswith("_") and not attr.startswith("__")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and (owner.id in ("self", "cls") or owner.id in outside):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            found.append(f"{ast.unparse(node)} (line {node.lineno})")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and private(node.args[1].value)):
            found.append(f"{ast.unparse(node)} (line {node.lineno})")
    return found


# Private attributes of third-party objects, read on purpose (each says why):
ALLOWED_REACH_INS = {
    # nn.LSTM keeps its weights' names only there; fused.py's layers are built from them
    "explorer.engine.model": ("shell._flat_weights_names",),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_reach_into_private_attributes(name):
    allowed = ALLOWED_REACH_INS.get(name, ())
    found = [f for f in reach_ins(name) if not f.startswith(allowed)]
    assert not found, f"{name} reads private attributes of other objects: {', '.join(found)}"


# The layers, lowest first: a module imports its own layer or lower ones, never higher (docs/ARCHITECTURE.md).
LAYERS = (
    ("shared", ("explorer.errors", "explorer.defaults", "explorer.settings", "explorer.equations", "explorer.limits", "explorer.storage",
                "explorer.outside_text")),
    ("data", ("explorer.data",)),
    ("record", ("explorer.record", "explorer.faithfulness")),  # the torch-free records: tokens, alignments from data
    ("engine", ("explorer.engine",)),
    ("checkpoints", ("explorer.checkpoints",)),
    ("training", ("explorer.training",)),
    ("jobs", ("explorer.jobs",)),
    ("app", ("explorer.app",)),
    ("cli", ("explorer.__main__", "explorer.cli_checks")),
)


def layer_of(name: str) -> int:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{name} belongs to no layer: add it to LAYERS (and docs/ARCHITECTURE.md)")


def test_every_module_has_a_layer():
    for name in MODULES:
        if name not in ("explorer",) and not MODULES[name].name == "__init__.py":
            layer_of(name)


def test_layers_import_downward():
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
              for a, targets in GRAPH.items() if a != "explorer" and MODULES[a].name != "__init__.py"
              for b in sorted(targets) if MODULES[b].name != "__init__.py" and layer_of(b) > layer_of(a)]
    assert not upward, "imports up the layers: " + "; ".join(upward)
