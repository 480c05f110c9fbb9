"""Tiny Keras fits with ``keras.callbacks.BackupAndRestore`` for ``deviate audit --resume-at`` (4 steps an epoch).

Each fit backs up into ``backup`` under the working directory, a fixed path as projects write it: under
``--resume-at`` the replicas' callbacks are redirected (``<out>/backups/<role>``), so the tests check that this
folder is never created.
"""

from __future__ import annotations

from typing import Any, Union

import keras
import numpy as np

STEPS_PER_EPOCH = 4


def _fit(layers: list[Any], *, save_freq: Union[str, int] = "epoch", backup: bool = True) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16 * STEPS_PER_EPOCH, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), *layers,
                              keras.layers.Dense(2)])  # fmt: skip
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=keras.losses.SparseCategoricalCrossentropy(True))
    callbacks = [keras.callbacks.BackupAndRestore("backup", save_freq=save_freq)] if backup else []
    history = model.fit(x, y, batch_size=16, epochs=50, verbose=0, shuffle=False, callbacks=callbacks)
    return {"loss": float(history.history["loss"][-1]), "epochs": float(len(history.history["loss"]))}


def backup_and_restore() -> dict[str, float]:
    """Weights and Adam's state are in the backup, the data is not shuffled: a resume at an epoch end is exact."""
    return _fit([])


def seeded_dropout() -> dict[str, float]:
    """``Dropout(seed=1)`` draws from its own SeedGenerator, whose state the backup does not hold."""
    return _fit([keras.layers.Dropout(0.5, seed=1)])


def every_two_batches() -> dict[str, float]:
    """``save_freq=2``: a backup every 2 batches, which Keras resumes from the start of the epoch it was taken in."""
    return _fit([], save_freq=2)


def no_backup() -> dict[str, float]:
    """No BackupAndRestore: nothing to resume from."""
    return _fit([], backup=False)
