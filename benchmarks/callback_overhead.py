"""What DeviateCallback costs per training step, measured side by side in one process.

A tiny MLP (1 thread, batch 32) is trained repeatedly under each configuration, interleaved round by
round so that drift in machine speed hits all of them alike. A step's time is the time between two
consecutive ``on_train_batch_start`` calls inside an epoch (so it includes every callback's batch hooks but
not the epoch-end work). Printed: the median step time per configuration and its ratio to plain training.

Peers: Lightning's ``CSVLogger(log_every_n_steps=1)``, and a naive callback that copies
``trainer.callback_metrics`` with ``.item()`` every step (on a GPU each ``.item()`` is a device sync).
Goal (issue 2): DeviateCallback at most 1.02x, with every step's metrics kept.

Two measurements. Run-interleaved: whole fits with and without, round by round, each paired with plain
training of the same round (and every logged value checked to be in metrics.parquet). Step-interleaved: within
one fit the callback (or logger) is in the Trainer on every other step, so "with" and "without" steps are
microseconds apart; on a shared machine whose speed drifts by tens of percent between runs this is the
figure that resolves a 2% effect.

    python benchmarks/callback_overhead.py [--rounds 30] [--epochs 2] [--steps 50] [--only lightning|keras]

First it prints the callback's one-off start-up cost at fit start (run directory, manifest, determinism record,
fingerprint). Then, for each installed Keras backend among TensorFlow and torch, ``keras_overhead.py`` runs the same
step-interleaved measurement for ``deviate_cb.keras.DeviateCallback`` in its own process (goal: 1.03x).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import pyarrow.parquet as pq
import torch
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.lightning import DeviateCallback


class MLP(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        self.log("train_acc", (logits.argmax(1) == y).float().mean(), on_step=True, on_epoch=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


class StepTimer(L.Callback):
    """Collects the time between consecutive batch starts within an epoch, as CPU time of the training
    thread (insensitive to the machine being shared: time spent descheduled is not counted) and wall time."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.wall: list[float] = []
        self._last: tuple[float, float] | None = None

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, idx: int) -> None:
        now = (time.thread_time(), time.perf_counter())
        if self._last is not None:
            self.times.append(now[0] - self._last[0])
            self.wall.append(now[1] - self._last[1])
        self._last = now


class NaiveItemCallback(L.Callback):
    """What a hand-written capture typically does: copy callback_metrics with .item() every step."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self.rows.append({k: v.item() for k, v in trainer.callback_metrics.items()})


class Alternator(L.Callback):
    """Puts the measured callback (or logger) into the Trainer on every other step, and times each step.

    "With" and "without" steps alternate within one run, microseconds apart, so the comparison is immune to
    the machine's speed drifting between runs. Parity flips every epoch so neither state owns the even steps.
    """

    def __init__(self, subject: Any, kind: str) -> None:
        self.subject, self.kind = subject, kind
        self.times: dict[bool, list[float]] = {True: [], False: []}
        self._last: tuple[float, bool] | None = None

    def _set(self, trainer: L.Trainer, present: bool) -> None:
        if self.kind == "logger":
            trainer.loggers = [self.subject] if present else []
        elif present and self.subject not in trainer.callbacks:
            trainer.callbacks.append(self.subject)
        elif not present and self.subject in trainer.callbacks:
            trainer.callbacks.remove(self.subject)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, idx: int) -> None:
        now = time.thread_time()
        if self._last is not None:
            self.times[self._last[1]].append(now - self._last[0])
        present = (idx + trainer.current_epoch) % 2 == 0
        self._set(trainer, present)
        self._last = (time.thread_time(), present)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._set(trainer, True)  # the subject's epoch-end work runs, but is not part of any step time


def alternating(
    subject_factory: Callable[[Path], tuple[Any, str, dict[str, Any]]], loader: DataLoader, epochs: int, tmp: Path
) -> float:
    """Median step time with the subject present over median without, in one run."""
    subject, kind, options = subject_factory(tmp)
    alternator = Alternator(subject, kind)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        callbacks=[alternator],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **({"logger": False} | options),
    )
    trainer.fit(MLP(), loader)
    return statistics.median(alternator.times[True]) / statistics.median(alternator.times[False])


SUBJECTS: dict[str, Callable[[Path], tuple[Any, str, dict[str, Any]]]] = {
    "DeviateCallback": lambda tmp: (DeviateCallback(tmp / "alt"), "callback", {}),
    "CSVLogger(every step)": lambda tmp: (CSVLogger(tmp / "alt-csv"), "logger", {"log_every_n_steps": 1}),
    "naive .item() callback": lambda tmp: (NaiveItemCallback(), "callback", {}),
}


def run_once(extra: Callable[[Path], dict[str, Any]], loader: DataLoader, epochs: int, tmp: Path) -> StepTimer:
    timer = StepTimer()
    options = extra(tmp)
    callbacks = [timer, *options.pop("callbacks", [])]
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **({"logger": False} | options),
    )
    trainer.fit(MLP(), loader)
    return timer


CONFIGS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "plain": lambda tmp: {},
    "DeviateCallback": lambda tmp: {"callbacks": [DeviateCallback(tmp / "runs")]},
    "CSVLogger(every step)": lambda tmp: {"logger": CSVLogger(tmp / "csv"), "log_every_n_steps": 1},
    "naive .item() callback": lambda tmp: {"callbacks": [NaiveItemCallback()]},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50, help="steps per epoch")
    parser.add_argument("--only", choices=["lightning", "keras"], help="run one framework's part")
    args = parser.parse_args()
    if args.only != "keras":
        startup_part()
        lightning_part(args)
    if args.only != "lightning":
        keras_part(args)


def startup_part(repeats: int = 20) -> None:
    """What the callback costs once per run, at fit start: the run directory, manifest, determinism record and
    the fingerprint (collected in-process: versions, CPU, BLAS, threads, NVML/CUDA facts when present)."""
    from deviate_cb.fingerprint.collect import collect_fingerprint
    from deviate_cb.lightning import DeviateCallback

    collect_fingerprint()  # the first call reads package metadata and imports nothing new afterwards
    fingerprint, start_up = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            t0 = time.perf_counter()
            collect_fingerprint()
            fingerprint.append(time.perf_counter() - t0)
            session = DeviateCallback(Path(tmp) / "runs", experiment="startup")._session
            t0 = time.perf_counter()
            session.open()
            session.write_fingerprint()
            start_up.append(time.perf_counter() - t0)
    print(
        f"start-up per run (median of {repeats}): collect_fingerprint {statistics.median(fingerprint) * 1e3:.2f} ms; "
        f"run directory + manifest + determinism record + fingerprint.json {statistics.median(start_up) * 1e3:.2f} ms"
    )
    print()


def keras_part(args: argparse.Namespace) -> None:
    """Each Keras backend in its own process: Keras picks its backend once, at import."""
    if importlib.util.find_spec("keras") is None:
        print("Keras part skipped: keras is not installed (pip install 'deviate-cb[keras]').")
        return
    script = Path(__file__).with_name("keras_overhead.py")
    for backend in ("tensorflow", "torch"):
        if importlib.util.find_spec(backend) is None:
            print(f"Keras/{backend} skipped: {backend} is not installed.")
            continue
        print()
        env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
        command = [sys.executable, str(script), f"--rounds={max(args.rounds * 2 // 3, 4)}", f"--epochs={args.epochs}"]
        subprocess.run([*command, f"--steps={args.steps}"], env=env, check=True)


def lightning_part(args: argparse.Namespace) -> None:

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    for name in ("lightning.pytorch", "lightning.fabric"):
        __import__("logging").getLogger(name).setLevel("ERROR")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(32 * args.steps, 32, generator=gen)
    y = torch.randint(0, 4, (32 * args.steps,), generator=gen)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)

    # Per round, each configuration's median step time divided by plain training's in the same round:
    # pairing within a round cancels slow drift; the median over rounds is reported, for the training
    # thread's CPU time (the figure that counts: it excludes time the shared machine took away) and wall time.
    ratios: dict[str, dict[str, list[float]]] = {"cpu": {n: [] for n in CONFIGS}, "wall": {n: [] for n in CONFIGS}}
    medians: dict[str, list[float]] = {name: [] for name in CONFIGS}
    order = list(CONFIGS)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        run_once(CONFIGS["plain"], loader, 1, Path(tmp))  # warm-up
        for _ in range(args.rounds):
            rng.shuffle(order)
            timers = {name: run_once(CONFIGS[name], loader, args.epochs, Path(tmp)) for name in order}
            cpu = {name: statistics.median(timer.times) for name, timer in timers.items()}
            wall = {name: statistics.median(timer.wall) for name, timer in timers.items()}
            for name in CONFIGS:
                medians[name].append(cpu[name])
                ratios["cpu"][name].append(cpu[name] / cpu["plain"])
                ratios["wall"][name].append(wall[name] / wall["plain"])
        runs = sorted(Path(tmp, "runs").rglob("metrics.parquet"))
        kept = sum(pq.read_metadata(path).num_rows for path in runs)

    print(f"tiny MLP, batch 32, 1 thread; {args.rounds} interleaved rounds x {args.epochs} epochs x {args.steps} steps")
    print(f"{'configuration':<26}{'CPU us/step':>12}{'CPU ratio':>11}{'(IQR)':>15}{'wall ratio':>12}{'(IQR)':>15}")
    for name in CONFIGS:
        cells = []
        for kind in ("cpu", "wall"):
            q1, median, q3 = statistics.quantiles(ratios[kind][name], n=4)
            cells.append(f"{median:>10.3f}x{q1:>8.3f}-{q3:.3f}")
        print(f"{name:<26}{statistics.median(medians[name]) * 1e6:>12.1f}{cells[0]}{cells[1]}")
    print()
    print("step-interleaved (the subject present on every other step of the same run; CPU time per step):")
    alt: dict[str, list[float]] = {name: [] for name in SUBJECTS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for name in SUBJECTS:
                alt[name].append(alternating(SUBJECTS[name], loader, args.epochs, Path(tmp)))
    print(f"{'configuration':<26}{'ratio with/without':>20}{'(IQR over runs)':>20}")
    for name in SUBJECTS:
        q1, median, q3 = statistics.quantiles(alt[name], n=4)
        print(f"{name:<26}{median:>19.3f}x{q1:>12.3f}-{q3:.3f}")
    print()
    expected = args.rounds * args.epochs * (2 * args.steps + 2)
    print(
        f"DeviateCallback per-step overhead, step-interleaved: {statistics.median(alt['DeviateCallback']):.3f}x "
        "(goal <= 1.02x)"
    )
    print(
        f"DeviateCallback per-step overhead: {statistics.median(ratios['cpu']['DeviateCallback']):.3f}x CPU time, "
        f"{statistics.median(ratios['wall']['DeviateCallback']):.3f}x wall time (run-interleaved); "
        f"rows kept: {kept} of {expected} logged values"
    )


if __name__ == "__main__":
    main()
