"""Keras 3 equivalents of the small and medium CNNs of :mod:`deviate_cb.bench.models` (channels-last inputs).

Example:
    >>> sorted(KERAS_MODELS)
    ['keras_medium_cnn_k1', 'keras_medium_cnn_k3', 'keras_medium_cnn_k5', 'keras_medium_cnn_k7', 'keras_small_cnn']
"""

from __future__ import annotations

from typing import Any

from deviate_cb.bench.models import NUM_CLASSES, TORCH_MODELS

__all__ = ["KERAS_MODELS", "build_keras_model"]

KERAS_MODELS = {f"keras_{name}": about for name, about in TORCH_MODELS.items() if "cnn" in name}


def build_keras_model(name: str) -> Any:
    """A compiled ``keras.Sequential`` (SGD, sparse categorical cross-entropy) for a name in :data:`KERAS_MODELS`."""
    import keras
    from keras import layers

    if name not in KERAS_MODELS:
        raise ValueError(f"`model` must be one of {', '.join(KERAS_MODELS)}. Received: model={name!r}.")
    stack: list[Any] = [keras.Input((32, 32, 3))]
    if name == "keras_small_cnn":
        stack += [
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(NUM_CLASSES),
        ]
    else:
        k = int(name.removeprefix("keras_medium_cnn_k"))
        stack += [
            layers.Conv2D(32, k, padding="same", activation="relu"),
            layers.Conv2D(32, k, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(64, k, padding="same", activation="relu"),
            layers.Conv2D(64, k, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(256, activation="relu"),
            layers.Dense(NUM_CLASSES),
        ]
    model = keras.Sequential(stack)
    model.compile(keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model
