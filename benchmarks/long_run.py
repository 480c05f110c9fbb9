"""A long run with every step logged: does the callback's cost stay flat from the first epoch to the last?

The run store used to rewrite ``metrics.parquet`` and ``timings.parquet`` whole at each epoch-end flush, so a
flush cost time in proportion to everything recorded before it: quadratic in the length of the run. Now each
flush appends one part with its own rows only and the run compacts the parts once at its end
(:mod:`deviate_cb.store.parts`). This script trains the tiny MLP of ``callback_overhead.py`` (1 thread, batch 32,
two metrics logged on every step) for ``--steps`` steps in ``--epochs`` epochs, without and with
``DeviateCallback`` (step times recorded too), alternating whole fits round by round, and prints:

- the whole fit's time with the callback over without: CPU time of the training thread (what the callback adds
  to the work of training; a shared machine's descheduling does not count) and wall time;
- the epoch-end flush (``RunSession.flush``) time at the first epoch, the last epoch and the slowest, and the
  ratio last/first (constant-cost writes: the last within 2x of the first);
- the end-of-run compaction (``RunSession.close``), once per run, and every logged value checked to be in
  ``metrics.parquet``.

Goal (issue 14): the whole run at most 1.05x, and the last epoch's flush within 2x of the first.

    python benchmarks/long_run.py [--steps 100000] [--epochs 100] [--rounds 1]

Measured on the 2-core development machine (2026-11-23, torch 2.13 CPU, Lightning 2.6.6):

- store only, 5,000 steps per epoch over 60 epochs: flush 61.6 ms at epoch 1, 23.6 ms at epoch 31, 28.3 ms at
  epoch 60 (0.46x), 2.1 s for all 60 flushes, 1.05 s to compact at the end. Before parts (commit 68ed3c1, same
  script, same idle machine): 34 ms, 694 ms and 1,359 ms (40x), 46 s for all flushes, 0.1 s at the end.
- 100,000 steps in 100 epochs, 1 round: with the callback 0.984x CPU and 0.984x wall (one round: the figure is
  within the noise of about 2% around 1.0); epoch-end flush 44.1 ms at the first epoch and 19.2 ms at the last
  (0.44x), median 20.9 ms, slowest 203 ms (once); end-of-run compaction 0.52 s; 200,200 metric rows and 100,000
  timing rows in the files. Before parts (68ed3c1, same script): 1.150x CPU and 1.156x wall, flush 27.2 ms at the
  first epoch and 476 ms at the last (17.5x), median 260 ms, slowest 734 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from callback_overhead import MLP

from deviate_cb.capture.run_timings import RunTimings
from deviate_cb.capture.session import RunSession
from deviate_cb.lightning import DeviateCallback


class FitClock(L.Callback):
    """Thread CPU time and wall time from the first training batch to the end of training."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0
        self._start: tuple[float, float] | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = (time.thread_time(), time.perf_counter())

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        assert self._start is not None
        self.cpu = time.thread_time() - self._start[0]
        self.wall = time.perf_counter() - self._start[1]


def timed(method: Any, record: list[tuple[str, float]]) -> Any:
    """``method`` wrapped so that each call's wall time is appended to ``record`` with its ``hook``."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            record.append((kwargs.get("hook", "?"), time.perf_counter() - start))

    return wrapper


def fit(loader: DataLoader, epochs: int, out: Path | None) -> dict[str, Any]:
    clock = FitClock()
    callbacks: list[L.Callback] = [clock]
    calls: list[tuple[str, float]] = []
    deviate = None
    if out is not None:
        deviate = DeviateCallback(out, experiment="long")
        callbacks.insert(0, deviate)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    if deviate is not None:
        original_setup = deviate.setup

        def setup(*args: Any, **kwargs: Any) -> None:  # the session exists once setup ran
            original_setup(*args, **kwargs)
            session = deviate._session
            session.flush_interval_s = 0.0  # every epoch end writes (by default, at most one every 10 s): timed here
            session.flush = timed(session.flush, calls)
            session.close = timed(session.close, calls)

        deviate.setup = setup  # type: ignore[method-assign]
    trainer.fit(MLP(), loader)
    result: dict[str, Any] = {"cpu": clock.cpu, "wall": clock.wall}
    if deviate is not None:
        epoch_flushes = [t for hook, t in calls if hook == "on_train_epoch_end"]
        result.update(flushes=epoch_flushes, close=sum(t for hook, t in calls if hook in ("teardown", "close")))
        run_dir = deviate._session.run.path
        result["rows"] = pq.read_metadata(run_dir / "metrics.parquet").num_rows
        result["step_rows"] = pq.read_table(run_dir / "timings.parquet", columns=["kind"]).num_rows
    return result


def store_flushes(out: Path, steps_per_epoch: int, epochs: int) -> tuple[list[float], float]:
    """The run store alone, as the issue measured it: ``steps_per_epoch`` steps per epoch (2 metrics and one
    step time each), one ``RunSession.flush`` per epoch; returns each flush's wall time and the close's."""
    session = RunSession(out_dir=out, experiment="store-only", seed=0)
    session.open()
    session.timings = RunTimings()
    flushes = []
    step = 0
    for epoch in range(epochs):
        for _ in range(steps_per_epoch):
            session.timings.step_started("train", epoch, step)
            session.timings.step_ended()
            session.recorder.update_many(
                step=step, epoch=epoch, stage="train", scope="step", items=[("loss", 0.5), ("acc", 0.25)], wall_time=0.0
            )
            step += 1
        start = time.perf_counter()
        session.flush()
        flushes.append(time.perf_counter() - start)
    start = time.perf_counter()
    session.close()
    return flushes, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000, help="training steps in all (default 100000)")
    parser.add_argument("--epochs", type=int, default=100, help="epochs the steps are split into (default 100)")
    parser.add_argument("--rounds", type=int, default=1, help="pairs of fits, without then with (default 1)")
    parser.add_argument("--store-steps", type=int, default=5000, help="store only: steps per epoch (default 5000)")
    parser.add_argument("--store-epochs", type=int, default=60, help="store only: epochs (default 60)")
    parser.add_argument("--store-only", action="store_true", help="measure the run store only (no training)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store_flushes(Path(tmp), 10, 2)  # first-time imports
        flushes, close = store_flushes(Path(tmp), args.store_steps, args.store_epochs)
    middle = flushes[len(flushes) // 2]
    print(
        f"store only, {args.store_steps} steps per epoch: flush at epoch 1 {flushes[0] * 1e3:.1f} ms, at epoch "
        f"{len(flushes) // 2 + 1} {middle * 1e3:.1f} ms, at epoch {len(flushes)} {flushes[-1] * 1e3:.1f} ms "
        f"(last/first {flushes[-1] / flushes[0]:.2f}x), all flushes {sum(flushes):.2f} s, close {close * 1e3:.0f} ms"
    )
    if args.store_only:
        return
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    per_epoch = args.steps // args.epochs
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(per_epoch * 32, 32, generator=generator)
    y = torch.randint(0, 4, (per_epoch * 32,), generator=generator)
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    print(f"{args.epochs} epochs x {per_epoch} steps = {args.epochs * per_epoch} steps, 2 metrics logged per step")
    without: list[dict[str, Any]] = []
    with_cb: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        warm_up = DataLoader(TensorDataset(x[:320], y[:320]), batch_size=32)
        fit(warm_up, 2, None), fit(warm_up, 2, Path(tmp) / "warm-up")  # first-time imports and allocations
        for k in range(args.rounds):
            order = [False, True] if k % 2 == 0 else [True, False]
            for use in order:
                if use:
                    with_cb.append(fit(loader, args.epochs, Path(tmp) / f"round{k}"))
                else:
                    without.append(fit(loader, args.epochs, None))
                print(f"  round {k}: {'with' if use else 'without'} the callback done", flush=True)
    cpu = statistics.median(r["cpu"] for r in with_cb) / statistics.median(r["cpu"] for r in without)
    wall = statistics.median(r["wall"] for r in with_cb) / statistics.median(r["wall"] for r in without)
    print(f"fit without the callback: {statistics.median(r['cpu'] for r in without):.1f} s CPU (training thread)")
    print(f"fit with DeviateCallback: {cpu:.3f}x CPU, {wall:.3f}x wall (goal: at most 1.05x)")
    for k, r in enumerate(with_cb):
        flushes = r["flushes"]
        first, last = flushes[0], flushes[-1]
        print(
            f"round {k}: epoch-end flush first {first * 1e3:.1f} ms, last {last * 1e3:.1f} ms "
            f"(last/first {last / first:.2f}x; goal at most 2x), slowest {max(flushes) * 1e3:.1f} ms, "
            f"median {statistics.median(flushes) * 1e3:.1f} ms; end-of-run compaction {r['close'] * 1e3:.0f} ms; "
            f"{r['rows']} metric rows and {r['step_rows']} timing rows in the files"
        )
        expected = 2 * args.epochs * per_epoch
        if r["rows"] < expected:
            raise SystemExit(f"metrics.parquet holds {r['rows']} rows; at least {expected} were logged")
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, lightning {L.__version__}, {os.cpu_count()} cpus"
    )


if __name__ == "__main__":
    main()
