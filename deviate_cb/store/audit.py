"""``audit.parquet``: digests of every tensor of the first training steps of a run (``deviate audit``).

Example:
    >>> import tempfile
    >>> row = {"step": 0, "seq": 0, "kind": "loss", "name": "loss", "module": None, "occurrence": 0,
    ...        "dtype": "float32", "shape": [], "numel": 1, "digest": "0" * 32, "sum": 0.5, "abs_max": 0.5,
    ...        "values": [0.5]}
    >>> run_dir = tempfile.mkdtemp()
    >>> write_audit(run_dir, [row]).name, read_audit(run_dir)[0]["kind"]
    ('audit.parquet', 'loss')
    >>> write_audit(run_dir, [row], {"rank": "1"}, rank=1).name, audit_ranks(run_dir), audit_metadata(run_dir, 1)
    ('audit.rank1.parquet', [0, 1], {'rank': '1'})
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from deviate_cb.store.atomic import atomic_write
from deviate_cb.store.bounded_read import HostileFileError, check_parquet

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "AUDIT_COLUMNS",
    "AUDIT_FILE",
    "audit_file",
    "audit_metadata",
    "audit_ranks",
    "audit_schema",
    "read_audit",
    "write_audit",
]

AUDIT_FILE = "audit.parquet"
_RANK_FILE = re.compile(r"audit\.rank([1-9][0-9]*)\.parquet")
AUDIT_COLUMNS = (
    "step",
    "seq",
    "kind",
    "name",
    "module",
    "occurrence",
    "dtype",
    "shape",
    "numel",
    "digest",
    "sum",
    "abs_max",
    "values",
)


def audit_schema() -> pa.Schema:
    """The Arrow schema of ``audit.parquet`` (see the module docstring)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("step", pa.int64()),
            ("seq", pa.int64()),
            ("kind", pa.string()),
            ("name", pa.string()),
            ("module", pa.string()),
            ("occurrence", pa.int64()),
            ("dtype", pa.string()),
            ("shape", pa.list_(pa.int64())),
            ("numel", pa.int64()),
            ("digest", pa.string()),
            ("sum", pa.float64()),
            ("abs_max", pa.float64()),
            ("values", pa.list_(pa.float64())),
        ]
    )


def audit_file(rank: int = 0) -> str:
    """The name of global rank ``rank``'s record: ``audit.parquet`` for rank 0, ``audit.rank<k>.parquet`` else.

    Example:
        >>> audit_file(0), audit_file(1)
        ('audit.parquet', 'audit.rank1.parquet')
    """
    return AUDIT_FILE if rank == 0 else f"audit.rank{int(rank)}.parquet"


def audit_ranks(run_dir: str | os.PathLike[str]) -> list[int]:
    """The global ranks whose record ``run_dir`` holds, in order (``[0]``: rank 0 alone; ``[]``: none)."""
    found = [0] if (Path(run_dir) / AUDIT_FILE).is_file() else []
    if Path(run_dir).is_dir():
        for entry in Path(run_dir).iterdir():
            match = _RANK_FILE.fullmatch(entry.name)
            if match and entry.is_file():
                found.append(int(match.group(1)))
    return sorted(found)


def audit_metadata(run_dir: str | os.PathLike[str], rank: int = 0) -> dict[str, str]:
    """The metadata of rank ``rank``'s record (``steps``, ``recorded_steps``, ``framework``; ``rank``,
    ``world_size`` and, when its fit stopped on one, ``exception`` under distributed training); ``{}`` when the
    file is absent or unreadable."""
    import pyarrow as pa

    try:
        footer = check_parquet(Path(run_dir) / audit_file(rank))  # a regular file's footer only
        metadata = footer.schema.to_arrow_schema().metadata or {}
    except (pa.ArrowException, OSError, ValueError):
        return {}
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, value in metadata.items()}


def write_audit(
    run_dir: str | os.PathLike[str],
    rows: Iterable[Mapping[str, Any]],
    metadata: Optional[Mapping[str, str]] = None,
    *,
    rank: int = 0,
) -> Path:
    """Write ``rows`` to ``<run_dir>/audit.parquet`` (rank ``k`` > 0: ``audit.rank<k>.parquet``) atomically,
    replacing it; return the file's path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    listed = [{column: row.get(column) for column in AUDIT_COLUMNS} for row in rows]
    schema = audit_schema()
    if metadata:
        schema = schema.with_metadata({str(k): str(v) for k, v in metadata.items()})
    table = pa.Table.from_pylist(listed, schema=schema)
    path = Path(run_dir) / audit_file(rank)
    atomic_write(path, lambda handle: pq.write_table(table, handle))
    return path


def read_audit(run_dir: str | os.PathLike[str], rank: int = 0) -> list[dict[str, Any]]:
    """The rows of ``<run_dir>/audit.parquet`` (rank ``k`` > 0: ``audit.rank<k>.parquet``) sorted by ``(step, seq)``.

    Raises:
        FileNotFoundError: The run recorded no audit.
        ValueError: The file is not a readable audit (corrupt, or columns missing).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(run_dir) / audit_file(rank)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    try:
        check_parquet(path)  # a FIFO or more rows than a run holds: HostileFileError (a ValueError), never read
        table = pq.read_table(path)
    except HostileFileError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path} is not a readable Parquet file ({' '.join(str(exc).split())})") from None
    missing = [column for column in AUDIT_COLUMNS if column not in table.column_names]
    if missing:
        raise ValueError(f"{path} lacks the column(s) {', '.join(missing)}")
    rows = table.select(list(AUDIT_COLUMNS)).to_pylist()
    return sorted(rows, key=lambda row: (row["step"], row["seq"]))
