"""PyTorch Lightning adapter: ``DeviateCallback`` captures every logged metric of a run.

Example:
    >>> import lightning as L
    >>> from deviate_cb.lightning import DeviateCallback
    >>> trainer = L.Trainer(max_epochs=1, callbacks=[DeviateCallback()], logger=False)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from typing import Any, Optional, Union

import lightning.pytorch as pl
import torch
from typing_extensions import override

from deviate_cb.audit.recording.fit_audit import FitAudit
from deviate_cb.audit.recording.settings import audit_steps
from deviate_cb.capture.guard import guarded, record_or_raise
from deviate_cb.capture.hot_path import StepHooks
from deviate_cb.capture.lightning_tap import (
    UNUSED_BATCH_HOOKS,
    LightningMetricTap,
    loop_results,
    set_aside,
    tensors_to_floats,
    training_results,
)
from deviate_cb.capture.resume_state import RESUME_FROM_ENV, ResumePoint, resume_plan
from deviate_cb.capture.run_timings import RunTimings
from deviate_cb.capture.session import RunSession
from deviate_cb.capture.stability.collector import FINAL_SNAPSHOT, epoch_snapshot, write_weight_record
from deviate_cb.capture.stability.extract import weight_arrays
from deviate_cb.capture.stability.settings import Predictions, Weights, parse_predictions, parse_weights
from deviate_cb.capture.step_timer import cuda_events
from deviate_cb.capture.torch_predictions import TorchPredictions, check_data, check_setup
from deviate_cb.capture.tracker_tags import flush_pending_tags, live_tags, tag_lightning_loggers
from deviate_cb.capture.trainer_facts import num_workers, planned_steps, trainer_facts
from deviate_cb.context import Deterministic
from deviate_cb.profiling.window import ProfileWindow
from deviate_cb.store.manifest import CaptureRecord

__all__ = ["DeviateCallback", "Predictions", "ProfileWindow", "Weights"]


class DeviateCallback(pl.Callback):
    """Capture every metric the module logs with ``self.log``, with seeds, determinism and a fingerprint.

    Records step- and epoch-level train metrics, validation and test metrics (the sanity check is skipped)
    with global step, epoch, stage and wall time into ``metrics.parquet``. Values on a GPU stay on their device
    until a flush (no per-step ``.item()``, no device sync); on the CPU each becomes a float within 32 steps. They
    are written at epoch ends (when 10 s passed since the last write:
    shorter epochs share one; ``DEVIATE_FLUSH_INTERVAL_S=0`` writes at every epoch end), on exception, at
    checkpoints and at teardown, so an exception loses nothing and a process killed outright at most its current
    epoch or the last 10 s. NaN and Inf are kept and flagged. Only global rank zero writes.

    Under ``deviate-replicate`` the replica's run directory, seed and determinism are used (arguments that
    disagree are ignored with a warning). Standalone, the run goes to
    ``<out_dir>/experiment=<experiment>/variant=standalone/replica=<k>/``, ``k`` the next free index.

    Args:
        out_dir: Root of the run store when standalone. Default: ``deviate_runs``.
        experiment: Experiment name when standalone. Default: the script's name (``train`` for ``train.py``;
            ``default`` with no script: interactive, ``python -c``, notebooks).
        seed: Seed for ``random``, NumPy, torch and DataLoader workers, applied when the callback is
            created: create it before the model so that weight initialisation is seeded. ``None``: not seeded;
            standalone, ``run.json`` records the seed set before the fit (``L.seed_everything(42)``,
            ``torch.manual_seed(3)``) where it can be read back, and ``seed_source`` says where it was read.
        deterministic: ``True`` turns deterministic algorithms and cuDNN determinism on (again at
            ``setup``, after the Trainer applied its own flags), ``"warn"`` does so with warnings only, ``False``
            or ``None`` leaves the framework's settings alone. What is in effect is verified and recorded.
        metrics: Metric names or ``fnmatch`` patterns to keep, e.g. ``["val_*", "train_loss_epoch"]``.
            Default: every metric.
        predictions: Record per-sample predictions to ``predictions.parquet`` (for prediction churn,
            per-class and per-group variance). ``True``: the outputs that ``test_step``/``predict_step``
            return during ``trainer.test``/``trainer.predict`` (logits, probabilities or classes; a dict under
            ``"preds"``, ``"logits"``, ...), with ``batch[1]`` as label. ``Predictions(data=loader,
            every_n_epochs=k, groups=...)``: the callback predicts on ``loader`` itself at the end of ``fit``
            and every k epochs (eval mode, ``torch.inference_mode``, modes restored). See
            :class:`deviate_cb.capture.stability.settings.Predictions`. Default: off.
        weights: Record the final weights at the end of ``fit``: a Johnson-Lindenstrauss sketch
            (``weights_sketch.npz``) and with ``Weights(full=True)`` the full weights (``weights.npz``). Every
            floating-point entry of ``pl_module.state_dict()`` (parameters and buffers) in ``state_dict`` order
            (module registration order), as float64. ``True`` means ``Weights()``. Default: off.
        profile: Profile a short window of training steps with ``torch.profiler`` (CPU, and CUDA when the
            model is on a GPU) and record per-op times in ``timings.parquet``: ``True`` (5 plain steps, 1 warm-up,
            3 recorded), a dict of ``wait``/``warmup``/``active``/``repeat`` or a
            :class:`~deviate_cb.profiling.window.ProfileWindow`. Every run records each training batch's wall time in
            ``timings.parquet`` anyway (host time from the previous batch's end to its end, the batch's fetch
            included; an epoch's first batch and the first after validation from its start; on CUDA the GPU time
            between the CUDA events recorded on the stream where those clock readings are taken, one a batch,
            read at the flush: no device synchronisation per step; steps in a profiling window are
            flagged and left out of step statistics). Default: off.
        audit: Record a bit-exact digest of every tensor of the first ``audit`` training steps (``True``: 20) to
            ``audit.parquet``: the input batch, every module's forward output, every parameter's gradient (in the
            order backward produces them), the loss, and every parameter after the optimizer step. Digests are
            computed on the device and moved to the host once per step; the hooks are removed after the last
            audited step. ``deviate audit`` sets it for every replica and compares them. Under distributed
            training (DDP) every rank records its own steps, rank ``k`` > 0 to ``audit.rank<k>.parquet`` in the run
            directory rank zero opened (broadcast at ``on_train_start``). Default: off.

    Only global rank zero records predictions and weights. Strategies that shard parameters (FSDP, DeepSpeed
    stage 3) are not supported for ``weights`` (refused at ``setup``); under multi-device
    ``trainer.test``/``predict``, use ``Predictions(data=...)`` (rank zero predicts on the whole set) instead of
    the loop's outputs.

    What can be checked is checked when the callback is created or at ``setup``, before any training step
    (e.g. ``Predictions(data=...)`` on a module with neither ``forward`` nor ``predict_step``). Once the run has
    started, the callback never raises into training: an error of a recording step (a write, a snapshot, a
    bug) becomes a warning and an entry of ``problems`` in ``run.json`` (:mod:`deviate_cb.capture.guard`), and
    ``fit`` goes on.

    Example:
        >>> cb = DeviateCallback("runs", experiment="mlp", seed=0, deterministic=True)  # doctest: +SKIP
        >>> trainer = L.Trainer(max_epochs=5, callbacks=[cb])  # doctest: +SKIP
        >>> stability = DeviateCallback(predictions=Predictions(data=val_loader, every_n_epochs=5),
        ...                             weights=True)  # doctest: +SKIP
    """

    def __init__(
        self,
        out_dir: Union[str, os.PathLike[str], None] = None,
        *,
        experiment: Optional[str] = None,
        seed: Optional[int] = None,
        deterministic: Optional[Deterministic] = None,
        metrics: Optional[Sequence[str]] = None,
        predictions: Union[bool, Predictions, None] = None,
        weights: Union[bool, Weights, None] = None,
        profile: Union[bool, dict, ProfileWindow, None] = None,
        audit: Union[bool, int, None] = None,
    ) -> None:
        super().__init__()
        self._audit_steps = audit_steps(audit)
        plan = resume_plan()  # deviate audit --resume-at: this replica's part (deviate_cb.capture.resume_state)
        self._resume = ResumePoint(plan, os.environ.get(RESUME_FROM_ENV, "")) if plan is not None else None
        self._profile = ProfileWindow.coerce(profile)
        self._predictions = parse_predictions(predictions)
        self._weights = parse_weights(weights)
        if self._predictions is not None and self._predictions.data is not None:
            check_data(self._predictions)
        self._session = RunSession(
            out_dir,
            experiment=experiment,
            seed=seed,
            deterministic=deterministic,
            metrics=metrics,
            framework="lightning",
            to_floats=tensors_to_floats,
        )
        self._session.apply_requested()
        self._audit = FitAudit(self._audit_steps, self._session)
        self._tap = LightningMetricTap()
        self._train_epoch: Optional[tuple[int, int]] = None  # (epoch, step) awaiting late epoch values
        self._train_epoch_keys: set[str] = set()
        self._records = TorchPredictions(self._predictions, self._session) if self._predictions is not None else None
        self._steps = StepHooks(self, DeviateCallback, self._session, self._tap)  # hot or slower path, per epoch
        # a per-batch hook with nothing to do is set to None on the instance: Lightning's dispatch skips it
        set_aside(self, DeviateCallback, UNUSED_BATCH_HOOKS + (() if self._audit_steps else ("on_before_backward",)))

    @property
    def run_dir(self) -> Optional[os.PathLike[str]]:
        """The run directory once the run has started (``None`` before, and on non-zero ranks)."""
        return self._session.run.path if self._session.run is not None else None

    # -- lifecycle -----------------------------------------------------------------------------------------
    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._session.enabled = trainer.is_global_zero
        self._audit.attach(trainer, pl_module, stage)
        if stage == "fit" and self._session.timings is None:
            events = cuda_events(trainer.strategy.root_device)  # CUDA events when the model is on a GPU: no sync
            self._session.timings = RunTimings(self._profile, framework="torch", events=events)
        # The Trainer applied its own `deterministic` flag in its constructor; a requested switch wins.
        self._session.apply_requested(seed=False)
        check_setup(trainer, pl_module, stage, self._predictions, self._weights)

    # Every recording step of a hook runs under `guarded`: once the run is open, its errors become problems of
    # the run (run.json `problems`, one warning per kind) and never reach the training loop.
    def _start(self, trainer: pl.Trainer, hook: str) -> None:
        if trainer.is_global_zero:
            with guarded(self._session, f"{hook}: run start"):  # the first opening still raises: nothing ran yet
                self._session.open()

    def _fingerprint(self, trainer: pl.Trainer, dataloaders: Any, hook: str) -> None:
        if trainer.is_global_zero:  # the DataLoaders exist only once the stage starts
            with guarded(self._session, f"{hook}: fingerprint"):
                self._session.write_fingerprint(
                    dataloader_workers=num_workers(dataloaders), extra={"lightning": trainer_facts(trainer)}
                )

    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:  # `fit: started`: a run that exits before on_fit_end is incomplete
            with guarded(self._session, "on_fit_start: fit record"):
                self._session.begin_fit()  # before open: the run's start writes it, one manifest write for both
        self._start(trainer, "on_fit_start")
        if trainer.is_global_zero:
            with guarded(self._session, "on_fit_start: tracker tags"):  # the user's loggers learn the replica
                tags = live_tags(self._session, lightning_seed=os.environ.get("PL_GLOBAL_SEED"))
                tag_lightning_loggers(trainer.loggers, tags, self._session)

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._fingerprint(trainer, trainer.train_dataloader, "on_train_start")
        self._audit.share_run_dir(trainer)
        if trainer.is_global_zero:
            with guarded(self._session, "on_train_start: tracker tags"):  # where the user's hparams were not logged
                flush_pending_tags(trainer.loggers)
            self._session.fit_planned = planned_steps(trainer)  # kept in memory: written if the fit stops early

    @override
    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:  # the fit ended as Lightning ends it (max_epochs, max_steps, early stopping)
            with guarded(self._session, "on_fit_end: fit record"):  # written by teardown's close, which follows
                self._session.end_fit(steps_done=trainer.global_step, write=False)

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._steps.pause()  # validation within a fit is no part of the training step before or after it
        if not trainer.sanity_checking and trainer.state.fn != "fit":
            self._start(trainer, "on_validation_start")
            self._fingerprint(trainer, trainer.val_dataloaders, "on_validation_start")

    @override
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start(trainer, "on_test_start")
        self._fingerprint(trainer, trainer.test_dataloaders, "on_test_start")
        if self._records is not None:
            with guarded(self._session, "on_test_start: predictions"):
                self._records.start_stage(trainer, "test", trainer.test_dataloaders)

    @override
    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._records is not None and self._records.config.records_stage("predict"):
            self._start(trainer, "on_predict_start")
            self._fingerprint(trainer, trainer.predict_dataloaders, "on_predict_start")
            with guarded(self._session, "on_predict_start: predictions"):
                self._records.start_stage(trainer, "predict", trainer.predict_dataloaders)

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if self._steps.end_processed_step() and self._steps.hot is not None:  # raised by an on_train_batch_end:
            self._steps.hot.steps.started = None  # that step ran and ended; no step was in progress
        self._steps.disarm(pause=False)  # the step in progress is kept, timed up to the exception
        self._audit.end("on_exception", exception)
        if trainer.is_global_zero:
            with guarded(self._session, "on_exception: end of run"):
                self._session.close(error=exception, hook="on_exception", steps_done=trainer.global_step)

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._steps.disarm()
        self._audit.end("teardown", trainer=trainer)
        if trainer.is_global_zero:
            with guarded(self._session, "teardown: metrics filter check"):
                _warn(self._session.recorder.nothing_kept())
            with guarded(self._session, "teardown: end of run"):
                self._session.close(hook="teardown")

    # -- capture -------------------------------------------------------------------------------------------
    def _record(self, trainer: pl.Trainer, stage: str, scope: str, items: list[tuple[str, Any]]) -> None:
        if items and self._session.enabled:
            self._session.recorder.update_many(
                step=trainer.global_step,
                epoch=trainer.current_epoch,
                stage=stage,
                scope=scope,
                items=items,
                wall_time=time.time(),
            )

    # The per-step hooks are the hot path (deviate_cb.capture.hot_path; docs/architecture.md, step 9): a step's
    # start sets on_train_batch_start aside after a chain's first step, and its end is where Lightning counts the
    # batch complete. A profiling window, an audit or a resume point take the slower path below them.
    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        hot = self._steps.hot
        if hot is not None:
            steps = hot.steps
            if steps.started is None:  # the first step of a chain: it starts now
                steps.step = hot.batches.ready - 1  # `total_batch_idx`: every batch, also under gradient accumulation
                steps.started = steps.mark()  # perf_counter, or on CUDA an event recorded on the stream
            if hot.one_shot:
                self.on_train_batch_start = None  # type: ignore[assignment,method-assign]
            return
        session = self._session
        timings = session.timings
        self._steps.slow_step_open = True  # its values are read when Lightning counts the batch complete (if hooked)
        if timings is not None and session.enabled:
            try:  # the batch index counts every batch, also under gradient accumulation
                timings.step_started("train", trainer.current_epoch, trainer.fit_loop.epoch_loop.total_batch_idx)
            except Exception as error:
                record_or_raise(session, "on_train_batch_start: step timing", error)
        self._audit.begin_step(trainer.fit_loop.epoch_loop.total_batch_idx, batch)
        if self._resume is not None:
            self._resume_step(trainer, start=True)

    @override
    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor) -> None:
        self._audit.record_loss(loss)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        hot = self._steps.hot
        if hot is not None:  # called only where Lightning's count of completed batches is not hooked (_arm_hot_path)
            hot.end_step()
            return
        session = self._session
        if session.timings is not None:
            try:
                session.timings.step_ended()
            except Exception as error:
                record_or_raise(session, "on_train_batch_end: step timing", error)
        self._audit.end_step(trainer)
        if session.enabled and self._steps.completion is None:  # else read where Lightning counts the batch complete
            self._record_step_values(trainer)
        if self._resume is not None:
            self._resume_step(trainer, start=False)

    def _resume_step(self, trainer: pl.Trainer, *, start: bool) -> None:
        """``--resume-at``: the states around step K into ``run.json`` (``resume``); the checkpoint; the stop."""
        point, step = self._resume, trainer.fit_loop.epoch_loop.total_batch_idx
        if point is None:
            return
        hook = "on_train_batch_start" if start else "on_train_batch_end"
        with guarded(self._session, f"{hook}: resume point"):
            changed = point.batch_start(trainer, step) if start else point.batch_end(trainer, step, self.run_dir)
            if changed and self._session.enabled and self._session.run is not None:
                self._session.run.record(CaptureRecord(resume=point.record))

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._take_late_train_epoch_values(trainer, "on_train_epoch_start")
        with guarded(self._session, "on_train_epoch_start: step timing"):
            slower = self._audit.audit is not None or self._resume is not None
            self._steps.arm(trainer, slower=slower, read_slow_step=lambda: self._record_step_values(trainer))

    def _record_step_values(self, trainer: pl.Trainer) -> None:
        """The slower path's read of a training step's values (per-step: ``try``, an error a problem of the run)."""
        try:
            self._record(trainer, "train", "step", self._tap.step_values("train", training_results(trainer)))
        except Exception as error:
            record_or_raise(self._session, "on_train_batch_end: metrics", error)

    @override
    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        hook = "on_train_epoch_end"
        self._steps.pause()
        with guarded(self._session, f"{hook}: metrics"):
            keys: set[str] = set()
            items = self._tap.epoch_values("train", loop_results(trainer), keys=keys)  # every rank: may all-reduce
            self._record(trainer, "train", "epoch", items)
            self._train_epoch, self._train_epoch_keys = (trainer.current_epoch, trainer.global_step), keys
        self._session.flush(hook=hook, when_due=True)  # short epochs share a write: see RunSession.flush
        if self._should_predict_after_epoch(trainer.current_epoch) and self._records is not None:
            with guarded(self._session, f"{hook}: predictions snapshot"):
                self._records.predict_on_data(trainer, pl_module, epoch_snapshot(trainer.current_epoch))

    def _should_predict_after_epoch(self, epoch: int) -> bool:
        """``Predictions(data=..., every_n_epochs=k)``: this epoch is one of every k."""
        config = self._predictions
        return config is not None and config.data is not None and config.due(epoch)

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        hook = "on_train_end"
        self._steps.disarm()
        self._take_late_train_epoch_values(trainer, hook)
        if self._records is not None and self._records.config.final_from_data:
            with guarded(self._session, f"{hook}: predictions snapshot"):
                self._records.predict_on_data(trainer, pl_module, FINAL_SNAPSHOT)
        weights = self._weights
        if weights is not None and self._session.enabled and self._session.run is not None:
            with guarded(self._session, f"{hook}: weights record"):
                named = ((name, t) for name, t in pl_module.state_dict().items() if torch.is_floating_point(t))
                write_weight_record(self._session.run.path, weight_arrays(named), weights)

    def _take_late_train_epoch_values(self, trainer: pl.Trainer, hook: str) -> None:
        """Epoch values the module logged in its own ``on_train_epoch_end``, after this callback's hook."""
        if self._train_epoch is None:
            return
        epoch, step = self._train_epoch
        self._train_epoch = None
        with guarded(self._session, f"{hook}: metrics"):
            items = self._tap.late_epoch_values(
                training_results(trainer), self._train_epoch_keys, trainer.callback_metrics
            )
            if items and self._session.enabled:
                self._session.recorder.update_many(
                    step=step, epoch=epoch, stage="train", scope="epoch", items=items, wall_time=time.time()
                )
                self._session.flush(hook=hook, when_due=True)

    @override
    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._session.enabled and not trainer.sanity_checking:
            with guarded(self._session, "on_validation_batch_end: metrics"):
                self._record(trainer, "val", "step", self._tap.step_values("val", loop_results(trainer)))

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        with guarded(self._session, "on_validation_end: metrics"):
            self._record(trainer, "val", "epoch", self._tap.epoch_values("val", loop_results(trainer)))
        if trainer.state.fn != "fit":
            self._session.flush(hook="on_validation_end")

    @override
    def on_test_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._session.enabled:
            with guarded(self._session, "on_test_batch_end: metrics"):
                self._record(trainer, "test", "step", self._tap.step_values("test", loop_results(trainer)))
        if self._records is not None:
            self._records.add_stage_outputs(outputs, batch, dataloader_idx, "on_test_batch_end")

    @override
    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        with guarded(self._session, "on_test_end: metrics"):
            self._record(trainer, "test", "epoch", self._tap.epoch_values("test", loop_results(trainer)))
        self._session.flush(hook="on_test_end")
        if self._records is not None:
            with guarded(self._session, "on_test_end: predictions snapshot"):
                self._records.finish_stage(trainer)

    @override
    def on_predict_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self._records is not None:
            self._records.add_stage_outputs(outputs, batch, dataloader_idx, "on_predict_batch_end")

    @override
    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._records is not None:
            with guarded(self._session, "on_predict_end: predictions snapshot"):
                self._records.finish_stage(trainer)

    # -- checkpointing -------------------------------------------------------------------------------------
    @override
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        self._steps.end_processed_step()  # saved in an on_train_batch_end (ModelCheckpoint's): that step is in it
        if self._steps.hot is not None:  # a checkpoint within an epoch: the steps so far into the buffer, then written
            self._steps.hot.take()
        self._session.flush(hook="state_dict")  # a checkpoint's rows are on disk before it records how many
        with guarded(self._session, "state_dict: checkpoint state"):  # a checkpoint is saved without it
            state = self._session.state_dict()
        if self._records is not None:
            state["prediction_snapshots"] = list(self._records.snapshots)
        return state

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        snapshots = state.pop("prediction_snapshots", None)
        if self._records is not None and snapshots is not None:
            self._records.snapshots = list(snapshots)
        self._session.load_state_dict(state)


def _warn(text: str) -> None:
    if text:
        warnings.warn(text, stacklevel=3)
