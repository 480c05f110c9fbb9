"""The Lightning callback's hot path (issue 30): hooks it does not use are skipped by Lightning, a subclass keeps
the ones it overrides, an error in a per-step hook becomes a problem of the run, not a crash, and the counters the
per-step hooks read directly give what the trainer's properties give."""

from __future__ import annotations

import json
import time
import warnings
import weakref
from pathlib import Path
from typing import Any

import lightning as L
import pyarrow.parquet as pq
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.nn import functional as F

from deviate_cb.capture.lightning_tap import LightningMetricTap
from deviate_cb.lightning import DeviateCallback
from lightning_cb.models import TinyModule, loader, trainer
from tests.helpers.stand_in_events import StampEvent

UNUSED = (
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_validation_batch_start",
    "on_test_batch_start",
    "on_predict_batch_start",
)


def test_unused_per_batch_hooks_are_none_and_lightning_skips_them(tmp_path: Path) -> None:
    cb = DeviateCallback(tmp_path / "runs")
    assert all(getattr(cb, name) is None for name in (*UNUSED, "on_before_backward"))
    assert callable(DeviateCallback(tmp_path / "runs", audit=2).on_before_backward)  # the audit records the loss
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([cb], max_epochs=2)
        fit.fit(TinyModule(), loader(), loader(shuffle=False))
        fit.test(TinyModule(), loader(shuffle=False))
    assert fit.state.finished
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet")  # type: ignore[arg-type]
    stages = set(zip(table.column("stage").to_pylist(), table.column("scope").to_pylist(), strict=True))
    assert {("train", "step"), ("train", "epoch"), ("val", "epoch"), ("test", "epoch")} <= stages


def test_a_subclass_keeps_the_hooks_it_overrides(tmp_path: Path) -> None:
    seen: list[tuple[str, int]] = []

    class Mine(DeviateCallback):
        def on_after_backward(self, trainer: Any, pl_module: Any) -> None:
            seen.append(("after_backward", trainer.global_step))

        def on_before_backward(self, trainer: Any, pl_module: Any, loss: torch.Tensor) -> None:
            super().on_before_backward(trainer, pl_module, loss)  # the parent's, though its instance slot is None
            seen.append(("before_backward", trainer.global_step))

    cb = Mine(tmp_path / "runs")
    assert cb.on_before_zero_grad is None and callable(cb.on_after_backward) and callable(cb.on_before_backward)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer([cb], max_epochs=1).fit(TinyModule(), loader())
    assert [step for kind, step in seen if kind == "after_backward"] == list(range(6))
    assert [step for kind, step in seen if kind == "before_backward"] == list(range(6))


def test_an_error_in_a_per_step_hook_is_a_problem_and_training_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = LightningMetricTap.take_step

    def failing(self: LightningMetricTap, plan: Any, caches: Any, **options: Any) -> Any:
        calls.append(1)  # once a training step: the hot path takes each step's values in order, in bulk
        if len(calls) in (3, 4):
            raise KeyError("a bug in the tap")
        return original(self, plan, caches, **options)

    monkeypatch.setattr(LightningMetricTap, "take_step", failing)
    cb = DeviateCallback(tmp_path / "runs")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = trainer([cb], max_epochs=2)
        fit.fit(TinyModule(), loader())
    assert fit.state.finished and fit.global_step == 12
    manifest = json.loads((Path(cb.run_dir) / "run.json").read_text())  # type: ignore[arg-type]
    assert manifest["status"] == "completed"
    assert [(p["where"], p["error"], p["count"]) for p in manifest["problems"]] == [
        ("on_train_batch_end: metrics", "KeyError: 'a bug in the tap'", 2)
    ]
    shown = [str(w.message) for w in caught if type(w.message).__name__ == "RecordingWarning"]
    assert len(shown) == 1 and "on_train_batch_end: metrics" in shown[0]
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet")  # type: ignore[arg-type]
    steps = [s for s, sc in zip(table.column("step").to_pylist(), table.column("scope").to_pylist(), strict=True)
             if sc == "step"]  # fmt: skip
    assert len(steps) == 12 - 2  # the two failed steps' values are missing, every other step's kept


class _Spy(L.Callback):
    """What the trainer's own properties say at each training batch end, and whether DeviateCallback's hot path
    was armed (read in the spy's hook, which Lightning calls after DeviateCallback's)."""

    def __init__(self, deviate: DeviateCallback) -> None:
        self.deviate = deviate
        self.ends: list[tuple[int, int, int]] = []  # (current_epoch, total_batch_idx, global_step)
        self.armed: list[bool] = []

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        loop = trainer.fit_loop.epoch_loop
        self.ends.append((trainer.current_epoch, loop.total_batch_idx, trainer.global_step))
        self.armed.append(self.deviate._steps.hot is not None)


class _ManualModule(TinyModule):
    """Manual optimization: an optimizer step every other batch, so global_step is half the batch count."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.manual_backward(loss)
        if batch_idx % 2 == 1:
            self.optimizers().step()  # type: ignore[union-attr]
            self.optimizers().zero_grad()  # type: ignore[union-attr]
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss


def _rows(run_dir: Any) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(epoch, step) of timings.parquet's step rows, and of metrics.parquet's train_loss_step rows."""
    timings = pq.read_table(Path(run_dir) / "timings.parquet").to_pylist()
    metrics = pq.read_table(Path(run_dir) / "metrics.parquet").to_pylist()
    steps = [(r["epoch"], r["step"]) for r in timings if r["kind"] == "step"]
    values = [(r["epoch"], r["step"]) for r in metrics if r["name"] == "train_loss_step"]
    return steps, values


@pytest.mark.parametrize("kind", ["accumulate", "manual"])
def test_the_hot_path_records_the_steps_and_epochs_the_trainer_reports(tmp_path: Path, kind: str) -> None:
    """Step times keyed by `total_batch_idx` and values by `global_step`, which differ under gradient accumulation
    and manual optimization, as Lightning's own properties give them; every step is timed and none twice."""
    cb = DeviateCallback(tmp_path / "runs")
    spy = _Spy(cb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([cb, spy], max_epochs=2, **({"accumulate_grad_batches": 2} if kind == "accumulate" else {}))
        fit.fit(TinyModule() if kind == "accumulate" else _ManualModule(), loader())
    assert fit.state.finished and all(spy.armed) and len(spy.ends) == 12
    assert fit.global_step == 6  # an optimizer step every second batch: global_step is not the batch index
    steps, values = _rows(cb.run_dir)
    assert steps == [(epoch, batch) for epoch, batch, _ in spy.ends]
    assert values == [(epoch, step) for epoch, _, step in spy.ends]
    durations = [r["wall_s"] for r in pq.read_table(Path(cb.run_dir) / "timings.parquet").to_pylist()]  # type: ignore[arg-type]
    assert all(0 < d < 60 for d in durations)


def test_a_mid_epoch_checkpoint_and_a_crash_keep_every_started_step(tmp_path: Path) -> None:
    """A checkpoint every 4 steps writes the rows so far (the hot path's steps handed over first); a crash in the
    second epoch's fourth step keeps it, timed up to the crash, and the run fails with every earlier step kept."""

    class Crashing(TinyModule):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            if self.current_epoch == 1 and batch_idx == 3:
                raise RuntimeError("failing on purpose")
            return super().training_step(batch, batch_idx)

    cb = DeviateCallback(tmp_path / "runs")
    every = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=4, save_top_k=-1)
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="failing on purpose"):
        warnings.simplefilter("ignore")
        trainer([cb, every], max_epochs=2, enable_checkpointing=True).fit(Crashing(), loader())
    assert len(list((tmp_path / "ckpt").glob("*.ckpt"))) == 2  # at steps 4 and 8
    steps, values = _rows(cb.run_dir)
    assert steps == [(0, i) for i in range(6)] + [(1, i) for i in range(6, 10)]  # the crashing step is the last
    assert values == [(0, i) for i in range(1, 7)] + [(1, i) for i in range(7, 10)]
    manifest = json.loads((Path(cb.run_dir) / "run.json").read_text())  # type: ignore[arg-type]
    assert manifest["status"] == "failed"


def test_values_taken_in_bulk_are_every_logged_value_in_order_across_new_metrics_and_a_checkpoint(
    tmp_path: Path,
) -> None:
    """The hot path reads each step's values and converts them 32 steps at a time: with 75 steps an epoch (two full
    batches of pending steps and a remainder taken at the epoch's end), a metric first logged mid-epoch (the plan
    is rebuilt with steps pending), one logged every third step, and a checkpoint at step 40 (its rows written
    first), the rows are exactly what the module logged, step after step, with wall times in step order."""
    logged: list[tuple[int, str, float]] = []

    class Sparse(TinyModule):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            step = self.global_step + 1  # recorded under the global step at the step's end: its optimizer step done
            logged.append((step, "train_loss_step", loss.item()))
            if step > 45:  # new in the first epoch's 46th step: 13 steps of the old plan pending
                late = loss.detach() * 2
                self.log("late", late, on_step=True, on_epoch=False)
                logged.append((step, "late", late.item()))
            if batch_idx % 3 == 0:
                third = torch.tensor(float(batch_idx))
                self.log("every_third", third, on_step=True, on_epoch=False)
                logged.append((step, "every_third", third.item()))
            return loss

    cb = DeviateCallback(tmp_path / "runs")
    every = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=40, save_top_k=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer([cb, every], max_epochs=2, enable_checkpointing=True).fit(Sparse(), loader(n=75, batch_size=1))
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet").to_pylist()  # type: ignore[arg-type]
    steps = [r for r in table if r["scope"] == "step"]
    recorded = [(r["step"], r["name"], r["value"]) for r in steps]
    assert [r[0] for r in recorded] == sorted(r[0] for r in recorded)  # step after step
    assert sorted(recorded) == sorted(logged)  # exact floats; within a step, in the collection's order
    assert [r["seq"] for r in table] == list(range(len(table)))
    walls = [r["wall_time"] for r in steps]
    assert walls == sorted(walls) and 0 < walls[-1] - walls[0] < 600
    assert [r["epoch"] for r in steps if r["name"] == "train_loss_step"] == [0] * 75 + [1] * 75
    assert len(list((tmp_path / "ckpt").glob("*.ckpt"))) == 3  # at steps 40, 80 and 120
    # the step-40 checkpoint counts the rows of its 40 steps, 8 of them pending when it was saved: a run resumed
    # from it keeps those rows and records what comes after
    saved = torch.load(tmp_path / "ckpt" / "epoch=0-step=40.ckpt", weights_only=False)["callbacks"]
    (state,) = [value for key, value in saved.items() if key.startswith("DeviateCallback")]
    assert state["next_seq"] == sum(1 for r in table if r["step"] <= 40)
    assert all(r["seq"] < state["next_seq"] for r in table if r["step"] <= 40)


def test_on_the_cpu_no_logged_tensor_outlives_its_step(tmp_path: Path) -> None:
    """On the CPU each step's values become floats within 32 steps and at every pause (the epoch's end among them):
    by the epoch's end every earlier step's logged tensor is gone (holding them until the flush slows the following
    steps), and the floats are the tensors'."""
    kept: list[Any] = []
    logged: list[float] = []

    class Watch(L.Callback):
        def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
            cache = trainer.fit_loop.epoch_loop._results["training_step.train_loss"]._forward_cache
            kept.append(weakref.ref(cache))
            logged.append(cache.item())

        def on_train_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
            alive = [ref() is not None for ref in kept]
            assert not any(alive[:-1]), alive  # Lightning holds the last step's value; nothing holds the others

    cb = DeviateCallback(tmp_path / "runs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer([cb, Watch()], max_epochs=1).fit(TinyModule(), loader())
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet").to_pylist()  # type: ignore[arg-type]
    assert [r["value"] for r in table if r["name"] == "train_loss_step"] == logged and len(logged) == 6


class _Clock(L.Callback):
    """perf_counter at each training batch's start and end and at each pause (a validation's start, the epoch's
    end), and whether DeviateCallback's start hook was armed."""

    def __init__(self, deviate: DeviateCallback) -> None:
        self.deviate = deviate
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.pauses: list[float] = []
        self.armed: list[bool] = []

    def on_validation_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.pauses.append(time.perf_counter())

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.pauses.append(time.perf_counter())

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        self.armed.append(callable(self.deviate.on_train_batch_start))
        self.starts.append(time.perf_counter())

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        self.ends.append(time.perf_counter())


@pytest.mark.parametrize("clock", ["host", "events"])
def test_a_step_lasts_from_the_previous_steps_end_and_a_chain_starts_at_each_epoch_and_validation(
    tmp_path: Path, clock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step times: from the end of the step before to the step's end, where Lightning counts its batch complete
    (after every callback's and the module's on_train_batch_end, so the next batch's fetch and the hooks around
    it fall within the next step); the first step of an epoch and the first after a validation run from their own
    start, the only steps for which Lightning calls DeviateCallback's on_train_batch_start. Two spies around the
    callback bound each recorded time: a step ends after the spies' on_train_batch_end and before whatever a spy
    sees next (the next batch's start, a validation, the epoch's end). With device events (as on CUDA; here events
    stamped with the host clock) the same chain records one event a step and one at each chain's start, read at the
    flushes with one wait each."""
    if clock == "events":
        monkeypatch.setattr("deviate_cb.lightning.cuda_events", lambda device: StampEvent)
        StampEvent.reset()
    cb = DeviateCallback(tmp_path / "runs")
    before, after = _Clock(cb), _Clock(cb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([before, cb, after], max_epochs=2, val_check_interval=0.5, num_sanity_val_steps=0)
        fit.fit(TinyModule(), loader(), loader(shuffle=False))
    assert fit.state.finished and len(before.starts) == 12
    chain_starts = [0, 3, 6, 9]  # each epoch's first step and the first after its mid-epoch validation
    assert [i for i, armed in enumerate(before.armed) if armed] == chain_starts
    rows = [r for r in pq.read_table(Path(cb.run_dir) / "timings.parquet").to_pylist() if r["kind"] == "step"]  # type: ignore[arg-type]
    assert [r["step"] for r in rows] == list(range(12))
    seen = sorted(before.starts + before.pauses)
    for i, row in enumerate(rows):
        ended_after = after.ends[i]
        ended_before = next(t for t in seen if t > ended_after)  # the next batch's start, or a pause
        if i in chain_starts:
            low, high = ended_after - after.starts[i], ended_before - before.starts[i]
        else:
            low, high = ended_after - before.starts[i], ended_before - after.ends[i - 1]
        assert low <= row["wall_s"] <= high, (i, low, row["wall_s"], high)
    if clock == "events":
        assert StampEvent.made == 12 + len(chain_starts)  # a chain's start, then one event a step
        assert 1 <= StampEvent.waits <= 3  # at the flushes (the epoch ends, the run's end), never a step


class _Hooked(L.Callback):
    """Whether DeviateCallback's on_train_batch_end is set aside and Lightning's batch completion hooked, at each
    training batch's start."""

    def __init__(self, deviate: DeviateCallback) -> None:
        self.deviate = deviate
        self.seen: list[tuple[bool, bool]] = []

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
        progress = trainer.fit_loop.epoch_loop.batch_progress
        self.seen.append((self.deviate.on_train_batch_end is None, "increment_completed" in vars(progress)))


class _LogsInItsBatchEnd(TinyModule):
    """Also logs ``at_step`` = the global step from its own on_train_batch_end, which Lightning calls after every
    callback's on_train_batch_end."""

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.log("at_step", float(self.global_step), on_step=True, on_epoch=False)


def test_the_step_ends_where_lightning_counts_its_batch_complete_and_every_hook_is_put_back(tmp_path: Path) -> None:
    """On the hot path Lightning dispatches no per-step hook of the callback: on_train_batch_end is None on the
    instance and the training batch progress's `increment_completed` ends the step; both are undone at the run's
    end. A value the module logs in its own on_train_batch_end is recorded with its own step, as Lightning's
    loggers get it (they read after the batch's completion too)."""
    cb = DeviateCallback(tmp_path / "runs")
    hooked = _Hooked(cb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([cb, hooked], max_epochs=2, val_check_interval=0.5, num_sanity_val_steps=0)
        fit.fit(_LogsInItsBatchEnd(), loader(), loader(shuffle=False))
    assert fit.state.finished and hooked.seen == [(True, True)] * 12
    assert "on_train_batch_end" not in vars(cb) and callable(cb.on_train_batch_end)
    assert "increment_completed" not in vars(fit.fit_loop.epoch_loop.batch_progress)
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet").to_pylist()  # type: ignore[arg-type]
    at_step = [(r["step"], r["value"]) for r in table if r["name"] == "at_step"]
    assert at_step == [(step, float(step)) for step in range(1, 13)]
    steps, values = _rows(cb.run_dir)
    assert steps == [(0, i) for i in range(6)] + [(1, i) for i in range(6, 12)]
    assert values == [(0, i) for i in range(1, 7)] + [(1, i) for i in range(7, 13)]


def test_an_on_train_batch_end_of_a_subclass_or_set_on_the_instance_is_called_every_step(tmp_path: Path) -> None:
    """Where on_train_batch_end is a subclass's override or a wrapper set on the instance (the benchmark's timer),
    Lightning calls it every step as its author expects, the batch completion is not hooked, and the steps and
    values are recorded the same."""
    calls: list[str] = []

    class Mine(DeviateCallback):
        def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
            calls.append("subclass")
            super().on_train_batch_end(trainer, pl_module, *args)

    wrapped = DeviateCallback(tmp_path / "runs")
    original = wrapped.on_train_batch_end

    def wrapper(*args: Any) -> None:
        calls.append("instance")
        original(*args)

    wrapped.on_train_batch_end = wrapper  # type: ignore[method-assign]
    for cb in (Mine(tmp_path / "runs"), wrapped):
        hooked = _Hooked(cb)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer([cb, hooked], max_epochs=2).fit(TinyModule(), loader())
        assert [seen[1] for seen in hooked.seen] == [False] * 12 and cb._steps.hot is None
        steps, values = _rows(cb.run_dir)
        assert steps == [(0, i) for i in range(6)] + [(1, i) for i in range(6, 12)]
        assert values == [(0, i) for i in range(1, 7)] + [(1, i) for i in range(7, 13)]
    assert calls == ["subclass"] * 12 + ["instance"] * 12


@pytest.mark.parametrize("path", ["hot", "profile"])
def test_an_exception_in_a_later_on_train_batch_end_keeps_that_step_and_adds_none(tmp_path: Path, path: str) -> None:
    """A callback after DeviateCallback raises in its on_train_batch_end at the fourth step: Lightning never counts
    that batch complete, yet the step ran; it is recorded (time and values) as where on_train_batch_end ended it,
    no step is open after it, and the run failed; on the slower path of a profiling window too."""

    class Raising(L.Callback):
        def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, *args: Any) -> None:
            if trainer.fit_loop.epoch_loop.total_batch_idx == 3:
                raise RuntimeError("raising on purpose")

    cb = DeviateCallback(tmp_path / "runs", profile=path == "profile")
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="raising on purpose"):
        warnings.simplefilter("ignore")
        trainer([cb, Raising()], max_epochs=2).fit(TinyModule(), loader())
    steps, values = _rows(cb.run_dir)
    assert steps == [(0, i) for i in range(4)] and values == [(0, i) for i in range(1, 5)]
    assert json.loads((Path(cb.run_dir) / "run.json").read_text())["status"] == "failed"  # type: ignore[arg-type]


def test_a_fit_resumed_from_a_checkpoint_saved_within_an_epoch_records_each_step_once(tmp_path: Path) -> None:
    """A checkpoint saved at the fourth step (ModelCheckpoint, in its on_train_batch_end: before the batch counts as
    complete) holds that step's rows; the fit dies in the fifth step; resumed from the checkpoint, Lightning counts
    the fourth batch complete before any step of the new process (a call that only counts) and goes on from the
    fifth: the run has every step's time and value once. The fourth step's time is its own (it trains for 50 ms),
    not the moment between the checkpoint and the batch's completion."""

    class SlowFourth(TinyModule):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            if self.current_epoch == 0 and batch_idx == 3:
                time.sleep(0.05)
            return super().training_step(batch, batch_idx)

    every = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=4, save_top_k=-1)
    cb = DeviateCallback(tmp_path / "runs")
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="failing on purpose"):
        warnings.simplefilter("ignore")
        trainer([cb, every], max_epochs=2, enable_checkpointing=True).fit(SlowFourth(fail_at_epoch=1), loader())
    resumed = DeviateCallback(tmp_path / "runs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([resumed, ModelCheckpoint(dirpath=tmp_path / "ckpt2")], max_epochs=2, enable_checkpointing=True)
        fit.fit(TinyModule(), loader(), ckpt_path=tmp_path / "ckpt" / "epoch=0-step=4.ckpt")
    assert fit.state.finished and Path(resumed.run_dir) == Path(cb.run_dir)
    steps, values = _rows(cb.run_dir)
    assert sorted(values) == [(0, i) for i in range(1, 7)] + [(1, i) for i in range(7, 13)]
    assert sorted(steps) == [(0, i) for i in range(6)] + [(1, i) for i in range(6, 12)]
    timings = pq.read_table(Path(cb.run_dir) / "timings.parquet").to_pylist()  # type: ignore[arg-type]
    assert next(r["wall_s"] for r in timings if r["kind"] == "step" and r["step"] == 3) >= 0.05


@pytest.mark.parametrize("path", ["hot", "profile", "audit", "not hooked"])
def test_a_value_the_module_logs_in_its_own_batch_end_is_recorded_with_its_step(
    tmp_path: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the hot path and on the slower one (a profiling window, an audit: both hooks every step) the step's
    values are read once Lightning counts the batch complete, so a value the module logs in its own
    on_train_batch_end (after every callback's) is recorded under its own step, the last of each epoch too, as
    Lightning's loggers record it. Where the completion cannot be hooked (another Lightning), on_train_batch_end
    reads them, and every value logged in training_step is still recorded with its step."""
    if path == "not hooked":
        monkeypatch.setattr("deviate_cb.capture.hot_path.hook_completion", lambda progress, completed: None)
    options: dict[str, Any] = {"profile": True} if path == "profile" else {"audit": 2} if path == "audit" else {}
    cb = DeviateCallback(tmp_path / "runs", **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([cb], max_epochs=2)
        fit.fit(_LogsInItsBatchEnd(), loader())
    assert fit.state.finished and "on_train_batch_end" not in vars(cb)
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet").to_pylist()  # type: ignore[arg-type]
    at_step = [(r["step"], r["value"]) for r in table if r["name"] == "at_step"]
    if path != "not hooked":
        assert at_step == [(step, float(step)) for step in range(1, 13)]
    else:  # read in on_train_batch_end: the value logged after it, with the next step; an epoch's last is not read
        assert at_step == [(step + 1, float(step)) for step in (*range(1, 6), *range(7, 12))]
    _, values = _rows(cb.run_dir)
    assert values == [(0, i) for i in range(1, 7)] + [(1, i) for i in range(7, 13)]


@pytest.mark.parametrize("path", ["hot", "profile"])
def test_a_checkpoint_saved_in_on_train_batch_end_counts_the_rows_of_its_step(tmp_path: Path, path: str) -> None:
    """ModelCheckpoint saves in its on_train_batch_end, before Lightning counts the batch complete: the callback's
    state in the checkpoint counts the rows of every step up to the one it was saved at, on either path."""
    every = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=4, save_top_k=-1)
    cb = DeviateCallback(tmp_path / "runs", profile=path == "profile")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer([cb, every], max_epochs=1, enable_checkpointing=True).fit(TinyModule(), loader())
    table = pq.read_table(Path(cb.run_dir) / "metrics.parquet").to_pylist()  # type: ignore[arg-type]
    saved = torch.load(tmp_path / "ckpt" / "epoch=0-step=4.ckpt", weights_only=False)["callbacks"]
    (state,) = [value for key, value in saved.items() if key.startswith("DeviateCallback")]
    assert state["next_seq"] == sum(1 for r in table if r["step"] <= 4) == 4
