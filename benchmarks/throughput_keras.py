"""The replicated unit of work of ``replicate_throughput.py`` for Keras 3: Dense 16 -> Dense 2, 3 epochs on 64 samples.

Keras and NumPy are imported at the top of this file on purpose: a warm-start template of ``deviate-replicate``
pre-imports the frameworks that the trainer's module imports at top level (found by reading its imports), so
this is the layout that lets replicas skip those imports. The backend comes from ``KERAS_BACKEND`` (the
benchmark uses ``tensorflow``), which must be set before this file is imported.

    deviate-replicate --trainer benchmarks/throughput_keras.py:tiny_keras -n 8 --parallel 2 --keras-backend tensorflow

Example:
    >>> x, y = data()
    >>> x.shape, y.shape, int(y.sum()) == int((x[:, 0] > 0).sum())
    ((64, 8), (64,), True)
"""

from __future__ import annotations

import keras
import numpy as np

__all__ = ["data", "tiny_keras"]


def data() -> tuple[np.ndarray, np.ndarray]:
    """64 fixed samples of 8 features (the same for every seed); the label is whether feature 0 is positive."""
    x = np.random.default_rng(1234).standard_normal((64, 8)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32")


def tiny_keras(seed: int = 0) -> dict[str, float]:
    """Train Dense 16 (ReLU) -> Dense 2 for 3 epochs on :func:`data` (batch 16, SGD); return the last epoch's loss."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [keras.Input(shape=(8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x, y = data()
    history = model.fit(x, y, epochs=3, batch_size=16, shuffle=True, verbose=0)
    return {"loss": float(history.history["loss"][-1])}
