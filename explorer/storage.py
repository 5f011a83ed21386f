"""Files on disk, handled defensively: bounded reads of regular files only, a read-only folder of
shipped models, one writer per path, and no orphaned temporary files.

Why each: `/dev/zero` reports size 0 and never ends, a FIFO blocks the first read forever, a path
spelled `runs/../pretrained/x` or through a symlink still lands in the shipped folder, and two
processes saving to one path would each report success while one silently lost.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from explorer.errors import ExplorerError

MAX_PATH_CHARS = 4096


def _stat(path: Path, what: str) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise ExplorerError(f"cannot read {what} {path}: no such file") from None
    except OSError as exc:
        raise ExplorerError(f"cannot read {what} {_short(path)}: {exc.strerror or exc}") from None


def _short(path: str | Path) -> str:
    """A path for a one-line message: very long ones are cut in the middle."""
    text = str(path)
    return text if len(text) <= 120 else f"{text[:60]}…{text[-40:]} ({len(text):,} characters)"


def check_regular(path: Path, what: str, max_bytes: int) -> os.stat_result:
    """The file's stat when it is a regular file of at most `max_bytes`; ExplorerError otherwise
    (folders, devices, FIFOs and sockets are refused without being opened)."""
    info = _stat(path, what)
    if stat.S_ISDIR(info.st_mode):
        raise ExplorerError(f"cannot read {what} {_short(path)}: it is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ExplorerError(f"cannot read {what} {_short(path)}: not a regular file (a device, pipe or socket)")
    if info.st_size > max_bytes:
        raise ExplorerError(f"{_short(path)} is {info.st_size:,} bytes; {what}s are at most {max_bytes:,}")
    return info


def read_regular(path: str | Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file, reading at most `max_bytes` + 1 whatever the file claims.

    The file is opened non-blocking and checked again through its descriptor, so one swapped for a
    FIFO or a device between the check and the open is refused too, without blocking."""
    path = Path(path)
    check_regular(path, what, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ExplorerError(f"cannot read {what} {_short(path)}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ExplorerError(f"cannot read {what} {_short(path)}: not a regular file")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ExplorerError(f"cannot read {what} {_short(path)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise ExplorerError(f"{_short(path)} is over {max_bytes:,} bytes; {what}s are at most {max_bytes:,}")
    return data


def check_path_text(text: str, what: str) -> None:
    """ExplorerError for a path no file system takes (too long, a part over 255 bytes, NUL)."""
    if "\x00" in text:
        raise ExplorerError(f"the {what} contains a NUL character")
    if len(text) > MAX_PATH_CHARS:
        raise ExplorerError(f"the {what} has {len(text):,} characters; the limit is {MAX_PATH_CHARS:,}")
    for part in text.split(os.sep):
        if len(os.fsencode(part)) > 255:
            raise ExplorerError(f"the {what} has a name of {len(os.fsencode(part)):,} bytes; "
                                "file names are at most 255")


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether `path`, with every symlink and `..` resolved, is `folder` or lies under it."""
    real, base = os.path.realpath(path), os.path.realpath(folder)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def refuse_read_only(path: str | Path, folder: str | Path, name: str) -> None:
    """ExplorerError when a write to `path` would land in the read-only `folder` of shipped models."""
    if inside(path, folder):
        raise ExplorerError(f"{name} is in the shipped models' folder, which is read-only: "
                            "save it elsewhere (for example runs/)")


def _temp_pattern(target: Path) -> re.Pattern[str]:
    """The names tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp") gives for `target`."""
    return re.compile(rf"\.{re.escape(target.name)}\.[A-Za-z0-9_]{{8}}\.tmp")


def clean_stale_temps(target: Path) -> list[Path]:
    """Remove the temporary files earlier saves to `target` left behind (a writer killed midway).

    Called with the target's lock held: a live writer of this path would hold the lock, so every
    matching file is an orphan."""
    pattern = _temp_pattern(target)
    removed = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        if pattern.fullmatch(name):
            stale = target.parent / name
            try:
                if stat.S_ISREG(os.lstat(stale).st_mode):
                    stale.unlink()
                    removed.append(stale)
            except OSError:
                pass
    return removed


_HELD: dict[tuple[int, str], int] = {}  # (thread, lock path) -> depth, for the locks this process holds


@contextmanager
def writer_lock(target: Path) -> Iterator[None]:
    """Hold `.NAME.lock` beside `target` for the duration: a second writer (another process or
    thread) is refused at once with a message, instead of both
    reporting success while one silently loses. Re-entrant within one thread.
    Not filelock 4.3.2: it leaves .NAME.lock behind (2 writer tests fail), takes a FIFO, and imports in 45-70 ms."""
    lock = target.parent / f".{target.name}.lock"
    key = (threading.get_ident(), os.path.realpath(lock))
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    while True:
        try:  # never through a link: a planted `.NAME.lock -> pretrained/x` must not create or touch x
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ExplorerError(f"cannot write checkpoint {_short(target)}: its lock file {_short(lock)} is a "
                                    "symbolic link; remove it") from None
            raise ExplorerError(f"cannot write checkpoint {_short(target)}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ExplorerError(f"cannot write checkpoint {_short(target)}: its lock file {_short(lock)} is not a "
                                "regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ExplorerError(f"another process is writing {_short(target)} right now: wait for it "
                                    "or choose another path") from None
            raise ExplorerError(f"cannot lock {_short(target)}: {exc.strerror or exc}") from None
        try:  # the holder before us may have removed the file we opened: then lock the new one
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _HELD[key] = 1
    try:
        yield
    finally:
        del _HELD[key]
        try:
            os.unlink(lock)  # while still locked: a waiter that opened it retries on the new file
        except OSError:
            pass
        os.close(fd)
