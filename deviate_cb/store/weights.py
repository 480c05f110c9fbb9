"""The final weights of a run: ``weights_sketch.npz`` (a sketch) and ``weights.npz`` (optional, the full arrays).

Example:
    >>> import tempfile
    >>> run = Path(tempfile.mkdtemp())
    >>> w = write_weights(run, [("layer.weight", np.ones((3, 2))), ("layer.bias", np.zeros(3))], sketch_dim=16)
    >>> w["num_params"], read_weight_sketch(run).sketch.shape
    (9, (16,))
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from deviate_cb.errors import UsageError
from deviate_cb.stats.stability.sketch import SKETCH_METHOD, SketchAccumulator
from deviate_cb.store.atomic import atomic_write
from deviate_cb.store.bounded_read import HostileFileError, check_npz
from deviate_cb.store.manifest import StabilityRecord
from deviate_cb.store.run_directory import RunDirectory
from deviate_cb.store.validation import PathLike, one_line

__all__ = [
    "WEIGHTS_FULL_FILE",
    "WEIGHTS_SKETCH_FILE",
    "WeightSketch",
    "iter_full_weights",
    "read_full_weights",
    "read_weight_sketch",
    "read_weight_sketches",
    "write_weights",
]

WEIGHTS_SKETCH_FILE = "weights_sketch.npz"
WEIGHTS_FULL_FILE = "weights.npz"
_NAMES_KEY = "__names__"
_SIZES_KEY = "__sizes__"


@dataclass(frozen=True)
class WeightSketch:
    """A run's weight sketch as read from ``weights_sketch.npz``.

    Attributes:
        sketch: ``S w / (sqrt(k) ||w||)``: the sketch of the unit-norm weights (length ``sketch_dim``).
        norm: ``||w||`` of the flattened weights.
        num_params: Number of weights.
        sketch_dim: ``k``.
        sketch_seed: Seed of the projection.
        method: Projection method (:data:`deviate_cb.stats.stability.sketch.SKETCH_METHOD`).
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
        RunDirectory(run).record(StabilityRecord(weights=block))
    return block


def _atomic_npz(path: Path, arrays: Mapping[str, Any]) -> None:
    def write(handle: IO[bytes]) -> None:
        np.savez(handle, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]

    atomic_write(path, write)


def _load_npz(path: Path, what: str) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise UsageError(f"{path}: no such file (record {what} with DeviateCallback(weights=...)).")
    try:
        check_npz(path)  # a FIFO, a zip bomb or a header claiming gigabytes: refused before np.load allocates
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except HostileFileError as exc:
        raise UsageError(f"{path}: not read ({exc.reason}).") from exc
    except Exception as exc:  # zipfile, ValueError (pickled object), OSError
        raise UsageError(f"{path}: not a readable .npz file ({one_line(exc)}).") from exc


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
        raise UsageError(f"{path}: not a weight sketch ({one_line(exc)}).") from exc


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
                check_npz(path)
                files.append(stack.enter_context(np.load(path, allow_pickle=False)))
            except HostileFileError as exc:
                raise UsageError(f"{path}: not read ({exc.reason}).") from exc
            except Exception as exc:
                raise UsageError(f"{path}: not a readable .npz file ({one_line(exc)}).") from exc
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
                    raise UsageError(f"{path}: weight {name!r} unreadable ({one_line(exc)}).") from exc
            yield np.stack(arrays)


def _layout(data: Any, path: Path) -> list[tuple[str, int]]:
    try:
        names = [str(n) for n in data[_NAMES_KEY].tolist()]
        sizes = [int(n) for n in data[_SIZES_KEY].tolist()]
    except Exception as exc:
        raise UsageError(f"{path}: not a full weights file ({one_line(exc)}).") from exc
    missing = [n for n in names if n not in data.files]
    if missing or len(sizes) != len(names):
        raise UsageError(f"{path}: weight(s) {', '.join(missing) or 'sizes'} listed but not stored.")
    return list(zip(names, sizes, strict=True))
