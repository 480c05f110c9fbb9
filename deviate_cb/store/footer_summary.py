"""Per-series summaries that ``metrics.parquet`` carries in its footer, so reports need not scan the values.

Each time the store writes a run's metrics it also computes, for every (stage, name) series, the value
recorded last (by ``seq``, ties to the later row) and its ``seq``, and the largest, smallest and summed
finite values and their count, and stores them as JSON under the key ``deviate.series`` of the Parquet
file's key-value metadata, together with the row count and the ``seq`` and ``value`` ranges of the file. A
reader takes a summary only when the footer agrees with it (same row count, same ``seq`` and ``value``
minimum and maximum in the column statistics); a file written by another tool, or rewritten with other rows
or values, is scanned as before. (A rewrite that keeps the row count and both ranges goes unnoticed here;
the store's writer also copies the summary into ``run.json`` with the file's size and modification time,
which notices any rewrite.) ``last``, ``best`` and ``mean`` then cost one manifest or footer read per run
instead of a scan of every value.

The capture side computes this with pyarrow only (no DuckDB).

Example:
    >>> import pyarrow as pa
    >>> t = pa.table({"seq": [0, 1, 2], "stage": ["val"] * 3, "name": ["acc"] * 3,
    ...               "value": [0.5, 0.9, float("nan")]})
    >>> summary = decode_summary(encode_summary(t))
    >>> summary["series"]
    [['val', 'acc', 2, nan, 0.9, 0.5, 1.4, 2]]
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

__all__ = [
    "SERIES_KEY",
    "SUMMARY_VERSION",
    "decode_summary",
    "encode_summary",
    "footer_summary",
    "valid_summary",
    "with_summary",
]

SERIES_KEY = b"deviate.series"
SUMMARY_VERSION = 1


def encode_summary(table: pa.Table) -> bytes:
    """The summary of a metrics table (columns ``seq``, ``stage``, ``name``, ``value``) as JSON bytes.

    Each series is ``[stage, name, last_seq, last_value, max, min, sum, n_finite]``: ``stage`` is
    ``"unknown"`` where it is null, rows without a name are left out, and ``max``/``min``/``sum`` are over the
    finite values (``NaN`` when there are none).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    seq = table.column("seq").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    order = np.arange(seq.size) if np.all(seq[1:] >= seq[:-1]) else np.argsort(seq, kind="stable")
    value = pc.cast(table.column("value"), pa.float64()).fill_null(math.nan)
    work = pa.table(
        {
            "stage": pc.cast(table.column("stage"), pa.string()).fill_null("unknown"),
            "name": pc.cast(table.column("name"), pa.string()),
            "seq": seq,
            "value": value,
        }
    ).take(pa.array(order))
    work = work.filter(pc.is_valid(work.column("name")))
    finite = pc.if_else(pc.is_finite(work.column("value")), work.column("value"), pa.scalar(None, pa.float64()))
    work = work.append_column("finite", finite)
    keep_nulls = pc.ScalarAggregateOptions(skip_nulls=False)
    out = work.group_by(["stage", "name"], use_threads=False).aggregate(
        [
            ("seq", "last", keep_nulls),
            ("value", "last", keep_nulls),
            ("finite", "max"),
            ("finite", "min"),
            ("finite", "sum"),
            ("finite", "count"),
        ]
    )
    columns = [out.column(c).to_pylist() for c in out.column_names]
    by_name = dict(zip(out.column_names, columns, strict=True))
    series = [
        [stage, name, last_seq, _num(last), _num(high), _num(low), _num(total), count]
        for stage, name, last_seq, last, high, low, total, count in zip(
            by_name["stage"],
            by_name["name"],
            by_name["seq_last"],
            by_name["value_last"],
            by_name["finite_max"],
            by_name["finite_min"],
            by_name["finite_sum"],
            by_name["finite_count"],
            strict=True,
        )
    ]
    extremes = pc.min_max(value)  # as Parquet's column statistics: NaN left out, infinities kept
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    summary = {
        "version": SUMMARY_VERSION,
        "rows": table.num_rows,
        "seq_min": int(seq.min()) if seq.size else None,
        "seq_max": int(seq.max()) if seq.size else None,
        "value_min": None if low is None or math.isnan(low) else low,
        "value_max": None if high is None or math.isnan(high) else high,
        "series": series,
    }
    return json.dumps(summary, separators=(",", ":")).encode()  # NaN and Infinity as Python's json writes them


def with_summary(table: pa.Table) -> pa.Table:
    """``table`` with its summary in the schema metadata (which Parquet stores in the footer)."""
    metadata = dict(table.schema.metadata or {})
    metadata[SERIES_KEY] = encode_summary(table)
    return table.replace_schema_metadata(metadata)


def decode_summary(data: bytes) -> Optional[dict[str, Any]]:
    """The summary in ``data``, or ``None`` when it is not one this version can read."""
    try:
        summary = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    return valid_summary(summary)


def valid_summary(summary: Any) -> Optional[dict[str, Any]]:
    """``summary`` when it is a summary this version can read (a dict with ``version``, ``rows``, ``series``)."""
    if not isinstance(summary, dict) or summary.get("version") != SUMMARY_VERSION:
        return None
    if not isinstance(summary.get("series"), list) or not isinstance(summary.get("rows"), int):
        return None
    return summary


def footer_summary(metadata: pq.FileMetaData) -> Optional[dict[str, Any]]:
    """The summary of a Parquet file whose footer agrees with it (row count, ``seq`` range), else ``None``.

    Example:
        >>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
        >>> path = tempfile.mkdtemp() + "/m.parquet"
        >>> t = pa.table({"seq": [0, 1], "stage": ["val"] * 2, "name": ["acc"] * 2, "value": [0.5, 0.7]})
        >>> pq.write_table(with_summary(t), path)
        >>> footer_summary(pq.read_metadata(path))["series"]
        [['val', 'acc', 1, 0.7, 0.7, 0.5, 1.2, 2]]
        >>> pq.write_table(with_summary(t).slice(0, 1), path)  # rewritten with fewer rows: not trusted
        >>> footer_summary(pq.read_metadata(path)) is None
        True
    """
    data = (metadata.metadata or {}).get(SERIES_KEY)
    summary = decode_summary(data) if data is not None else None
    if summary is None or summary["rows"] != metadata.num_rows:
        return None
    if metadata.num_rows == 0:
        return summary
    for column, key in (("seq", "seq"), ("value", "value")):
        try:
            index = metadata.schema.names.index(column)
        except ValueError:
            return None
        low, high = None, None
        for i in range(metadata.num_row_groups):
            stats = metadata.row_group(i).column(index).statistics
            if stats is None:
                return None
            if stats.has_min_max:
                low = stats.min if low is None else min(low, stats.min)
                high = stats.max if high is None else max(high, stats.max)
        if (low, high) != (summary.get(f"{key}_min"), summary.get(f"{key}_max")):
            return None  # rewritten since: other rows or other values
    return summary


def _num(x: Optional[float]) -> float:
    return math.nan if x is None else float(x)
