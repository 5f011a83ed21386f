"""Progress of a long CLI job on stderr, drawn by tqdm: its bar on a terminal; elsewhere (CI, a pipe) tqdm's same
meter as a plain line every few seconds, since tqdm itself redraws with carriage returns only. Then a summary.

No torch here. The trainer's callbacks (`on_step`, `on_eval`) feed it `train.Progress` records; anything
with `step`, `total_steps`, `loss` and `examples_per_second` works. tqdm is already loaded on `explorer train`'s
path (`import torch` loads it for torch.hub), so it costs no start-up.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, TextIO

from tqdm import tqdm

LINE_SECONDS = 5.0  # a plain progress line at least this often
BAR_SECONDS = 0.25  # a terminal's bar redraws at most this often
FALLBACK_SIZE = (100, 20)  # columns, rows


def _reports_size(stream: TextIO) -> bool:
    """Whether `stream`'s terminal says how large it is: tqdm draws no bar at all on a pty of 0 x 0 (`script`, some
    CI runners), so that gets FALLBACK_SIZE."""
    try:
        return min(os.get_terminal_size(stream.fileno())) > 0
    except (AttributeError, OSError, ValueError):
        return False


fmt_seconds = tqdm.format_interval  # 00:12, 03:05, 1:02:05: the meter's own spelling


class ConsoleProgress:
    """Prints training progress to `stream`: on a terminal tqdm's bar, else a line every line_seconds;
    evaluations and messages always get their own line. `quiet` prints nothing."""

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
        self._tqdm: tqdm | None = None

    def _line(self, text: str) -> None:
        if self._tqdm is not None:  # tqdm clears its bar, prints the line, redraws the bar below it
            self._tqdm.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def on_step(self, p: Any) -> None:
        self._tick(p.step, p.total_steps, "training", "steps",
                   f"loss {p.loss:.4f}, {p.examples_per_second:,.0f} ex/s")

    def on_count(self, done: int, total: int, what: str = "pairs") -> None:
        """Progress of a job counted in items, e.g. `eval` translating a file's pairs (call it with 0 first:
        the clock starts there)."""
        self._tick(done, total, what, what)

    def _tick(self, position: int, total: int, desc: str, unit: str, postfix: str | None = None) -> None:
        """The bar (tqdm redraws it at most every BAR_SECONDS) or a line (every line_seconds) at `position`."""
        if self.quiet:
            return
        now = self.clock()
        if self.started is None:
            self.started, self.first_step, self._last_print = now, position, now  # the pace from here on
            if self.bar:
                sized = _reports_size(self.stream)
                self._tqdm = tqdm(total=total, initial=position, desc=desc, unit=f" {unit}", file=self.stream,
                                  postfix=postfix, mininterval=BAR_SECONDS, dynamic_ncols=sized,
                                  ncols=None if sized else FALLBACK_SIZE[0], nrows=None if sized else FALLBACK_SIZE[1],
                                  smoothing=0, leave=False)
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(postfix or "", refresh=False)
            self._tqdm.update(position - self._tqdm.n)
        elif now - self._last_print >= self.line_seconds:
            self._line(tqdm.format_meter(position, total, now - self.started, ncols=0, prefix=desc,
                                         unit=f" {unit}", postfix=postfix, initial=self.first_step))
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

    def finish(self, text: str) -> None:
        """The job's last line, in place of the bar."""
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        self.message(text)

    def summary(self, steps: int, seconds: float, reason: str, exact: float, token: float, path: str) -> None:
        """The last line: how the run ended and where the model is."""
        why = {"steps": "all steps done", "target": "target reached", "time": "time limit reached",
               "stopped": "stopped", "plateau": "validation stopped improving"}.get(reason, reason)
        wall = self.clock() - self.started if self.started is not None else seconds
        self.finish(f"done: {steps:,} steps in {fmt_seconds(wall)} ({why}); validation exact {exact:.3f}, "
                     f"token {token:.3f}; saved {path}")
