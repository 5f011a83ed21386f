"""A job recipe whose data takes a minute to prepare: a stand-in for a large upload, importable by the job's
process (a test module's class would import the whole test module there)."""

from __future__ import annotations

import time
from dataclasses import fields

from explorer.jobs.worker import Recipe


class SlowRecipe(Recipe):
    """Prepares as Recipe does, a minute later."""

    def setup(self, note=None):
        time.sleep(60)
        return super().setup(note)


def slow(recipe: Recipe) -> SlowRecipe:
    """`recipe` made slow to prepare."""
    return SlowRecipe(**{f.name: getattr(recipe, f.name) for f in fields(recipe)})
