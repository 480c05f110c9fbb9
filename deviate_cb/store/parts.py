"""Append-only parts: what a run adds at each flush, one small Parquet file each, until the run compacts them.

Example:
    >>> import tempfile, pyarrow as pa
    >>> table_path = Path(tempfile.mkdtemp()) / "metrics.parquet"
    >>> _ = write_part(table_path, pa.table({"seq": [0, 1]}), attempt=1, first=0)
    >>> _ = write_part(table_path, pa.table({"seq": [2]}), attempt=1, first=2)
    >>> [(p.attempt, p.first, p.path.name) for p in list_parts(table_path)]
    [(1, 0, 'a1-000000000000.parquet'), (1, 2, 'a1-000000000002.parquet')]
    >>> remove_parts(table_path, list_parts(table_path)); parts_dir(table_path).exists()
    False
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Optional

from deviate_cb.store.atomic import atomic_write_parquet
from deviate_cb.store.bounded_read import load_json

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "PARTS_SUFFIX",
    "Part",
    "attempt_number",
    "find_parts",
    "list_parts",
    "parts_dir",
    "recorded_attempt",
    "remove_parts",
    "write_part",
]

PARTS_SUFFIX = ".parts"
_PART_NAME = re.compile(r"a([1-9][0-9]{0,8})-([0-9]{12})\.parquet")


class Part(NamedTuple):
    """One part file: its path, the attempt that wrote it and its first sequence number."""

    path: Path
    attempt: int
    first: int


def parts_dir(table_path: Path) -> Path:
    """The folder of ``table_path``'s parts: ``metrics.parquet`` → ``metrics.parts``."""
    table_path = Path(table_path)
    return table_path.with_name(table_path.name.removesuffix(".parquet") + PARTS_SUFFIX)


def write_part(table_path: Path, table: pa.Table, *, attempt: int, first: int) -> Path:
    """Write ``table`` as the part of ``table_path`` that starts at ``first``, atomically; return its path."""
    if not 0 <= first < 10**12 or attempt_number(attempt) is None:
        raise ValueError(f"a part needs 0 <= first < 10**12 and 0 < attempt < 10**9. Received: {first=}, {attempt=}.")
    folder = parts_dir(table_path)
    path = folder / f"a{attempt}-{first:012d}.parquet"
    if not folder.is_dir():  # the first part (or the first since a compaction removed the folder)
        folder.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(path, table)
    return path


def list_parts(table_path: Path) -> list[Part]:
    """The parts of ``table_path`` in the order they were written (by attempt, then first sequence number).

    Files that are not parts (temporary files of a write in progress, anything else) are left out.
    """
    return find_parts(table_path) or []


def find_parts(table_path: Path) -> Optional[list[Part]]:
    """:func:`list_parts`, or ``None`` when there is no parts folder at all (then there is nothing for
    :func:`remove_parts` to delete either)."""
    folder = parts_dir(table_path)
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return None
    parts = []
    for name in names:
        match = _PART_NAME.fullmatch(name)
        if match:
            parts.append(Part(folder / name, int(match.group(1)), int(match.group(2))))
    return sorted(parts, key=lambda part: (part.attempt, part.first))


def remove_parts(table_path: Path, parts: Iterable[Part]) -> None:
    """Delete ``parts`` (already gone is fine), and their folder once it is empty."""
    for part in parts:
        Path(part.path).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty (a part of another attempt, a write in progress) or gone
        parts_dir(table_path).rmdir()


def recorded_attempt(run_dir: str | os.PathLike[str]) -> int:
    """The ``attempt`` that ``<run_dir>/run.json`` records: 1 when there is none, or no readable manifest.

    Example:
        >>> import tempfile
        >>> run_dir = Path(tempfile.mkdtemp())
        >>> recorded_attempt(run_dir)
        1
        >>> _ = (run_dir / "run.json").write_text('{"attempt": 3}')
        >>> recorded_attempt(run_dir)
        3
    """
    try:
        attempt = load_json(Path(run_dir) / "run.json").get("attempt")  # bounded: a FIFO or deep JSON is refused
    except (OSError, ValueError, AttributeError):
        return 1
    return attempt_number(attempt) or 1


def attempt_number(value: object) -> Optional[int]:
    """``value`` when it is an attempt number (an int from 1 to 10**9 - 1, as part names hold), else ``None``.

    Example:
        >>> attempt_number(2), attempt_number(0), attempt_number(True), attempt_number("2")
        (2, None, None, None)
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**9:
        return value
    return None
