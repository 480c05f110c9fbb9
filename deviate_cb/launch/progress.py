"""Progress of a replication: a live table on a terminal, one plain line per state change otherwise (CI logs).

Example:
    >>> import io
    >>> progress = make_progress(io.StringIO(), live=False)
    >>> progress.add(0, seed=7)
    >>> progress.started(0, "slot 0")
    >>> progress.finished(0, "completed", exit_code=0, duration_s=1.5)
    >>> progress.close()
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Optional, TextIO

from deviate_cb.report.text.safe import printable_message

__all__ = [
    "LiveProgress",
    "OnceSkipped",
    "PlainProgress",
    "Progress",
    "make_progress",
    "quiet_if_closed",
    "write_line",
]

_STYLES = {
    "queued": "dim",
    "running": "yellow",
    "completed": "green",
    "skipped": "dim green",
    "failed": "bold red",
    "incomplete": "bold dark_orange",  # exited 0 before its training ended: left out of the statistics
    "timeout": "bold red",
    "killed": "magenta",
    "audited": "cyan",  # deviate audit stopped it after its audited steps: not a completed training
}
_ORDER = {
    "running": 0,
    "failed": 1,
    "incomplete": 1,
    "timeout": 1,
    "killed": 2,
    "queued": 3,
    "audited": 4,
    "completed": 4,
    "skipped": 5,
}


@dataclass
class _Row:
    replica: int
    seed: int
    state: str = "queued"
    where: str = ""
    started: Optional[float] = None
    ended: Optional[float] = None
    exit: str = ""
    note: str = ""

    def elapsed(self) -> str:
        if self.started is None:
            return ""
        return f"{(self.ended or time.monotonic()) - self.started:.1f} s"


class Progress:
    """Tracks each replica's state; subclasses decide how to show it."""

    def __init__(self) -> None:
        self.rows: dict[int, _Row] = {}
        self._lock = threading.Lock()

    def add(self, replica: int, seed: int, *, skipped: str = "") -> None:
        """Announce a replica: queued, or skipped with a reason (e.g. ``already completed``)."""
        with self._lock:
            self.rows[replica] = _Row(replica, seed, state="skipped" if skipped else "queued", note=skipped)
        if skipped:
            self._changed(self.rows[replica])

    def started(self, replica: int, where: str) -> None:
        with self._lock:
            row = self.rows[replica]
            row.state, row.where, row.started = "running", where, time.monotonic()
        self._changed(row)

    def finished(
        self, replica: int, state: str, *, exit_code: Optional[int], duration_s: Optional[float], note: str = ""
    ) -> None:
        with self._lock:
            row = self.rows[replica]
            now = time.monotonic()
            row.started = row.started if row.started is not None else now - (duration_s or 0.0)
            row.state, row.ended, row.note = state, now, note
            row.exit = "" if exit_code is None else str(exit_code)
        self._changed(row)

    def message(self, text: str) -> None:
        """A line that is not about one replica (the header, the summary)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop live updates; leave the final state on screen."""

    def _changed(self, row: _Row) -> None:
        raise NotImplementedError


class PlainProgress(Progress):
    """One line per state change, for logs: ``replica 3 (seed 3): failed after 2.1 s (exit 1)``; ``replica 4 (seed
    4): incomplete after 3.0 s (exit 0, the fit stopped at step 7 of 47 and never reached on_fit_end)``.

    With ``skipped_in_one_line`` (the rounds of ``--until-decided``, each a launch that skips what the rounds before
    ran) the skipped replicas are counted in one line instead: ``8 replicas (0-7): skipped (already completed)``.

    Example:
        >>> import io
        >>> progress = PlainProgress(io.StringIO(), skipped_in_one_line=True)
        >>> for k in range(3):
        ...     progress.add(k, seed=k, skipped="already completed")
        >>> progress.add(3, seed=3)
        >>> progress.started(3, "slot 0")
        >>> print(progress.stream.getvalue(), end="")
        3 replicas (0-2): skipped (already completed)
        replica 3 (seed 3): running on slot 0
    """

    def __init__(self, stream: TextIO, *, skipped_in_one_line: bool = False) -> None:
        super().__init__()
        self.stream = stream
        self.skipped_in_one_line = skipped_in_one_line
        self._skipped: list[_Row] = []

    def message(self, text: str) -> None:
        self._say_skipped()
        self._write(text)

    def close(self) -> None:
        self._say_skipped()

    def _say_skipped(self) -> None:
        rows, self._skipped = self._skipped, []
        if len(rows) == 1:
            self._write(f"replica {rows[0].replica} (seed {rows[0].seed}): skipped ({rows[0].note})")
        elif rows:
            notes = sorted({row.note for row in rows})
            self._write(
                f"{len(rows)} replicas ({_ranges([row.replica for row in rows])}): skipped ({'; '.join(notes)})"
            )

    def _changed(self, row: _Row) -> None:
        if self.skipped_in_one_line and row.state == "skipped":
            self._skipped.append(row)
            return
        self._say_skipped()
        head = f"replica {row.replica} (seed {row.seed}): {row.state}"
        if row.state == "running":
            text = f"{head} on {row.where}" if row.where else head
        elif row.state == "skipped":
            text = f"{head} ({row.note})" if row.note else head
        else:
            text = f"{head} after {row.elapsed()}"
            details = [d for d in (f"exit {row.exit}" if row.exit else "", row.note) if d]
            text += f" ({', '.join(details)})" if details else ""
        self._write(text)

    def _write(self, text: str) -> None:
        write_line(self.stream, printable_message(text))


class LiveProgress(Progress):
    """A rich live table (replica, seed, slot/GPU, state, elapsed, exit), redrawn a few times a second."""

    def __init__(self, console: Any) -> None:
        from rich.live import Live

        super().__init__()
        self.console = console
        self._live = Live(self, console=console, refresh_per_second=4, transient=False, redirect_stdout=False)
        self._started = False

    def message(self, text: str) -> None:
        self.console.print(printable_message(text), markup=False, highlight=False, soft_wrap=True)

    def _changed(self, row: _Row) -> None:
        if not self._started:
            self._started = True
            self._live.start()
        self._live.refresh()

    def close(self) -> None:
        if self._started:
            self._live.refresh()
            self._live.stop()

    def __rich__(self) -> Any:
        from rich.table import Table

        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("replica", "seed", "slot/GPU", "state", "elapsed", "exit"):
            table.add_column(column, justify="right" if column in ("replica", "seed", "elapsed", "exit") else "left")
        with self._lock:
            rows = sorted(self.rows.values(), key=lambda r: (_ORDER.get(r.state, 9), r.replica))
            counts: dict[str, int] = {}
            for row in rows:
                counts[row.state] = counts.get(row.state, 0) + 1
            limit = max(5, self.console.size.height - 4)
            shown = sorted(rows[:limit] if len(rows) > limit else rows, key=lambda r: r.replica)
            for row in shown:
                state = f"[{_STYLES.get(row.state, '')}]{row.state}[/]"
                table.add_row(str(row.replica), str(row.seed), row.where, state, row.elapsed(), row.exit)
        if len(rows) > len(shown):
            hidden = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
            table.caption = f"{len(rows) - len(shown)} more not shown; in all: {hidden}"
        return table


class OnceSkipped:
    """``stream`` for :func:`make_progress` (through :func:`~deviate_cb.launch.runner.replicate`'s ``stream``): the
    launch's plain lines count its skipped replicas in one line (:class:`PlainProgress`), for the rounds of
    ``--until-decided`` and ``--until-precision``, each of which skips every replica the rounds before ran."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __getattr__(self, name: str) -> Any:  # write, flush, isatty, fileno: the stream's
        return getattr(self.stream, name)


def _ranges(numbers: list[int]) -> str:
    """``0-3, 5, 7-8``: sorted numbers as runs.

    Example:
        >>> _ranges([5, 0, 1, 2, 3, 7, 8])
        '0-3, 5, 7-8'
    """
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def quiet_if_closed(stream: IO[str], *, force: bool = False) -> bool:
    """Point ``stream``'s file descriptor at ``/dev/null`` when its reader has closed it (a pipe whose reader is
    gone), or whatever it is with ``force``; whether it did. Later writes, and the flush at exit, then succeed
    without a word, as ``head``'s writer should; a stream without a descriptor (a test's buffer) is left alone.

    Example:
        >>> import io
        >>> quiet_if_closed(io.StringIO(), force=True)
        False
    """
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    if not force:
        try:
            poll = select.poll()
            poll.register(fd, select.POLLOUT)
            closed = any(events & select.POLLERR for _, events in poll.poll(0))
        except (OSError, ValueError, AttributeError):  # no poll() here (Windows)
            closed = False
        if not closed:
            return False
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.dup2(devnull, fd)
    except OSError:
        return False
    finally:
        os.close(devnull)
    with contextlib.suppress(OSError, ValueError):
        stream.flush()  # what the buffer held goes to /dev/null now, not to a failing write at exit
    return True


def write_line(stream: IO[str], text: str) -> None:
    """Write ``text`` and a newline to ``stream`` and flush; a reader that closed the stream (``| head -1``) is
    no error: the rest goes to ``/dev/null`` (:func:`quiet_if_closed`), and the launcher carries on.

    Example:
        >>> import io
        >>> stream = io.StringIO()
        >>> write_line(stream, "2 completed")
        >>> stream.getvalue()
        '2 completed\\n'
    """
    try:
        stream.write(text + "\n")
        stream.flush()
    except BrokenPipeError:
        quiet_if_closed(stream, force=True)


def make_progress(stream: Optional[TextIO] = None, *, live: Optional[bool] = None) -> Progress:
    """A live table when ``stream`` (default stdout) is a terminal, plain lines otherwise.

    Example:
        >>> import io
        >>> type(make_progress(io.StringIO())).__name__
        'PlainProgress'
    """
    import sys

    stream = sys.stdout if stream is None else stream
    once = isinstance(stream, OnceSkipped)
    stream = stream.stream if isinstance(stream, OnceSkipped) else stream
    if live is None or live:
        from rich.console import Console

        console = Console(file=stream, force_terminal=True if live else None)
        if live or (console.is_terminal and not console.is_dumb_terminal):
            return LiveProgress(console)
    return PlainProgress(stream, skipped_in_one_line=once)
