"""What DeviateCallback costs per training step, measured side by side in one process.

A tiny MLP (1 thread, batch 32) is trained repeatedly under each configuration, interleaved round by
round so that drift in machine speed hits all of them alike. A step's time is the time between two
consecutive ``on_train_batch_start`` calls inside an epoch (so it includes every callback's batch hooks but
not the epoch-end work). Printed: the median step time per configuration and its ratio to plain training.

Peers: Lightning's ``CSVLogger(log_every_n_steps=1)``, and a naive callback that copies
``trainer.callback_metrics`` with ``.item()`` every step (on a GPU each ``.item()`` is a device sync).
Goal (issue 2): DeviateCallback at most 1.02x, with every step's metrics kept.

    python benchmarks/callback_overhead.py [--rounds 30] [--epochs 2] [--steps 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
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
    """Collects the time between consecutive batch starts within an epoch."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._last: float | None = None

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, idx: int) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)
        self._last = now


class NaiveItemCallback(L.Callback):
    """What a hand-written capture typically does: copy callback_metrics with .item() every step."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self.rows.append({k: v.item() for k, v in trainer.callback_metrics.items()})


def run_once(extra: Callable[[Path], dict[str, Any]], loader: DataLoader, epochs: int, tmp: Path) -> list[float]:
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
    return timer.times


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
    args = parser.parse_args()

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    for name in ("lightning.pytorch", "lightning.fabric"):
        __import__("logging").getLogger(name).setLevel("ERROR")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(32 * args.steps, 32, generator=gen)
    y = torch.randint(0, 4, (32 * args.steps,), generator=gen)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)

    # Per round, each configuration's median step time divided by plain training's in the same round:
    # pairing within a round cancels the drift of a shared machine; the median over rounds is reported.
    ratios: dict[str, list[float]] = {name: [] for name in CONFIGS}
    medians: dict[str, list[float]] = {name: [] for name in CONFIGS}
    order = list(CONFIGS)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        run_once(CONFIGS["plain"], loader, 1, Path(tmp))  # warm-up
        for _ in range(args.rounds):
            rng.shuffle(order)
            round_medians = {
                name: statistics.median(run_once(CONFIGS[name], loader, args.epochs, Path(tmp))) for name in order
            }
            for name, median in round_medians.items():
                medians[name].append(median)
                ratios[name].append(median / round_medians["plain"])
        runs = sorted(Path(tmp, "runs").rglob("metrics.parquet"))
        kept = sum(pq.read_metadata(path).num_rows for path in runs)

    print(f"tiny MLP, batch 32, 1 thread; {args.rounds} interleaved rounds x {args.epochs} epochs x {args.steps} steps")
    print(f"{'configuration':<26}{'median step (us)':>18}{'ratio to plain':>16}{'ratio IQR':>20}")
    for name in CONFIGS:
        q1, _, q3 = statistics.quantiles(ratios[name], n=4)
        print(
            f"{name:<26}{statistics.median(medians[name]) * 1e6:>18.1f}{statistics.median(ratios[name]):>15.3f}x"
            f"{q1:>12.3f}-{q3:.3f}"
        )
    expected = args.rounds * args.epochs * (2 * args.steps + 2)
    print(
        f"DeviateCallback per-step overhead: {statistics.median(ratios['DeviateCallback']):.3f}x (goal <= 1.02x); "
        f"rows kept: {kept} of {expected} logged values"
    )


if __name__ == "__main__":
    main()
