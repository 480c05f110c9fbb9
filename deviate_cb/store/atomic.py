"""Atomic file writes: a reader sees the old file or the new one, never a partial one.

Every file of a run directory (manifest, fingerprint, ``metrics.parquet``, the job record) is written through
here: into a temporary file in the same directory, flushed and fsynced, then renamed over the target, so a
reader, or a replica killed mid-write, never sees a half-written file.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "run.json"
    >>> atomic_write_bytes(path, b'{"status": "running"}\\n')
    >>> path.read_text()
    '{"status": "running"}\\n'
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "atomic_write_bytes"]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, flush, fsync, rename)."""
    atomic_write(path, lambda handle: handle.write(data))


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write`` on a temporary file next to ``path``, flush and fsync it, then rename it over ``path``.

    A reader sees the old file or the new one, never a partial one; on an error the temporary file is removed
    and the old file is left as it was.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "x.bin"
        >>> atomic_write(path, lambda handle: handle.write(b"new"))
        >>> path.read_bytes()
        b'new'
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
