"""aggregate(..., "at_step"/"at_epoch") on arrays and on pyarrow tables, parse_aggregate, and their validation."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pytest

from deviate_cb.stats.aggregation.arrow import aggregate_table
from deviate_cb.stats.aggregation.series import aggregate
from deviate_cb.stats.aggregation.spec import AT_AGGREGATES, parse_aggregate

NAN = float("nan")


def _table() -> pa.Table:
    # run 0: step 10 recorded twice (seq 1 and 3: the later one wins); run 1: rows out of seq order;
    # run 2: never reaches step 20 / epoch 1; run 3: NaN at step 20.
    return pa.table(
        {
            "run": [0, 0, 0, 0, 1, 1, 1, 2, 3, 3],
            "name": ["acc"] * 10,
            "seq": [0, 1, 2, 3, 2, 0, 1, 0, 0, 1],
            "step": [0, 10, 20, 10, 20, 0, 10, 0, 10, 20],
            "epoch": [0, 0, 1, 0, 1, 0, 0, 0, 0, 1],
            "value": [0.1, 0.2, 0.3, 0.25, 0.6, 0.4, 0.5, 0.7, 0.8, NAN],
        }
    )


def _reference(table: pa.Table, column: str, at: int) -> dict[int, float]:
    """Plain-Python reference: per run, the value of the row with the largest seq among rows at ``at``."""
    out: dict[int, float] = {}
    rows = table.to_pylist()
    for run in sorted({r["run"] for r in rows}):
        match = [r for r in rows if r["run"] == run and r[column] == at]
        out[run] = max(match, key=lambda r: r["seq"])["value"] if match else NAN
    return out


@pytest.mark.parametrize(("how", "column"), [("at_step", "step"), ("at_epoch", "epoch")])
@pytest.mark.parametrize("at", [0, 10, 20, 1, 99])
def test_table_matches_plain_reference(how: str, column: str, at: int) -> None:
    table = _table()
    result = aggregate_table(table, how, at=at, keys=["run", "name"])
    expected = _reference(table, column, at)
    assert result.table.column("run").to_pylist() == sorted(expected)
    np.testing.assert_array_equal(result.table.column("value").to_numpy(), list(expected.values()))
    assert result.how == how and result.at == at
    # A run with no row at `at` is missing; a NaN recorded there is a value (NaN), not a missing run.
    reached = {r["run"] for r in table.to_pylist() if r[column] == at}
    assert result.n_missing == 4 - len(reached)


def test_table_small_example_and_string_form() -> None:
    result = aggregate_table(_table(), "at_step=10", keys=["run", "name"])
    np.testing.assert_array_equal(result.table.column("value").to_numpy(), [0.25, 0.5, NAN, 0.8])
    assert (result.how, result.at, result.n_missing) == ("at_step", 10, 1)
    epoch = aggregate_table(_table(), "at_epoch", at=1, keys=["run", "name"])
    np.testing.assert_array_equal(epoch.table.column("value").to_numpy(), [0.3, 0.6, NAN, NAN])
    assert epoch.n_missing == 1


def test_table_custom_column_names_and_unchanged_defaults() -> None:
    t = _table().rename_columns(["run", "name", "seq", "global_step", "ep", "value"])
    r = aggregate_table(t, "at_step", at=20, keys=["run", "name"], step="global_step", epoch="ep")
    np.testing.assert_array_equal(r.table.column("value").to_numpy(), [0.3, 0.6, NAN, NAN])
    last = aggregate_table(_table(), "last", keys=["run", "name"])
    assert (last.at, last.n_missing) == (None, 0)
    assert last.table.column("value").to_pylist()[:3] == [0.25, 0.6, 0.7]


@pytest.mark.parametrize("at", [0, 10, 20, 1, 99])
def test_array_path_matches_table_path(at: int) -> None:
    table = _table()
    for how, column in (("at_step", "step"), ("at_epoch", "epoch")):
        per_run = aggregate_table(table, how, at=at, keys=["run", "name"]).table.column("value").to_pylist()
        for run, expected in enumerate(per_run):
            rows = [r for r in table.to_pylist() if r["run"] == run]
            labels = {"steps" if column == "step" else "epochs": [r[column] for r in rows]}
            got = aggregate([r["value"] for r in rows], how, at=at, order=[r["seq"] for r in rows], **labels)
            assert got == expected or (math.isnan(got) and math.isnan(expected))


def test_array_path_without_order_takes_the_last_position() -> None:
    assert aggregate([1.0, 2.0, 3.0], "at_step", at=5, steps=[5, 5, 6]) == 2.0
    assert aggregate([1.0, 2.0, 3.0], "at_step", at=5, steps=np.array([5, 5, 6]), order=[1, 0, 2]) == 1.0
    assert math.isnan(aggregate([], "at_epoch", at=0, epochs=[]))
    assert math.isnan(aggregate([1.0, NAN], "at_epoch=1", epochs=[0, 1]))


def test_parse_aggregate() -> None:
    assert parse_aggregate("at_step=100") == ("at_step", 100)
    assert parse_aggregate("at_epoch= 3") == ("at_epoch", 3)
    assert parse_aggregate("at_epoch", at=np.int64(2)) == ("at_epoch", 2)
    assert parse_aggregate("mean") == ("mean", None)
    assert AT_AGGREGATES == ("at_step", "at_epoch")


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: parse_aggregate("at_step"), ValueError, "`at` must be given when how='at_step'. Received: at=None."),
        (lambda: parse_aggregate("at_step", at=1.5), TypeError, "`at` must be an integer. Received: at=1.5."),
        (lambda: parse_aggregate("at_step", at=True), TypeError, "`at` must be an integer. Received: at=True."),
        (
            lambda: parse_aggregate("at_step=x"),
            ValueError,
            "`how` must give an integer after '='. Received: how='at_step=x'.",
        ),
        (
            lambda: parse_aggregate("at_step=2", at=3),
            ValueError,
            "`at` contradicts `how`. Received: how='at_step=2', at=3.",
        ),
        (
            lambda: parse_aggregate("last", at=3),
            ValueError,
            "`at` applies to at_step and at_epoch only. Received: how='last', at=3.",
        ),
        (
            lambda: parse_aggregate("best=3"),
            ValueError,
            "`how` must be one of last, best, mean. Received: how='best=3'.",
        ),
        (
            lambda: aggregate([1.0], "at_step", at=0),
            ValueError,
            "`steps` must be given when how='at_step'. Received: steps=None.",
        ),
        (
            lambda: aggregate([1.0], "at_epoch", at=0, epochs=[0, 1]),
            ValueError,
            "`epochs` must have one entry per value. Received: 2 entries for 1 values.",
        ),
        (
            lambda: aggregate_table(_table(), "at_step", keys=["run"]),
            ValueError,
            "`at` must be given when how='at_step'.",
        ),
        (
            lambda: aggregate_table(_table().drop_columns(["epoch"]), "at_epoch=1", keys=["run"]),
            ValueError,
            "`table` lacks column(s) epoch.",
        ),
        (
            lambda: aggregate_table(_table().set_column(3, "step", pa.array([0.0] * 10)), "at_step=0", keys=["run"]),
            TypeError,
            "`table` column `step` must be integer. Received: double.",
        ),
    ],
)
def test_validation_messages(call, error: type, message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}"):
        call()
