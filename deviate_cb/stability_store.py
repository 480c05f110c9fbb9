"""Per-sample predictions and final weights of a run: the files behind the stability measures (issue 5).

Framework-free (NumPy and pyarrow only): the Lightning and Keras callbacks turn tensors into NumPy arrays and
call :func:`write_predictions` and :func:`write_weights`; the analysis side reads the files back with
:func:`read_predictions`, :func:`read_weight_sketch` and :func:`read_full_weights`. Nothing is pickled.

``predictions.parquet`` is long format, one row per sample per snapshot (``"final"`` or ``"epoch=<k>"``);
see :func:`predictions_schema`. ``weights_sketch.npz`` holds a Johnson-Lindenstrauss sketch of the flattened
weights scaled to unit norm (see :mod:`deviate_cb.stats.stability_sketch`), ``weights.npz`` (optional) the full arrays.

How ``outputs`` is read (``task="auto"``):

- shape ``(n, C)`` with ``C >= 2``: class probabilities when every row lies in [0, 1] and sums to 1 (score: the
  top probability), logits otherwise (score: the margin between the two largest logits);
- shape ``(n,)`` of integers: predicted classes (score: null);
- shape ``(n,)`` or ``(n, 1)`` of floats: a single sigmoid/logit column of a *binary* classifier when ``labels``
  are given and every label is 0 or 1 (values in [0, 1] are probabilities of class 1, predicted 1 when
  ``>= 0.5``, score ``max(p, 1 - p)``; other values are logits, predicted 1 when ``> 0``, score ``|z|``);
  otherwise regression values (``value``; ``target`` from ``labels``). ``task="regression"`` or
  ``task="classification"`` forces the reading.

Example:
    >>> import tempfile
    >>> import numpy as np
    >>> run = Path(tempfile.mkdtemp())
    >>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    >>> block = write_predictions(run, outputs=probs, labels=[0, 1, 1], groups={"sex": ["f", "m", "f"]})
    >>> block["task"], block["score"], block["num_classes"], block["snapshots"]
    ('classification', 'probability', 2, ['final'])
    >>> read_predictions(run).column("predicted").to_pylist()
    [0, 1, 0]
    >>> w = write_weights(run, [("layer.weight", np.ones((3, 2))), ("layer.bias", np.zeros(3))], sketch_dim=16)
    >>> w["num_params"], read_weight_sketch(run).sketch.shape
    (9, (16,))
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Optional, Union

import numpy as np

from deviate_cb.errors import UsageError
from deviate_cb.stats.stability_sketch import SKETCH_METHOD, SketchAccumulator
from deviate_cb.store import RunDirectory, atomic_write, atomic_write_bytes

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "PREDICTIONS_FILE",
    "TASKS",
    "WEIGHTS_FULL_FILE",
    "WEIGHTS_SKETCH_FILE",
    "WeightSketch",
    "iter_full_weights",
    "predictions_metadata",
    "predictions_schema",
    "read_full_weights",
    "read_predictions",
    "read_weight_sketch",
    "read_weight_sketches",
    "write_predictions",
    "write_weights",
]

PREDICTIONS_FILE = "predictions.parquet"
WEIGHTS_SKETCH_FILE = "weights_sketch.npz"
WEIGHTS_FULL_FILE = "weights.npz"
TASKS = ("auto", "classification", "regression")
_META_KEY = b"deviate_cb.predictions"
_NAMES_KEY = "__names__"
_SIZES_KEY = "__sizes__"
PathLike = Union[str, "os.PathLike[str]"]


def predictions_schema(groups: Iterable[str] = ()) -> pa.Schema:
    """The Arrow schema of ``predictions.parquet``, with one ``group_<name>`` string column per group.

    Example:
        >>> predictions_schema(["sex"]).names[-3:]
        ['value', 'target', 'group_sex']
    """
    import pyarrow as pa

    fields = [
        ("snapshot", pa.string()),
        ("epoch", pa.int64()),
        ("step", pa.int64()),
        ("sample", pa.int64()),
        ("predicted", pa.int64()),
        ("score", pa.float64()),
        ("label", pa.int64()),
        ("value", pa.float64()),
        ("target", pa.float64()),
    ]
    return pa.schema(fields + [(f"group_{g}", pa.string()) for g in groups])


def write_predictions(
    run_dir: PathLike,
    *,
    outputs: Any,
    labels: Any = None,
    sample: Any = None,
    groups: Optional[Mapping[str, Any]] = None,
    snapshot: str = "final",
    epoch: Optional[int] = None,
    step: Optional[int] = None,
    task: str = "auto",
    num_classes: Optional[int] = None,
    update_manifest: bool = True,
) -> dict[str, Any]:
    """Add one snapshot of per-sample predictions to ``<run_dir>/predictions.parquet``.

    The file is rewritten atomically (temporary file, fsync, rename); rows of an earlier snapshot with the same
    name are replaced, so a resumed run does not duplicate them. Unless ``update_manifest=False``, the returned
    block is also merged into ``run.json`` under the key ``predictions``.

    Args:
        run_dir: The run directory.
        outputs: Model outputs for ``n`` samples (see the module docstring for how each shape is read).
        labels: True classes (classification) or targets (regression), one per sample; ``None`` if unknown.
            One-hot labels of shape ``(n, classes)`` are read as their argmax.
        sample: Sample indices (default ``arange(n)``); runs are aligned on them.
        groups: Sub-group labels, ``name -> array of n`` (strings or ints), stored as ``group_<name>``.
        snapshot: ``"final"`` or ``"epoch=<k>"`` (any non-empty name is accepted).
        epoch: Epoch of the snapshot, if known.
        step: Global step of the snapshot, if known.
        task: ``"auto"``, ``"classification"`` or ``"regression"``.
        num_classes: Number of classes when ``outputs`` are class indices (default: inferred).
        update_manifest: Whether to store the block under ``run.json``'s ``predictions`` key.

    Returns:
        The manifest block: task, score kind, num_classes, n_samples, snapshots, groups, file.

    Raises:
        ValueError: Inconsistent shapes or an unknown ``task``, with a one-line message.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    columns, info = _prediction_columns(outputs, labels, sample, groups, task, num_classes)
    if not isinstance(snapshot, str) or not snapshot:
        raise ValueError(f"`snapshot` must be a non-empty string such as 'final'. Received: snapshot={snapshot!r}.")
    n = info["n_samples"]
    columns["snapshot"] = pa.array([snapshot] * n, pa.string())
    columns["epoch"] = pa.array([_opt_int(epoch, "epoch")] * n, pa.int64())
    columns["step"] = pa.array([_opt_int(step, "step")] * n, pa.int64())
    group_names = sorted(groups or {})
    schema = predictions_schema(group_names)
    new = pa.table([columns[name] for name in schema.names], schema=schema)
    path = Path(run_dir) / PREDICTIONS_FILE
    tables = [new]
    meta = {k: info[k] for k in ("task", "score", "num_classes")}
    if path.is_file():
        old = read_predictions(run_dir)
        old_meta = predictions_metadata(old)
        if old_meta.get("task", meta["task"]) != meta["task"]:
            raise ValueError(
                f"{path} holds {old_meta['task']} predictions; a {meta['task']} snapshot cannot be added to it."
            )
        if meta["num_classes"] is not None and old_meta.get("num_classes") is not None:
            meta["num_classes"] = max(int(meta["num_classes"]), int(old_meta["num_classes"]))
        old = old.filter(pc.not_equal(old.column("snapshot"), snapshot))
        tables.insert(0, old)
    table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else new
    table = table.replace_schema_metadata({_META_KEY: json.dumps(meta).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
    snapshots = pc.unique(table.column("snapshot")).to_pylist()  # in order of first appearance
    block = {
        **meta,
        "n_samples": n,
        "snapshots": snapshots,
        "groups": [name[len("group_") :] for name in table.schema.names if name.startswith("group_")],
        "file": PREDICTIONS_FILE,
    }
    if update_manifest:
        RunDirectory(Path(run_dir)).update_manifest(predictions=block)
    return block


def _prediction_columns(
    outputs: Any, labels: Any, sample: Any, groups: Optional[Mapping[str, Any]], task: str, num_classes: Optional[int]
) -> tuple[dict[str, Any], dict[str, Any]]:
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


def _opt_int(value: Optional[int], name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"`{name}` must be an int or None. Received: {name}={value!r}.")
    return int(value)


def read_predictions(run_dir: PathLike) -> pa.Table:
    """The rows of ``<run_dir>/predictions.parquet`` (all snapshots).

    Raises:
        UsageError: The file is missing, unreadable or lacks a required column (one line naming the file).
    """
    import pyarrow.parquet as pq

    path = Path(run_dir) / PREDICTIONS_FILE
    if not path.is_file():
        raise UsageError(f"{path}: no such file (record predictions with DeviateCallback(predictions=...)).")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise UsageError(f"{path}: not a readable Parquet file ({_one_line(exc)}).") from exc
    missing = [name for name in predictions_schema().names if name not in table.schema.names]
    if missing:
        raise UsageError(f"{path}: not a predictions file: missing column(s) {', '.join(missing)}.")
    return table


def predictions_metadata(table: pa.Table) -> dict[str, Any]:
    """The task/score/num_classes that :func:`write_predictions` stored in the file's schema metadata.

    Example:
        >>> import pyarrow as pa
        >>> predictions_metadata(pa.table({"a": [1]}))
        {}
    """
    raw = (table.schema.metadata or {}).get(_META_KEY)
    try:
        return dict(json.loads(raw)) if raw else {}
    except ValueError:
        return {}


@dataclass(frozen=True)
class WeightSketch:
    """A run's weight sketch as read from ``weights_sketch.npz``.

    Attributes:
        sketch: ``S w / (sqrt(k) ||w||)``: the sketch of the unit-norm weights (length ``sketch_dim``).
        norm: ``||w||`` of the flattened weights.
        num_params: Number of weights.
        sketch_dim: ``k``.
        sketch_seed: Seed of the projection.
        method: Projection method (:data:`deviate_cb.stats.stability_sketch.SKETCH_METHOD`).
        layout: Hash of the parameter names and shapes.
        path: The file it was read from.
    """

    sketch: np.ndarray
    norm: float
    num_params: int
    sketch_dim: int
    sketch_seed: int
    method: str
    layout: str
    path: Path


def write_weights(
    run_dir: PathLike,
    named_arrays: Iterable[tuple[str, Any]],
    *,
    sketch_dim: int = 256,
    sketch_seed: int = 0,
    full: bool = False,
    update_manifest: bool = True,
) -> dict[str, Any]:
    """Save the sketch of a model's final weights (and, with ``full=True``, the weights themselves).

    The projection depends only on ``(sketch_seed, sketch_dim, parameter position)``, so every replica of a
    study that uses the same seed and dimension is sketched the same way; it is applied parameter by parameter
    in chunks of 2,048 values (bounded memory). Unless ``update_manifest=False``, the returned block is also
    stored in ``run.json`` under the key ``weights``.

    Args:
        run_dir: The run directory.
        named_arrays: ``(name, array)`` pairs in a stable order (e.g. ``model.named_parameters()`` as NumPy).
        sketch_dim: Dimension ``k`` of the sketch (the error bound shrinks like ``1/sqrt(k)``).
        sketch_seed: Seed of the projection; keep it equal across the runs you compare.
        full: Also save every array, flattened, to ``weights.npz``.
        update_manifest: Whether to store the block under ``run.json``'s ``weights`` key.

    Returns:
        The manifest block: sketch_dim, sketch_seed, method, num_params, norm, full, layout, files.
    """
    acc = SketchAccumulator(sketch_dim, sketch_seed)
    layout: list[tuple[str, list[int]]] = []
    kept: dict[str, np.ndarray] = {}
    for position, (name, array) in enumerate(named_arrays):
        values = np.asarray(array)
        if values.dtype.kind not in "biuf":
            raise ValueError(f"weight {name!r} must be a numeric array. Received: dtype {values.dtype}.")
        if full and (name in kept or name in (_NAMES_KEY, _SIZES_KEY)):
            raise ValueError(f"weight names must be distinct. Received: {name!r} twice.")
        layout.append((str(name), list(values.shape)))
        acc.add(position, values.reshape(-1))
        if full:
            kept[str(name)] = values.reshape(-1)
    sketch, norm, count = acc.result()
    digest = hashlib.sha256(json.dumps(layout).encode()).hexdigest()[:16]
    meta = {"sketch_dim": int(sketch_dim), "sketch_seed": int(sketch_seed), "method": SKETCH_METHOD, "layout": digest}
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    _atomic_npz(run / WEIGHTS_SKETCH_FILE, dict(sketch=sketch, norm=norm, num_params=count, **meta))
    if full:
        sizes = np.array([a.size for a in kept.values()], dtype=np.int64)
        _atomic_npz(run / WEIGHTS_FULL_FILE, {_NAMES_KEY: np.array(list(kept), dtype=str), _SIZES_KEY: sizes, **kept})
    block = {**meta, "num_params": count, "norm": norm, "full": bool(full), "file": WEIGHTS_SKETCH_FILE}
    if full:
        block["full_file"] = WEIGHTS_FULL_FILE
    if update_manifest:
        RunDirectory(run).update_manifest(weights=block)
    return block


def _atomic_npz(path: Path, arrays: Mapping[str, Any]) -> None:
    def write(handle: IO[bytes]) -> None:
        np.savez(handle, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]

    atomic_write(path, write)


def _load_npz(path: Path, what: str) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise UsageError(f"{path}: no such file (record {what} with DeviateCallback(weights=...)).")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except Exception as exc:  # zipfile, ValueError (pickled object), OSError
        raise UsageError(f"{path}: not a readable .npz file ({_one_line(exc)}).") from exc


def read_weight_sketch(run_dir: PathLike) -> WeightSketch:
    """The weight sketch of one run.

    Raises:
        UsageError: The file is missing, damaged or lacks a field (one line naming the file).
    """
    path = Path(run_dir) / WEIGHTS_SKETCH_FILE
    data = _load_npz(path, "weights")
    try:
        sketch = np.asarray(data["sketch"], dtype=np.float64)
        if sketch.ndim != 1 or sketch.size != int(data["sketch_dim"]):
            raise ValueError(f"sketch of shape {sketch.shape} for sketch_dim={int(data['sketch_dim'])}")
        return WeightSketch(
            sketch=sketch,
            norm=float(data["norm"]),
            num_params=int(data["num_params"]),
            sketch_dim=int(data["sketch_dim"]),
            sketch_seed=int(data["sketch_seed"]),
            method=str(data["method"]),
            layout=str(data["layout"]),
            path=path,
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise UsageError(f"{path}: not a weight sketch ({_one_line(exc)}).") from exc


def read_weight_sketches(run_dirs: Iterable[PathLike]) -> list[WeightSketch]:
    """The sketches of several runs, checked to be comparable (same method, seed, dimension and layout).

    Raises:
        UsageError: A file is unreadable, or two runs were sketched differently (one line naming both files).
    """
    sketches = [read_weight_sketch(d) for d in run_dirs]
    for other in sketches[1:]:
        first = sketches[0]
        for field, label in (("method", "method"), ("sketch_seed", "sketch seed"), ("sketch_dim", "sketch dim")):
            if getattr(first, field) != getattr(other, field):
                raise UsageError(
                    f"{other.path}: {label} {getattr(other, field)!r} differs from {getattr(first, field)!r} in "
                    f"{first.path}; sketches of different projections cannot be compared."
                )
        if (first.layout, first.num_params) != (other.layout, other.num_params):
            raise UsageError(
                f"{other.path}: parameter layout ({other.num_params} weights, {other.layout}) differs from "
                f"{first.path} ({first.num_params} weights, {first.layout}); the models are not comparable."
            )
    return sketches


def read_full_weights(run_dir: PathLike) -> dict[str, np.ndarray]:
    """The full flattened weights of one run, by name, in the order they were written.

    Raises:
        UsageError: The file is missing or damaged (one line naming the file).
    """
    path = Path(run_dir) / WEIGHTS_FULL_FILE
    data = _load_npz(path, "full weights (weights=... with full=True)")
    data.pop(_SIZES_KEY, None)
    names = [str(n) for n in data.pop(_NAMES_KEY, np.array([], dtype=str)).tolist()] or list(data)
    missing = [n for n in names if n not in data]
    if missing:
        raise UsageError(f"{path}: weight(s) {', '.join(missing)} listed but not stored.")
    return {name: data[name] for name in names}


def iter_full_weights(run_dirs: Sequence[PathLike]) -> Iterator[np.ndarray]:
    """The full weights of several runs, one parameter at a time: ``(runs, size)`` arrays in the written order.

    Only one parameter of every run is in memory at once (``np.load`` of an ``.npz`` reads entries lazily).

    Example:
        >>> import tempfile
        >>> runs = [Path(tempfile.mkdtemp()) for _ in range(2)]
        >>> for k, run in enumerate(runs):
        ...     _ = write_weights(run, [("a", np.full(2, k)), ("b", np.ones(3))], full=True, update_manifest=False)
        >>> [block.shape for block in iter_full_weights(runs)]
        [(2, 2), (2, 3)]

    Raises:
        UsageError: A file is missing or damaged, or the runs' parameter names and sizes differ.
    """
    paths = [Path(d) / WEIGHTS_FULL_FILE for d in run_dirs]
    with ExitStack() as stack:
        files = []
        for path in paths:
            if not path.is_file():
                raise UsageError(f"{path}: no such file (record full weights with weights=... and full=True).")
            try:
                files.append(stack.enter_context(np.load(path, allow_pickle=False)))
            except Exception as exc:
                raise UsageError(f"{path}: not a readable .npz file ({_one_line(exc)}).") from exc
        layouts = [_layout(f, path) for f, path in zip(files, paths, strict=True)]
        for layout, path in zip(layouts[1:], paths[1:], strict=True):
            if layout != layouts[0]:
                raise UsageError(f"{path}: parameter layout differs from {paths[0]}; the models are not comparable.")
        for name, _ in layouts[0]:
            arrays = []
            for f, path in zip(files, paths, strict=True):
                try:
                    arrays.append(np.asarray(f[name]).reshape(-1))
                except Exception as exc:
                    raise UsageError(f"{path}: weight {name!r} unreadable ({_one_line(exc)}).") from exc
            yield np.stack(arrays)


def _layout(data: Any, path: Path) -> list[tuple[str, int]]:
    try:
        names = [str(n) for n in data[_NAMES_KEY].tolist()]
        sizes = [int(n) for n in data[_SIZES_KEY].tolist()]
    except Exception as exc:
        raise UsageError(f"{path}: not a full weights file ({_one_line(exc)}).") from exc
    missing = [n for n in names if n not in data.files]
    if missing or len(sizes) != len(names):
        raise UsageError(f"{path}: weight(s) {', '.join(missing) or 'sizes'} listed but not stored.")
    return list(zip(names, sizes, strict=True))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
