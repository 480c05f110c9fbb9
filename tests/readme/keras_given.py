"""What the README's Keras quickstart takes as given: a compiled ``model`` and ``x``, ``y``, ``x_test``, ``y_test``.

tests/test_readme_blocks.py runs this file before a ```python block marked
``<!-- readme-check: given tests/readme/keras_given.py (...) -->``: a tiny real classifier on the torch backend
(unless ``KERAS_BACKEND`` says otherwise), trained by the snippet itself.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras
import numpy as np

__all__ = ["model", "x", "x_test", "y", "y_test"]

_rng = np.random.default_rng(0)
x = _rng.normal(size=(80, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
x_test = _rng.normal(size=(20, 8)).astype("float32")
y_test = (x_test[:, 0] > 0).astype("int64")

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
