"""A tiny real Keras 3 trainer, backend-neutral. What it does depends on the replica index (mod 3):

replica 0: ``fit`` without callbacks (one gets injected); 1: ``callbacks=[DeviateCallback(), Probe()]`` as a
keyword (kept, never doubled); 2: ``callbacks=[Probe()]`` passed positionally (one gets injected next to it).
Every replica then calls ``model.evaluate()`` without callbacks (recorded as stage ``test``) and returns how
many ``DeviateCallback`` objects were created (1: the user's or the injected one, never both). The three paths
train identically, so under ``control`` their metrics must be bit-identical.
"""

from __future__ import annotations

import keras
import numpy as np

from deviate_cb.keras import DeviateCallback

EPOCHS, BATCH, N_TRAIN = 3, 16, 64

created = []  # every DeviateCallback made in this process, the injected ones included
_original_init = DeviateCallback.__init__


def _counting_init(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    created.append(type(self).__name__)


DeviateCallback.__init__ = _counting_init


class Probe(keras.callbacks.Callback):
    """A user's own callback: counts training batches (and must not change anything)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1


def _data():
    gen = np.random.Generator(np.random.PCG64(1234))  # fixed data; init, order and dropout come from the seed
    x = gen.standard_normal((N_TRAIN + 16, 8)).astype("float32")
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")
    return (x[:N_TRAIN], y[:N_TRAIN]), (x[N_TRAIN:], y[N_TRAIN:])


def main(ctx):
    (x, y), val = _data()
    variant = ctx.replica % 3
    user_callback = DeviateCallback() if variant == 1 else None
    model = keras.Sequential(
        [
            keras.Input(shape=(8,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    probe = Probe()
    if variant == 0:
        model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_data=val, verbose=0)
    elif variant == 1:
        callbacks = [user_callback, probe]
        model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, validation_data=val, verbose=0, callbacks=callbacks)
    else:
        model.fit(x, y, BATCH, EPOCHS, 0, [probe], validation_data=val)
    model.evaluate(*val, verbose=0)
    return {
        "deviate_callbacks": len(created),
        "probe_batches": probe.batches,
    }
