"""The footer summary's encoding is byte for byte what the previous implementation wrote, on random tables.

``encode_summary`` groups series by counting into one bin per possible (stage, name) code when there are few, and
skips null handling for columns without nulls (issue 30: it runs at every run's end). The JSON it writes must not
change: reports compare it with Parquet statistics, and run.json holds a copy. The reference below is the
previous algorithm, kept verbatim; random tables cover shuffled and tied ``seq``, null stages, names and values,
NaN, infinities, signed zeros, several chunks, many series (the ``np.unique`` path) and empty tables.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from deviate_cb.store.footer_summary import decode_summary, encode_summary


def reference_summary(table: pa.Table) -> bytes:
    """The summary as the previous implementation (commit 5ec9ea8) computed it: an Arrow dictionary encoding
    and ``np.unique`` per table."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    seq = table.column("seq").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    value_column = pc.cast(table.column("value"), pa.float64()).fill_null(math.nan)
    stage = _reference_codes(pc.cast(table.column("stage"), pa.string()).fill_null("unknown"))
    name = _reference_codes(pc.cast(table.column("name"), pa.string()))
    n_names = max(len(name.dictionary), 1)
    stage_codes = stage.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    name_codes = name.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    key = stage_codes * n_names + name_codes  # one code per (stage, name)
    named = name.indices.is_valid().to_numpy(zero_copy_only=False)
    value = value_column.to_numpy(zero_copy_only=False)
    row_seq = seq
    if not np.all(seq[1:] >= seq[:-1]):
        order = np.argsort(seq, kind="stable")  # by seq, ties in row order: the later row is the last
        key, named, value, row_seq = key[order], named[order], value[order], seq[order]
    key, value, row_seq = key[named], value[named], row_seq[named]
    keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    _, first_reversed = np.unique(key[::-1], return_index=True)
    last = key.size - 1 - first_reversed  # each series' last row (np.unique sorts both alike)
    finite = np.isfinite(value)
    groups = keys.size
    count = np.bincount(inverse, weights=finite, minlength=groups).astype(np.int64)
    total = np.bincount(inverse, weights=np.where(finite, value, 0.0), minlength=groups)
    high, low = np.full(groups, -np.inf), np.full(groups, np.inf)
    np.maximum.at(high, inverse[finite], value[finite])
    np.minimum.at(low, inverse[finite], value[finite])
    stages, names = stage.dictionary.to_pylist(), name.dictionary.to_pylist()
    series = []
    for group in np.argsort(first, kind="stable").tolist():  # in the order the series first appear
        k, n, row = int(keys[group]), int(count[group]), last[group]
        some = n > 0
        series.append(
            [
                stages[k // n_names],
                names[k % n_names],
                int(row_seq[row]),
                float(value[row]),
                float(high[group]) if some else math.nan,
                float(low[group]) if some else math.nan,
                float(total[group]) if some else math.nan,
                n,
            ]
        )
    extremes = pc.min_max(value_column)  # as Parquet's column statistics: NaN left out, infinities kept
    low_value, high_value = extremes["min"].as_py(), extremes["max"].as_py()
    summary = {
        "version": 1,
        "rows": table.num_rows,
        "seq_min": int(seq.min()) if seq.size else None,
        "seq_max": int(seq.max()) if seq.size else None,
        "value_min": None if low_value is None or math.isnan(low_value) else low_value,
        "value_max": None if high_value is None or math.isnan(high_value) else high_value,
        "series": series,
    }
    return json.dumps(summary, separators=(",", ":")).encode()  # NaN and Infinity as Python's json writes them


def _reference_codes(column: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column)
    return encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded


_SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 1e308, -1e-308]


def _random_table(rng: np.random.Generator, rows: int, stages: int, names: int) -> pa.Table:
    seq = rng.permutation(rows) if rng.random() < 0.5 else np.arange(rows)
    if rng.random() < 0.3 and rows:  # ties in seq
        seq = rng.integers(0, max(rows // 2, 1), rows)
    stage_pool = [f"s{i}" for i in range(stages)]
    name_pool = [f"n{i}/é" for i in range(names)]
    null_share = rng.choice([0.0, 0.0, 0.1, 0.5, 1.0])
    stage = [None if rng.random() < null_share else stage_pool[rng.integers(stages)] for _ in range(rows)]
    name = [None if rng.random() < null_share else name_pool[rng.integers(names)] for _ in range(rows)]
    value: list[Any] = [
        None
        if rng.random() < null_share / 2
        else (_SPECIAL[rng.integers(len(_SPECIAL))] if rng.random() < 0.3 else float(rng.normal()))
        for _ in range(rows)
    ]
    table = pa.table(
        {
            "seq": pa.array(seq, pa.int64()),
            "stage": pa.array(stage, pa.string()),
            "name": pa.array(name, pa.string()),
            "value": pa.array(value, pa.float64()),
        }
    )
    if rows > 2 and rng.random() < 0.4:  # several chunks
        cut = int(rng.integers(1, rows - 1))
        table = pa.concat_tables([table.slice(0, cut), table.slice(cut)])
    return table


@pytest.mark.parametrize("seed", range(8))
def test_the_summary_is_byte_identical_to_the_previous_algorithm(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        shape = rng.integers(3)
        if shape == 0:  # the common shape: few series, many rows
            rows, stages, names = int(rng.integers(0, 400)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
        elif shape == 1:  # many series, few rows: more possible keys than the bins allow
            rows, stages, names = int(rng.integers(1, 40)), int(rng.integers(10, 40)), int(rng.integers(10, 40))
        else:
            rows, stages, names = int(rng.integers(0, 60)), int(rng.integers(1, 8)), int(rng.integers(1, 8))
        table = _random_table(rng, rows, stages, names)
        assert encode_summary(table) == reference_summary(table)


def test_the_common_shape_and_the_many_series_shape_both_give_each_series_in_order() -> None:
    few = pa.table(
        {
            "seq": [0, 1, 2, 3],
            "stage": ["val", "train", "val", "train"],
            "name": ["b", "a", "b", "a"],
            "value": [1.0, 2.0, 3.0, math.nan],
        }
    )
    series = json.loads(encode_summary(few))["series"]
    assert json.dumps(series) == '[["val", "b", 2, 3.0, 3.0, 1.0, 4.0, 2], ["train", "a", 3, NaN, 2.0, 2.0, 2.0, 1]]'
    many = pa.table(  # 30 x 30 possible (stage, name) keys for 30 rows: grouped through np.unique
        {
            "seq": list(range(30))[::-1],
            "stage": [f"s{i}" for i in range(30)],
            "name": [f"n{i}" for i in range(30)],
            "value": [float(i) for i in range(30)],
        }
    )
    series = decode_summary(encode_summary(many))["series"]
    assert [s[:3] for s in series] == [[f"s{i}", f"n{i}", 29 - i] for i in range(29, -1, -1)]
    assert encode_summary(many) == reference_summary(many)
