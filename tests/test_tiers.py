"""The suite as scripts/test.sh runs it on two workers: each module on one worker, so its module-scoped fixtures
(trained models, running apps) are built once, and the modules holding a long test first.

(Its --dist loadgroup with an xdist_group mark per module grouped nothing under pytest 9.2, which no longer reads
the node id that xdist 3.8 rewrites to carry the group, pytest-xdist#1386: each module's tests went to both
workers.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import LONG_TIERS, long_modules_first

TEST_SH = Path(__file__).resolve().parent.parent / "scripts" / "test.sh"


def test_the_modules_with_a_long_test_go_first_on_an_xdist_worker(request):
    items = request.session.items
    ordered = long_modules_first(items)
    long_modules = {item.path for item in ordered if any(item.get_closest_marker(t) for t in LONG_TIERS)}
    in_long = [item.path in long_modules for item in ordered]
    assert in_long == sorted(in_long, reverse=True), "a quick module before a long one"
    for module in {item.path for item in items}:
        assert [i for i in ordered if i.path == module] == [i for i in items if i.path == module]
    if hasattr(request.config, "workerinput"):
        assert items == ordered


def test_the_test_scripts_workers_run_each_module_whole(tmp_path):
    """scripts/test.sh's own xdist options, on three small modules: every module's tests on one worker."""
    line = next(line for line in TEST_SH.read_text().splitlines() if " -m pytest " in line)
    options = line.split(" -m pytest ", 1)[1].replace('"${TEST_WORKERS:-2}"', "2").replace('"$@"', "").split()
    for name in "abc":
        (tmp_path / f"test_{name}.py").write_text("import pytest\n\n\n@pytest.mark.parametrize('i', range(6))\n"
                                                  "def test_it(i):\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    result = subprocess.run([sys.executable, "-m", "pytest", *options, "-v", "-p", "no:cacheprovider", "."],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    ran = re.findall(r"\[(gw\d+)\].*?PASSED (test_\w)\.py", result.stdout)
    assert len(ran) == 18, result.stdout
    workers = {module: {worker for worker, m in ran if m == module} for module in ("test_a", "test_b", "test_c")}
    assert all(len(found) == 1 for found in workers.values()), workers
    assert len(set().union(*workers.values())) == 2, f"both workers should get work: {workers}"
