"""The test tiers as scripts/test.sh runs them: every test carries its tier's marker and its module's xdist group,
and under --dist loadgroup xdist really groups by module (it reads the marks in its own collection hook, which ran
before tests/conftest.py's and saw none: each module's tests, and its module-scoped fixtures, went to both
workers) and gets the modules holding a long test first."""

from __future__ import annotations


from conftest import LONG_TIERS, long_modules_first


def test_every_test_is_in_its_modules_xdist_group(request):
    items = request.session.items
    assert all([m.args[0] for m in item.iter_markers("xdist_group")] == [item.path.stem] for item in items)
    if request.config.getoption("dist", "no") == "loadgroup":
        assert request.node.nodeid.endswith("@test_tiers"), request.node.nodeid


def test_the_modules_with_a_long_test_go_first_under_loadgroup(request):
    items = request.session.items
    ordered = long_modules_first(items)
    long = [any(item.get_closest_marker(tier) for tier in LONG_TIERS) for item in ordered]
    long_modules = {item.path for item, is_long in zip(ordered, long) if is_long}
    in_long = [item.path in long_modules for item in ordered]
    assert in_long == sorted(in_long, reverse=True), "a quick module before a long one"
    for module in {item.path for item in items}:
        assert [i for i in ordered if i.path == module] == [i for i in items if i.path == module]
    if request.config.getoption("dist", "no") == "loadgroup":
        assert items == ordered
