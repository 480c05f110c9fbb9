"""Per-run aggregation: last/best/mean, direction inference, NaN/Inf, on arrays and on pyarrow tables."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from deviate_cb.stats import aggregate, aggregate_table, infer_direction, resolve_direction

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("val_acc", "max"),
        ("train_accuracy", "max"),
        ("val/acc_top1", "max"),
        ("acc@5", "max"),
        ("val_sparse_categorical_accuracy", "max"),
        ("f1_score", "max"),
        ("val_auroc", "max"),
        ("mAP", "max"),
        ("map50", "max"),
        ("test_iou", "max"),
        ("bleu4", "max"),
        ("r2", "max"),
        ("train_loss", "min"),
        ("valLoss", "min"),
        ("val_loss_epoch", "min"),
        ("test_error", "min"),
        ("top1_err", "min"),
        ("val_mean_squared_error", "min"),
        ("rmse", "min"),
        ("val_nll", "min"),
        ("perplexity", "min"),
        ("ppl", "min"),
        ("wer", "min"),
        ("cer", "min"),
        ("lr", None),
        ("epoch_time", None),
        ("grad_norm", None),
        ("", None),
    ],
)
def test_infer_direction(name: str, direction: str | None) -> None:
    assert infer_direction(name) == direction


def test_explicit_direction_overrides_inference() -> None:
    assert resolve_direction("val_acc", {"val_acc": "min"}) == "min"
    assert resolve_direction("lr", {"lr": "max"}) == "max"
    assert resolve_direction("val_acc", {"other": "min"}) == "max"
    with pytest.raises(ValueError, match=r"must be 'max' or 'min'\. Received: directions\['lr'\]='up'\."):
        resolve_direction("lr", {"lr": "up"})


def test_aggregate_arrays_against_numpy() -> None:
    x = np.random.default_rng(3).normal(size=20)
    assert aggregate(x, "last") == x[-1]
    assert aggregate(x, "best", "max") == np.max(x)
    assert aggregate(x, "best", "min") == np.min(x)
    assert aggregate(x, "mean") == pytest.approx(np.mean(x), rel=1e-14)
    order = np.random.default_rng(4).permutation(20)
    assert aggregate(x, "last", order=order) == x[np.argmax(order)]


def test_nonfinite_values() -> None:
    series = [0.5, NAN, 0.2, INF, 0.9]
    assert aggregate(series, "best", "min") == 0.2
    assert aggregate(series, "best", "max") == 0.9
    assert aggregate(series, "mean") == pytest.approx((0.5 + 0.2 + 0.9) / 3)
    assert math.isnan(aggregate([0.5, NAN], "last"))
    assert aggregate([0.5, -INF], "last") == -INF
    assert math.isnan(aggregate([NAN, INF], "mean"))
    assert math.isnan(aggregate([NAN, -INF], "best", "max"))
    assert math.isnan(aggregate([], "last"))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"^`how` must be one of last, best, mean\. Received: how='median'\.$"):
        aggregate([1.0], "median")
    with pytest.raises(ValueError, match="`direction` must be 'max' or 'min' when how='best'"):
        aggregate([1.0], "best")
    with pytest.raises(ValueError, match=r"`direction` must be 'max' or 'min'\. Received: direction='up'\."):
        aggregate([1.0], "best", "up")
    with pytest.raises(TypeError, match="`values` must be numbers"):
        aggregate(["x"], "mean")
    with pytest.raises(ValueError, match="one key per value"):
        aggregate([1.0, 2.0], "last", order=[0])


def _long_table(rng: np.random.Generator) -> tuple[pa.Table, dict[tuple[int, str], np.ndarray]]:
    """A shuffled long table of 5 runs x 3 metrics with NaN/Inf sprinkled in; also the series in seq order."""
    rows, series = [], {}
    for run in range(5):
        for name in ("val_acc", "train_loss", "lr"):
            values = rng.normal(size=int(rng.integers(1, 8)))
            values[rng.random(values.size) < 0.2] = NAN
            values[rng.random(values.size) < 0.1] = INF
            series[(run, name)] = values
            rows += [(run, name, seq, v) for seq, v in enumerate(values)]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    table = pa.table({k: [r[i] for r in rows] for i, k in enumerate(("run", "name", "seq", "value"))})
    return table, series


@pytest.mark.parametrize("how", ["last", "best", "mean"])
def test_aggregate_table_matches_per_series_reference(how: str) -> None:
    table, series = _long_table(np.random.default_rng(11))
    result = aggregate_table(table, how, keys=["run", "name"], directions={"lr": "min"})
    got = {(r["run"], r["name"]): r["value"] for r in result.table.to_pylist()}
    assert set(got) == set(series)
    for key, values in series.items():
        direction = {"val_acc": "max", "train_loss": "min", "lr": "min"}[key[1]]
        expected = aggregate(values, how, direction if how == "best" else None)
        np.testing.assert_equal(got[key], expected)
    assert result.skipped == () and result.how == how
    assert result.table.column_names == ["run", "name", "value"]
    assert result.table.schema.field("value").type == pa.float64()


def test_aggregate_table_best_skips_unknown_direction() -> None:
    table, _ = _long_table(np.random.default_rng(5))
    result = aggregate_table(table, "best", keys=["run", "name"])
    assert result.skipped == ("lr",)
    assert set(result.table.column("name").to_pylist()) == {"val_acc", "train_loss"}


def test_aggregate_table_best_direction_override() -> None:
    table = pa.table({"run": [0, 0, 0], "name": ["val_loss"] * 3, "seq": [0, 1, 2], "value": [1.0, 0.4, 0.6]})
    assert aggregate_table(table, "best", keys=["run", "name"]).table.column("value").to_pylist() == [0.4]
    flipped = aggregate_table(table, "best", keys=["run", "name"], directions={"val_loss": "max"})
    assert flipped.table.column("value").to_pylist() == [1.0]


def test_aggregate_table_integer_values_and_empty_table() -> None:
    table = pa.table({"run": [0, 0], "name": ["steps"] * 2, "seq": [1, 0], "value": pa.array([7, 3], pa.int64())})
    assert aggregate_table(table, "last", keys=["run", "name"]).table.column("value").to_pylist() == [7.0]
    empty = aggregate_table(table.slice(0, 0), "mean", keys=["run", "name"]).table
    assert empty.num_rows == 0 and empty.column_names == ["run", "name", "value"]


def test_aggregate_table_validation() -> None:
    table = pa.table({"run": [0], "name": ["a"], "seq": [0], "value": ["x"]})
    with pytest.raises(TypeError, match="column `value` must be numeric"):
        aggregate_table(table, "last", keys=["run", "name"])
    with pytest.raises(ValueError, match="lacks column"):
        aggregate_table(table.drop_columns(["seq"]), "last", keys=["run", "name"])
    with pytest.raises(TypeError, match=r"must be a pyarrow\.Table"):
        aggregate_table({"value": [1.0]}, "last")  # type: ignore[arg-type]
