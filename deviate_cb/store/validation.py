"""Validation shared by the stability files: one snapshot's arrays checked and read into the columns of
``predictions.parquet``, and the one-line detail of a damaged file's error.

Example:
    >>> import numpy as np
    >>> columns, info = prediction_columns(np.array([0.2, 0.7]), [0, 1], None, None, "auto", None)
    >>> info, columns["predicted"].to_pylist()
    ({'task': 'classification', 'score': 'probability', 'num_classes': 2, 'n_samples': 2}, [0, 1])
    >>> one_line(ValueError("bad\\n  header"))
    'bad header'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional, Union

import numpy as np

__all__ = ["TASKS", "PathLike", "one_line", "opt_int", "prediction_columns"]

TASKS = ("auto", "classification", "regression")
PathLike = Union[str, "os.PathLike[str]"]


def prediction_columns(
    outputs: Any, labels: Any, sample: Any, groups: Optional[Mapping[str, Any]], task: str, num_classes: Optional[int]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Arrow columns of one snapshot (all but ``snapshot``/``epoch``/``step``) and what was read.

    The arguments are those of :func:`deviate_cb.store.predictions.write_predictions`; outputs are read as
    the module docstring says.

    Returns:
        ``(columns, info)``: column name -> Arrow array; ``info`` holds task, score, num_classes, n_samples.

    Raises:
        ValueError: Inconsistent shapes or an unknown ``task``, with a one-line message.
    """
    import pyarrow as pa

    if task not in TASKS:
        raise ValueError(f"`task` must be one of {', '.join(TASKS)}. Received: task={task!r}.")
    out = np.asarray(outputs)
    if out.ndim == 2 and out.shape[1] == 1:
        out = out[:, 0]
    if out.ndim not in (1, 2) or out.dtype.kind not in "biuf":
        raise ValueError(
            f"`outputs` must be a numeric array of shape (n,), (n, 1) or (n, classes). Received: shape {out.shape}, "
            f"dtype {out.dtype}."
        )
    n = out.shape[0]
    lab = None if labels is None else np.asarray(labels)
    if lab is not None and lab.ndim == 2 and lab.shape[1] > 1 and task != "regression":
        lab = np.argmax(lab, axis=1)  # one-hot (or soft) labels, as Keras' categorical losses take them
    lab = None if lab is None else lab.reshape(-1) if lab.ndim else lab.reshape(1)
    if lab is not None and lab.shape[0] != n:
        raise ValueError(f"`labels` must have one entry per sample. Received: {lab.shape[0]} labels for {n} samples.")
    idx = np.arange(n, dtype=np.int64) if sample is None else np.asarray(sample).reshape(-1)
    if idx.shape[0] != n:
        raise ValueError(f"`sample` must have one entry per sample. Received: {idx.shape[0]} indices for {n} samples.")
    if idx.dtype.kind not in "iu" or np.unique(idx).size != n:
        raise ValueError("`sample` must hold distinct integer indices, one per sample.")
    binary_labels = lab is not None and lab.dtype.kind in "biuf" and bool(np.isin(lab, (0, 1)).all())
    regression = task == "regression" or (
        task == "auto" and out.ndim == 1 and out.dtype.kind == "f" and not binary_labels
    )
    null_i = pa.nulls(n, pa.int64())
    null_f = pa.nulls(n, pa.float64())
    cols: dict[str, Any] = {"sample": pa.array(idx.astype(np.int64))}
    if regression:
        if out.ndim != 1:
            raise ValueError(f"`outputs` of a regression must have shape (n,) or (n, 1). Received: shape {out.shape}.")
        cols.update(predicted=null_i, score=null_f, label=null_i, value=pa.array(out.astype(np.float64)))
        cols["target"] = null_f if lab is None else pa.array(_as_float(lab, "labels"))
        info: dict[str, Any] = {"task": "regression", "score": None, "num_classes": None}
    else:
        predicted, score, kind, classes = _classify(out)
        if lab is not None:
            if lab.dtype.kind == "f" and np.all(lab == np.round(lab)):
                lab = lab.astype(np.int64)
            if lab.dtype.kind not in "biu":
                raise ValueError(f"`labels` of a classification must be integer classes. Received: dtype {lab.dtype}.")
        if classes is None:
            seen = [int(predicted.max(initial=-1)) + 1, 0 if lab is None else int(lab.max(initial=-1)) + 1]
            classes = int(num_classes) if num_classes is not None else max(seen)
        cols.update(predicted=pa.array(predicted), score=null_f if score is None else pa.array(score))
        cols["label"] = null_i if lab is None else pa.array(lab.astype(np.int64))
        cols.update(value=null_f, target=null_f)
        info = {"task": "classification", "score": kind, "num_classes": classes}
    for name, values in (groups or {}).items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"`groups` keys must be non-empty strings. Received: {name!r}.")
        arr = np.asarray(values).reshape(-1)
        if arr.shape[0] != n:
            raise ValueError(
                f"`groups[{name!r}]` must have one entry per sample. Received: {arr.shape[0]} values for {n} samples."
            )
        cols[f"group_{name}"] = pa.array([str(v) for v in arr.tolist()], pa.string())
    info["n_samples"] = n
    return cols, info


def _classify(out: np.ndarray) -> tuple[np.ndarray, Optional[np.ndarray], Optional[str], Optional[int]]:
    if out.ndim == 2:
        values = out.astype(np.float64)
        predicted = np.argmax(values, axis=1).astype(np.int64)
        top2 = -np.partition(-values, 1, axis=1)[:, :2]
        is_prob = bool(np.all((values >= 0) & (values <= 1)) and np.allclose(values.sum(axis=1), 1.0, atol=1e-4))
        score = top2[:, 0] if is_prob else top2[:, 0] - top2[:, 1]
        return predicted, score, "probability" if is_prob else "margin", int(out.shape[1])
    if out.dtype.kind in "biu":
        return out.astype(np.int64), None, None, None
    values = out.astype(np.float64)
    if np.all((values >= 0) & (values <= 1)):
        return (values >= 0.5).astype(np.int64), np.maximum(values, 1 - values), "probability", 2
    return (values > 0).astype(np.int64), np.abs(values), "margin", 2


def _as_float(values: np.ndarray, name: str) -> np.ndarray:
    if values.dtype.kind not in "biuf":
        raise ValueError(f"`{name}` must be numbers. Received: dtype {values.dtype}.")
    return values.astype(np.float64)


def opt_int(value: Optional[int], name: str) -> Optional[int]:
    """``value`` as an int, or ``None``; ``name`` is the argument's name, for the message.

    Raises:
        ValueError: ``value`` is neither an integer nor ``None`` (a bool is not an integer here).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`{name}` must be an int or None. Received: {name}={value!r}.")
    return int(value)


def one_line(exc: BaseException, limit: int = 200) -> str:
    """``exc``'s message on one line (whitespace collapsed, at most ``limit`` characters), or its type's name."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
