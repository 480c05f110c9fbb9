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
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import lightning.pytorch as pl
import torch
from typing_extensions import override

from deviate_cb.capture.audit.hooks import TorchAudit, named_modules, named_parameters
from deviate_cb.capture.audit.log import KINDS
from deviate_cb.capture.audit.settings import audit_steps, write_audit_record, write_rank_audit
from deviate_cb.capture.audit.stopping import record_stop, stops_after_audit
from deviate_cb.capture.guard import guarded, record_or_raise
from deviate_cb.capture.lightning_tap import LightningMetricTap, tensors_to_floats
from deviate_cb.capture.resume_state import RESUME_FROM_ENV, ResumePoint, resume_plan
from deviate_cb.capture.run_timings import HostSteps, RunTimings
from deviate_cb.capture.session import RunSession
from deviate_cb.capture.stability.collector import (
    FINAL_SNAPSHOT,
    CollectedPredictions,
    PredictionCollector,
    epoch_snapshot,
    write_prediction_snapshot,
    write_weight_record,
)
from deviate_cb.capture.stability.extract import weight_arrays
from deviate_cb.capture.stability.settings import Predictions, Weights, parse_predictions, parse_weights
from deviate_cb.capture.step_timer import cuda_events
from deviate_cb.capture.tracker_tags import live_tags, tag_lightning_loggers
from deviate_cb.context import Deterministic
from deviate_cb.errors import UsageError
from deviate_cb.profiling.window import ProfileWindow

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
        self._audit: Optional[TorchAudit] = None
        self._audited = False  # the audit ran (one per callback: a second fit is not audited again)
        plan = resume_plan()  # deviate audit --resume-at: this replica's part (deviate_cb.capture.resume_state)
        self._resume = ResumePoint(plan, os.environ.get(RESUME_FROM_ENV, "")) if plan is not None else None
        self._audit_ranks = (0, 1)  # (global rank, world size) of the audited fit
        self._audit_dir: Optional[str] = None  # where a rank other than zero writes its record (from rank zero)
        self._profile = ProfileWindow.coerce(profile)
        self._predictions = parse_predictions(predictions)
        self._weights = parse_weights(weights)
        if self._predictions is not None and self._predictions.data is not None:
            _check_data(self._predictions)
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
        self._tap = LightningMetricTap()
        self._train_epoch: Optional[tuple[int, int]] = None  # (epoch, step) awaiting late epoch values
        self._train_epoch_keys: set[str] = set()
        self._stage_collector: Optional[PredictionCollector] = None  # set while a test/predict loop is recorded
        self._last_data_snapshot: Optional[tuple[int, CollectedPredictions]] = None  # (global step, arrays)
        self._snapshots: list[str] = []
        self._hot: Optional[_HotPath] = None  # what the per-step hooks need, armed at each training epoch's start
        # (Lightning's training batch progress, the function set on it, what it calls): _hook_completion
        self._completion: Optional[tuple[Any, Any, Any]] = None
        self._slow_step_open = False  # the slower path: a step began and its values were not read yet
        # Lightning calls every per-batch hook of every callback, each under a profiler context: a few microseconds
        # a hook, as much as this callback's own per-step work. A hook it has nothing to do in is set to None on the
        # instance, which Lightning skips (`_call_callback_hooks` calls only what is callable); a subclass that
        # overrides one keeps it.
        for name in _UNUSED_BATCH_HOOKS + (() if self._audit_steps else ("on_before_backward",)):
            if getattr(type(self), name) is getattr(DeviateCallback, name):
                setattr(self, name, None)

    @property
    def run_dir(self) -> Optional[os.PathLike[str]]:
        """The run directory once the run has started (``None`` before, and on non-zero ranks)."""
        return self._session.run.path if self._session.run is not None else None

    # -- lifecycle -----------------------------------------------------------------------------------------
    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._session.enabled = trainer.is_global_zero
        if stage == "fit" and self._audit_steps and not self._audited:  # every rank records its own steps
            self._audited = True
            self._audit_ranks = (trainer.global_rank, trainer.world_size)
            self._audit = TorchAudit(self._audit_steps)
            self._audit.attach(named_modules(pl_module), named_parameters(pl_module))
        if stage == "fit" and self._session.timings is None:
            events = cuda_events(trainer.strategy.root_device)  # CUDA events when the model is on a GPU: no sync
            self._session.timings = RunTimings(self._profile, framework="torch", events=events)
        # The Trainer applied its own `deterministic` flag in its constructor; a requested switch wins.
        self._session.apply_requested(seed=False)
        config = self._predictions
        if config is not None and stage == "fit" and config.data is not None:
            sampler = getattr(config.data, "sampler", None)
            if isinstance(sampler, torch.utils.data.RandomSampler) and config.sample_ids is None:
                raise UsageError(
                    "`Predictions.data` shuffles (its sampler is a RandomSampler): the sample index is the "
                    "position in the set, so it must come in the same order in every run. Build the DataLoader "
                    "with shuffle=False, or give each sample an id with Predictions(sample_ids=...)."
                )
            if config.final_from_data or config.every_n_epochs is not None:
                _check_can_predict(pl_module, config)
        if self._weights is not None and stage == "fit" and _shards_parameters(trainer.strategy):
            raise UsageError(
                f"DeviateCallback(weights=...) is not supported with {type(trainer.strategy).__name__}: it shards "
                "the parameters, and rank zero alone cannot read them. Use a strategy that keeps whole parameters "
                "on every rank (DDP, DeepSpeed stages 1-2), or weights=None."
            )
        if config is not None and config.records_stage(stage) and trainer.world_size > 1:
            warnings.warn(
                f"DeviateCallback(predictions=...): the outputs of trainer.{stage}() are not recorded with "
                f"{trainer.world_size} processes (each sees part of the data); pass Predictions(data=...) to "
                "predict on the whole set on rank zero at the end of fit.",
                stacklevel=2,
            )

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
                    dataloader_workers=_num_workers(dataloaders), extra={"lightning": _trainer_facts(trainer)}
                )

    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:  # `fit: started`: a run that exits before on_fit_end is incomplete
            with guarded(self._session, "on_fit_start: fit record"):
                self._session.begin_fit()  # before open: the run's start writes it, one manifest write for both
        self._start(trainer, "on_fit_start")
        if trainer.is_global_zero:
            with guarded(self._session, "on_fit_start: tracker tags"):  # the user's loggers learn the replica
                tag_lightning_loggers(trainer.loggers, live_tags(self._session))

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._fingerprint(trainer, trainer.train_dataloader, "on_train_start")
        if self._audit is not None and self._audit_ranks[1] > 1:  # every rank: rank zero says where the run is
            with guarded(self._session, "on_train_start: audit run directory"):
                run = self._session.run if trainer.is_global_zero else None
                self._audit_dir = trainer.strategy.broadcast(str(run.path) if run is not None else None, src=0)
        if trainer.is_global_zero:
            self._session.fit_planned = _planned_steps(trainer)  # kept in memory: written if the fit stops early

    @override
    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:  # the fit ended as Lightning ends it (max_epochs, max_steps, early stopping)
            with guarded(self._session, "on_fit_end: fit record"):  # written by teardown's close, which follows
                self._session.end_fit(steps_done=trainer.global_step, write=False)

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._pause_steps()  # validation within a fit is no part of the training step before or after it
        if not trainer.sanity_checking and trainer.state.fn != "fit":
            self._start(trainer, "on_validation_start")
            self._fingerprint(trainer, trainer.val_dataloaders, "on_validation_start")

    @override
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start(trainer, "on_test_start")
        self._fingerprint(trainer, trainer.test_dataloaders, "on_test_start")
        with guarded(self._session, "on_test_start: predictions"):
            self._start_stage_predictions(trainer, "test", trainer.test_dataloaders)

    @override
    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._predictions is not None and self._predictions.records_stage("predict"):
            self._start(trainer, "on_predict_start")
            self._fingerprint(trainer, trainer.predict_dataloaders, "on_predict_start")
            with guarded(self._session, "on_predict_start: predictions"):
                self._start_stage_predictions(trainer, "predict", trainer.predict_dataloaders)

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if self._end_processed_step() and self._hot is not None:  # raised by an on_train_batch_end: that step ran
            self._hot.steps.started = None  # and ended; no step was in progress
        self._disarm_hot_path(pause=False)  # the step in progress is kept, timed up to the exception
        self._end_audit("on_exception", exception)
        if trainer.is_global_zero:
            with guarded(self._session, "on_exception: end of run"):
                self._session.close(error=exception, hook="on_exception", steps_done=trainer.global_step)

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._disarm_hot_path()
        self._end_audit("teardown", trainer=trainer)
        if trainer.is_global_zero:
            with guarded(self._session, "teardown: metrics filter check"):
                self._warn_if_nothing_kept()
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

    # The per-step hooks are the hot path (docs/architecture.md, step 9). Armed at each training epoch's start
    # (_arm_hot_path), a step's end (_HotPath.end_step) reads a clock and Lightning's counters and appends: no
    # property chain of the trainer, no call into the step timer, `try` instead of `guarded` (no object per step), no
    # device sync, no file. A step lasts from the end of the one before to its own end (what Keras' steps are, start
    # to start), so on_train_batch_start is needed only where a chain of steps begins (an epoch, after validation):
    # it starts the clock and sets itself to None on the instance, which Lightning then skips. Lightning's dispatch
    # of a callback hook (its profiler context, the hook's name formatted) costs more than the step's own work, so
    # the step's end is not on_train_batch_end either: where Lightning's training batch progress can be hooked, its
    # `increment_completed` (called once a batch, after every on_train_batch_end) ends the step, and
    # on_train_batch_end is None on the instance (_hook_completion). On CUDA the clock is an event recorded on the
    # stream (HostSteps.mark). A profiling window, an audit or a resume point take the slower path below them,
    # with both hooks every step.
    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        hot = self._hot
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
        self._slow_step_open = True  # its values are read when Lightning counts the batch complete (if hooked)
        if timings is not None and session.enabled:
            try:  # the batch index counts every batch, also under gradient accumulation
                timings.step_started("train", trainer.current_epoch, trainer.fit_loop.epoch_loop.total_batch_idx)
            except Exception as error:
                record_or_raise(session, "on_train_batch_start: step timing", error)
        if self._audit is not None and self._audit.attached:
            with guarded(session, "on_train_batch_start: audit"):
                self._audit.begin_step(trainer.fit_loop.epoch_loop.total_batch_idx, batch)
        if self._resume is not None:
            self._resume_step(trainer, start=True)

    @override
    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor) -> None:
        if self._audit is not None and self._audit.attached:
            with guarded(self._session, "on_before_backward: audit"):
                self._audit.record_loss(loss)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        hot = self._hot
        if hot is not None:  # called only where Lightning's count of completed batches is not hooked (_arm_hot_path)
            hot.end_step()
            return
        session = self._session
        if session.timings is not None:
            try:
                session.timings.step_ended()
            except Exception as error:
                record_or_raise(session, "on_train_batch_end: step timing", error)
        if self._audit is not None and self._audit.attached:
            with guarded(session, "on_train_batch_end: audit"):
                self._audit.end_step()
            if self._audit.done:
                self._end_audit("on_train_batch_end", trainer=trainer)
                if stops_after_audit():  # deviate audit without --finish: every rank stops its fit here
                    with guarded(session, "on_train_batch_end: audit stop"):
                        if trainer.is_global_zero and session.run is not None:
                            record_stop(session.run, self._audit_steps or 0, "lightning")
                        trainer.should_stop = True
        if session.enabled and self._completion is None:  # else read where Lightning counts the batch complete
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
                self._session.run.update_manifest(resume=point.record)

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._take_late_train_epoch_values(trainer, "on_train_epoch_start")
        with guarded(self._session, "on_train_epoch_start: step timing"):
            self._arm_hot_path(trainer)

    def _arm_hot_path(self, trainer: pl.Trainer) -> None:
        """Decide for this training epoch whether the per-step hooks take the hot path, and resolve once what they
        read: the step timer's :class:`~deviate_cb.capture.run_timings.HostSteps`, the epoch (constant within
        it), Lightning's batch and optimizer-step counters (what ``total_batch_idx`` and ``global_step`` read,
        checked against them here) and the training result collection. On either path a step's values are read
        where Lightning counts its batch complete, where that can be hooked (:func:`_hook_completion`)."""
        self._disarm_hot_path()
        session, timings = self._session, self._session.timings
        if not session.enabled:  # a rank that records nothing
            return
        counters, results = _step_counters(trainer), trainer.fit_loop.epoch_loop._results
        if counters is None or results is None:  # another Lightning layout: the properties, a step at a time
            return
        own = type(self).on_train_batch_start is DeviateCallback.on_train_batch_start  # it says when a step began
        slower = timings is None or self._audit is not None or self._resume is not None
        steps = None if slower else timings.host_steps("train", trainer.current_epoch)  # type: ignore[union-attr]
        if steps is None:  # an audit, a resume point, a profiling window: both hooks every step
            if own:
                self._completion = _hook_completion(
                    trainer.fit_loop.epoch_loop.batch_progress, lambda: self._slow_step_completed(trainer)
                )
            return
        # only this class's own hook sets itself aside: a subclass's override (calling this one, which starts a
        # chain only once) or a wrapper set on the instance stays and is called every step
        one_shot = own and self.__dict__.get("on_train_batch_start") is None
        hot = self._hot = _HotPath(
            steps,
            *counters,
            results,
            self._tap,
            session,
            on_cpu=trainer.strategy.root_device.type == "cpu",  # values as floats: see step_values
            one_shot=one_shot,
        )
        # the step's end where Lightning counts the batch complete, not in on_train_batch_end; not where a subclass
        # overrides on_train_batch_end or a wrapper is set on the instance (called every step, as they expect), nor
        # where on_train_batch_start is not this class's own (it may not start the chain that the end relies on)
        own_end = type(self).on_train_batch_end is DeviateCallback.on_train_batch_end
        if one_shot and own_end and "on_train_batch_end" not in self.__dict__:
            self._completion = _hook_completion(trainer.fit_loop.epoch_loop.batch_progress, hot.completed)
            if self._completion is not None:
                self.on_train_batch_end = None  # type: ignore[assignment,method-assign]

    def _slow_step_completed(self, trainer: pl.Trainer) -> None:
        """The slower path's step values, read where Lightning counts the batch complete (after the module's own
        on_train_batch_end, as Lightning's loggers read them); only after a step began (not a restart's count)."""
        if self._slow_step_open:
            self._slow_step_open = False
            self._record_step_values(trainer)

    def _record_step_values(self, trainer: pl.Trainer) -> None:
        """The slower path's read of a training step's values (per-step: ``try``, an error a problem of the run)."""
        try:
            self._record(trainer, "train", "step", self._tap.step_values("train", trainer.fit_loop.epoch_loop._results))
        except Exception as error:
            record_or_raise(self._session, "on_train_batch_end: metrics", error)

    def _end_processed_step(self) -> bool:
        """With the step's end hooked on Lightning's count of completed batches: end now a step that ran its
        training step and is not counted complete yet (a checkpoint saved, an exception raised in some callback's
        ``on_train_batch_end``), so that a checkpoint's rows include the step it was saved at, as where
        ``on_train_batch_end`` ends the step (Lightning runs checkpoint callbacks last). Returns whether it did."""
        if self._completion is None:
            return False
        batches = self._completion[0].total  # what _step_counters read before the hook was set
        processed, completed = getattr(batches, "processed", None), getattr(batches, "completed", None)
        if processed != batches.ready or completed is None or completed >= processed:  # not between the two
            return False
        began = self._slow_step_open if self._hot is None else self._hot.steps.started is not None
        self._completion[2]()  # what the count calls: the step ends now, and the count finds it ended
        return began

    def _pause_steps(self) -> None:
        """Training pauses (validation, the epoch's end): the next training step starts a new chain, timed from its
        own start (on_train_batch_start is called again), not from the last step's end."""
        hot = self._hot
        if hot is not None:
            hot.steps.started = None
            hot.take()
        self._restore_hook("on_train_batch_start")

    def _restore_hook(self, name: str) -> None:
        """Undo the hot path's ``<name> = None`` on the instance (and nothing else set there)."""
        if name in self.__dict__ and self.__dict__[name] is None:
            del self.__dict__[name]

    def _unhook_completion(self) -> None:
        """Undo :func:`_hook_completion` and the ``on_train_batch_end = None`` that may have gone with it."""
        completion, self._completion, self._slow_step_open = self._completion, None, False
        if completion is None:
            return
        progress, hooked = completion[0], completion[1]
        if getattr(progress, "__dict__", {}).get("increment_completed") is hooked:
            del progress.__dict__["increment_completed"]
        self._restore_hook("on_train_batch_end")

    def _disarm_hot_path(self, *, pause: bool = True) -> None:
        """The per-step hooks take the slower path (and on_train_batch_start is called every step) until the next
        :meth:`_arm_hot_path`. ``pause``: forget the chain's open step (the next one has not begun); without it
        (an exception) the step in progress is kept, timed up to the end of the run."""
        self._unhook_completion()
        hot = self._hot
        if hot is not None:
            hot.take()
            if pause:
                hot.steps.started = None
        self._restore_hook("on_train_batch_start")
        self._hot = None

    @override
    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        hook = "on_train_epoch_end"
        self._pause_steps()
        with guarded(self._session, f"{hook}: metrics"):
            keys: set[str] = set()
            items = self._tap.epoch_values("train", trainer._results, keys=keys)  # every rank: may all-reduce
            self._record(trainer, "train", "epoch", items)
            self._train_epoch, self._train_epoch_keys = (trainer.current_epoch, trainer.global_step), keys
        self._session.flush(hook=hook, when_due=True)  # short epochs share a write: see RunSession.flush
        config = self._predictions
        if config is not None and config.data is not None and config.due(trainer.current_epoch):
            with guarded(self._session, f"{hook}: predictions snapshot"):
                self._predict_on_data(trainer, pl_module, epoch_snapshot(trainer.current_epoch))

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        hook = "on_train_end"
        self._disarm_hot_path()
        self._take_late_train_epoch_values(trainer, hook)
        if self._predictions is not None and self._predictions.final_from_data:
            with guarded(self._session, f"{hook}: predictions snapshot"):
                self._predict_on_data(trainer, pl_module, FINAL_SNAPSHOT)
        if self._weights is not None and self._session.enabled and self._session.run is not None:
            with guarded(self._session, f"{hook}: weights record"):
                named = ((name, t) for name, t in pl_module.state_dict().items() if torch.is_floating_point(t))
                write_weight_record(self._session.run.path, weight_arrays(named), self._weights)

    def _end_audit(
        self, hook: str, error: Optional[BaseException] = None, trainer: Optional[pl.Trainer] = None
    ) -> None:
        """Remove the audit's hooks and write what it recorded (also after fewer steps than asked: fit ended);
        ``error``: the exception that stopped the fit (a rank other than zero records it with its steps).
        ``trainer``: every rank is here at once (not after an exception): wait until each has written its record,
        since rank zero's process ending may end the others (Lightning's launcher, the replica's process group)."""
        audit, self._audit = self._audit, None
        if audit is None:
            return
        audit.detach()
        rank, world_size = self._audit_ranks
        if self._session.enabled and self._session.run is not None:
            with guarded(self._session, f"{hook}: audit record"):
                write_audit_record(  # the torch hooks record every kind of row (capture.audit.log.KINDS)
                    self._session.run, audit.log, framework="lightning", covered=KINDS, world_size=world_size
                )
        elif rank > 0 and self._audit_dir is not None:  # its own audit.rank<k>.parquet, never run.json
            with guarded(self._session, f"{hook}: audit record of rank {rank}"):
                stopped = " ".join(f"{type(error).__name__}: {error}".split()) if error is not None else ""
                write_rank_audit(self._audit_dir, audit.log, rank=rank, world_size=world_size, framework="lightning",
                                 error=stopped)  # fmt: skip
        if world_size > 1 and trainer is not None:
            with guarded(self._session, f"{hook}: audit records of every rank"):
                trainer.strategy.barrier("deviate_audit_records")

    def _take_late_train_epoch_values(self, trainer: pl.Trainer, hook: str) -> None:
        """Epoch values the module logged in its own ``on_train_epoch_end``, after this callback's hook."""
        if self._train_epoch is None:
            return
        epoch, step = self._train_epoch
        self._train_epoch = None
        with guarded(self._session, f"{hook}: metrics"):
            items = self._tap.late_epoch_values(
                trainer.fit_loop.epoch_loop._results, self._train_epoch_keys, trainer.callback_metrics
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
                self._record(trainer, "val", "step", self._tap.step_values("val", trainer._results))

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        with guarded(self._session, "on_validation_end: metrics"):
            self._record(trainer, "val", "epoch", self._tap.epoch_values("val", trainer._results))
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
                self._record(trainer, "test", "step", self._tap.step_values("test", trainer._results))
        self._add_stage_outputs(outputs, batch, dataloader_idx, "on_test_batch_end")

    @override
    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        with guarded(self._session, "on_test_end: metrics"):
            self._record(trainer, "test", "epoch", self._tap.epoch_values("test", trainer._results))
        self._session.flush(hook="on_test_end")
        with guarded(self._session, "on_test_end: predictions snapshot"):
            self._finish_stage_predictions(trainer)

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
        self._add_stage_outputs(outputs, batch, dataloader_idx, "on_predict_batch_end")

    @override
    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        with guarded(self._session, "on_predict_end: predictions snapshot"):
            self._finish_stage_predictions(trainer)

    # -- checkpointing -------------------------------------------------------------------------------------
    @override
    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        self._end_processed_step()  # saved in an on_train_batch_end (ModelCheckpoint's): that step is in it
        if self._hot is not None:  # a checkpoint within an epoch: the steps so far into the buffer, then written
            self._hot.take()
        self._session.flush(hook="state_dict")  # a checkpoint's rows are on disk before it records how many
        with guarded(self._session, "state_dict: checkpoint state"):  # a checkpoint is saved without it
            state = self._session.state_dict()
        if self._predictions is not None:
            state["prediction_snapshots"] = list(self._snapshots)
        return state

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        self._snapshots = list(state.pop("prediction_snapshots", self._snapshots))
        self._session.load_state_dict(state)

    # -- predictions ---------------------------------------------------------------------------------------
    def _start_stage_predictions(self, trainer: pl.Trainer, stage: str, dataloaders: Any) -> None:
        config = self._predictions
        self._stage_collector = None
        if config is None or not config.records_stage(stage) or not self._session.enabled or trainer.world_size > 1:
            return
        loaders = dataloaders if isinstance(dataloaders, (list, tuple)) else [dataloaders]
        sampler = getattr(loaders[0], "sampler", None) if loaders else None
        if isinstance(sampler, torch.utils.data.RandomSampler) and config.sample_ids is None:
            warnings.warn(
                f"DeviateCallback(predictions=...): the {stage} DataLoader shuffles, so sample indices will not "
                "line up across runs; use shuffle=False or Predictions(sample_ids=...).",
                stacklevel=3,
            )
        self._stage_collector = PredictionCollector(config, source=f"{stage}_step")

    def _add_stage_outputs(self, outputs: Any, batch: Any, dataloader_idx: int, hook: str) -> None:
        collector = self._stage_collector
        if collector is not None and dataloader_idx == 0:
            with guarded(self._session, f"{hook}: predictions"):
                try:
                    collector.add(outputs, batch)
                except Exception:
                    self._stage_collector = None  # a stage's snapshot is whole or absent
                    raise

    def _finish_stage_predictions(self, trainer: pl.Trainer) -> None:
        collector, self._stage_collector = self._stage_collector, None
        if collector is None:
            return
        skipped = collector.skipped
        collected = collector.collect()
        if collected is None:
            if skipped:
                warnings.warn(
                    f"DeviateCallback(predictions=...): {collector.source} returned nothing, so no predictions "
                    f"were recorded. Return the batch's logits or probabilities (or a dict with 'preds'), or "
                    "predict on a given set with Predictions(data=...).",
                    stacklevel=3,
                )
            return
        self._write_snapshot(trainer, collected, FINAL_SNAPSHOT)

    def _predict_on_data(self, trainer: pl.Trainer, pl_module: pl.LightningModule, snapshot: str) -> None:
        """Run the module on ``Predictions.data`` (rank zero, eval mode, no autograd) and write a snapshot."""
        config = self._predictions
        if config is None or not self._session.enabled or self._session.run is None:
            return
        last = self._last_data_snapshot
        if last is not None and last[0] == trainer.global_step:  # nothing trained since: same predictions
            self._write_snapshot(trainer, last[1], snapshot)
            return
        collector = PredictionCollector(config, source=_forward_name(pl_module, config))
        modes = [(module, module.training) for module in pl_module.modules()]
        pl_module.eval()
        try:
            with torch.inference_mode(), trainer.precision_plugin.predict_step_context():
                for batch_idx, batch in enumerate(config.data):
                    batch = trainer.strategy.batch_to_device(batch)
                    collector.add(_forward(pl_module, config, batch, batch_idx), batch)
        finally:
            for module, training in modes:
                module.training = training
        collected = collector.collect()
        if collected is None:
            raise UsageError(
                f"DeviateCallback(predictions=...): {collector.source} returned no predictions on "
                "Predictions.data (empty data, or the step returned None)."
            )
        self._last_data_snapshot = (trainer.global_step, collected)
        self._write_snapshot(trainer, collected, snapshot)

    def _write_snapshot(self, trainer: pl.Trainer, collected: CollectedPredictions, snapshot: str) -> None:
        if self._predictions is None or self._session.run is None:
            return
        write_prediction_snapshot(
            self._session.run.path,
            collected,
            self._predictions,
            snapshot=snapshot,
            epoch=trainer.current_epoch,
            step=trainer.global_step,
        )
        if snapshot not in self._snapshots:
            self._snapshots.append(snapshot)

    def _warn_if_nothing_kept(self) -> None:
        if self._session.recorder.patterns is None:  # no filter: every logged metric is kept
            return
        seen = self._session.recorder.seen_names
        if seen and not any(seen.values()):
            warnings.warn(
                f"DeviateCallback(metrics={self._session.recorder.patterns!r}) matched none of the logged metrics "
                f"{sorted(seen)}; nothing was recorded.",
                stacklevel=2,
            )


_perf_counter = time.perf_counter


# Steps whose logged values the hot path holds before converting them in one go (_HotPath.take): a step then costs
# two attribute reads a metric, and the conversion runs as one loop with its code in the cache (the tensors it reads
# are not: that part of its cost stays).
_PENDING_STEPS = 32
_step_caches = LightningMetricTap.step_caches  # one global lookup a step


class _HotPath:
    """What the per-step hooks read in one training epoch (:meth:`DeviateCallback._arm_hot_path`): one attribute
    each. ``batches.ready - 1`` is ``total_batch_idx`` and ``optimizer_steps.completed`` is ``global_step``.

    Each step appends ``(global step, perf_counter at its end, what each metric of the plan holds)`` to
    :attr:`pending`; :meth:`take` turns up to :data:`_PENDING_STEPS` of them into the recorder's rows, in order,
    and runs before anything reads or writes the recorder (a pause, a checkpoint, the end of the hot path)."""

    __slots__ = (
        "batches",
        "epoch",
        "on_cpu",
        "one_shot",
        "optimizer_steps",
        "pending",
        "plan",
        "planned",
        "results",
        "session",
        "steps",
        "tap",
    )

    def __init__(
        self,
        steps: HostSteps,
        batches: Any,
        optimizer_steps: Any,
        results: Any,
        tap: LightningMetricTap,
        session: RunSession,
        *,
        on_cpu: bool,
        one_shot: bool,
    ) -> None:
        self.steps, self.epoch = steps, steps.epoch
        self.batches, self.optimizer_steps = batches, optimizer_steps
        self.results, self.tap, self.session = results, tap, session
        self.on_cpu = on_cpu  # the module trains on the CPU: logged values become floats (see step_values)
        self.one_shot = one_shot  # on_train_batch_start sets itself to None once it has started a chain
        self.pending: list[tuple[int, float, list[Any]]] = []
        self.plan: list[tuple[str, Any, str]] = []
        self.planned = -1
        self.replan()

    def end_step(self) -> None:
        """The training step ends now: its time (from the end of the one before, or its chain's start) and, read
        from the metrics as they hold them now, its values, pending until :meth:`take`. A step ended already (by
        ``DeviateCallback._end_processed_step``) is not ended again; an error is a problem of the run, never raised
        into the training loop once the run is under way."""
        now, steps = _perf_counter(), self.steps
        try:
            ended = self.batches.ready - 1  # `total_batch_idx` of the batch ending now
            if steps.step > ended:  # ended by a checkpoint before Lightning counted it complete
                return
            mark = now if steps.events is None else steps.mark()  # on CUDA an event recorded on the stream
            if steps.started is not None:  # HostSteps.lasted, inline: no call a step
                steps.walls.append(now - steps.started if steps.events is None else [steps.started, mark])
                steps.steps.append(ended)
            steps.step, steps.started = ended + 1, mark  # the next step starts as this one ends
            if len(self.results) != self.planned:  # a metric logged for the first time: plan again
                self.replan()
            if self.plan:  # the step's values as the metrics hold them now; converted in bulk by take
                pending = self.pending
                pending.append((self.optimizer_steps.completed, now, _step_caches(self.plan)))  # `global_step`
                if len(pending) >= _PENDING_STEPS:
                    self.take()
        except Exception as error:
            record_or_raise(self.session, "on_train_batch_end: metrics", error)

    def completed(self) -> None:
        """Lightning counts the batch complete (:func:`_hook_completion`): the step ends, if one began (not a
        restart's count of the batch a checkpoint was saved in, before any step of this process)."""
        if self.steps.started is not None:
            self.end_step()

    def replan(self) -> None:
        """Take the pending steps (read under the old plan), then plan the collection's ``on_step`` metrics."""
        self.take()
        self.plan = self.tap.step_plan("train", self.results)
        self.planned = len(self.results)

    def take(self) -> None:
        """The pending steps' values into the recorder as ``update_many`` would have recorded them at each step's
        end (``wall_time`` from its ``perf_counter`` reading). A step whose values cannot be taken is a problem of
        the run (``on_train_batch_end: metrics``) and its values are missing; the other steps' are kept."""
        pending = self.pending
        if not pending:
            return
        self.pending = []
        session, tap, plan, on_cpu, epoch = self.session, self.tap, self.plan, self.on_cpu, self.epoch
        update, anchor = session.recorder.update_many, time.time() - _perf_counter()
        for step, ended, caches in pending:
            try:
                items = tap.take_step(plan, caches, on_cpu=on_cpu)
                if items:
                    update(step=step, epoch=epoch, stage="train", scope="step", items=items, wall_time=anchor + ended)
            except Exception as error:
                record_or_raise(session, "on_train_batch_end: metrics", error)


def _hook_completion(progress: Any, completed: Callable[[], None]) -> Optional[tuple[Any, Any, Any]]:
    """Call ``completed`` where Lightning counts a training batch complete: ``progress.increment_completed`` (the
    training epoch loop's batch progress; called once a batch, after every callback's and the module's
    ``on_train_batch_end`` and Lightning's logger connector, before the loggers read the step's values) shadowed
    on the instance by a function that calls ``completed`` and then counts. ``(progress, that function,
    completed)`` to undo it with, or ``None`` where this Lightning keeps no such method, or something else
    shadowed it first."""
    count = getattr(progress, "increment_completed", None)
    if not callable(count) or getattr(type(progress), "increment_completed", None) is None:
        return None
    if "increment_completed" in getattr(progress, "__dict__", {"increment_completed": None}):
        return None

    def increment_completed() -> None:
        try:
            completed()
        finally:
            count()

    try:
        progress.increment_completed = increment_completed
    except (AttributeError, TypeError):  # slots, a frozen object
        return None
    return progress, increment_completed, completed


def _step_counters(trainer: pl.Trainer) -> Optional[tuple[Any, Any]]:
    """Lightning's progress trackers behind ``total_batch_idx`` (``ready - 1``) and ``global_step``
    (``completed``), read an attribute each on the hot path instead of a property chain a step; ``None`` when
    this Lightning keeps them elsewhere or they disagree with the properties."""
    epoch_loop = trainer.fit_loop.epoch_loop
    try:
        batches = epoch_loop.batch_progress.total
        module = trainer.lightning_module
        if module is None or module.automatic_optimization:
            optimizer_steps = epoch_loop.automatic_optimization.optim_progress.optimizer.step.total
        else:
            optimizer_steps = epoch_loop.manual_optimization.optim_step_progress.total
        agree = batches.ready - 1 == epoch_loop.total_batch_idx and optimizer_steps.completed == epoch_loop.global_step
    except AttributeError:
        return None
    return (batches, optimizer_steps) if agree else None


_UNUSED_BATCH_HOOKS = (
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_validation_batch_start",
    "on_test_batch_start",
    "on_predict_batch_start",
)
"""Per-batch hooks of :class:`lightning.pytorch.Callback` that :class:`DeviateCallback` does not use."""


def _check_data(config: Predictions) -> None:
    """``Predictions.data`` as Lightning reads it: an iterable of batches, not empty, in line with whole-set groups."""
    data = config.data
    if not hasattr(data, "__iter__") or isinstance(data, torch.Tensor):
        raise TypeError(
            "`Predictions.data` must be a DataLoader (or an iterable of batches) for Lightning. "
            f"Received: data of type {type(data).__name__}."
        )
    try:
        batches = len(data)
    except (TypeError, NotImplementedError):  # an IterableDataset, an iterable without a length
        batches = None
    if batches == 0:
        raise UsageError(
            "DeviateCallback(predictions=Predictions(data=...)): `data` holds no batches; give it the evaluation set."
        )
    samples = _sample_count(data)
    if samples is not None:
        config.check_sample_count(samples)


def _sample_count(data: Any) -> Optional[int]:
    """How many samples a DataLoader yields, when that is known without iterating it (``None`` otherwise)."""
    if not isinstance(data, torch.utils.data.DataLoader) or data.drop_last:
        return None
    if type(data.batch_sampler) is not torch.utils.data.BatchSampler:
        return None
    if not isinstance(data.sampler, torch.utils.data.SequentialSampler):
        return None
    try:
        return len(data.dataset)  # type: ignore[arg-type]
    except (TypeError, NotImplementedError):
        return None


def _check_can_predict(pl_module: pl.LightningModule, config: Predictions) -> None:
    """Refuse, before training, ``Predictions(data=...)`` on a module that has no way to predict on it."""
    if config.predict_fn is not None or type(pl_module).predict_step is not pl.LightningModule.predict_step:
        return
    if type(pl_module).forward in (pl.LightningModule.forward, torch.nn.Module.forward):
        raise UsageError(
            f"DeviateCallback(predictions=Predictions(data=...)) predicts on `data` with the module's "
            f"`predict_step` or `forward`, but {type(pl_module).__name__} defines neither (LightningModule's "
            "`forward` raises NotImplementedError): define `forward(x)` or `predict_step(batch, batch_idx)`, or "
            "pass Predictions(data=..., predict_fn=lambda module, batch: outputs)."
        )


def _shards_parameters(strategy: Any) -> bool:
    """Whether ``strategy`` keeps only shards of the parameters on each rank (FSDP, model parallel, ZeRO-3)."""
    names = {cls.__name__ for cls in type(strategy).__mro__}
    return bool(names & {"FSDPStrategy", "ModelParallelStrategy"}) or bool(getattr(strategy, "zero_stage_3", False))


def _forward_name(pl_module: pl.LightningModule, config: Predictions) -> str:
    if config.predict_fn is not None:
        return "Predictions.predict_fn"
    if type(pl_module).predict_step is not pl.LightningModule.predict_step:
        return "predict_step"
    return "forward"


def _forward(pl_module: pl.LightningModule, config: Predictions, batch: Any, batch_idx: int) -> Any:
    """The module's outputs on one batch: ``predict_fn``, else its own ``predict_step``, else ``forward(x)``."""
    if config.predict_fn is not None:
        return config.predict_fn(pl_module, batch)
    if type(pl_module).predict_step is not pl.LightningModule.predict_step:
        return pl_module.predict_step(batch, batch_idx)
    return pl_module(batch[0] if isinstance(batch, (tuple, list)) else batch)


def _planned_steps(trainer: pl.Trainer) -> Optional[int]:
    """The optimizer steps the fit plans (``estimated_stepping_batches``), once its training data is loaded; ``None``
    when unknown or unbounded. Never loads data itself, never raises."""
    if trainer.train_dataloader is None:
        return None
    try:
        planned = trainer.estimated_stepping_batches
    except Exception:  # e.g. accumulation that changes between epochs
        return None
    return int(planned) if isinstance(planned, (int, float)) and 0 <= planned < float("inf") else None


def _num_workers(dataloaders: Any) -> Optional[int]:
    loaders = dataloaders if isinstance(dataloaders, (list, tuple)) else [dataloaders]
    workers = [getattr(loader, "num_workers", None) for loader in loaders]
    known = [w for w in workers if isinstance(w, int)]
    return max(known) if known else None


def _trainer_facts(trainer: pl.Trainer) -> dict[str, Any]:
    return {
        "accelerator": type(trainer.accelerator).__name__,
        "strategy": type(trainer.strategy).__name__,
        "precision": str(trainer.precision),
        "num_devices": trainer.num_devices,
        "num_nodes": trainer.num_nodes,
        "world_size": trainer.world_size,
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
    }
