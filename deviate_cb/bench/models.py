"""The built-in benchmark models, in plain torch and in Keras 3: the model set of Zhuang et al. (2022).

Example:
    >>> sorted(TORCH_MODELS)
    ['medium_cnn_k1', 'medium_cnn_k3', 'medium_cnn_k5', 'medium_cnn_k7', 'resnet18', 'small_cnn']
    >>> import torch
    >>> build_torch_model("small_cnn")(torch.zeros(2, 3, 32, 32)).shape
    torch.Size([2, 10])
    >>> sorted(KERAS_MODELS)
    ['keras_medium_cnn_k1', 'keras_medium_cnn_k3', 'keras_medium_cnn_k5', 'keras_medium_cnn_k7', 'keras_small_cnn']
"""

from __future__ import annotations

from typing import Any

__all__ = ["INPUT_SHAPE", "KERAS_MODELS", "NUM_CLASSES", "TORCH_MODELS", "build_keras_model", "build_torch_model"]

INPUT_SHAPE = (3, 32, 32)
NUM_CLASSES = 10
TORCH_MODELS = {
    "small_cnn": "3 layers: conv3x3(32)-pool, conv3x3(64)-pool, linear(10)",
    **{
        f"medium_cnn_k{k}": f"6 layers: conv{k}x{k}(32) x2-pool, conv{k}x{k}(64) x2-pool, linear(256), linear(10)"
        for k in (1, 3, 5, 7)
    },
    "resnet18": "ResNet-18, CIFAR variant (3x3 stem, no max-pool, basic blocks [2, 2, 2, 2])",
}
KERAS_MODELS = {f"keras_{name}": about for name, about in TORCH_MODELS.items() if "cnn" in name}


def build_torch_model(name: str) -> Any:
    """A freshly initialised ``torch.nn.Module`` for a built-in model name (see :data:`TORCH_MODELS`)."""
    from torch import nn

    if name == "small_cnn":
        return nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 8 * 8, NUM_CLASSES),
        )
    if name.startswith("medium_cnn_k") and name in TORCH_MODELS:
        k = int(name.removeprefix("medium_cnn_k"))
        return nn.Sequential(
            nn.Conv2d(3, 32, k, padding=k // 2),
            nn.ReLU(),
            nn.Conv2d(32, 32, k, padding=k // 2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, k, padding=k // 2),
            nn.ReLU(),
            nn.Conv2d(64, 64, k, padding=k // 2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 8 * 8, 256),
            nn.ReLU(),
            nn.Linear(256, NUM_CLASSES),
        )
    if name == "resnet18":
        return _resnet18()
    raise ValueError(f"`model` must be one of {', '.join(TORCH_MODELS)}. Received: model={name!r}.")


def _resnet18() -> Any:
    from torch import nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
            return (out + self.shortcut(x)).relu()

    layers: list[Any] = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, NUM_CLASSES)]
    return nn.Sequential(*layers)


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
