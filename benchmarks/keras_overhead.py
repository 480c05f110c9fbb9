"""Keras part of ``callback_overhead.py``: per-step cost of DeviateCallback on one Keras backend.

Run by ``callback_overhead.py`` once per backend, each in its own process (Keras picks its backend at
import)::

    KERAS_BACKEND=tensorflow python benchmarks/keras_overhead.py [--rounds 20]

Step-interleaved, as for Lightning: within one ``fit`` the measured callback is in Keras' callback list on
every other step, so "with" and "without" steps are microseconds apart. Step time is the process's CPU time
between consecutive batch starts (frameworks limited to one thread), which also counts the work Keras hands
to its callback threads. Peers: Keras' own CSVLogger (epoch-level only) and a naive callback that keeps the
batch logs, which is not ``async_safe`` and so makes Keras convert logs on the training thread every step.
Goal (issue 3): DeviateCallback at most 1.03x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np
from keras.callbacks import CallbackList

from deviate_cb.keras import DeviateCallback


class NaiveLogsCallback(keras.callbacks.Callback):
    """Keeps a copy of every batch's logs (not async-safe, like most hand-written callbacks)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, float]] = []

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.rows.append(dict(logs or {}))


class Alternator(keras.callbacks.Callback):
    """Puts the subject into the live callback list on every other step and times each step."""

    def __init__(self, subject: keras.callbacks.Callback) -> None:
        super().__init__()
        self.subject = subject
        self.callback_list: CallbackList | None = None
        self.times: dict[bool, list[float]] = {True: [], False: []}
        self._last: tuple[float, bool] | None = None
        self._epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._last, self._epoch = None, epoch

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        now = time.process_time()
        if self._last is not None:
            self.times[self._last[1]].append(now - self._last[0])
        present = (batch + self._epoch) % 2 == 0
        callbacks = self.callback_list.callbacks  # type: ignore[union-attr]
        if present and self.subject not in callbacks:
            callbacks.append(self.subject)
        elif not present and self.subject in callbacks:
            callbacks.remove(self.subject)
        self._last = (time.process_time(), present)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.subject not in self.callback_list.callbacks:  # type: ignore[union-attr]
            self.callback_list.callbacks.append(self.subject)  # its epoch-end work is in no step time


def make_model() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((32,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(4),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.05),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def alternating(subject: keras.callbacks.Callback, x: np.ndarray, y: np.ndarray, epochs: int) -> float:
    model = make_model()
    alternator = Alternator(subject)
    steps = len(x) // 32
    # a prebuilt CallbackList is used as is by fit: the alternator edits it while training runs
    callback_list = CallbackList([alternator, subject], add_history=True, model=model, epochs=epochs, steps=steps)
    alternator.callback_list = callback_list
    model.fit(x, y, batch_size=32, epochs=epochs, callbacks=callback_list, verbose=0, shuffle=True)
    return statistics.median(alternator.times[True]) / statistics.median(alternator.times[False])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50, help="steps per epoch")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        torch.set_num_threads(1)
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32 * args.steps, 32)).astype("float32")
    y = rng.integers(0, 4, size=32 * args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        subjects: dict[str, Callable[[], keras.callbacks.Callback]] = {
            "DeviateCallback": lambda: DeviateCallback(Path(tmp) / "runs"),
            "CSVLogger (Keras, per epoch)": lambda: keras.callbacks.CSVLogger(os.path.join(tmp, "log.csv")),
            "naive logs callback": NaiveLogsCallback,
        }
        alternating(subjects["DeviateCallback"](), x, y, 1)  # warm-up: compilation, first-call costs
        ratios: dict[str, list[float]] = {name: [] for name in subjects}
        for _ in range(args.rounds):
            for name, factory in subjects.items():
                ratios[name].append(alternating(factory(), x, y, args.epochs))
    print(
        f"Keras {keras.__version__}, backend {backend}: tiny MLP, batch 32, 1 thread; step-interleaved, "
        f"{args.rounds} runs x {args.epochs} epochs x {args.steps} steps (process CPU time per step)"
    )
    print(f"{'configuration':<30}{'ratio with/without':>20}{'(IQR over runs)':>20}")
    for name, values in ratios.items():
        q1, median, q3 = statistics.quantiles(values, n=4)
        print(f"{name:<30}{median:>19.3f}x{q1:>12.3f}-{q3:.3f}")
    print(
        f"Keras/{backend} DeviateCallback per-step overhead: {statistics.median(ratios['DeviateCallback']):.3f}x "
        "(goal <= 1.03x)"
    )


if __name__ == "__main__":
    main()
