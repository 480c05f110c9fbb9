"""A measuring tool never costs the user their training: once a run is under way, an error in a recording step
becomes a ``problems`` entry of ``run.json`` and one warning per kind, never an exception in ``fit``.

Example:
    >>> import tempfile, warnings
    >>> from deviate_cb.capture.session import RunSession
    >>> session = RunSession(out_dir=tempfile.mkdtemp())
    >>> run = session.open()
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     for _ in range(2):
    ...         with guarded(session, "on_train_epoch_end: predictions snapshot"):
    ...             raise OSError(28, "No space left on device")
    >>> [(p["where"], p["error"], p["count"]) for p in session.close().problems]  # repeats: counted at flush
    [('on_train_epoch_end: predictions snapshot', 'OSError: [Errno 28] No space left on device', 2)]
    >>> len(caught), caught[0].category.__name__
    (1, 'RecordingWarning')
"""

from __future__ import annotations

import sys
import threading
import warnings
from types import TracebackType
from typing import Any, Optional, Protocol

from deviate_cb.store.manifest import CaptureRecord
from deviate_cb.store.run_directory import RunDirectory

__all__ = ["MAX_PROBLEMS", "ProblemLog", "RecordingWarning", "guarded", "record_or_raise"]

MAX_PROBLEMS = 50
"""At most this many distinct problems are kept in ``run.json`` (repeats only raise an entry's ``count``)."""
_MAX_ERROR_CHARS = 500


class RecordingWarning(UserWarning):
    """A recording step of ``DeviateCallback`` failed; training went on (see ``problems`` in ``run.json``)."""


class _Session(Protocol):
    """What :func:`guarded` needs of a :class:`~deviate_cb.capture.session.RunSession`."""

    @property
    def under_way(self) -> bool: ...

    def record_problem(self, where: str, error: Exception) -> None: ...


class _Guard:
    """The context manager :func:`guarded` returns (a class, not a generator: it sits on per-step hooks)."""

    __slots__ = ("_active", "_session", "_where")

    def __init__(self, session: _Session, where: str) -> None:
        self._session = session
        self._where = where
        self._active = False

    def __enter__(self) -> None:
        self._active = self._session.under_way  # decided on entry: a step that opens the run still raises

    def __exit__(
        self, kind: Optional[type[BaseException]], error: Optional[BaseException], traceback: Optional[TracebackType]
    ) -> bool:
        if error is None or not self._active or not isinstance(error, Exception):
            return False  # no error, not under way yet, or KeyboardInterrupt/SystemExit/GeneratorExit
        self._session.record_problem(self._where, error)
        return True


def guarded(session: _Session, where: str) -> _Guard:
    """A context manager that turns an ``Exception`` raised inside it into a problem of ``session``'s run.

    Args:
        session: The run's session; errors are caught only once it is under way (``session.under_way``:
            its run directory is open, or this process records nothing, as a rank other than zero).
        where: ``"<hook>: <step>"``, e.g. ``"on_train_epoch_end: metrics flush"``; recorded as the problem's
            ``where``. Warnings are given once per step (the part after ``": "``) and error type.

    Example:
        >>> class Started:
        ...     under_way = True
        ...     def record_problem(self, where, error):
        ...         print(where, "->", repr(error))
        >>> with guarded(Started(), "teardown: end of run"):
        ...     raise ValueError("a bug")
        teardown: end of run -> ValueError('a bug')
    """
    return _Guard(session, where)


def record_or_raise(session: _Session, where: str, error: Exception) -> None:
    """:func:`guarded` as an ``except`` clause, for the per-step hooks, where even a context manager's cost shows
    (``try`` costs nothing until something is raised): record ``error`` as a problem of the run once it is under
    way, else raise it.

    Example:
        >>> class Started:
        ...     under_way = True
        ...     def record_problem(self, where, error):
        ...         print(where, "->", repr(error))
        >>> try:
        ...     raise KeyError("loss")
        ... except Exception as error:
        ...     record_or_raise(Started(), "on_train_batch_end: metrics", error)
        on_train_batch_end: metrics -> KeyError('loss')
    """
    if not session.under_way:
        raise error
    session.record_problem(where, error)


def _one_line(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


class ProblemLog:
    """The recording problems of one session: written to ``run.json`` under ``problems``, warned about once per kind.

    Each entry is ``{"where": ..., "error": "Type: message", "count": n}``; a repeat of the same (where, error)
    only raises ``count`` (written at once for a new entry, and by :meth:`write` for repeats, which the session
    calls at each flush, so a step failing at every batch does not rewrite the manifest each time). Entries an
    earlier session left in the manifest (a continued run) are kept. If the manifest itself cannot be written,
    the warning says so and nothing else happens.

    Example:
        >>> import tempfile, warnings
        >>> log, run = ProblemLog(), RunDirectory(tempfile.mkdtemp())
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     log.record(run, "on_train_end: weights record", ValueError("bad\\nshape"))
        >>> run.manifest().problems, log.entries
        ([{'count': 1, 'error': 'ValueError: bad shape', 'where': 'on_train_end: weights record'}], 1)
        >>> print(caught[0].message)  # doctest: +NORMALIZE_WHITESPACE
        DeviateCallback: on_train_end: weights record failed (ValueError: bad shape); training goes on without
        it. The problem is recorded in run.json under `problems`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}  # (where, error) -> count, in first-seen order
        self._earlier: Optional[list[dict[str, Any]]] = None  # what the manifest held before this session wrote
        self._unwritten = False
        self._warned: set[tuple[str, str]] = set()

    @property
    def entries(self) -> int:
        """Distinct problems met by this session."""
        return len(self._counts)

    def record(self, run: Optional[RunDirectory], where: str, error: Exception) -> None:
        """Record that step ``where`` failed with ``error`` (in ``run``'s manifest when ``run`` is given) and warn
        the first time this kind of step fails with this type of error."""
        text = _one_line(error)
        key = (where, text)
        with self._lock:
            new = key not in self._counts
            self._counts[key] = self._counts.get(key, 0) + 1
            self._unwritten = True
            failure = self._write(run) if new and run is not None else None
            kind = (where.rpartition(": ")[2], type(error).__name__)
            if kind in self._warned:
                return
            self._warned.add(kind)
        if run is None:
            outcome = "This process records nothing, so it is not in run.json."
        elif failure is None:
            outcome = "The problem is recorded in run.json under `problems`."
        else:
            outcome = f"It could not be recorded in run.json either ({_one_line(failure)})."
        _warn(f"DeviateCallback: {where} failed ({text}); training goes on without it. {outcome}")

    def write(self, run: Optional[RunDirectory]) -> None:
        """Write the counts of repeated problems that are not in the manifest yet (never raises)."""
        if run is None or not self._unwritten:
            return
        with self._lock:
            self._write(run)

    def _write(self, run: RunDirectory) -> Optional[Exception]:
        """Merge this session's problems into the manifest; return the error if that failed (lock held)."""
        try:
            if self._earlier is None:
                earlier = run.manifest().problems or []
                self._earlier = [dict(p) for p in earlier if isinstance(p, dict)]
            merged = [dict(p) for p in self._earlier]
            index = {(p.get("where"), p.get("error")): p for p in merged}
            for (where, text), count in self._counts.items():
                entry = index.get((where, text))
                if entry is not None:
                    entry["count"] = int(entry.get("count", 1)) + count
                elif len(merged) < MAX_PROBLEMS:
                    merged.append({"where": where, "error": text, "count": count})
            run.record(CaptureRecord(problems=merged))
        except Exception as exc:
            return exc
        self._unwritten = False
        return None


def _warn(message: str) -> None:
    """Warn with a :class:`RecordingWarning`; even a warnings filter set to ``error`` does not make it raise."""
    try:
        warnings.warn(message, RecordingWarning, stacklevel=5)  # the hook that ran the step
    except Exception:
        print(f"RecordingWarning: {message}", file=sys.stderr)
