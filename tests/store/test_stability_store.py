"""predictions.parquet and the weight files: round trips, snapshot replacement, atomicity, readable errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from deviate_cb.errors import UsageError
from deviate_cb.store.predictions import PREDICTIONS_FILE, predictions_schema, read_predictions, write_predictions
from deviate_cb.store.weights import (
    WEIGHTS_FULL_FILE,
    WEIGHTS_SKETCH_FILE,
    read_full_weights,
    read_weight_sketch,
    read_weight_sketches,
    write_weights,
)


def _rows(run: Path, snapshot: str = "final") -> list[dict]:
    return [r for r in read_predictions(run).to_pylist() if r["snapshot"] == snapshot]


def test_probabilities_round_trip_with_groups_and_manifest(tmp_path: Path) -> None:
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.3, 0.4, 0.3]])
    block = write_predictions(
        tmp_path,
        outputs=probs,
        labels=[0, 2, 0],
        sample=[10, 11, 12],
        groups={"sex": ["f", "m", "f"], "age": [1, 2, 3]},
    )
    assert block == {
        "task": "classification",
        "score": "probability",
        "num_classes": 3,
        "n_samples": 3,
        "snapshots": ["final"],
        "groups": ["age", "sex"],
        "file": PREDICTIONS_FILE,
    }
    assert json.loads((tmp_path / "run.json").read_text())["predictions"] == block
    table = read_predictions(tmp_path)
    assert table.schema.equals(predictions_schema(["age", "sex"]))
    rows = table.to_pylist()
    assert [r["sample"] for r in rows] == [10, 11, 12]
    assert [r["predicted"] for r in rows] == [0, 2, 1]
    assert [r["score"] for r in rows] == pytest.approx([0.7, 0.6, 0.4])
    assert [r["label"] for r in rows] == [0, 2, 0]
    assert [r["group_age"] for r in rows] == ["1", "2", "3"]
    assert {r["value"] for r in rows} == {None} and {r["epoch"] for r in rows} == {None}


def test_logits_give_the_margin(tmp_path: Path) -> None:
    block = write_predictions(tmp_path, outputs=np.array([[2.0, -1.0, 0.5], [0.0, 3.0, 3.5]]), labels=[0, 1])
    assert block["score"] == "margin"
    assert [r["score"] for r in _rows(tmp_path)] == pytest.approx([1.5, 0.5])
    assert [r["predicted"] for r in _rows(tmp_path)] == [0, 2]


def test_one_hot_labels_are_classes(tmp_path: Path) -> None:
    write_predictions(tmp_path, outputs=np.array([[0.9, 0.1], [0.4, 0.6]]), labels=np.eye(2)[[1, 1]])
    assert [r["label"] for r in _rows(tmp_path)] == [1, 1]


def test_class_indices_infer_the_number_of_classes(tmp_path: Path) -> None:
    block = write_predictions(tmp_path, outputs=np.array([0, 3, 1]), labels=[0, 1, 4])
    assert (block["score"], block["num_classes"]) == (None, 5)
    assert write_predictions(tmp_path, outputs=np.array([0, 1]), num_classes=10)["num_classes"] == 10


@pytest.mark.parametrize(
    ("outputs", "labels", "task", "expected"),
    [
        # one float column + labels that are all 0/1: a binary classifier (sigmoid probability or logit)
        (np.array([[0.2], [0.7], [0.5]]), [0, 1, 1], "auto", ("classification", [0, 1, 1], [0.8, 0.7, 0.5])),
        (np.array([-2.0, 0.5, 0.0]), np.array([0.0, 1.0, 1.0]), "auto", ("classification", [0, 1, 0], [2, 0.5, 0])),
        # other labels, or none: regression values
        (np.array([0.2, 0.7, 0.5]), [0.1, 1.5, 2.0], "auto", ("regression", None, None)),
        (np.array([0.2, 0.7, 0.5]), None, "auto", ("regression", None, None)),
        # forced
        (np.array([0.2, 0.7, 0.5]), [0, 1, 1], "regression", ("regression", None, None)),
        (np.array([0.2, 0.7, 0.5]), None, "classification", ("classification", [0, 1, 1], [0.8, 0.7, 0.5])),
    ],
)
def test_single_column_outputs(tmp_path: Path, outputs, labels, task, expected) -> None:
    block = write_predictions(tmp_path, outputs=outputs, labels=labels, task=task)
    kind, predicted, score = expected
    rows = _rows(tmp_path)
    assert block["task"] == kind
    if kind == "regression":
        assert [r["value"] for r in rows] == pytest.approx(np.asarray(outputs).reshape(-1).tolist())
        assert {r["predicted"] for r in rows} == {None}
        targets = [r["target"] for r in rows]
        assert targets == ([None] * 3 if labels is None else pytest.approx(np.asarray(labels, float).tolist()))
    else:
        assert block["num_classes"] == 2
        assert [r["predicted"] for r in rows] == predicted
        assert [r["score"] for r in rows] == pytest.approx(score)


def test_snapshots_are_replaced_not_duplicated(tmp_path: Path) -> None:
    write_predictions(tmp_path, outputs=np.array([0, 1, 1]), snapshot="epoch=1", epoch=1, step=10)
    write_predictions(tmp_path, outputs=np.array([1, 1, 1]), snapshot="final")
    block = write_predictions(tmp_path, outputs=np.array([0, 0, 0]), snapshot="epoch=1", epoch=1, step=10)
    table = read_predictions(tmp_path)
    assert table.num_rows == 6
    assert sorted(block["snapshots"]) == ["epoch=1", "final"]
    assert [r["predicted"] for r in _rows(tmp_path, "epoch=1")] == [0, 0, 0]
    assert {(r["epoch"], r["step"]) for r in _rows(tmp_path, "epoch=1")} == {(1, 10)}
    assert [r["predicted"] for r in _rows(tmp_path)] == [1, 1, 1]


def test_a_regression_snapshot_cannot_join_classification(tmp_path: Path) -> None:
    write_predictions(tmp_path, outputs=np.array([0, 1]))
    with pytest.raises(ValueError, match="holds classification predictions; a regression snapshot"):
        write_predictions(tmp_path, outputs=np.array([0.5, 1.5]), snapshot="epoch=2")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch) -> None:
    write_predictions(tmp_path, outputs=np.array([0, 1]))
    before = (tmp_path / PREDICTIONS_FILE).read_bytes()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_predictions(tmp_path, outputs=np.array([1, 1]), snapshot="epoch=1")
    with pytest.raises(OSError, match="disk full"):
        write_weights(tmp_path, [("w", np.ones(3))], full=True)
    monkeypatch.undo()
    assert (tmp_path / PREDICTIONS_FILE).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [PREDICTIONS_FILE, "run.json"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"outputs": np.zeros((12, 3)), "labels": np.zeros(10)},
            "`labels` must have one entry per sample. Received: 10 labels for 12 samples.",
        ),
        (
            {"outputs": np.zeros(4), "sample": [0, 1, 2]},
            "`sample` must have one entry per sample. Received: 3 indices for 4 samples.",
        ),
        (
            {"outputs": np.zeros(3, int), "sample": [0, 1, 1]},
            "`sample` must hold distinct integer indices, one per sample.",
        ),
        (
            {"outputs": np.zeros((2, 2, 2))},
            "`outputs` must be a numeric array of shape (n,), (n, 1) or (n, classes). "
            "Received: shape (2, 2, 2), dtype float64.",
        ),
        ({"outputs": np.array(["a", "b"])}, "`outputs` must be a numeric array"),
        (
            {"outputs": np.zeros(2, int), "groups": {"sex": ["f"]}},
            "`groups['sex']` must have one entry per sample. Received: 1 values for 2 samples.",
        ),
        (
            {"outputs": np.zeros(2, int), "task": "ranking"},
            "`task` must be one of auto, classification, regression. Received: task='ranking'.",
        ),
        ({"outputs": np.zeros(2, int), "snapshot": ""}, "`snapshot` must be a non-empty string"),
        ({"outputs": np.zeros(2, int), "labels": ["a", "b"]}, "`labels` of a classification must be integer classes."),
        (
            {"outputs": np.zeros((2, 3)), "task": "regression"},
            "`outputs` of a regression must have shape (n,) or (n, 1).",
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, kwargs, message: str) -> None:
    with pytest.raises(ValueError) as info:
        write_predictions(tmp_path, **kwargs)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert not (tmp_path / PREDICTIONS_FILE).exists()


def test_corrupt_or_foreign_predictions_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"{PREDICTIONS_FILE}: no such file"):
        read_predictions(tmp_path)
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"PAR1 not really")
    with pytest.raises(UsageError, match=f"{PREDICTIONS_FILE}: not a readable Parquet file") as info:
        read_predictions(tmp_path)
    assert "\n" not in str(info.value)
    import pyarrow as pa

    pq.write_table(pa.table({"sample": [1]}), tmp_path / PREDICTIONS_FILE)
    with pytest.raises(UsageError, match="not a predictions file: missing column"):
        read_predictions(tmp_path)


def _model(scale: float = 1.0) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    # sizes that cross the 8-value groups and the 2,048-value chunks
    return [
        ("conv.weight", rng.normal(size=(3, 5, 7)) * scale),
        ("fc.weight", rng.normal(size=(2050,)) * scale),
        ("fc.bias", np.arange(3.0) * scale),
    ]


def test_weights_round_trip(tmp_path: Path) -> None:
    block = write_weights(tmp_path, _model(), sketch_dim=64, sketch_seed=3, full=True)
    flat = np.concatenate([a.reshape(-1) for _, a in _model()])
    assert block["num_params"] == flat.size == 105 + 2050 + 3
    assert block["norm"] == pytest.approx(np.linalg.norm(flat))
    assert (block["sketch_dim"], block["sketch_seed"], block["full"]) == (64, 3, True)
    assert json.loads((tmp_path / "run.json").read_text())["weights"] == block
    sketch = read_weight_sketch(tmp_path)
    assert sketch.sketch.shape == (64,) and sketch.layout == block["layout"]
    full = read_full_weights(tmp_path)
    assert list(full) == ["conv.weight", "fc.weight", "fc.bias"]
    np.testing.assert_array_equal(np.concatenate(list(full.values())), flat)


def test_the_sketch_is_of_the_unit_norm_weights_and_the_same_for_every_replica(tmp_path: Path) -> None:
    write_weights(tmp_path / "a", _model(), sketch_dim=32)
    write_weights(tmp_path / "b", _model(scale=7.0), sketch_dim=32)
    a, b = read_weight_sketches([tmp_path / "a", tmp_path / "b"])
    np.testing.assert_allclose(a.sketch, b.sketch, rtol=1e-12)
    assert not (tmp_path / "a" / WEIGHTS_FULL_FILE).exists()


def test_mismatched_sketches_are_refused(tmp_path: Path) -> None:
    write_weights(tmp_path / "a", _model(), sketch_dim=32, sketch_seed=0)
    write_weights(tmp_path / "b", _model(), sketch_dim=32, sketch_seed=1)
    write_weights(tmp_path / "c", _model(), sketch_dim=16, sketch_seed=0)
    write_weights(tmp_path / "d", _model()[:2], sketch_dim=32, sketch_seed=0)
    for other, message in (
        ("b", "sketch seed 1 differs from 0"),
        ("c", "sketch dim 16 differs from 32"),
        ("d", "parameter layout"),
    ):
        with pytest.raises(UsageError, match=message) as info:
            read_weight_sketches([tmp_path / "a", tmp_path / other])
        assert str(info.value).startswith(str(tmp_path / other / WEIGHTS_SKETCH_FILE))


def test_damaged_or_pickled_weight_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"{WEIGHTS_SKETCH_FILE}: no such file"):
        read_weight_sketch(tmp_path)
    (tmp_path / WEIGHTS_SKETCH_FILE).write_bytes(b"garbage")
    with pytest.raises(UsageError, match=f"{WEIGHTS_SKETCH_FILE}: not a readable .npz file"):
        read_weight_sketch(tmp_path)
    np.savez(tmp_path / WEIGHTS_FULL_FILE, w=np.array([{"a": 1}], dtype=object))
    with pytest.raises(UsageError, match=f"{WEIGHTS_FULL_FILE}: not a readable .npz file"):
        read_full_weights(tmp_path)
    np.savez(tmp_path / WEIGHTS_SKETCH_FILE, sketch=np.zeros(3))
    with pytest.raises(UsageError, match="not a weight sketch"):
        read_weight_sketch(tmp_path)


def test_bad_weights_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="`sketch_dim` must be a positive integer"):
        write_weights(tmp_path, _model(), sketch_dim=0)
    with pytest.raises(ValueError, match="weight names must be distinct"):
        write_weights(tmp_path, [("w", np.ones(2)), ("w", np.ones(2))], full=True)
    with pytest.raises(ValueError, match="weight 'w' must be a numeric array"):
        write_weights(tmp_path, [("w", np.array(["x"]))])
