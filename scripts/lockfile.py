"""The lock, requirements.lock: what scripts/setup.sh asks pip for; what scripts/lock.sh adds to pip-compile's output.

    python scripts/lockfile.py requirements "test,browser"   # setup.sh: the project's requirements with those extras
    python scripts/lockfile.py finish requirements.lock      # lock.sh: torch's entry widened, the header written

Standard library only: setup.sh runs it before anything is installed, lock.sh in pip-tools' throwaway venv.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import tomllib
import urllib.request
from pathlib import Path

# A pinned entry's first line in pip-compile's output: "name==version \".
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")
# Packages that only a CUDA build of torch pulls in: their presence means lock.sh resolved the wrong torch.
CUDA_PREFIXES = ("nvidia-", "cuda-", "triton")
PYPI_TORCH = "https://pypi.org/simple/torch/"

HEADER = """\
# The lock: every package that the app and all its extras need ({extras}), pip and setuptools
# included, each at one version with the sha256 of every file of that version. Written by `bash scripts/lock.sh`
# (pip-compile) with CPython {python} on {system} {machine}; don't edit it by hand. scripts/setup.sh installs
# from it in pip's hash-checking mode: a file whose hash is not listed here is refused.
# torch {public}: PyTorch's CPU build {local} or PyPI's macOS and Windows wheels (CPU builds). PyPI's Linux wheels
# of torch are CUDA builds whose CUDA packages are not in the lock, so pip refuses them: on Linux, pip has to find
# PyTorch's CPU wheel. Where pip's find-links hold no copy of it, run setup.sh (or start.sh, test.sh) with
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu (PyTorch's CPU index). On another Python or processor,
# or wherever pip says a package lacks a hash, re-lock there: download PyTorch's CPU wheel of torch {public} for that
# machine into a folder DIR, run `PIP_FIND_LINKS=DIR bash scripts/lock.sh`, then setup.sh with the same variable.
"""


def normalize(name: str) -> str:
    """PEP 503's form of a project name, so "Jinja2" and "jinja2", "typing_extensions" and "typing-extensions" match."""
    return re.sub(r"[-_.]+", "-", name).lower()


def entries(lock_text: str) -> dict[str, tuple[str, list[str]]]:
    """{normalized name: (version, hashes)} for every pinned entry of a pip-compile output with hashes."""
    found: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for line in lock_text.splitlines():
        match = PIN.match(line)
        if match:
            current = normalize(match.group(1))
            found[current] = (match.group(2), [])
        elif line.startswith((" ", "\t")) and current is not None:
            found[current][1].extend(HASH.findall(line))
        elif line.strip() and not line.startswith("#"):
            current = None
    return found


def requirements_for(pyproject_text: str, extras: str) -> list[str]:
    """The project's dependencies plus those of the comma-separated `extras`, as pyproject.toml spells them."""
    project = tomllib.loads(pyproject_text)["project"]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    wanted = [e.strip() for e in extras.split(",") if e.strip()]
    unknown = [e for e in wanted if e not in optional]
    if unknown:
        raise SystemExit(
            f"EXTRAS names no extra of pyproject.toml: {', '.join(unknown)} (its extras: {', '.join(optional)})"
        )
    return list(project["dependencies"]) + [r for e in wanted for r in optional[e]]


def is_linux_wheel(filename: str) -> bool:
    """Whether a wheel's platform tag is a Linux one (PyPI's Linux torch wheels are CUDA builds)."""
    return filename.endswith(".whl") and "linux" in filename[: -len(".whl")].rsplit("-", 1)[-1]


def widen_torch(lock_text: str, pypi_files: list[tuple[str, str]]) -> str:
    """torch's entry pinned at its public version with PyPI's non-Linux files of it added and its Linux ones left out.

    pip-compile pins what resolved here, e.g. torch==2.13.0+cpu with the CPU wheel's hash alone: no other system could
    install that. ==2.13.0 still admits 2.13.0+cpu, which pip prefers where it can see it (a local version sorts above
    its public one). `pypi_files` is (filename, "sha256:...") for each of PyPI's torch files, any version.
    """
    cuda = sorted(n for n in entries(lock_text) if n.startswith(CUDA_PREFIXES))
    if cuda:
        raise SystemExit(
            f"the lock holds CUDA packages ({', '.join(cuda)}): torch resolved to a CUDA build. Put PyTorch's CPU "
            "wheel where pip finds it (PIP_FIND_LINKS=DIR) and run scripts/lock.sh again"
        )
    lines = lock_text.splitlines(keepends=True)
    pins = [(i, PIN.match(line)) for i, line in enumerate(lines)]
    starts = [i for i, match in pins if match and normalize(match.group(1)) == "torch"]
    if not starts:
        raise SystemExit("the lock has no torch entry: pyproject.toml asks for torch")
    start = starts[0]
    end = start + 1
    while end < len(lines) and lines[end].startswith((" ", "\t")):
        end += 1
    version, hashes = entries("".join(lines[start:end]))["torch"]
    public = version.split("+", 1)[0]
    same_version = [(f, h) for f, h in pypi_files if f.startswith((f"torch-{public}-", f"torch-{public}.tar"))]
    linux = {h for f, h in same_version if is_linux_wheel(f)}
    others = {h for f, h in same_version if not is_linux_wheel(f)}
    kept = sorted((set(hashes) - linux) | others)
    comments = [line for line in lines[start + 1:end] if line.lstrip().startswith("#")]
    hash_lines = [f"    --hash={h}" for h in kept]
    block = [" \\\n".join([f"torch=={public}"] + hash_lines) + "\n"] + comments
    return "".join(lines[:start] + block + lines[end:])


def pypi_torch_files() -> list[tuple[str, str]]:
    """(filename, "sha256:...") for each of PyPI's torch files, from its JSON simple index (PEP 691)."""
    request = urllib.request.Request(PYPI_TORCH, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        listing = json.load(response)
    return [(f["filename"], f"sha256:{f['hashes']['sha256']}") for f in listing["files"] if "sha256" in f["hashes"]]


def header(lock_text: str, pyproject_text: str) -> str:
    """The lock's opening comment: what it holds, what made it, and what a user on another system does."""
    version, _ = entries(lock_text)["torch"]
    extras = ", ".join(tomllib.loads(pyproject_text)["project"].get("optional-dependencies", {}))
    return HEADER.format(
        extras=extras, python=platform.python_version(), system=platform.system(), machine=platform.machine(),
        public=version.split("+", 1)[0], local=version,
    )


def finish(lock: Path, pyproject: Path) -> None:
    """lock.sh's last step: torch's entry widened (widen_torch) and the header put on top of pip-compile's output."""
    resolved = lock.read_text()
    widened = widen_torch(resolved, pypi_torch_files())
    lock.write_text(header(resolved, pyproject.read_text()) + widened)


def main(argv: list[str] | None = None) -> None:
    """The two subcommands, for setup.sh and lock.sh."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    reqs = commands.add_parser("requirements", help="the project's requirements with EXTRAS, one a line")
    reqs.add_argument("extras", help='comma-separated extras of pyproject.toml, e.g. "test,browser", or ""')
    done = commands.add_parser("finish", help="widen torch's entry of LOCK and write its header")
    done.add_argument("lock", type=Path)
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    if args.command == "requirements":
        print("\n".join(requirements_for((root / "pyproject.toml").read_text(), args.extras)))
    else:
        finish(args.lock, root / "pyproject.toml")


if __name__ == "__main__":
    sys.exit(main())
