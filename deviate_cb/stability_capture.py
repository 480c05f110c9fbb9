"""What the callbacks capture for model-stability measures: per-sample predictions and final weights.

Framework-free (no torch, Lightning, Keras or TensorFlow import): the Lightning and Keras adapters pass
framework values in, and this module turns them into NumPy arrays for ``deviate_cb.stability_store``.

- :class:`Predictions` says which evaluation set to predict on and when (at the end of training, and every
  ``every_n_epochs`` epochs), or that the outputs of the user's own ``trainer.test``/``trainer.predict`` are
  recorded; how to find the model output, the true label, a sample id and group labels in each batch.
- :class:`Weights` says how the final weights are stored (a Johnson-Lindenstrauss sketch, and optionally the
  full vectors).
- :class:`PredictionCollector` takes one batch at a time (outputs and the batch they came from) and, at the
  end, returns aligned arrays: outputs, labels, sample index and groups.

``predictions=True`` and ``weights=True`` in the callbacks mean ``Predictions()`` and ``Weights()``.

Example:
    >>> import numpy as np
    >>> config = parse_predictions(Predictions(groups="sex"), "predictions")
    >>> collector = PredictionCollector(config)
    >>> batch = {"x": np.zeros((2, 3)), "label": np.array([1, 0]), "sex": np.array(["F", "M"])}
    >>> collector.add({"logits": np.array([[0.1, 0.9], [0.8, 0.2]])}, batch)
    >>> collector.add({"logits": np.array([[0.3, 0.7]])}, {"label": np.array([1]), "sex": np.array(["F"])})
    >>> arrays = collector.collect()
    >>> arrays.outputs.shape, arrays.labels.tolist(), arrays.sample.tolist(), arrays.groups["sex"].tolist()
    ((3, 2), [1, 0, 1], [0, 1, 2], ['F', 'M', 'F'])
    >>> config.due(epoch=4), Predictions(data=[batch], every_n_epochs=5).due(epoch=4)
    (False, True)
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal, Optional, Union

import numpy as np

from deviate_cb.errors import UsageError

__all__ = [
    "FINAL_SNAPSHOT",
    "LABEL_KEYS",
    "OUTPUT_KEYS",
    "CollectedPredictions",
    "PredictionCollector",
    "Predictions",
    "Weights",
    "as_numpy",
    "epoch_snapshot",
    "parse_predictions",
    "parse_weights",
    "weight_arrays",
    "write_prediction_snapshot",
    "write_weight_record",
]

FINAL_SNAPSHOT = "final"
OUTPUT_KEYS = ("preds", "logits", "probs", "y_hat", "predictions", "outputs")
"""Keys tried, in order, when a step returns a dict and ``output_key`` is not set."""
LABEL_KEYS = ("label", "labels", "y", "target", "targets")
"""Keys tried, in order, for the true label of a dict batch when ``labels`` is not set."""

Stage = Literal["auto", "test", "predict"]
Task = Literal["auto", "classification", "regression"]
Extractor = Union[int, str, Callable[[Any], Any]]
GroupsSpec = Union[Mapping[str, Any], str, Sequence[str], Callable[[Any], Any], np.ndarray]
_STAGES = ("auto", "test", "predict")
_TASKS = ("auto", "classification", "regression")


def _is_extractor(value: object) -> bool:
    return callable(value) or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


@dataclass(frozen=True)
class Predictions:
    """Record per-sample predictions on an evaluation set (``DeviateCallback(predictions=Predictions(...))``).

    Two sources, usable together:

    - **The user's own evaluation loop** (``data=None``, the default; Lightning only): the outputs that
      ``test_step``/``predict_step`` return during ``trainer.test(...)``/``trainer.predict(...)`` (a tensor of
      logits, probabilities or predicted classes, or a dict holding one under ``output_key``) are recorded,
      with the labels of each batch, as snapshot ``final`` when the stage ends. Nothing runs twice. With
      several dataloaders, the first one's outputs; with several devices, none (use ``data``).
    - **A given evaluation set** (``data=...``): the callback predicts on it itself, at the end of ``fit``
      (snapshot ``final``) and, with ``every_n_epochs=k``, after every k-th epoch (snapshot ``epoch=<e>``,
      ``e`` the 0-based epoch that just ended). Lightning: a ``DataLoader`` (or any iterable of batches);
      the module runs in eval mode under ``torch.inference_mode()`` (its ``predict_step`` if it defines one,
      else ``forward`` on the first element of a tuple batch), and each submodule's train/eval mode is
      restored afterwards. Keras: ``(x, y)`` arrays, ``x`` alone, a ``tf.data.Dataset``, a ``PyDataset`` or
      any iterable of ``(x, y)`` batches, predicted with ``model.predict``/``predict_on_batch``.

    The sample index is the position in the evaluation set, so the data must come in the same order in every
    run (no shuffling), or carry an id (``sample_ids``). A snapshot written again (a resumed run, a second
    ``trainer.test``) replaces the earlier one of the same name.

    Args:
        data: Evaluation set the callback predicts on itself (see above). ``None``: record the outputs of
            ``trainer.test``/``trainer.predict`` (Lightning).
        every_n_epochs: Also take a snapshot after every n-th training epoch (needs ``data``).
        groups: Sub-group labels of each sample (for per-group variance): a mapping name -> array aligned
            with the sample order (``{"sex": sex_array}``), a NumPy array (named ``group``), a batch field
            name or list of names (dict batches, e.g. ``"sex"`` or ``["sex", "age_band"]``), or a function
            ``batch -> array | {name: array}``.
        labels: Where the true label is in a batch: an index (tuple batches), a key (dict batches) or a
            function ``batch -> array``. Default: ``batch[1]`` of a tuple/list batch, else the first of
            ``label``, ``labels``, ``y``, ``target``, ``targets`` in a dict batch, else no labels.
        sample_ids: Where a per-sample id is in a batch (index, key or function), for data that is not in
            a fixed order. Default: the position in the evaluation set.
        output_key: Which output to record when a step returns a dict (a key) or a tuple (an index).
            Default for dicts: the first of ``preds``, ``logits``, ``probs``, ``y_hat``, ``predictions``,
            ``outputs``.
        from_stage: Which of the user's loops to record (Lightning): ``"test"``, ``"predict"``, ``"auto"``
            (both, when ``data`` is ``None``; neither when it is given) or ``None`` (neither). Naming a loop
            together with ``data`` makes that loop's outputs the ``final`` snapshot: ``data`` then serves only
            the ``every_n_epochs`` snapshots (no extra pass at the end of ``fit``).
        task: ``"classification"`` ((n, C) scores or (n,) class ids), ``"regression"`` (values), or
            ``"auto"`` (decided by the store from the outputs' shape and dtype).
        predict_fn: Lightning with ``data``: a function ``(module, batch) -> outputs`` to use instead of
            ``predict_step``/``forward``.

    Example:
        >>> Predictions(every_n_epochs=2)
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `every_n_epochs` needs `data`: ... Received: every_n_epochs=2, data=None.
        >>> Predictions(from_stage="val")
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `from_stage` must be one of 'auto', ... Received: from_stage='val'.
    """

    data: Any = field(default=None, repr=False)
    every_n_epochs: Optional[int] = None
    groups: Optional[GroupsSpec] = field(default=None, repr=False)
    labels: Optional[Extractor] = None
    sample_ids: Optional[Extractor] = None
    output_key: Union[str, int, None] = None
    from_stage: Optional[Stage] = "auto"
    task: Task = "auto"
    predict_fn: Optional[Callable[[Any, Any], Any]] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.data, (str, bytes, PathLike)):
            raise UsageError(
                "`data` must be an evaluation set (a DataLoader, arrays or a dataset), not a path. "
                f"Received: data={self.data!r}."
            )
        if isinstance(self.data, Iterator):
            raise UsageError(
                "`data` must be re-iterable (a DataLoader, a dataset, arrays), not a one-shot iterator or "
                f"generator: it is read at every snapshot. Received: data={self.data!r}."
            )
        k = self.every_n_epochs
        if k is not None and (isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1):
            raise UsageError(f"`every_n_epochs` must be a positive integer or None. Received: every_n_epochs={k!r}.")
        if k is not None and self.data is None:
            raise UsageError(
                "`every_n_epochs` needs `data`: the callback predicts on that set after every n-th epoch. "
                f"Received: every_n_epochs={k!r}, data=None."
            )
        for name in ("labels", "sample_ids"):
            value = getattr(self, name)
            if value is not None and not _is_extractor(value):
                raise UsageError(
                    f"`{name}` must be a batch index, a batch key, a function of the batch, or None. "
                    f"Received: {name}={value!r}."
                )
        key = self.output_key
        if key is not None and (isinstance(key, bool) or not isinstance(key, (str, int))):
            raise UsageError(f"`output_key` must be a dict key, a tuple index or None. Received: output_key={key!r}.")
        if self.from_stage not in (*_STAGES, None):
            raise UsageError(
                "`from_stage` must be one of 'auto', 'test', 'predict' or None. "
                f"Received: from_stage={self.from_stage!r}."
            )
        if self.task not in _TASKS:
            raise UsageError(f"`task` must be 'auto', 'classification' or 'regression'. Received: task={self.task!r}.")
        if self.predict_fn is not None and not callable(self.predict_fn):
            raise UsageError(
                f"`predict_fn` must be a function (module, batch) -> outputs. Received: {self.predict_fn!r}."
            )
        _check_groups(self.groups)

    def due(self, epoch: int) -> bool:
        """Whether a snapshot is due after (0-based) ``epoch``: every ``every_n_epochs``-th epoch.

        Example:
            >>> [Predictions(data=[], every_n_epochs=2).due(e) for e in range(4)]
            [False, True, False, True]
        """
        return self.every_n_epochs is not None and (epoch + 1) % self.every_n_epochs == 0

    @property
    def final_from_data(self) -> bool:
        """Whether the ``final`` snapshot is taken on ``data`` at the end of ``fit`` (no loop was named).

        Example:
            >>> Predictions(data=[]).final_from_data, Predictions(data=[], from_stage="test").final_from_data
            (True, False)
        """
        return self.data is not None and self.from_stage in ("auto", None)

    def records_stage(self, stage: str) -> bool:
        """Whether the outputs of the user's ``test``/``predict`` loop are recorded.

        Example:
            >>> Predictions().records_stage("test"), Predictions(data=[]).records_stage("test")
            (True, False)
        """
        if self.from_stage == "auto":
            return self.data is None and stage in ("test", "predict")
        return self.from_stage == stage

    @property
    def groups_per_batch(self) -> bool:
        """Whether groups are read from each batch (a field name or a function) rather than given whole.

        Example:
            >>> Predictions(groups="sex").groups_per_batch, Predictions(groups={"sex": [0, 1]}).groups_per_batch
            (True, False)
        """
        return isinstance(self.groups, str) or callable(self.groups) or _is_names(self.groups)


@dataclass(frozen=True)
class Weights:
    """Record the final trained weights (``DeviateCallback(weights=Weights(...))``), at the end of ``fit``.

    Every weight (trainable and not: Lightning ``state_dict()`` floating-point entries in the module's
    registration order, buffers such as BatchNorm statistics included; Keras ``model.weights`` by path) is
    taken as float64. The store projects the concatenated, unit-normalised vector with a fixed random
    (Johnson-Lindenstrauss) projection to ``sketch_dim`` numbers: the same projection for every replica that
    uses the same ``sketch_seed``, so distances between replicas' sketches estimate their weight distances.

    Args:
        sketch_dim: Size of the sketch (more: a tighter distance estimate).
        sketch_seed: Seed of the projection; keep it the same across a study (it is not the run's seed).
        full: Also store the full flattened weights (``weights.npz``) for exact distances.

    Example:
        >>> Weights(sketch_dim=0)
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `sketch_dim` must be a positive integer. Received: sketch_dim=0.
    """

    sketch_dim: int = 256
    sketch_seed: int = 0
    full: bool = False

    def __post_init__(self) -> None:
        d = self.sketch_dim
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1:
            raise UsageError(f"`sketch_dim` must be a positive integer. Received: sketch_dim={d!r}.")
        s = self.sketch_seed
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or not 0 <= s < 2**32:
            raise UsageError(f"`sketch_seed` must be an integer in [0, 2**32). Received: sketch_seed={s!r}.")
        if not isinstance(self.full, bool):
            raise UsageError(f"`full` must be True or False. Received: full={self.full!r}.")


def parse_predictions(value: object, name: str = "predictions") -> Optional[Predictions]:
    """The callbacks' ``predictions`` argument as a :class:`Predictions` (``None`` when off).

    Example:
        >>> parse_predictions(True) == Predictions(), parse_predictions(None), parse_predictions(False)
        (True, None, None)
        >>> parse_predictions(3)
        Traceback (most recent call last):
        ...
        TypeError: `predictions` must be True, False, None or a ...Predictions. Received: predictions=3.
    """
    if value is None or value is False:
        return None
    if value is True:
        return Predictions()
    if isinstance(value, Predictions):
        return value
    raise TypeError(
        f"`{name}` must be True, False, None or a deviate_cb.stability_capture.Predictions. Received: {name}={value!r}."
    )


def parse_weights(value: object, name: str = "weights") -> Optional[Weights]:
    """The callbacks' ``weights`` argument as a :class:`Weights` (``None`` when off).

    Example:
        >>> parse_weights(True), parse_weights(False)
        (Weights(sketch_dim=256, sketch_seed=0, full=False), None)
    """
    if value is None or value is False:
        return None
    if value is True:
        return Weights()
    if isinstance(value, Weights):
        return value
    raise TypeError(
        f"`{name}` must be True, False, None or a deviate_cb.stability_capture.Weights. Received: {name}={value!r}."
    )


def epoch_snapshot(epoch: int) -> str:
    """The snapshot name of the predictions taken after (0-based) ``epoch``.

    Example:
        >>> epoch_snapshot(4)
        'epoch=4'
    """
    return f"epoch={int(epoch)}"


def as_numpy(value: Any) -> np.ndarray:
    """A framework array (torch, TensorFlow, JAX, Keras) or sequence as a NumPy array, without importing any.

    torch half-precision values become float32 (NumPy has no bfloat16).

    Example:
        >>> as_numpy([1, 2]).tolist()
        [1, 2]
    """
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor
        tensor = value.detach()
        if str(tensor.dtype) in ("torch.bfloat16", "torch.float16"):
            tensor = tensor.float()
        return tensor.cpu().numpy()
    if hasattr(value, "numpy") and callable(value.numpy):  # TensorFlow eager tensors, Keras variables
        return np.asarray(value.numpy())
    return np.asarray(value)


@dataclass(frozen=True)
class CollectedPredictions:
    """Aligned per-sample arrays of one snapshot.

    Attributes:
        outputs: ``(n, C)`` scores, ``(n,)`` class ids or regression values, as returned.
        labels: ``(n,)`` true labels (one-hot labels become class ids), or ``None``.
        sample: ``(n,)`` sample index (position in the evaluation set) or the ids from ``sample_ids``.
        groups: Group name -> ``(n,)`` array.
    """

    outputs: np.ndarray
    labels: Optional[np.ndarray]
    sample: np.ndarray
    groups: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.outputs)


class PredictionCollector:
    """Buffers a snapshot's outputs batch by batch; :meth:`collect` converts and aligns them once at the end.

    Batch values stay as they are (on their device) until :meth:`collect`, so adding costs no device sync.

    Args:
        config: What to extract (``output_key``, ``labels``, ``sample_ids``, ``groups``).
        to_numpy: Converts one framework value to NumPy (default :func:`as_numpy`).
        source: How the outputs were produced, for messages (e.g. ``"test_step"``).
    """

    def __init__(
        self, config: Predictions, to_numpy: Callable[[Any], np.ndarray] = as_numpy, source: str = "the model"
    ) -> None:
        self.config = config
        self.to_numpy = to_numpy
        self.source = source
        self.clear()

    def clear(self) -> None:
        """Forget every buffered batch."""
        self._outputs: list[Any] = []
        self._labels: list[Any] = []
        self._ids: list[Any] = []
        self._groups: list[Any] = []
        self.skipped = 0  # batches whose step returned no usable output

    def __len__(self) -> int:
        return len(self._outputs)

    def add(self, outputs: Any, batch: Any = None, *, labels: Any = None) -> None:
        """Buffer one batch: ``outputs`` as the step/model returned them, and the ``batch`` they came from.

        Args:
            outputs: A tensor/array, or a dict/tuple holding one (see ``output_key``). ``None`` is counted
                in :attr:`skipped` and otherwise ignored.
            batch: The batch, for labels, sample ids and group fields.
            labels: The batch's labels when known apart from the batch (overrides extraction).
        """
        output = self._select(outputs)
        if output is None:
            self.skipped += 1
            return
        self._outputs.append(output)
        config = self.config
        self._labels.append(labels if labels is not None else _extract(batch, config.labels, "labels", default=True))
        if config.sample_ids is not None:
            self._ids.append(_extract(batch, config.sample_ids, "sample_ids"))
        if config.groups_per_batch:
            self._groups.append(_batch_groups(batch, config.groups))

    def _select(self, outputs: Any) -> Any:
        key = self.config.output_key
        if outputs is None:
            return None
        if isinstance(outputs, Mapping):
            if key is not None:
                if key not in outputs:
                    raise UsageError(
                        f"Predictions(output_key={key!r}): {self.source} returned a dict without that key "
                        f"(keys: {sorted(map(str, outputs))})."
                    )
                return outputs[key]
            for name in OUTPUT_KEYS:
                if name in outputs:
                    return outputs[name]
            raise UsageError(
                f"{self.source} returned a dict with none of the keys {', '.join(OUTPUT_KEYS)} "
                f"(keys: {sorted(map(str, outputs))}); name the one holding the predictions with "
                "Predictions(output_key=...)."
            )
        if isinstance(outputs, (tuple, list)):
            if not isinstance(key, int):
                raise UsageError(
                    f"{self.source} returned a {type(outputs).__name__} of {len(outputs)} values; give the "
                    "position of the predictions with Predictions(output_key=<index>)."
                )
            return outputs[key]
        if key is not None and not isinstance(key, int):
            raise UsageError(
                f"Predictions(output_key={key!r}) expects a dict, but {self.source} returned {type(outputs).__name__}."
            )
        return outputs

    def collect(self) -> Optional[CollectedPredictions]:
        """Convert and concatenate what was buffered (``None`` if nothing was); the buffer is cleared.

        Raises:
            UsageError: Outputs are not per-sample, or labels, ids or groups do not line up with them.
        """
        if not self._outputs:
            self.clear()
            return None
        try:
            return self._collect()
        finally:
            self.clear()

    def _collect(self) -> CollectedPredictions:
        parts = [self.to_numpy(o) for o in self._outputs]
        for part in parts:
            if part.ndim == 0:
                raise UsageError(
                    f"{self.source} returned a single number per batch (shape ()), not one prediction per "
                    "sample: return the logits/probabilities of the batch (shape (batch, classes) or (batch,))."
                )
        outputs = np.concatenate(parts, axis=0)
        n = len(outputs)
        labels = None
        if any(label is not None for label in self._labels):
            if any(label is None for label in self._labels):
                raise UsageError("labels were found in some batches but not in others; set Predictions(labels=...).")
            labels = _as_labels(np.concatenate([np.atleast_1d(self.to_numpy(x)) for x in self._labels], axis=0))
            _check_length("labels", labels, n)
        if self._ids:
            sample = np.concatenate([np.atleast_1d(self.to_numpy(x)) for x in self._ids], axis=0)
            _check_length("sample_ids", sample, n)
        else:
            sample = np.arange(n, dtype=np.int64)
        groups: dict[str, np.ndarray] = {}
        if self.config.groups_per_batch:
            names = self._groups[0].keys()
            for name in names:
                groups[name] = np.concatenate([np.atleast_1d(self.to_numpy(g[name])) for g in self._groups], axis=0)
        elif self.config.groups is not None:
            given = self.config.groups
            items = given.items() if isinstance(given, Mapping) else [("group", given)]
            groups = {str(name): self.to_numpy(values) for name, values in items}
        for name, values in groups.items():
            _check_length(f"groups[{name!r}]", values, n)
            if values.ndim == 2 and values.shape[1] == 1:
                groups[name] = values[:, 0]
            elif values.ndim != 1:
                raise UsageError(f"groups[{name!r}] must hold one label per sample. Received shape {values.shape}.")
        return CollectedPredictions(outputs, labels, sample, groups)


def _check_groups(groups: object) -> None:
    if groups is None or callable(groups) or isinstance(groups, (str, np.ndarray)) or _is_names(groups):
        if isinstance(groups, str) and not groups:
            raise UsageError("`groups` must name a batch field. Received: groups=''.")
        return
    if isinstance(groups, Mapping):
        for name, values in groups.items():
            if not isinstance(name, str) or not name:
                raise UsageError(f"`groups` names must be non-empty strings. Received: {name!r}.")
            if isinstance(values, (str, bytes)) or callable(values) or not hasattr(values, "__len__"):
                raise UsageError(
                    f"`groups[{name!r}]` must be an array with one label per sample (in sample order). "
                    f"Received: {type(values).__name__}."
                )
        return
    raise UsageError(
        "`groups` must be a mapping name -> array, an array, a batch field name (or list of names) or a "
        f"function of the batch. Received: groups={groups!r}."
    )


def _is_names(value: object) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) and v for v in value)


def _extract(batch: Any, spec: Optional[Extractor], name: str, *, default: bool = False) -> Any:
    if spec is None:
        if not default:
            return None
        if isinstance(batch, (tuple, list)):
            return batch[1] if len(batch) >= 2 else None
        if isinstance(batch, Mapping):
            return next((batch[k] for k in LABEL_KEYS if k in batch), None)
        return None
    if callable(spec):
        return spec(batch)
    try:
        return batch[spec]
    except (KeyError, IndexError, TypeError) as exc:
        kind = f"keys {sorted(map(str, batch))}" if isinstance(batch, Mapping) else type(batch).__name__
        raise UsageError(f"Predictions({name}={spec!r}): not found in the batch ({kind}).") from exc


def _batch_groups(batch: Any, spec: Any) -> dict[str, Any]:
    if callable(spec):
        found = spec(batch)
        return dict(found) if isinstance(found, Mapping) else {"group": found}
    names = [spec] if isinstance(spec, str) else list(spec)
    if not isinstance(batch, Mapping):
        raise UsageError(
            f"Predictions(groups={spec!r}) names batch fields, but the batches are {type(batch).__name__}, "
            "not dicts: pass a function of the batch or arrays aligned with the sample order."
        )
    missing = [n for n in names if n not in batch]
    if missing:
        raise UsageError(f"Predictions(groups={spec!r}): {missing} not in the batch (keys {sorted(map(str, batch))}).")
    return {n: batch[n] for n in names}


def _as_labels(labels: np.ndarray) -> np.ndarray:
    if labels.ndim == 2 and labels.shape[1] == 1:
        return labels[:, 0]
    if labels.ndim == 2:  # one-hot or soft targets: the class with the largest weight
        return labels.argmax(axis=1)
    return labels


def _check_length(name: str, values: np.ndarray, n: int) -> None:
    if len(values) != n:
        raise UsageError(f"{name} has {len(values)} entries but there are {n} predictions; they must line up.")


def weight_arrays(
    named: Iterable[tuple[str, Any]], to_numpy: Callable[[Any], np.ndarray] = as_numpy
) -> dict[str, np.ndarray]:
    """Named weights as float64 arrays, in the given order; repeated names get ``#1``, ``#2`` suffixes.

    Example:
        >>> arrays = weight_arrays([("dense/kernel", [[1, 2]]), ("dense/kernel", [3])])
        >>> {k: v.dtype.name for k, v in arrays.items()}
        {'dense/kernel': 'float64', 'dense/kernel#1': 'float64'}
    """
    arrays: dict[str, np.ndarray] = {}
    for name, value in named:
        key, k = name, 0
        while key in arrays:
            k += 1
            key = f"{name}#{k}"
        arrays[key] = np.asarray(to_numpy(value), dtype=np.float64)
    return arrays


def write_prediction_snapshot(
    run_dir: Union[str, PathLike[str]],
    collected: CollectedPredictions,
    config: Predictions,
    *,
    snapshot: str,
    epoch: Optional[int],
    step: Optional[int],
) -> dict[str, Any]:
    """Write one snapshot to ``predictions.parquet`` through the stability store; return its manifest block."""
    from deviate_cb import stability_store

    return stability_store.write_predictions(
        run_dir,
        outputs=collected.outputs,
        labels=collected.labels,
        sample=collected.sample,
        groups=collected.groups or None,
        snapshot=snapshot,
        epoch=epoch,
        step=step,
        task=config.task,
    )


def write_weight_record(
    run_dir: Union[str, PathLike[str]], arrays: Mapping[str, np.ndarray], config: Weights
) -> dict[str, Any]:
    """Write the weight sketch (and the full weights if asked) through the stability store."""
    from deviate_cb import stability_store

    if not arrays:
        warnings.warn(
            "DeviateCallback(weights=...): the model has no floating-point weights; nothing stored.", stacklevel=3
        )
        return {}
    return stability_store.write_weights(
        run_dir, list(arrays.items()), sketch_dim=config.sketch_dim, sketch_seed=config.sketch_seed, full=config.full
    )
