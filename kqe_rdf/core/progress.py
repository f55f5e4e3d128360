"""Progress for long work: rich bars on a terminal, nothing when quiet.

>>> with Progress.quiet().task("counting", total=3) as tick:
...     tick(3)
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator


class Progress:
    def __init__(self, console=None, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled

    @classmethod
    def quiet(cls) -> Progress:
        return cls(enabled=False)

    def note(self, message: str) -> None:
        """A line about the work (a retry, a slow answer) on the console, above any bar; nothing when quiet."""
        if self.enabled:
            if self.console is not None:
                self.console.print(message, markup=False, highlight=False, soft_wrap=True)
            else:
                print(message, file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def task(self, description: str, total: int | None = None, unit: str = "") -> Iterator[Callable[[int], None]]:
        if not self.enabled:
            yield lambda n=1: None
            return
        if self.console is not None and not self.console.is_terminal:
            with contextlib.contextmanager(self._plain)(description, total, unit) as tick:
                yield tick
            return
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        columns = [SpinnerColumn(), TextColumn("[bold]{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        else:
            columns += [TextColumn("{task.completed:,} " + unit)]
        columns.append(TimeElapsedColumn())
        with Bar(*columns, console=self.console, transient=False) as bar:
            task_id = bar.add_task(description, total=total)
            yield lambda n=1: bar.advance(task_id, n)

    def _plain(self, description: str, total: int | None, unit: str) -> Iterator[Callable[[int], None]]:
        """Without a terminal (logs, CI): a line at most every 30 s, and one at the end."""
        done, started, last = 0, time.monotonic(), time.monotonic()

        def line() -> None:
            elapsed = time.monotonic() - started
            of = f"/{total:,}" if total is not None else ""
            count = f"{done:,}{of} {unit} " if done or total is not None else ""
            print(f"{description}: {count}({elapsed:.0f} s)", file=sys.stderr, flush=True)

        def tick(n: int = 1) -> None:
            nonlocal done, last
            done += n
            if time.monotonic() - last >= 30:
                last = time.monotonic()
                line()

        yield tick
        line()


class StepClock:
    """Seconds spent in each step of one query or question, kept in its explanation.

    >>> clock = StepClock(digits=4)
    >>> clock.lap("read"); list(clock.laps)
    ['read']
    """

    def __init__(self, digits: int = 6) -> None:
        self.laps: dict[str, float] = {}
        self.digits = digits
        self._last = time.perf_counter()

    def lap(self, step: str) -> None:
        """Charge the time since the previous lap (or the start) to ``step``."""
        now = time.perf_counter()
        self.laps[step] = round(self.laps.get(step, 0.0) + now - self._last, self.digits)
        self._last = now
