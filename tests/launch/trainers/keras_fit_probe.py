"""Run in a subprocess by test_keras_launch.py (KERAS_BACKEND=torch): wrap a real keras.Model, print JSON."""

from __future__ import annotations

import json
import sys
from typing import ClassVar

import numpy as np

import deviate_cb.launch.replica.inject as inject

inject.install_keras_injection()  # before Keras is imported, as in a replica
report: dict = {"keras_imported_by_install": "keras" in sys.modules}

import keras  # noqa: E402

report["tensorflow_imported"] = "tensorflow" in sys.modules
report["wrapped"] = [getattr(getattr(keras.Model, n), inject._MARKER, False) for n in ("fit", "evaluate")]


class Marker(keras.callbacks.Callback):
    """Stands in for deviate_cb.keras.DeviateCallback: counts instances and hook calls."""

    made: ClassVar[list[Marker]] = []

    def __init__(self) -> None:
        super().__init__()
        self.calls = {"train_begin": 0, "train_batch": 0, "test_begin": 0}
        Marker.made.append(self)

    def on_train_begin(self, logs=None):
        self.calls["train_begin"] += 1

    def on_train_batch_end(self, batch, logs=None):
        self.calls["train_batch"] += 1

    def on_test_begin(self, logs=None):
        self.calls["test_begin"] += 1


inject._default_callback_class = lambda *args: Marker  # the class the wrapper looks up at call time


def model() -> keras.Model:
    m = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(2)])
    m.compile(optimizer="sgd", loss="mse")
    return m


x, y = np.zeros((8, 3), "float32"), np.zeros((8, 2), "float32")
a = model()
a.fit(x, y, batch_size=4, epochs=2, validation_data=(x, y), verbose=0)  # none given: one injected
report["after_fit"] = [len(Marker.made), dict(Marker.made[0].calls)]
a.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[keras.callbacks.History()])  # fine-tuning: reused
a.evaluate(x, y, verbose=0)  # after fit: the model's callback again
report["after_evaluate"] = [len(Marker.made), dict(Marker.made[0].calls)]
mine = Marker()
a.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[mine])  # the user's own: kept, none added
report["users_own"] = [len(Marker.made), mine.calls["train_begin"], Marker.made[0].calls["train_begin"]]
b = model()
probe = keras.callbacks.History()
b.fit(x, y, 4, 1, 0, [probe])  # positional callbacks, without one: injected next to the user's
report["positional"] = [len(Marker.made), Marker.made[-1].calls["train_batch"], b.history is probe]
c = model()
c.fit(x, y, 4, 1, 0, keras.callbacks.History())  # a single callback, not a list
c.evaluate(x, y, 4, 0, None, None, [mine])  # evaluate's positional callbacks, with one: kept
report["single_and_evaluate"] = [len(Marker.made), mine.calls["test_begin"]]
json.dump(report, sys.stdout)
