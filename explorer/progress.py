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
        elapsed = now - (self.started or now)
        done = p.step - self.first_step
        eta = elapsed / done * (p.total_steps - p.step) if done > 0 else None
        return (f"step {p.step:,}/{p.total_steps:,}  loss {p.loss:.4f}  {p.examples_per_second:,.0f} ex/s  "
                f"elapsed {fmt_seconds(elapsed)}  ETA {fmt_seconds(eta)}")

    def on_step(self, p: Any) -> None:
        if self.quiet:
            return
        now = self.clock()
        if self.started is None:
            self.started, self.first_step, self._last_print = now, p.step, now  # the pace from here on
        if self.bar:
            if now - self._last_print >= BAR_SECONDS or p.step >= p.total_steps:
                filled = round(BAR_WIDTH * min(1.0, p.step / max(1, p.total_steps)))
                self._write(f"\r\033[K[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self._status(p, now)}")
                self._bar_shown, self._last_print = True, now
        elif now - self._last_print >= self.line_seconds:
            self._line(self._status(p, now))
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
