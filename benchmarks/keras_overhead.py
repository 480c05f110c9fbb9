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

Then the worst case of issue 30, whole fits (``--pairs``, ``--fit-steps``): a 32-64-1 MLP (MSE, ``mae`` metric:
two values logged every step), batch 32, 4 epochs; each round fits once bare, once with DeviateCallback and once
with an empty ``keras.callbacks.Callback()`` (the order rotates), process CPU time over the whole ``fit`` (start-up,
epoch-end flushes and the run's end included). Printed: the ratio with/bare; the callback's per-step hooks
(``on_train_batch_begin`` + ``on_train_batch_end``, timed with ``perf_counter_ns``); the milliseconds a fit spends
inside its hooks (per-step, epoch ends, start, end), which is most of its cost; what the empty callback costs a
fit (the floor of any callback: Keras calls every hook of every callback, converts the logs for every callback
list, with or without callbacks, and on torch hands batch ends to its executor either way); and the metric rows
kept against those logged. Goals: <= 1.02x and <= 20 us a step.
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
import pyarrow.parquet as pq
from hook_timing import hook_timer, print_fit_costs
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


def worst_model() -> keras.Model:
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", metrics=["mae"])
    return model


def worst_case(args: argparse.Namespace, backend: str) -> None:
    """Whole 4-epoch fits with and without the callback, pair by pair (see the module doc)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32 * args.fit_steps, 32)).astype("float32")
    y = rng.normal(size=(32 * args.fit_steps, 1)).astype("float32")
    groups = {"per-step": ("on_train_batch_begin", "on_train_batch_end"), "epoch ends": ("on_epoch_end",),
              "start": ("on_train_begin",), "end": ("on_train_end",)}  # fmt: skip

    def fit(callback: keras.callbacks.Callback | None) -> float:
        model = worst_model()
        start = time.process_time()
        callbacks = [] if callback is None else [callback]
        model.fit(x, y, batch_size=32, epochs=4, verbose=0, shuffle=True, callbacks=callbacks)
        return time.process_time() - start

    ratios, extra, bare, per_step, empty_extra = [], [], [], [], []
    per_fit: dict[str, list[float]] = {name: [] for name in groups}
    with tempfile.TemporaryDirectory(dir=args.runs_dir) as tmp:
        fit(None), fit(DeviateCallback(Path(tmp) / "warm", experiment="warm")), fit(keras.callbacks.Callback())
        for pair in range(args.pairs):
            callback = DeviateCallback(Path(tmp) / "runs", experiment="worst")
            # one list per hook: on torch, batch ends run on Keras' executor threads, in no fixed order with the
            # batch begins
            spent = {name: hook_timer(callback, (name,)) for names in groups.values() for name in names}
            order = ["bare", "with", "empty"][pair % 3 :] + ["bare", "with", "empty"][: pair % 3]
            subjects = {"bare": None, "with": callback, "empty": keras.callbacks.Callback()}
            seconds = {kind: fit(subjects[kind]) for kind in order}
            with_s, without_s = seconds["with"], seconds["bare"]
            ratios.append(with_s / without_s)
            extra.append(with_s - without_s)
            empty_extra.append(seconds["empty"] - without_s)
            bare.append(without_s)
            begins, ends = spent["on_train_batch_begin"], spent["on_train_batch_end"]
            per_step.append(statistics.median(b + e for b, e in zip(begins, ends, strict=True)) / 1e3)
            for group, names in groups.items():
                per_fit[group].append(sum(sum(spent[name]) for name in names) / 1e6)
        kept = sum(pq.read_metadata(path).num_rows for path in Path(tmp, "runs").rglob("metrics.parquet"))
    expected = args.pairs * 4 * (2 * args.fit_steps + 2)  # loss and mae each step and at each epoch end
    print(
        f"worst case (issue 30), Keras/{backend}: 32-64-1 MLP, batch 32, loss + mae every step, 4 epochs x "
        f"{args.fit_steps} steps, {args.pairs} rounds of whole fits (bare, with, empty callback), process CPU time"
    )
    print_fit_costs(
        bare=bare, ratios=ratios, extra=extra, per_step=per_step, hooks="on_train_batch_begin + on_train_batch_end",
        kept=kept, expected=expected, per_fit=per_fit, empty_extra=empty_extra, empty="keras.callbacks.Callback()",
        steps=4 * args.fit_steps, runs_dir=args.runs_dir,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50, help="steps per epoch")
    parser.add_argument(
        "--pairs", type=int, default=25, help="worst case: rounds of fits (bare, with, empty callback); 0 skips it"
    )
    parser.add_argument("--fit-steps", type=int, default=125, help="worst case: steps per epoch of a 4-epoch fit")
    parser.add_argument("--runs-dir", help="worst case: where the runs are written (default: a temporary directory)")
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
    if args.pairs > 0:
        worst_case(args, backend)
        print()
    if args.rounds <= 0:
        return
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
