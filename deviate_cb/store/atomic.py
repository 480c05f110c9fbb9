"""Atomic file writes: a reader sees the old file or the new one, never a partial one.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "run.json"
    >>> atomic_write_bytes(path, b'{"status": "running"}\\n')
    >>> path.read_text()
    '{"status": "running"}\\n'
    >>> path.stat().st_mode & 0o777 == 0o666 & ~current_umask()
    True
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional, Union

from deviate_cb.store.safe_paths import PlantedLinkError, in_folder, open_folder

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_parquet", "current_umask"]

_PROC_STATUS = "/proc/self/status"
_umask_lock = threading.Lock()
_umask_read_once: Optional[int] = None


def current_umask() -> int:
    """The process's umask, read without changing it where the system tells (Linux: ``/proc/self/status``).

    Elsewhere it is read once per process by setting it and setting it back (``os.umask`` has no read-only
    form), under a lock and with a restrictive value in between, so a file another thread creates in that
    instant is never more open than intended.

    Example:
        >>> 0 <= current_umask() <= 0o777
        True
    """
    try:
        with open(_PROC_STATUS, "rb") as handle:
            for line in handle:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    global _umask_read_once
    with _umask_lock:
        if _umask_read_once is None:
            previous = os.umask(0o077)
            os.umask(previous)
            _umask_read_once = previous
        return _umask_read_once


def atomic_write_bytes(path: str | os.PathLike[str], data: Union[bytes, bytearray, memoryview]) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename), as :func:`atomic_write` does.

    ``data`` goes to the file descriptor as it is, with no file object in between: the cheapest way to write
    what is already serialized in memory (a Parquet file written to ``pyarrow.BufferOutputStream``, whose
    buffer ``memoryview`` wraps without a copy).
    """
    fd, tmp = _create_temporary(path)
    try:
        try:
            view = memoryview(data).cast("B")
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_parquet(path: str | os.PathLike[str], table: pa.Table) -> None:
    """Write ``table`` as the Parquet file ``path`` atomically: serialized in memory, then handed to
    :func:`atomic_write_bytes` in one go (a file object in between costs more than the serializing).

    Dictionary encoding for the string columns only (stage, name, kind: a few values repeated), where pyarrow's
    default tries it on every column and gives it up on the float ones: about a sixth faster to write, a smaller
    file, read back the same. Min/max statistics stay on every column (the footer summary is checked against those
    of ``seq`` and ``value``: :func:`~deviate_cb.store.footer_summary.footer_summary`).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    strings = [field.name for field in table.schema if pa.types.is_string(field.type)]
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=strings)
    atomic_write_bytes(path, memoryview(sink.getvalue()))


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write`` on a temporary file next to ``path``, flush and fsync it, then rename it over ``path``.

    A reader sees the old file or the new one, never a partial one; on an error the temporary file is removed
    and the old file is left as it was. The temporary file is created with mode ``0o666``, which the system
    narrows by the umask (and a directory's default ACL) as it does for ``open(path, "w")``: the new file gets
    the mode any other new file of the process would get, with no second call to set it.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "x.bin"
        >>> atomic_write(path, lambda handle: handle.write(b"new"))
        >>> path.read_bytes(), path.stat().st_mode & 0o777 == 0o666 & ~current_umask()
        (b'new', True)
    """
    path = Path(path)
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)
_counter = itertools.count()


def _create_temporary(path: str | os.PathLike[str]) -> tuple[int, str]:
    """A new file ``.<name>.<pid>.<n><random>.tmp`` next to ``path``, opened for writing (never an existing one:
    ``O_EXCL``, nor a link: ``O_NOFOLLOW``; another name on a clash), and its name. The folder must not be a link
    (:func:`~deviate_cb.store.safe_paths.open_folder`: a run folder replaced by one is refused), and the file must
    be in the folder so opened (not in one a link swapped in since), else :class:`PlantedLinkError`. Whole paths
    are opened, as the outside-writes audit hook expects. Its random part comes from ``os.urandom``, never from
    the ``random`` module, whose state is the user's."""
    folder, file_name = os.path.split(os.fspath(path))
    folder_fd = open_folder(folder or ".")
    try:
        for _ in range(100):
            tmp = os.path.join(folder, f".{file_name}.{os.getpid()}.{next(_counter)}{os.urandom(3).hex()}.tmp")
            try:
                fd = os.open(tmp, _FLAGS, 0o666)
            except FileExistsError:
                continue
            if in_folder(fd, os.path.basename(tmp), folder_fd):
                return fd, tmp
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise PlantedLinkError(folder)
    finally:
        if folder_fd is not None:
            os.close(folder_fd)
    raise FileExistsError(f"{folder or '.'}: no free temporary file name for {file_name}")
