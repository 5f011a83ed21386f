"""The package imports only down its layers and has no import cycle (import-linter's contracts in
pyproject.toml's [tool.importlinter], docs/ARCHITECTURE.md), its pages' engine links point down too, and no
module reaches into another module's private names.

import-linter reads every `import` statement, at module level and inside functions alike (a function-level
import is how a cycle usually hides: it works until someone moves it to the top), but not a page's
`engine_module("...")` link: test_the_pages_engine_links_point_down holds those. The private-name checks read
the source with `ast`.
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


def test_the_import_contracts_hold(capsys):
    """Layers import downward (every top-level module has a layer), and no package's children import in a
    cycle: import-linter reports what broke and which imports to remove."""
    from importlinter.cli import lint_imports
    status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    assert status == 0, capsys.readouterr().out


def test_the_pages_engine_links_point_down():
    """A page's engine_module("...") target is below the top (CLI) layer, and neither is a page nor imports one
    (directly or not): the link would be a cycle once it became a plain import."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: import-linter brings tomli
        import tomli as tomllib

    import grimp
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    top = {f"explorer.{m.strip()}" for m in contracts[0]["layers"][0].split(":")}
    graph = grimp.build_graph("explorer", cache_dir=None)
    links = [(name, module) for name in MODULES if name.startswith("explorer.app.pages.")
             for module, item, node in imported(ast.parse(MODULES[name].read_text()), name)
             if isinstance(node, ast.Call)]
    assert ("explorer.app.pages.explore", "explorer.app.views") in links, "engine_module(...) calls are found"
    for page, target in links:
        assert target not in top, f"{page} links {target}, in the layer above the app"
        reached = graph.find_upstream_modules(target) | {target}
        assert not any(m.startswith("explorer.app.pages") for m in reached), f"{page} -> {target} leads back to a page"


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
