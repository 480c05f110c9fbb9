"""The run's end writes build their Arrow columns without pandas, and the columns are the ones ``pa.array`` builds.

``pa.array`` and ``to_numpy`` import pandas the first time they run in a process; a replica's training never
imports it, so its run's end did, at a cost of 0.2-0.3 s of CPU (issue 30). ``deviate_cb.store.arrow_columns``
builds the columns through Arrow's buffer API instead. Here: every builder gives exactly what ``pa.array`` gives
(or refuses what it refuses) for the inputs it takes and those it hands on, ``numpy_view`` gives what ``to_numpy``
gives, and a real Lightning fit with the callback, in a fresh process, ends without pandas imported.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from deviate_cb.store.arrow_columns import (
    bool_array,
    float64_array,
    int64_array,
    numpy_view,
    repeated_string,
    string_array,
)

REPO = Path(__file__).resolve().parents[2]


def same(column: pa.Array, expected: pa.Array) -> bool:
    """The same type, nulls and values, NaN equal to NaN and -0.0 told from 0.0 (``Array.equals`` has NaN != NaN)."""
    return (
        column.type == expected.type
        and column.null_count == expected.null_count
        and [repr(v) for v in column.to_pylist()] == [repr(v) for v in expected.to_pylist()]
    )


CASES: list[tuple[Callable[[Any], pa.Array], pa.DataType, Any]] = [
    (int64_array, pa.int64(), [3, -1, 2**62, 0]),
    (int64_array, pa.int64(), np.arange(5, dtype=np.int32)),
    (int64_array, pa.int64(), np.array([7, 8], dtype=np.uint64)),
    (int64_array, pa.int64(), np.array([2**63], dtype=np.uint64)),  # past int64: pa.array says so
    (int64_array, pa.int64(), [1, None, 3]),  # a null: through pa.array
    (int64_array, pa.int64(), [1.5, 2.0]),  # floats: pa.array's own rule
    (int64_array, pa.int64(), ["1"]),
    (int64_array, pa.int64(), [2**64]),
    (int64_array, pa.int64(), [np.int64(4), 5]),
    (float64_array, pa.float64(), [0.5, math.nan, math.inf, -math.inf, -0.0, 1e308]),
    (float64_array, pa.float64(), [1, 2, 3]),
    (float64_array, pa.float64(), np.array([1.5, 2.5], dtype=np.float32)),
    (float64_array, pa.float64(), [2**60 + 1]),  # not exact in float64: pa.array refuses it
    (float64_array, pa.float64(), [0.5, None]),
    (float64_array, pa.float64(), np.linspace(0, 1, 7)[::2]),  # not contiguous
    (bool_array, pa.bool_(), [True, False, True] * 5),
    (bool_array, pa.bool_(), np.array([True] * 9)),
    (bool_array, pa.bool_(), [0, 1]),
    (bool_array, pa.bool_(), [True, None]),
    (string_array, pa.string(), ["train", "val", "train", "é ü 深", ""]),
    (string_array, pa.string(), ["a\x1fb", "c"]),  # holds the separator
    (string_array, pa.string(), ["a", None]),
    (string_array, pa.string(), [b"bytes"]),
    (string_array, pa.string(), ["\ud800"]),  # not encodable: pa.array refuses it
    (string_array, pa.string(), [1]),
    (string_array, pa.string(), []),
    (string_array, pa.string(), ("x", "y")),
    (string_array, pa.string(), ["train"] * 7),  # one value repeated
    (string_array, pa.string(), ["train"] * 3 + [None]),
    (string_array, pa.string(), ["", ""]),
    (string_array, pa.string(), ["loss_step", "acc_step", "", "a\x1fb"]),  # ASCII, the separator within one
    (string_array, pa.string(), ["x", 1]),
]


@pytest.mark.parametrize(("build", "arrow_type", "values"), CASES)
def test_each_column_is_what_pa_array_builds_or_refused_as_it_refuses(
    build: Callable[[Any], pa.Array], arrow_type: pa.DataType, values: Any
) -> None:
    try:
        expected = pa.array(values, type=arrow_type)
    except Exception as error:  # the same refusal is the expected outcome
        with pytest.raises(type(error)):
            build(values)
        return
    column = build(values)
    column.validate(full=True)
    assert same(column, expected), (column, expected)


def test_random_columns_are_what_pa_array_builds() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 300))
        ints = rng.integers(-(2**40), 2**40, n)
        floats = rng.normal(size=n)
        floats[rng.random(n) < 0.1] = math.nan
        words = [["train", "val", "test", "loss/é", ""][k] for k in rng.integers(0, 5, n)]
        assert same(int64_array(ints.tolist()), pa.array(ints.tolist(), type=pa.int64()))
        assert same(float64_array(floats.tolist()), pa.array(floats.tolist(), type=pa.float64()))
        assert same(float64_array(floats), pa.array(floats, type=pa.float64()))
        assert same(bool_array((floats > 0).tolist()), pa.array((floats > 0).tolist(), type=pa.bool_()))
        assert same(string_array(words), pa.array(words, type=pa.string()))
        ascii_words = [words[0]] * n if n % 3 == 0 else [w for w in words if w.isascii()]  # repeated, or ASCII
        assert same(string_array(ascii_words), pa.array(ascii_words, type=pa.string()))
    assert repeated_string("step", 3).equals(pa.array(["step"] * 3, type=pa.string()))
    assert repeated_string("step", 0).equals(pa.array([], type=pa.string()))


def test_numpy_view_is_what_to_numpy_gives() -> None:
    columns = [
        pa.array([1, 2, 3], type=pa.int64()),
        pa.array([1, 2, 3, 4, 5], type=pa.int32()).slice(2),  # an offset into the buffer
        pa.array([0.5, math.nan], type=pa.float64()),
        pa.chunked_array([[1, 2], [3]], type=pa.int64()),
        pa.chunked_array([[4.0]], type=pa.float64()),
        pa.array([1, None], type=pa.int64()),  # nulls: through to_numpy
        pa.array([], type=pa.int64()),
        pa.array(["a"]),
    ]
    for column in columns:
        expected = column.to_numpy(zero_copy_only=False) if isinstance(column, pa.Array) else column.to_numpy()
        np.testing.assert_array_equal(numpy_view(column), expected)
        assert numpy_view(column).dtype == expected.dtype


FIT = """
import sys, warnings
warnings.filterwarnings("ignore")
from lightning_cb.models import TinyModule, loader, trainer
from deviate_cb.lightning import DeviateCallback
before = "pandas" in sys.modules
cb = DeviateCallback(sys.argv[1], experiment="no-pandas")
trainer([cb], max_epochs=2).fit(TinyModule(), loader(), loader(shuffle=False))
import pyarrow.parquet as pq
rows = pq.read_metadata(f"{cb.run_dir}/metrics.parquet").num_rows
print(before, "pandas" in sys.modules, rows)
"""


@pytest.mark.slow
def test_a_lightning_fit_with_the_callback_ends_without_importing_pandas(tmp_path: Path) -> None:
    pytest.importorskip("pandas")  # without pandas installed there is nothing to avoid
    paths = [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    script = tmp_path / "fit.py"
    script.write_text(textwrap.dedent(FIT))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs")], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    before, after, rows = done.stdout.split()[-3:]
    assert int(rows) > 0  # the run's end wrote its metrics ...
    assert (before, after) == ("False", "False")  # ... and no step of the fit imported pandas
