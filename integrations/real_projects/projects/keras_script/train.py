"""A keras-io style example: module-level code, argparse, ``keras.utils.set_random_seed(42)``, fit and evaluate.

    python train.py --epochs 3
    KERAS_BACKEND=torch python train.py --epochs 3

The data set is fixed (its own NumPy generator); weight initialisation, the shuffle of each epoch and the
dropout masks follow the global seed set by ``keras.utils.set_random_seed``.
"""

import argparse

import keras
import numpy as np
from keras import layers

parser = argparse.ArgumentParser(description="Train a small classifier on a synthetic two-class problem.")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

print("Keras backend:", keras.backend.backend())
keras.utils.set_random_seed(42)

# Prepare the data: two noisy Gaussian blobs, always the same
rng = np.random.default_rng(0)
num_samples, num_features = 320, 8
y = rng.integers(0, 2, size=num_samples)
x = (rng.normal(size=(num_samples, num_features)) + (y[:, None] * 2 - 1) * 0.6).astype("float32")
x_train, y_train = x[:256], y[:256]
x_test, y_test = x[256:], y[256:]

# Build the model
model = keras.Sequential(
    [
        keras.Input(shape=(num_features,)),
        layers.Dense(32, activation="relu"),
        layers.Dropout(0.3),
        layers.Dense(2, activation="softmax"),
    ]
)
model.summary()

# Train the model
model.compile(loss="sparse_categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs, validation_split=0.2, verbose=2)

# Evaluate the trained model
score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
