"""A deterministic tiny Keras 3 training whose replica 1 raises at training step :data:`CRASH_STEP`, for
``tests/faults/test_audit_crashes.py``: the steps before agree bit for bit, the audit must still not pass."""

from __future__ import annotations

import os
from typing import Any, Optional

import keras
import numpy as np

CRASH_STEP = 2


class StopsAt(keras.callbacks.Callback):
    """Raises at training step :data:`CRASH_STEP` in replica 1."""

    def on_train_batch_begin(self, batch: int, logs: Optional[Any] = None) -> None:
        replica = int(os.environ.get("DEVIATE_REPLICA", "0"))
        if batch == CRASH_STEP and replica == 1:
            raise RuntimeError(f"boom in replica {replica} at step {batch}")


def replica_1_crashes() -> dict[str, float]:
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    x = np.random.default_rng(1234).standard_normal((96, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    history = model.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0, callbacks=[StopsAt()])
    return {"loss": float(history.history["loss"][-1])}
