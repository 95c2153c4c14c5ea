"""Progress of a tuning run: a tqdm bar when tqdm is installed and stderr is a terminal,
else one plain line per beam round on a terminal, then a final summary (with the best
schedule as Python). Nothing at all when stderr is not a terminal (SPEC §4): a library
call in a script whose output goes to a file or a pipe must not write to it.
Example::

    p = Progress("C", budget_s=60, enabled=None)     # None: decide from the terminal
    p.round(1, tried=16, failed=2, wrong=0, best_s=0.0132, default_s=4.5, left_s=41)
    p.summary(report, schedule)
"""
from __future__ import annotations

import sys


def _ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


class Progress:
    """Reports a tuning run of the pipeline named ``name`` on stderr (see module docstring).
    ``enabled``: True / False force the report (per-round lines and the final summary) on
    or off; None shows it only when stderr is a terminal. ``summary_enabled`` False
    silences the final summary even then."""

    def __init__(self, name, budget_s, enabled=None, summary_enabled=True, stream=None):
        self.name, self.budget_s = name, budget_s
        self.stream = stream or sys.stderr
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = tty if enabled is None else bool(enabled)
        self.summary_enabled = summary_enabled
        self._bar = None
        if self.enabled and tty:
            try:
                from tqdm import tqdm
                self._bar = tqdm(total=round(budget_s, 1), unit="s", desc=f"tuning {name}",
                                 file=self.stream, leave=False)
            except ImportError:
                self._bar = None

    def round(self, n, tried, failed, wrong, best_s, default_s, left_s, elapsed_s=None):
        """Report the state after beam round ``n`` (0 is the seeds)."""
        if not self.enabled:
            return
        speed = f" ({default_s / best_s:.1f}x default)" if best_s and default_s else ""
        if self._bar is not None:
            if elapsed_s is not None:
                self._bar.n = min(self._bar.total, round(elapsed_s, 1))
            self._bar.set_postfix_str(f"round {n}, {tried} tried, {failed} failed, {wrong} wrong, "
                                      f"best {_ms(best_s)}{speed}")
            self._bar.refresh()
            return
        print(f"[autotune] {self.name} round {n}: {tried} tried, {failed} failed, {wrong} wrong, "
              f"best {_ms(best_s)}{speed}, {max(0.0, left_s):.0f} s left", file=self.stream,
              flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def summary(self, report, schedule):
        """The final summary: best time, counts, where it was stored, the schedule as Python."""
        self.close()
        if not (self.enabled and self.summary_enabled):
            return
        r = report
        speed = f", {r.default_s / r.best_s:.1f}x the default schedule" if r.best_s else ""
        print(f"[autotune] {self.name}: best {_ms(r.best_s)}{speed}; {r.measured} measured, "
              f"{r.failed} failed, {r.wrong} wrong ({r.rejected} illegal moves skipped), "
              f"{r.rounds} rounds, {r.retimed} finalists timed again, in {r.elapsed_s:.1f} s"
              + (f"; stored in {r.database}" if r.stored else ""), file=self.stream)
        print("[autotune] best schedule:\n" + (str(schedule).rstrip() or "# (default schedule)"),
              file=self.stream, flush=True)


__all__ = ["Progress"]
