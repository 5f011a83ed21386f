"""requirements.lock, the lock that scripts/setup.sh installs from in pip's hash-checking mode, has the shape setup.sh
needs; and scripts/lockfile.py does its two jobs: setup.sh's list of requirements, lock.sh's widening of torch's entry.

The lock is checked as text (no install: scripts/setup.sh itself is what installs from it).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.scripts_support import load_script

ROOT = Path(__file__).resolve().parent.parent
LOCK = (ROOT / "requirements.lock").read_text()
PYPROJECT = (ROOT / "pyproject.toml").read_text()
LOCK_IN = (ROOT / "scripts" / "lock.in").read_text()
lockfile = load_script("scripts/lockfile.py")


def asked_for(pyproject_text: str, lock_in_text: str) -> list[Requirement]:
    """Every requirement the lock must satisfy: the project's, each extra's, the build backend's and lock.in's."""
    data = tomllib.loads(pyproject_text)
    project = data["project"]
    lines = list(project["dependencies"]) + [r for reqs in project["optional-dependencies"].values() for r in reqs]
    lines += data["build-system"]["requires"]
    lines += [line.split("#")[0].strip() for line in lock_in_text.splitlines() if line.split("#")[0].strip()]
    return [Requirement(line) for line in lines]


def lock_problems(lock_text: str, pyproject_text: str = PYPROJECT, lock_in_text: str = LOCK_IN) -> list[str]:
    """What would make a lock unfit for setup.sh, one line each (none: fit).

    Hash-checking mode needs each entry pinned with == and hashed; setup.sh asks for pyproject.toml's requirements
    and lock.in's under the lock as constraints, so each must be in it at a version it allows; a machine's path or
    index in the lock would send another machine's pip there; a CUDA package means torch resolved to a CUDA build.
    """
    problems = []
    for line in lock_text.splitlines():
        if line.strip() and not line.startswith(("#", " ", "\t")) and not lockfile.PIN.match(line):
            problems.append(f"not an entry pinned with ==: {line!r}")
    if re.search(r"file://|/opt/|^\s*--(extra-index-url|index-url|find-links)", lock_text, flags=re.M):
        problems.append("the lock names an index, a folder or a file of the machine that made it")
    entries = lockfile.entries(lock_text)
    for name, (version, hashes) in entries.items():
        if not hashes:
            problems.append(f"{name}=={version} has no hash")
        if name.startswith(lockfile.CUDA_PREFIXES):
            problems.append(f"{name}: a CUDA package (torch resolved to a CUDA build)")
    for req in asked_for(pyproject_text, lock_in_text):
        name = lockfile.normalize(req.name)
        if name not in entries:
            problems.append(f"{req} is not in the lock")
        elif not req.specifier.contains(Version(entries[name][0]), prereleases=True):
            problems.append(f"{req}: the lock has {name}=={entries[name][0]}")
    torch = entries.get("torch")
    if torch and Version(torch[0]).local:
        problems.append(f"torch=={torch[0]}: a local version, which no system but the one that made the lock has")
    return problems


def test_the_lock_is_fit_for_setup_sh() -> None:
    assert lock_problems(LOCK) == []
    entries = lockfile.entries(LOCK)
    assert {"torch", "pip", "setuptools", "streamlit", "playwright", "pytest"} <= entries.keys()
    # the CPU wheel pip finds here and PyPI's macOS and Windows wheels (at least one of each)
    assert len(entries["torch"][1]) >= 3


def first_entry(name: str) -> str:
    """The real lock's entry for `name`, from its pin to the line before the next one."""
    match = re.search(rf"^{name}==.*?(?=^\S)", LOCK, flags=re.M | re.S)
    assert match, name
    return match.group(0)


@pytest.mark.parametrize(
    "broken, expected",
    [
        # certifi has one hash: without it the entry has none
        (lambda t: t.replace(first_entry("certifi"), re.sub(r" \\\n    --hash=\S+", "", first_entry("certifi"))),
         "certifi==2026.10.19.post1 has no hash"),
        (lambda t: t.replace(first_entry("playwright"), ""), "playwright>=1.40 is not in the lock"),
        (lambda t: t.replace("\nstreamlit==1.67.0 ", "\nstreamlit==1.60.0 "), "streamlit>=1.65: the lock has"),
        (lambda t: t.replace("\npip==26.3 ", "\npip==25.3 "), "pip>=26.1: the lock has pip==25.3"),
        (lambda t: t.replace("\ntorch==2.13.0 ", "\ntorch==2.13.0+cpu "), "a local version"),
        (lambda t: t.replace("\ntorch==2.13.0 ", "\ntorch>=2.4 "), "not an entry pinned with ==: 'torch>=2.4 \\\\'"),
        (lambda t: "--find-links /opt/wheels\n" + t, "names an index, a folder or a file"),
        (lambda t: t + "nvidia-nccl-cu13==2.29.7 \\\n    --hash=sha256:" + "0" * 64 + "\n", "a CUDA package"),
    ],
    ids=["hash", "missing", "floor", "pip", "local-torch", "unpinned", "machine-path", "cuda"],
)
def test_lock_problems_finds_what_would_break_setup_sh(broken, expected: str) -> None:
    text = broken(LOCK)
    assert text != LOCK
    assert any(expected in problem for problem in lock_problems(text)), lock_problems(text)


def test_requirements_for_selects_the_extras() -> None:
    project = tomllib.loads(PYPROJECT)["project"]
    core = project["dependencies"]
    assert lockfile.requirements_for(PYPROJECT, "") == core
    both = lockfile.requirements_for(PYPROJECT, "test, browser")
    assert both == core + project["optional-dependencies"]["test"] + project["optional-dependencies"]["browser"]
    assert any(r.startswith("playwright") for r in both)
    assert not any(r.startswith("playwright") for r in lockfile.requirements_for(PYPROJECT, "test"))
    with pytest.raises(SystemExit, match="EXTRAS names no extra of pyproject.toml: tset .its extras: test, browser"):
        lockfile.requirements_for(PYPROJECT, "tset")


CPU, LINUX, MAC, WIN, OLD_MAC = (f"sha256:{c * 64}" for c in "abcde")
PYPI_FILES = [
    ("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", LINUX),
    ("torch-2.13.0-cp311-cp311-macosx_14_0_arm64.whl", MAC),
    ("torch-2.13.0-cp311-cp311-win_amd64.whl", WIN),
    ("torch-2.12.0-cp311-cp311-macosx_14_0_arm64.whl", OLD_MAC),
]
RESOLVED = f"""\
sympy==1.14.0 \\
    --hash=sha256:{"1" * 64}
    # via torch
torch==2.13.0+cpu \\
    --hash={CPU}
    # via
    #   attention-explorer (pyproject.toml)
    #   captum
tqdm==4.70.1 \\
    --hash=sha256:{"2" * 64}
    # via attention-explorer (pyproject.toml)
"""


def test_widen_torch_pins_the_public_version_with_pypis_cpu_builds() -> None:
    widened = lockfile.widen_torch(RESOLVED, PYPI_FILES)
    entries = lockfile.entries(widened)
    assert entries["torch"] == ("2.13.0", sorted([CPU, MAC, WIN]))
    assert entries["sympy"] == lockfile.entries(RESOLVED)["sympy"]
    assert entries["tqdm"] == lockfile.entries(RESOLVED)["tqdm"]
    assert "    #   captum\ntqdm==4.70.1 \\\n" in widened
    # PyPI's Linux wheel (a CUDA build) stays out even where pip-compile hashed it (a lock made from PyPI's torch)
    from_pypi = RESOLVED.replace("torch==2.13.0+cpu", "torch==2.13.0").replace(
        f"--hash={CPU}", f"--hash={LINUX} \\\n    --hash={MAC}"
    )
    assert lockfile.entries(lockfile.widen_torch(from_pypi, PYPI_FILES))["torch"] == ("2.13.0", sorted([MAC, WIN]))


def test_widen_torch_refuses_a_lock_with_cuda_packages() -> None:
    with pytest.raises(SystemExit, match="CUDA packages .nvidia-nccl-cu13.: torch resolved to a CUDA build"):
        lockfile.widen_torch(RESOLVED + "nvidia-nccl-cu13==2.29.7 \\\n    --hash=sha256:" + "3" * 64 + "\n", [])
