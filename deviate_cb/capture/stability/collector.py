"""What the callbacks capture for model-stability measures: per-sample predictions and final weights.

Example:
    >>> import numpy as np
    >>> from deviate_cb.capture.stability.settings import parse_predictions
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

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from os import PathLike
from typing import Any, Optional, Union

import numpy as np

from deviate_cb.capture.stability.extract import as_numpy, batch_field, batch_groups
from deviate_cb.capture.stability.settings import Predictions, Weights, count_entries
from deviate_cb.errors import UsageError

__all__ = [
    "FINAL_SNAPSHOT",
    "OUTPUT_KEYS",
    "CollectedPredictions",
    "PredictionCollector",
    "check_whole_set",
    "epoch_snapshot",
    "write_prediction_snapshot",
    "write_weight_record",
]

FINAL_SNAPSHOT = "final"
OUTPUT_KEYS = ("preds", "logits", "probs", "y_hat", "predictions", "outputs")
"""Keys tried, in order, when a step returns a dict and ``output_key`` is not set."""


def epoch_snapshot(epoch: int) -> str:
    """The snapshot name of the predictions taken after (0-based) ``epoch``.

    Example:
        >>> epoch_snapshot(4)
        'epoch=4'
    """
    return f"epoch={int(epoch)}"


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
        self._labels.append(labels if labels is not None else batch_field(batch, config.labels, "labels", default=True))
        if config.sample_ids is not None:
            self._ids.append(batch_field(batch, config.sample_ids, "sample_ids"))
        if config.groups_per_batch:
            self._groups.append(batch_groups(batch, config.groups))

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


def check_whole_set(config: Predictions, batch: Any, n: int) -> None:
    """Check, before any prediction, an evaluation set given whole as one ``batch`` of ``n`` samples (Keras
    ``(x, y)`` arrays): it holds samples, and its labels, sample ids and groups can be taken out of it, one per
    sample, as they will be at each snapshot.

    Raises:
        UsageError: One line naming ``predictions`` and what does not line up.

    Example:
        >>> check_whole_set(Predictions(data=()), (np.zeros((4, 2)), np.array([0, 1, 1])), 4)
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: DeviateCallback(predictions=...): labels has 3 entries but `data` holds 4 ...
    """
    config.check_sample_count(n)
    try:
        fields = {"labels": batch_field(batch, config.labels, "labels", default=True)}
        if config.sample_ids is not None:
            fields["sample_ids"] = batch_field(batch, config.sample_ids, "sample_ids")
        if config.groups_per_batch:
            fields.update({f"groups[{k!r}]": v for k, v in batch_groups(batch, config.groups).items()})
        for name, values in fields.items():
            size = count_entries(values) if values is not None else None
            if size is not None and size != n:
                raise UsageError(f"{name} has {size} entries but `data` holds {n} samples; they must line up.")
    except UsageError as exc:
        raise UsageError(f"DeviateCallback(predictions=...): {exc}") from None


def _as_labels(labels: np.ndarray) -> np.ndarray:
    if labels.ndim == 2 and labels.shape[1] == 1:
        return labels[:, 0]
    if labels.ndim == 2:  # one-hot or soft targets: the class with the largest weight
        return labels.argmax(axis=1)
    return labels


def _check_length(name: str, values: np.ndarray, n: int) -> None:
    if len(values) != n:
        raise UsageError(f"{name} has {len(values)} entries but there are {n} predictions; they must line up.")


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
    from deviate_cb.store.predictions import write_predictions

    return write_predictions(
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
    from deviate_cb.store.weights import write_weights

    if not arrays:
        warnings.warn(
            "DeviateCallback(weights=...): the model has no floating-point weights; nothing stored.", stacklevel=3
        )
        return {}
    return write_weights(
        run_dir, list(arrays.items()), sketch_dim=config.sketch_dim, sketch_seed=config.sketch_seed, full=config.full
    )
