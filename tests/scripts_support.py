"""Loading the repository's scripts (scripts/, benchmarks/) in tests: they are files to run, not modules of
a package, so a test loads one by its path."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(relative: str) -> ModuleType:
    """The script at `relative` (to the repository's root, e.g. "scripts/build_cjk_font.py"), run as a module."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
