"""Per-sample predictions of a Keras run on ``Predictions.data``: arrays through ``model.predict``, datasets by batch.

Keras is imported only inside :func:`predict` (its batch unpacking); the checks need NumPy alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from deviate_cb.capture.session import RunSession
from deviate_cb.capture.stability.collector import (
    CollectedPredictions,
    PredictionCollector,
    check_whole_set,
    write_prediction_snapshot,
)
from deviate_cb.capture.stability.settings import Predictions, count_entries
from deviate_cb.errors import UsageError

__all__ = ["KerasPredictions", "check_data", "predict"]


class KerasPredictions:
    """The snapshots of one callback's predictions, each computed once per global step.

    Args:
        config: What to record (``Predictions`` with ``data``, checked by :func:`check_data`).
        session: The run's session (its run directory; ``enabled`` on the chief).
    """

    def __init__(self, config: Predictions, session: RunSession) -> None:
        self.config, self.session = config, session
        self._last: Optional[tuple[int, CollectedPredictions]] = None  # (global step, arrays)

    def snapshot(self, model: Any, snapshot: str, epoch: Optional[int], step: int) -> None:
        """Predict on ``Predictions.data`` and write one snapshot (reusing the last one if nothing trained)."""
        run = self.session.run
        if run is None or model is None or not self.session.enabled:
            return
        last = self._last
        if last is not None and last[0] == step:
            collected = last[1]
        else:
            collected = predict(model, self.config)
            self._last = (step, collected)
        write_prediction_snapshot(run.path, collected, self.config, snapshot=snapshot, epoch=epoch, step=step)


def _is_whole_arrays(data: Any) -> bool:
    return (isinstance(data, tuple) and 1 <= len(data) <= 3) or _is_arrays(data)


def predict(model: Any, config: Predictions) -> CollectedPredictions:
    """The model's predictions on ``config.data``: arrays via ``model.predict``, datasets batch by batch."""
    data = config.data
    collector = PredictionCollector(config, source="model.predict")
    if _is_whole_arrays(data):
        batch = data if isinstance(data, tuple) else (data,)
        collector.add(model.predict(batch[0], verbose=0), batch)
    else:
        import keras

        if hasattr(data, "as_numpy_iterator"):  # tf.data: NumPy batches for every backend
            data = data.as_numpy_iterator()
        for batch in data:
            x, y, _ = keras.utils.unpack_x_y_sample_weight(batch)
            labels = y if config.labels is None else None
            collector.add(model.predict_on_batch(x), batch, labels=labels)
    collected = collector.collect()
    if collected is None:
        raise UsageError("DeviateCallback(predictions=...): Predictions.data holds no samples.")
    return collected


def check_data(config: Predictions) -> None:
    """What can be checked of ``Predictions.data`` before any training: that it is given, its kind, and for arrays that ``x``,
    ``y`` (and sample weights), labels, sample ids and groups all hold one entry per sample.

    Example:
        >>> check_data(Predictions(data=(np.zeros((4, 2)), np.zeros(3))))
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: DeviateCallback(predictions=Predictions(data=(x, y))): x holds 4 samples but y holds 3; they must line up.
    """  # noqa: E501
    data = config.data
    if data is None:
        raise UsageError(
            "deviate_cb.keras.DeviateCallback needs the evaluation set to predict on: "
            "predictions=Predictions(data=(x, y)) (or a tf.data.Dataset of (x, y) batches). "
            "Received: predictions with data=None."
        )
    if _is_whole_arrays(data):
        batch = data if isinstance(data, tuple) else (data,)
        n = _first_dimension(batch[0])
        if n is None:
            return
        for name, part in zip(("y", "sample_weight"), batch[1:], strict=False):
            size = _first_dimension(part) if part is not None else None
            if size is not None and size != n:
                raise UsageError(
                    f"DeviateCallback(predictions=Predictions(data=(x, y))): x holds {n} samples but {name} holds "
                    f"{size}; they must line up."
                )
        check_whole_set(config, batch, n)
    elif not (hasattr(data, "__iter__") or hasattr(data, "as_numpy_iterator")):
        raise TypeError(
            "`Predictions.data` must be (x, y) arrays, x alone, a tf.data.Dataset, a PyDataset or an iterable of "
            f"(x, y) batches. Received: data of type {type(data).__name__}."
        )


def _first_dimension(x: Any) -> Optional[int]:
    """The number of samples of ``x`` (an array, or a dict or list of arrays), ``None`` if unknown."""
    if isinstance(x, Mapping):
        x = next(iter(x.values()), None)
    elif isinstance(x, list) and x and all(hasattr(item, "shape") for item in x):
        x = x[0]
    try:
        return count_entries(x)
    except (TypeError, ValueError):  # a dimension of unknown size
        return None


def _is_arrays(data: Any) -> bool:
    """``x`` given as an array or a dict/list of arrays (rather than a dataset of batches)."""
    if isinstance(data, Mapping):
        return True
    if isinstance(data, list):
        return bool(data) and all(hasattr(item, "shape") for item in data)
    return isinstance(data, np.ndarray) or (hasattr(data, "shape") and hasattr(data, "dtype"))
