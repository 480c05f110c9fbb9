"""Tiny real Keras models and data for the callback tests."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np


def data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype("float32")
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int64")


def model(metrics: list[Any] | None = None, **compile_kwargs: Any) -> keras.Model:
    m = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(2),
        ]
    )
    m.compile(
        optimizer="sgd",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"] if metrics is None else metrics,
        **compile_kwargs,
    )
    return m
