"""How page modules reach the engine: a module imported the first time a page uses it, not when the page is imported.

Why: the pages lay out records (explorer.record) and figures, which need no torch; the engine (torch, about
two seconds to import) is needed only once a page runs a model. Importing a page module therefore costs
nothing heavy (tests/test_torch_free.py holds every page module to that), and the first page that decodes
pays once per server.

Each attribute access goes through `importlib.import_module`, so the module is the ordinary one in
sys.modules (a test that patches it patches what the pages call) and its first import is guarded by the
import system's per-module locks: Streamlit runs sessions in threads, and Python 3.11's
importlib.util.LazyLoader does not guard a first access from two threads.
Not plain imports in functions: 65 functions in 14 modules (+11 TYPE_CHECKING blocks), ~98 lines added for 89 gone.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class EngineModule:
    """Stands for the module `name`; its attributes are the module's, looked up when used."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # a private or special name (copy, pickle, inspect probe these): never the module's
            raise AttributeError(attr)
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<engine module {self._name}{'' if self._module else ' (not imported yet)'}>"


def engine_module(name: str) -> Any:
    """The module `name` (e.g. "explorer.app.views"), imported on its first attribute access."""
    return EngineModule(name)
