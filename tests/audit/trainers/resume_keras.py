"""A tiny Keras fit with ``keras.callbacks.BackupAndRestore``, for ``deviate audit --resume-at`` (not supported on
Keras yet: the command must say so, exit 3, after one training step rather than the whole fit)."""

from __future__ import annotations

import os
import tempfile

import keras
import numpy as np

STEPS_PER_EPOCH = 4


def backup_and_restore() -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16 * STEPS_PER_EPOCH, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    backup = keras.callbacks.BackupAndRestore(os.path.join(tempfile.mkdtemp(), "backup"))
    history = model.fit(x, y, batch_size=16, epochs=50, verbose=0, callbacks=[backup])
    return {"loss": float(history.history["loss"][-1]), "epochs": float(len(history.history["loss"]))}
