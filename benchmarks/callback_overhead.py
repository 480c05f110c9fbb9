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

    python benchmarks/callback_overhead.py [--rounds 30] [--epochs 2] [--steps 50] [--only lightning|keras|transformers]
        [--pairs 25] [--fit-steps 125] [--parts startup,worst,steps,gpu] [--gpu-shapes launch-bound,GPU-bound]
        [--runs-dir DIR]

First it prints the callback's one-off start-up cost at fit start (run directory, manifest, determinism record,
fingerprint). Then the **worst case** of issue 30, whole fits: a 32-64-1 MLP, batch 32, ``self.log`` of two metrics
on every step, 4-epoch fits of ``--fit-steps`` steps an epoch, each paired with a bare fit in the same process (the
order within a pair alternates), CPU time of the process over the whole ``trainer.fit`` (start-up, epoch-end
flushes and the end-of-run compaction included); printed: the median over pairs of with/without, the median extra
milliseconds per fit, and the **per-step microseconds** of the callback's own per-step hooks
(``on_train_batch_start`` + ``on_train_batch_end``, ``time.perf_counter_ns`` around each call; goal <= 20 us), and
the milliseconds a fit spent inside the callback's hooks (per-step, epoch ends, start, end, wall time), next to what
an empty ``L.Callback()`` costs a fit (a third fit of each round): Lightning calls every hook of every callback, the
floor of any callback; and what a callback with one no-op per-step hook costs (a fourth fit, ``OneHookCallback``: the
other per-batch hooks None as DeviateCallback sets them), Lightning's dispatch alone. The first line is the answer:
the median ratio with its 95% order-statistic confidence interval, and "meets" or "misses" the goal only when the
whole interval says so. The hook times come from a fifth fit of each round whose callback has its hooks wrapped, left
out of the ratio: the wrappers cost time themselves, and a wrapper set on the instance keeps
``on_train_batch_start`` called every step, which the callback otherwise sets aside after the first step of a chain,
and keeps ``on_train_batch_end`` dispatched by Lightning every step, where the callback otherwise ends the step where
Lightning counts the batch complete (the same work, without the dispatch).
Goals (issue 30): <= 1.02x and <= 20 us a step. Then the **GPU-shaped** variant on CUDA (``--gpu-shapes``): a
GPU-bound MLP (4096-8192-1, batch 4096: the device is busy) and a launch-bound one (1024-4096-1, batch 512: the
host's Python is), batches made ahead on the device, throughput (samples/s over epochs 1-2, wall time, the device
drained at both ends) in rounds of four fits, each first in turn: none, DeviateCallback, an empty callback, and a
callback calling ``torch.cuda.synchronize()`` before and after every step (what the step timer did before issue
30); printed: the median ratio to no callback with its IQR over rounds, DeviateCallback's per-step hooks' host
time, and the recorded step times. Skipped, with a line saying so, where no CUDA device is present. On an H100
(2026-11-26, 8 rounds): GPU-bound 0.999x (sync 0.908x); launch-bound 0.970x [IQR 0.953-1.020] (empty callback
1.013x: that machine's fits vary by a few percent), the hooks 40-80 us a step. Then, for each installed Keras
backend among TensorFlow and torch, ``keras_overhead.py`` runs the step-interleaved measurement (goal: 1.03x) and
the same worst case for ``deviate_cb.keras.DeviateCallback`` in its own process; and ``transformers_overhead.py`` the
worst case for ``deviate_cb.transformers.DeviateCallback``: whole ``Trainer.train()`` calls of a 1-layer BERT logging
every step, bare, with the callback and with an empty ``TrainerCallback``, in rotating rounds (goal: 1.02x).
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
from hook_timing import hook_timer, per_step_us, print_fit_costs
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.capture.lightning_tap import UNUSED_BATCH_HOOKS
from deviate_cb.lightning import DeviateCallback
from deviate_cb.store.timings import read_timings


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
    parser.add_argument("--only", choices=["lightning", "keras", "transformers"], help="run one framework's part")
    parser.add_argument("--pairs", type=int, default=25, help="worst case: fit pairs (bare, with)")
    parser.add_argument("--fit-steps", type=int, default=125, help="worst case: steps per epoch of a 4-epoch fit")
    parser.add_argument("--parts", default="startup,worst,steps,gpu", help="comma-separated parts to run")
    parser.add_argument("--gpu-shapes", default="launch-bound,GPU-bound", help="the GPU part's shapes")
    parser.add_argument(
        "--runs-dir", help="worst case: where the runs are written (default: the system's temporary directory)"
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if args.only != "keras":
        if "startup" in parts:
            startup_part()
        if "worst" in parts:
            worst_case_part(args)
        if "steps" in parts:
            lightning_part(args)
        if "gpu" in parts:
            gpu_part(args)
    if args.only in (None, "keras"):
        keras_part(args)
    if args.only in (None, "transformers"):
        transformers_part(args)


class WorstMLP(L.LightningModule):
    """The worst case of issue 30: a 32-64-1 MLP, so small that the callback's share of a step is largest."""

    def __init__(self, width: int = 64, features: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, width), nn.ReLU(), nn.Linear(width, 1))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        out = self.net(x)
        loss = F.mse_loss(out, y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        self.log("train_mae", (out - y).abs().mean(), on_step=True, on_epoch=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def worst_case_part(args: argparse.Namespace) -> None:
    """Whole 4-epoch fits with and without the callback, pair by pair, process CPU time (see the module doc)."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    for name in ("lightning.pytorch", "lightning.fabric"):
        __import__("logging").getLogger(name).setLevel("ERROR")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(32 * args.fit_steps, 32, generator=gen)
    y = torch.randn(32 * args.fit_steps, 1, generator=gen)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    hooks = ("on_train_batch_start", "on_train_batch_end")

    def fit(callback: Any) -> float:
        trainer = L.Trainer(
            max_epochs=4,
            accelerator="cpu",
            devices=1,
            callbacks=[] if callback is None else [callback],
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        module = WorstMLP()
        start = time.process_time()
        trainer.fit(module, loader)
        return time.process_time() - start

    ratios, extra, bare, spent_all, empty_extra, one_hook_extra = [], [], [], [], [], []
    groups = {"epoch ends": ("on_train_epoch_end",), "start": ("on_fit_start", "on_train_start"),
              "end": ("on_fit_end", "teardown")}  # fmt: skip
    per_fit: dict[str, list[float]] = {name: [] for name in ("per-step", *groups)}
    kinds = ["bare", "with", "empty", "one-hook", "timed"]
    with tempfile.TemporaryDirectory(dir=args.runs_dir) as tmp:
        fit(None), fit(DeviateCallback(Path(tmp) / "warm", experiment="warm"))  # warm-up: imports, first calls
        for pair in range(args.pairs):
            # "with" is the callback as users run it; "timed" (left out of the ratio) has its hooks wrapped to time
            # them: a wrapper set on the instance is called every step, on_train_batch_start too
            timed = DeviateCallback(Path(tmp) / "timed", experiment="worst")
            spent = hook_timer(timed, hooks)
            other = {name: hook_timer(timed, names) for name, names in groups.items()}
            made = {"bare": None, "with": DeviateCallback(Path(tmp) / "runs", experiment="worst"),
                    "empty": L.Callback(), "one-hook": OneHookCallback(), "timed": timed}  # fmt: skip
            turn = pair % len(kinds)
            seconds = {kind: fit(made[kind]) for kind in kinds[turn:] + kinds[:turn]}
            with_s, without_s = seconds["with"], seconds["bare"]
            ratios.append(with_s / without_s)
            extra.append(with_s - without_s)
            empty_extra.append(seconds["empty"] - without_s)
            one_hook_extra.append(seconds["one-hook"] - without_s)
            bare.append(without_s)
            spent_all.append(per_step_us(spent, len(hooks)))
            per_fit["per-step"].append(sum(spent) / 1e6)
            for name, durations in other.items():
                per_fit[name].append(sum(durations) / 1e6)
        kept = sum(pq.read_metadata(path).num_rows for path in Path(tmp, "runs").rglob("metrics.parquet"))
    expected = args.pairs * 4 * (2 * args.fit_steps + 2)
    print(
        f"worst case (issue 30), Lightning: 32-64-1 MLP, batch 32, 2 metrics logged every step, 4 epochs x "
        f"{args.fit_steps} steps, {args.pairs} pairs of whole fits, process CPU time"
    )
    print_fit_costs(
        bare=bare, ratios=ratios, extra=extra, per_step=spent_all, hooks=" + ".join(hooks), kept=kept,
        expected=expected, per_fit=per_fit,
        empty_extra=empty_extra, empty="L.Callback()", steps=4 * args.fit_steps, runs_dir=args.runs_dir,
        one_hook_extra=one_hook_extra, one_hook="on_train_batch_end, Lightning's other per-batch hooks None",
    )  # fmt: skip
    print()


class OneHookCallback(L.Callback):
    """A callback whose one per-step hook does nothing, with Lightning's other training-batch hooks set to None on
    the instance as :class:`DeviateCallback` sets them (``_call_callback_hooks`` skips what is not callable):
    what Lightning's dispatch alone costs a callback that reads every step."""

    def __init__(self) -> None:
        for name in ("on_train_batch_start", "on_before_backward", *UNUSED_BATCH_HOOKS):  # DeviateCallback's own set
            setattr(self, name, None)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        pass


class _Batches:
    """An epoch's batches, made ahead (a list would be read by Lightning as a list of loaders)."""

    def __init__(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.batches, self.samples = batches, sum(len(x) for x, _ in batches)

    def __iter__(self) -> Any:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def gpu_part(args: argparse.Namespace) -> None:
    """Throughput on CUDA with and without the callback, and with a callback that synchronises every step (what
    issue 30 removed: the step timer used to call ``torch.cuda.synchronize()`` around each step), for two shapes:
    a launch-bound MLP (the host's Python is the bottleneck, so per-step host work shows) and a GPU-bound one
    (the device is busy; a per-step sync stalls the host's run-ahead)."""
    if not torch.cuda.is_available():
        print("GPU-shaped variant skipped: no CUDA device here (torch.cuda.is_available() is False).")
        print()
        return
    warnings.filterwarnings("ignore")
    for name in ("lightning.pytorch", "lightning.fabric"):
        __import__("logging").getLogger(name).setLevel("ERROR")

    class Window(L.Callback):
        """Times epochs 1-2 (epoch 0 warms up), the device drained at both ends only."""

        seconds = 0.0

        def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            if trainer.current_epoch == 1:
                torch.cuda.synchronize()
                self.start = time.perf_counter()

        def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            torch.cuda.synchronize()
            self.seconds = time.perf_counter() - self.start

    class SyncEveryStep(L.Callback):
        """The design issue 30 replaced: the host waits for the device before and after every step."""

        def on_train_batch_start(self, *args: Any) -> None:
            torch.cuda.synchronize()

        def on_train_batch_end(self, *args: Any) -> None:
            torch.cuda.synchronize()

    shapes = [("launch-bound", 1024, 4096, 512, 150), ("GPU-bound", 4096, 8192, 4096, 40)]
    for label, features, width, batch, steps in shapes:
        if label not in args.gpu_shapes.split(","):
            continue
        gen = torch.Generator("cuda").manual_seed(0)
        x = torch.randn(batch * steps, features, generator=gen, device="cuda")
        y = torch.randn(batch * steps, 1, generator=gen, device="cuda")
        # batches made ahead, on the device, as views: neither a loader nor a host-to-device copy is measured
        batches = _Batches([(x[i : i + batch], y[i : i + batch]) for i in range(0, batch * steps, batch)])

        def fit(callback: Any, loader: _Batches = batches, shape: tuple[int, ...] = (features, width)) -> float:
            window = Window()
            trainer = L.Trainer(
                max_epochs=3,
                accelerator="cuda",
                devices=1,
                callbacks=[window] + ([] if callback is None else [callback]),
                logger=False,
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
            )
            trainer.fit(WorstMLP(width=shape[1], features=shape[0]), loader)
            return 2 * loader.samples / window.seconds

        rounds = max(args.pairs // 3, 3)
        rates: dict[str, list[float]] = {"without": [], "with": [], "empty": [], "sync": []}
        hook_s: list[float] = []  # DeviateCallback's two per-step hooks, host time a step
        with tempfile.TemporaryDirectory() as tmp:
            fit(None), fit(DeviateCallback(Path(tmp) / "warm", experiment="warm"))
            for turn in range(rounds):
                callback = DeviateCallback(Path(tmp) / "runs", experiment="gpu")
                spent = hook_timer(callback, ("on_train_batch_start", "on_train_batch_end"))  # ns, two a step
                arms = {"without": None, "with": callback, "empty": L.Callback(), "sync": SyncEveryStep()}
                order = list(arms)[turn % 4 :] + list(arms)[: turn % 4]  # each arm goes first in turn
                got = {arm: fit(arms[arm]) for arm in order}
                for arm, rate in got.items():
                    rates[arm].append(rate)
                hook_s.append(sum(spent) / 1e9 / (len(spent) // 2) if spent else float("nan"))  # mean a step
            run_dir = next(Path(tmp, "runs").rglob("run.json")).parent
            walls = [r["wall_s"] for r in read_timings(run_dir).to_pylist() if r["kind"] == "step"]
        median = statistics.median

        print(
            f"GPU-shaped, {label} ({torch.cuda.get_device_name()}): {features}-{width}-1 MLP, batch {batch}, "
            f"{steps} steps x 3 epochs (the last 2 timed), {rounds} rounds of 4 fits; throughput without a "
            f"callback {median(rates['without']):,.0f} samples/s, relative to it (1.000 = no cost):"
        )
        print(f"  with DeviateCallback           {_ratio(rates['with'], rates['without'])}")
        print(f"  with an empty L.Callback()     {_ratio(rates['empty'], rates['without'])}")
        print(f"  with a sync before/after steps {_ratio(rates['sync'], rates['without'])}")
        print(
            f"  DeviateCallback's per-step hooks on the host: {median(hook_s) * 1e6:.1f} us a step (median of "
            f"rounds); the host's time a step without a callback {batch / median(rates['without']) * 1e3:.3f} ms"
        )
        print(
            f"  recorded step times (wall_s; CUDA events: GPU time between a step's start and end): median "
            f"{median(walls) * 1e3:.3f} ms over {len(walls)} steps"
        )
    print()


def _ratio(rates: list[float], baseline: list[float]) -> str:
    """Median and interquartile range of round-by-round throughput ratios."""
    values = sorted(rate / base for rate, base in zip(rates, baseline, strict=True))
    quarter = len(values) // 4
    return f"{statistics.median(values):.3f}x [IQR {values[quarter]:.3f}-{values[-1 - quarter]:.3f}]"


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
        rounds = max(args.rounds * 2 // 3, 4) if "steps" in args.parts.split(",") else 0
        command = [sys.executable, str(script), f"--rounds={rounds}", f"--epochs={args.epochs}"]
        pairs = args.pairs if "worst" in args.parts.split(",") else 0
        subprocess.run(
            [*command, f"--steps={args.steps}", f"--pairs={pairs}", f"--fit-steps={args.fit_steps}"]
            + ([f"--runs-dir={args.runs_dir}"] if args.runs_dir else []),
            env=env,
            check=True,
        )


def transformers_part(args: argparse.Namespace) -> None:
    """The Hugging Face Trainer's part, in its own process (``transformers_overhead.py``)."""
    if importlib.util.find_spec("transformers") is None:
        print("transformers part skipped: transformers is not installed (pip install 'deviate-cb[transformers]').")
        return
    print()
    pairs = max(args.pairs, 5) if "worst" in args.parts.split(",") else 5
    script = Path(__file__).with_name("transformers_overhead.py")
    subprocess.run([sys.executable, str(script), f"--pairs={pairs}"], check=True)


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
