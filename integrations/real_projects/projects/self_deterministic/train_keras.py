"""A keras-io style recipe (TensorFlow backend) that makes itself reproducible, as the Keras FAQ says: one global
seed and TensorFlow's op determinism, before the model is built.

    KERAS_BACKEND=tensorflow python train_keras.py --epochs 2

It prints Keras' fit output, then ``final: acc=... loss=...`` from evaluate. The data set is fixed (its own NumPy
generator); the weight initialisation, the shuffle and the dropout masks follow ``keras.utils.set_random_seed(42)``.
"""

import argparse

import keras
import numpy as np
import tensorflow as tf
from keras import layers

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()

keras.utils.set_random_seed(42)
tf.config.experimental.enable_op_determinism()

rng = np.random.default_rng(0)
y = rng.integers(0, 2, size=256)
x = (rng.normal(size=(256, 8)) + (y[:, None] * 2 - 1) * 0.6).astype("float32")
x_train, y_train, x_test, y_test = x[:192], y[:192], x[192:], y[192:]

model = keras.Sequential(
    [keras.Input(shape=(8,)), layers.Dense(32, activation="relu"), layers.Dropout(0.3), layers.Dense(2)]
)
model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=args.epochs, validation_split=0.25, verbose=2)
loss, acc = model.evaluate(x_test, y_test, verbose=0)
print(f"final: acc={acc:.6f} loss={loss:.6f}")
