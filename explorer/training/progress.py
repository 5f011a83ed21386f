"""Progress of a long CLI job on stderr: a line at least every few seconds, a bar on a terminal, a summary.

No torch here. The trainer's callbacks (`on_step`, `on_eval`) feed it `train.Progress` records; anything
with `step`, `total_steps`, `loss` and `examples_per_second` works.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

LINE_SECONDS = 5.0  # a plain progress line at least this often
BAR_SECONDS = 0.25  # a terminal's bar redraws at most this often
BAR_WIDTH = 24


def fmt_seconds(seconds: float | None) -> str:
    """12s, 3m05s, 1h02m."""
    if seconds is None or seconds != seconds:
        return "?"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class ConsoleProgress:
    """Prints training progress to `stream`: on a terminal a bar redrawn in place (carriage return), else a
    line every LINE_SECONDS; evaluations always get their own line. `quiet` prints nothing."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False, bar: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, line_seconds: float = LINE_SECONDS) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.bar = bar if bar is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.clock = clock
        self.line_seconds = line_seconds
        self.started: float | None = None
        self.first_step = 0
        self._last_print = 0.0
        self._bar_shown = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _line(self, text: str) -> None:
        if self._bar_shown:  # finish the bar's line first
            self._write("\r\033[K")
            self._bar_shown = False
        self._write(text + "\n")

    def _status(self, p: Any, now: float) -> str:
        elapsed = now - (self.started if self.started is not None else now)
        done = p.step - self.first_step
        eta = elapsed / done * (p.total_steps - p.step) if done > 0 else None
        return (f"step {p.step:,}/{p.total_steps:,}  loss {p.loss:.4f}  {p.examples_per_second:,.0f} ex/s  "
                f"elapsed {fmt_seconds(elapsed)}  ETA {fmt_seconds(eta)}")

    def on_step(self, p: Any) -> None:
        self._tick(p.step, p.total_steps, lambda now: self._status(p, now))

    def on_count(self, done: int, total: int, what: str = "pairs") -> None:
        """Progress of a job counted in items, e.g. `eval` translating a file's pairs (call it with 0 first:
        the clock starts there)."""
        def status(now: float) -> str:
            elapsed = now - (self.started if self.started is not None else now)
            rate = done / elapsed if elapsed > 0 else 0.0
            eta = elapsed / done * (total - done) if done > 0 else None
            return (f"{what} {done:,}/{total:,}  {rate:,.0f} {what}/s  elapsed {fmt_seconds(elapsed)}  "
                    f"ETA {fmt_seconds(eta)}")
        self._tick(done, total, status)

    def _tick(self, position: int, total: int, status: Callable[[float], str]) -> None:
        """A bar (at most every BAR_SECONDS) or a line (every line_seconds) at `position` of `total`."""
        if self.quiet:
            return
        now = self.clock()
        if self.started is None:
            self.started, self.first_step, self._last_print = now, position, now  # the pace from here on
        if self.bar:
            if now - self._last_print >= BAR_SECONDS or position >= total:
                filled = round(BAR_WIDTH * min(1.0, position / max(1, total)))
                self._write(f"\r\033[K[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {status(now)}")
                self._bar_shown, self._last_print = True, now
        elif now - self._last_print >= self.line_seconds:
            self._line(status(now))
            self._last_print = now

    def on_eval(self, p: Any) -> None:
        if self.quiet or p.metrics is None:
            return
        m = p.metrics
        align = "" if m.alignment_accuracy is None else f"  align {m.alignment_accuracy:.3f}"
        self._line(f"validation at step {p.step:,}: exact {m.exact_match:.3f}  token {m.token_accuracy:.3f}{align}")
        self._last_print = self.clock()

    def message(self, text: str) -> None:
        if not self.quiet:
            self._line(text)

    def summary(self, steps: int, seconds: float, reason: str, exact: float, token: float, path: str) -> None:
        """The last line: how the run ended and where the model is."""
        why = {"steps": "all steps done", "target": "target reached", "time": "time limit reached",
               "stopped": "stopped", "plateau": "validation stopped improving"}.get(reason, reason)
        wall = self.clock() - self.started if self.started is not None else seconds
        self.message(f"done: {steps:,} steps in {fmt_seconds(wall)} ({why}); validation exact {exact:.3f}, "
                     f"token {token:.3f}; saved {path}")
