"""Untrusted tokenization in a process of its own, so an abort inside the Rust library ends that process, not the app.

Why: `tokenizers` aborts the whole process on some inputs (an allocation that fails), and in the app that process
would be the Streamlit server, every user's session. `subwords.check_definition` accepts only what our own training
writes and every line is bounded, but a library can still hold an abort we do not know of: the app's server runs
every tokenizer it did not ship or train itself here (`subwords.isolate_untrusted`); the CLI runs them in its own
process, where an abort ends only that command.

One worker per server, started at the first call, serves every session (a lock: one call at a time, each well under
a millisecond for a sentence). Its address space is capped at MAX_WORKER_BYTES, so a definition that allocates
without bound aborts it at once instead of taking the machine's memory; a call gets CALL_SECONDS. When the worker
dies or overruns, the call is an ExplorerError and the next call starts a fresh worker. What the process costs a
call is docs/PERFORMANCE.md's row (benchmarks/tokenizer_worker.py).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from hashlib import sha256
from pathlib import Path
from typing import Any

from explorer.errors import ExplorerError

MAX_WORKER_BYTES = 512_000_000  # its address space: ~40 MB with a shipped tokenizer built (measured VmPeak)
CALL_SECONDS = 30.0
KEPT = 4  # tokenizers the worker keeps built (each at most subwords.MAX_TOKENIZER_CHARS of JSON)


OPS = {  # what a caller may ask of a tokenizer (the calls SubwordTokenizer makes): (verb for a message, call)
    "tokens": ("tokenize", lambda tok, text: tok.encode(text, add_special_tokens=False).tokens),
    "ids": ("tokenize", lambda tok, texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]),
    "split": ("split", lambda tok, text: [word for word, _ in tok.pre_tokenizer.pre_tokenize_str(text)]),
    "decode": ("decode", lambda tok, pieces: tok.decoder.decode(pieces)),
}


def library_call(what: str, call, *args):
    """`call(*args)` of the tokenizers library with its failures as ExplorerError, a Rust panic included
    (pyo3's PanicException derives from BaseException, so `except Exception` misses it)."""
    try:
        return call(*args)
    except (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError):
        raise
    except BaseException as exc:  # noqa: B036 - a panic; see the docstring
        detail = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise ExplorerError(f"the subword tokenizer could not {what} this text ({detail})") from None


def run(op: str, tok: Any, arg: Any) -> Any:
    """`op` of a built `tokenizers.Tokenizer` on `arg` in this process, its failures as ExplorerError."""
    verb, method = OPS[op]
    return library_call(verb, method, tok, arg)


class _Worker:
    """The client's side: one process, the tokenizers it holds (by their JSON's sha256, most recent last)."""

    def __init__(self) -> None:
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1", "RUST_BACKTRACE": "0",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                           os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen([sys.executable, "-c", "from explorer.data.tokenizer_worker import serve; serve()"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        env=env, bufsize=0)
        self.held: OrderedDict[str, None] = OrderedDict()
        self._buffer = b""

    def alive(self) -> bool:
        return self.process.poll() is None

    def ask(self, request: dict, deadline: float) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request).encode("ascii") + b"\n")
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.process.stdout], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(self.process.stdout.fileno(), 1 << 20)
            if not chunk:
                raise EOFError
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def end(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait()


_lock = threading.Lock()
_worker: _Worker | None = None


def call(json_text: str, op: str, arg: Any, seconds: float = CALL_SECONDS) -> Any:
    """`op` ("tokens", "ids", "split" or "decode") of the tokenizer defined by `json_text` on `arg`, run in the
    worker; ExplorerError when the library refuses it, aborts or overruns `seconds` (the worker is then replaced)."""
    global _worker
    key = sha256(json_text.encode("utf-8")).hexdigest()
    with _lock:
        if _worker is None or not _worker.alive():
            _worker = _Worker()
        worker = _worker
        try:
            deadline = time.monotonic() + seconds
            reply = worker.ask({"key": key, "json": None if key in worker.held else json_text, "op": op, "arg": arg},
                               deadline)
            if reply.get("unknown"):
                reply = worker.ask({"key": key, "json": json_text, "op": op, "arg": arg}, deadline)
        except (TimeoutError, EOFError, BrokenPipeError, OSError, ValueError) as exc:
            worker.end()
            _worker = None
            code = worker.process.returncode
            how = (f"took over {seconds:g} s" if isinstance(exc, TimeoutError) else
                   f"ended ({_signal_name(-code) if code is not None and code < 0 else f'exit code {code}'})")
            raise ExplorerError(f"the subword tokenizer's own process {how} on this text; the app goes on") from None
        worker.held[key] = None
        worker.held.move_to_end(key)
        while len(worker.held) > KEPT:
            worker.held.popitem(last=False)
    if "error" in reply:
        raise ExplorerError(reply["error"])
    return reply["ok"]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def worker_pid() -> int | None:
    """The worker's process id (None before the first call): for tests and operators."""
    with _lock:
        return _worker.process.pid if _worker is not None and _worker.alive() else None


def serve() -> None:
    """The worker's loop: one JSON request a line on stdin, one reply a line on stdout, until stdin closes."""
    import resource
    from tokenizers import Tokenizer
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MAX_WORKER_BYTES, MAX_WORKER_BYTES))
    except (ValueError, OSError):  # a lower hard limit is already set: it bounds the worker anyway
        pass
    built: OrderedDict[str, Any] = OrderedDict()
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = json.loads(line)
        key = request["key"]
        try:
            if request["json"] is not None:
                built[key] = library_call("read", Tokenizer.from_str, request["json"])
                while len(built) > KEPT:
                    built.popitem(last=False)
            if key not in built:
                reply: dict = {"unknown": True}
            else:
                built.move_to_end(key)
                reply = {"ok": run(request["op"], built[key], request["arg"])}
        except ExplorerError as exc:
            reply = {"error": str(exc)}
        out.write(json.dumps(reply).encode("ascii") + b"\n")
        out.flush()
