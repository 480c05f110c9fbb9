"""A real Keras fit with the TensorBoard callback (TensorFlow backend), for the import tests.

``python keras_tensorboard.py LOGDIR SEED [UPDATE_FREQ]`` trains a tiny regression for 3 epochs with
``validation_split`` and prints, as JSON, the training and validation losses Keras reported at each epoch (what the
import must store). ``UPDATE_FREQ`` (``epoch`` by default, or a number of batches) is the callback's ``update_freq``:
with batches, Keras also writes ``batch_loss`` beside ``epoch_loss``.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import numpy as np


def main(logdir: str, seed: int, update_freq: str = "epoch") -> None:
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(1234)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True) + 0.1 * rng.normal(size=(64, 1)).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    history = model.fit(
        x,
        y,
        epochs=3,
        batch_size=16,
        validation_split=0.25,
        verbose=0,
        callbacks=[
            keras.callbacks.TensorBoard(
                log_dir=logdir, update_freq=update_freq if update_freq == "epoch" else int(update_freq)
            )
        ],
    )
    print(json.dumps({"loss": history.history["loss"], "val_loss": history.history["val_loss"]}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:])
