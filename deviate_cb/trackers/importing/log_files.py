"""A log folder read as untrusted input: each folder once, links not followed, regular files of bounded size only.

Example:
    >>> import tempfile
    >>> logs = Path(tempfile.mkdtemp())
    >>> (logs / "version_0").mkdir()
    >>> (logs / "version_0" / "again").symlink_to(logs)
    >>> notes = []
    >>> [folder.relative_to(logs).as_posix() for folder, files in walk_logs(logs, notes)]
    ['.', 'version_0']
    >>> notes[0].replace(str(logs), "LOGS")
    'LOGS: 1 directory link not followed (LOGS/version_0/again); name a linked folder as LOGDIR to read it'
    >>> os.mkfifo(logs / "version_0" / "metrics.csv")
    >>> try:
    ...     read_log_file(logs / "version_0" / "metrics.csv")
    ... except LogFileError as exc:
    ...     print(exc.reason)
    a FIFO, not a regular file
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import BinaryIO

from deviate_cb.errors import UsageError
from deviate_cb.store.bounded_read import file_kind, open_regular, read_at_most

__all__ = ["MAX_LOG_BYTES", "LogFileError", "check_log_file", "open_log_file", "read_log_file", "walk_logs"]

#: The largest log file read (a metrics.csv, an event file): 100,000 steps of 100 metrics is a few hundred MB.
MAX_LOG_BYTES = 4 * 1024**3


class LogFileError(UsageError):
    """A log file refused (not a regular file, too large, a bomb): ``str`` is the one warning line."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def walk_logs(logdir: Path, notes: list[str], quiet_links: Collection[str] = ()) -> Iterator[tuple[Path, list[str]]]:
    """``(folder, names of its regular-or-other non-folder entries)`` of every folder under ``logdir``, each
    folder once, top-down in name order; one line appended to ``notes`` for what was skipped (a directory link
    named in ``quiet_links``, a tracker's own such as W&B's ``latest-run``, is skipped unsaid)."""
    logdir = Path(logdir)
    seen: set[tuple[int, int]] = set()
    links: list[str] = []
    repeated: list[str] = []
    stack = [logdir]
    while stack:
        folder = stack.pop()
        try:
            info = os.stat(folder)  # LOGDIR itself may be a link the user named; below it, none is followed
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            repeated.append(str(folder))
            continue
        seen.add((info.st_dev, info.st_ino))
        files, below = [], []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    below.append(Path(entry.path))
                elif entry.is_symlink() and entry.is_dir():
                    if entry.name not in quiet_links:
                        links.append(entry.path)
                else:
                    files.append(entry.name)
            except OSError:
                continue
        yield folder, files
        stack.extend(reversed(below))
    if links:
        notes.append(
            f"{logdir}: {_count(links, 'directory link')} not followed ({_shown(links)}); "
            "name a linked folder as LOGDIR to read it"
        )
    if repeated:
        notes.append(
            f"{logdir}: {_count(repeated, 'folder')} skipped, already read under another path (a bind mount or "
            f"loop: {_shown(repeated)})"
        )


def check_log_file(path: Path, limit: int = MAX_LOG_BYTES) -> None:
    """Raise :class:`LogFileError` unless ``path`` is a regular file of at most ``limit`` bytes (no open)."""
    _check(Path(path), os.stat(path), limit)


def read_log_file(path: Path, limit: int = MAX_LOG_BYTES) -> bytes:
    """The bytes of ``path``, opened without blocking and checked on the open file (see the module).

    Raises:
        LogFileError: Not a regular file, or larger than ``limit``.
        OSError: The file cannot be opened or read.
    """
    with open_log_file(path, limit) as handle:
        data = read_at_most(handle.fileno(), limit)  # never a buffer of `limit` bytes up front
    if len(data) > limit:
        raise LogFileError(Path(path), f"grew past {_size(limit)} while read; not read")
    return data


def open_log_file(path: Path, limit: int = MAX_LOG_BYTES) -> BinaryIO:
    """``path`` opened for reading in binary, once checked as :func:`read_log_file` checks it (the caller closes).

    Raises:
        LogFileError: Not a regular file, or larger than ``limit``.
        OSError: The file cannot be opened.
    """
    handle = open_regular(path, refuse=LogFileError)
    try:
        _check(Path(path), os.fstat(handle.fileno()), limit)
    except BaseException:
        handle.close()
        raise
    return handle


def _check(path: Path, info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise LogFileError(path, f"{file_kind(info.st_mode)}, not a regular file")
    if info.st_size > limit:
        raise LogFileError(path, f"{_size(info.st_size)}, more than the {_size(limit)} a log file is read up to")


def _size(count: int) -> str:
    return f"{count / 1024**3:.1f} GB" if count >= 1024**3 else f"{count / 1024**2:.1f} MB"


def _count(items: list[str], what: str) -> str:
    return f"{len(items)} {what}{'s' if len(items) > 1 else ''}"


def _shown(items: list[str]) -> str:
    return ", ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")
