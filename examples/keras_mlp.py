"""The Keras 3 twin of ``lightning_mlp.py``: an MLP with dropout on the same synthetic task, on any backend.

Run it once, standalone (writes one run to ``deviate_runs/``; ``KERAS_BACKEND`` picks the backend)::

    KERAS_BACKEND=torch python examples/keras_mlp.py

or replicate it under a noise variant on a chosen backend and report the spread::

    deviate-replicate --trainer examples/keras_mlp.py:main -n 4 --variant algo+impl --keras-backend jax --out runs/
    deviate report runs/

The data set is made by NumPy's own generator (seed 0), not by the backend, so that it is the same on every
backend and in every replica: replicas differ only in what the variant varies (weight initialisation, batch
order and dropout masks through the seed; kernel behaviour through deterministic tooling). The code uses
backend-neutral ``keras`` API only, so it runs unchanged on TensorFlow, torch and JAX.
"""

from __future__ import annotations

from typing import Optional

import keras
import numpy as np

from deviate_cb.keras import DeviateCallback

__all__ = ["N_CLASSES", "N_FEATURES", "build_model", "main", "make_data"]

N_FEATURES, N_CLASSES = 20, 4


def make_data(n: int = 1200, seed: int = 0) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A fixed synthetic classification problem: Gaussian clusters with 10% label noise, split 5:1.

    Example:
        >>> (x, y), (x_val, y_val) = make_data()
        >>> x.shape, x_val.shape, x.dtype, sorted(set(y.tolist()))
        ((1000, 20), (200, 20), dtype('float32'), [0, 1, 2, 3])
    """
    gen = np.random.Generator(np.random.PCG64(seed))
    centers = gen.standard_normal((N_CLASSES, N_FEATURES)) * 1.5
    labels = gen.integers(0, N_CLASSES, size=n)
    x = centers[labels] + gen.standard_normal((n, N_FEATURES)) * 2.0
    flip = gen.random(n) < 0.1
    labels = np.where(flip, gen.integers(0, N_CLASSES, size=n), labels)
    x, labels = x.astype("float32"), labels.astype("int32")
    cut = n * 5 // 6
    return (x[:cut], labels[:cut]), (x[cut:], labels[cut:])


def build_model(hidden: int = 64, dropout: float = 0.3, lr: float = 1e-2) -> keras.Model:
    """Two hidden layers with dropout, compiled with SGD + momentum; reports ``loss`` and ``accuracy``."""
    inputs = keras.Input(shape=(N_FEATURES,))
    x = inputs
    for _ in range(2):
        x = keras.layers.Dense(hidden, activation="relu")(x)
        x = keras.layers.Dropout(dropout)(x)
    model = keras.Model(inputs, keras.layers.Dense(N_CLASSES)(x), name="mlp")  # logits
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=lr, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def main(epochs: int = 5, seed: Optional[int] = None) -> dict[str, float]:
    """Train once; return the held-out metrics of ``model.evaluate`` (recorded as stage ``test``).

    Under ``deviate-replicate`` the seed is the replica's and the callback is optional (one is added to every
    ``fit``/``evaluate`` that has none). Standalone, ``seed`` seeds Python, NumPy, the backend and Keras.
    """
    (x, y), (x_val, y_val) = make_data()
    callback = DeviateCallback(seed=seed)  # created before the model, so that the seed covers initialisation
    model = build_model()
    model.fit(
        x,
        y,
        batch_size=32,
        epochs=epochs,
        shuffle=True,
        validation_data=(x_val, y_val),
        callbacks=[callback],
        verbose=0,
    )
    results = model.evaluate(x_val, y_val, batch_size=200, callbacks=[callback], return_dict=True, verbose=0)
    return {name: float(value) for name, value in results.items()}


if __name__ == "__main__":
    print(main())
