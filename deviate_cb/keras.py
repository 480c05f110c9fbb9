"""Keras 3 adapter: ``DeviateCallback`` captures every metric ``fit`` and ``evaluate`` report.

Works on the TensorFlow, torch and JAX backends. Example:

    >>> from deviate_cb.keras import DeviateCallback
    >>> model.fit(x, y, validation_split=0.2, epochs=5, callbacks=[DeviateCallback()])  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any, Optional, Union

import keras

from deviate_cb.audit.recording.keras_audit import KerasFitAudit
from deviate_cb.audit.recording.settings import audit_steps
from deviate_cb.capture.backup_restore import KerasResumePoint
from deviate_cb.capture.guard import guarded, record_or_raise
from deviate_cb.capture.hot_path import StepClock, step_events
from deviate_cb.capture.keras_predictions import KerasPredictions, check_data
from deviate_cb.capture.log_numbers import LogNumbers, split_val
from deviate_cb.capture.resume_state import RESUME_FROM_ENV, resume_plan
from deviate_cb.capture.run_timings import RunTimings
from deviate_cb.capture.session import RunSession
from deviate_cb.capture.stability.collector import FINAL_SNAPSHOT, epoch_snapshot, write_weight_record
from deviate_cb.capture.stability.extract import weight_arrays
from deviate_cb.capture.stability.settings import Predictions, Weights, parse_predictions, parse_weights
from deviate_cb.capture.tracker_tags import live_tags, tag_active_runs
from deviate_cb.context import Deterministic, is_rank_zero
from deviate_cb.profiling.window import ProfileWindow
from deviate_cb.store.manifest import CaptureRecord

__all__ = ["DeviateCallback", "Predictions", "ProfileWindow", "Weights"]

# A model trained again (fine-tuning after pre-training) continues the run of its previous fit, even when
# the second fit gets a new callback: model -> (run directory, global steps so far).
_RUNS_OF_MODELS: weakref.WeakKeyDictionary[Any, tuple[str, int]] = weakref.WeakKeyDictionary()


class DeviateCallback(keras.callbacks.Callback):
    """Capture every metric Keras reports, with seeds, per-backend determinism and a fingerprint.

    Records ``logs`` at each training batch end (stage ``train``, scope ``step``; with
    ``steps_per_execution=N`` Keras reports every N batches, and batch-end values are Keras' running means
    over the epoch), at each epoch end (``train``, and ``val_*`` keys as stage ``val`` under the base name, so
    ``val_loss`` is ``loss`` at stage ``val``, lining up with Lightning runs), and the results of
    ``model.evaluate()`` outside ``fit`` (stage ``test``). Values are written at each epoch end and at the end
    of ``fit``/``evaluate``. The callback is ``async_safe``: it does not stop Keras from dispatching batch-end
    callbacks off the training thread. Several ``fit`` calls on one model continue the same run. Each ``fit`` is
    recorded as ``fit: started`` at ``on_train_begin`` and ``fit: ended`` at ``on_train_end`` (with ``fit_steps``),
    so a process that exits with status 0 in the middle of a fit is recorded ``incomplete``, not ``completed``
    (:mod:`deviate_cb.store.completion`).

    Under ``deviate-replicate`` the replica's run directory, seed and determinism are used. Standalone, the
    run goes to ``<out_dir>/experiment=<experiment>/variant=standalone/replica=<k>/``.

    Args:
        out_dir: Root of the run store when standalone. Default: ``deviate_runs``.
        experiment: Experiment name when standalone. Default: the script's name (``train`` for ``train.py``;
            ``default`` with no script: interactive, ``python -c``, notebooks).
        seed: Seed for ``random``, NumPy, the backend and Keras' global seed, applied when the callback is
            created (create it before the model). Never imports TensorFlow on the torch or JAX backend.
            ``None``: not seeded; standalone, ``run.json`` records the seed set before the fit
            (``keras.utils.set_random_seed(7)``, ``tf.random.set_seed``, ``torch.manual_seed``) where it can be
            read back, and ``seed_source`` says where it was read.
        deterministic: ``True`` turns the backend's determinism on (TensorFlow op determinism; torch
            deterministic algorithms and cuDNN; JAX ``XLA_FLAGS``, effective only if set before JAX starts, as
            ``deviate-replicate`` does), ``"warn"`` the warn-only variant where the backend has one,
            ``False``/``None`` leaves things alone. What is in effect is verified and recorded.
        metrics: Metric names or ``fnmatch`` patterns to keep (names as recorded: ``loss``, ``accuracy``).
        predictions: Record per-sample predictions on an evaluation set to ``predictions.parquet`` (for
            prediction churn, per-class and per-group variance): ``Predictions(data=(x_test, y_test),
            every_n_epochs=k, groups={"sex": sex})`` predicts with the model at the end of ``fit`` (snapshot
            ``final``) and after every k-th epoch (``epoch=<e>``). ``data``: ``(x, y)`` arrays (``model.predict``,
            labels ``y``), ``x`` alone (no labels), or a ``tf.data.Dataset``/``PyDataset``/iterable of
            ``(x, y)`` batches, which must come in the same order every time (each batch is predicted with
            ``predict_on_batch``). ``from_stage`` and ``predict_fn`` are Lightning's and not used here. See
            :class:`deviate_cb.capture.stability.settings.Predictions`. Default: off.
        weights: Record the final weights at the end of ``fit``: a Johnson-Lindenstrauss sketch
            (``weights_sketch.npz``) and with ``Weights(full=True)`` the full weights (``weights.npz``).
            Every variable of ``model.weights`` (trainable and not) under its path, in that order, as float64.
            ``True`` means ``Weights()``. Default: off.
        profile: Profile a short window of training steps and record per-op times in ``timings.parquet``:
            ``True`` (5 plain steps, 1 warm-up, 3 recorded), a dict of ``wait``/``warmup``/``active``/``repeat``
            or a :class:`~deviate_cb.profiling.window.ProfileWindow`. ``torch.profiler`` on the torch backend, the
            TensorFlow profiler on TensorFlow; JAX has no op profiler here. Every run records each training
            step's wall time in ``timings.parquet`` anyway (from one step's start to the next, so it includes
            the callbacks; steps in a profiling window are flagged and left out of step statistics).
            Default: off.
        audit: Record a bit-exact digest of the first ``audit`` training steps (``True``: 20) to ``audit.parquet``
            for ``deviate audit``. On the torch backend: the batch, every layer's output, the loss, every
            gradient and every variable after the step (digests on the device); on TensorFlow and JAX, whose
            compiled train step a callback cannot look into: the reported loss and every variable after each step.
            Batch-end callbacks then run on the training thread. Default: off.

    What can be checked is checked when the callback is created (e.g. ``Predictions(data=(x, y))`` with ``x``
    and ``y`` of different lengths). Once the run has started, the callback never raises into training: an
    error of a recording step (a write, a snapshot, a bug) becomes a warning and an entry of ``problems`` in
    ``run.json`` (:mod:`deviate_cb.capture.guard`), and ``fit``/``evaluate`` go on.

    Example:
        >>> cb = DeviateCallback("runs", experiment="mlp", seed=0, deterministic=True)  # doctest: +SKIP
        >>> cb = DeviateCallback(predictions=Predictions(data=(x_test, y_test)), weights=True)  # doctest: +SKIP
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
        self._profile = ProfileWindow.coerce(profile)
        self._predictions = parse_predictions(predictions)
        self._weights = parse_weights(weights)
        if self._predictions is not None:
            check_data(self._predictions)
        self._session = RunSession(
            out_dir, experiment=experiment, seed=seed, deterministic=deterministic, metrics=metrics, framework="keras"
        )
        self._records = KerasPredictions(self._predictions, self._session) if self._predictions is not None else None
        self._session.apply_requested()
        self._audit = KerasFitAudit(audit_steps(audit), self._session)
        # Keras may call on_train_batch_end from its dispatch threads; not while auditing, which reads the
        # variables after each step and must not race the next one
        self.async_safe = not self._audit.steps
        plan = resume_plan()  # deviate audit --resume-at: this replica's part (deviate_cb.capture.backup_restore)
        self._resume = KerasResumePoint(plan, os.environ.get(RESUME_FROM_ENV, "")) if plan is not None else None
        if self._resume is not None:
            self.async_safe = False
        self._lock = threading.Lock()
        self._batches: list[tuple[int, int, float, Mapping[str, Any]]] = []  # (step, epoch, time, logs)
        self._steps_done = 0  # global steps before the current epoch
        self._epoch: Optional[int] = None
        self._in_fit = False
        self._fit_plan: Optional[tuple[int, int, int]] = None  # (first step, steps per epoch, epochs) of this fit
        self._numbers = LogNumbers()  # a log that is not a number: one warning a name
        # the per-step hooks' switches, set for each fit by _arm_step_hooks (the hot path, see on_train_batch_begin)
        self._step_clock: Optional[StepClock] = None  # step times from one clock reading a step (host or CUDA)
        self._device_steps = False  # steps are timed with CUDA events (torch with CUDA)
        self._keep_logs = False  # on_train_batch_end keeps the logs: this process records
        self._slow_begin = False  # on_train_batch_begin has more to do: the step timer itself, audit, resume point
        self._slow_end = False  # on_train_batch_end has more to do: audit, resume point
        atexit.register(_close_at_exit, weakref.ref(self))

    @property
    def run_dir(self) -> Optional[os.PathLike[str]]:
        """The run directory once the run has started (``None`` before)."""
        return self._session.run.path if self._session.run is not None else None

    def set_model(self, model: Any) -> None:
        if not isinstance(model, keras.Model):
            kind = f"{type(model).__module__}.{type(model).__qualname__}"
            raise TypeError(
                f"deviate_cb.keras.DeviateCallback needs a Keras 3 model (keras.Model). Received: {kind}. "
                "Legacy tf.keras/tf_keras models are not supported: build the model with `import keras` "
                "(Keras 3, pip install 'keras>=3'), or use deviate_cb.lightning for PyTorch Lightning."
            )
        super().set_model(model)

    def prepare_fit(self, callbacks: Sequence[Any]) -> None:
        """Called by the launcher's ``fit`` wrapper with the fit's callbacks, before ``fit`` starts: under
        ``--resume-at``, find and redirect its ``BackupAndRestore`` (:mod:`deviate_cb.capture.backup_restore`)."""
        if self._resume is not None:
            self._resume.prepare(callbacks)

    def _resume_record(self, hook: str) -> None:
        point, run = self._resume, self._session.run
        if point is not None and point.changed and run is not None and self._session.enabled:
            with guarded(self._session, f"{hook}: resume point"):
                point.changed = False
                run.record(CaptureRecord(resume=point.record))

    # -- lifecycle -----------------------------------------------------------------------------------------
    # Every recording step of a hook runs under `guarded`: once the run is open, its errors become problems of
    # the run (run.json `problems`, one warning per kind) and never reach fit() or evaluate().
    def _start(self, hook: str, *, fit: bool = False) -> None:
        session = self._session
        session.enabled = _is_chief()
        if not session.enabled:
            return
        model = self._model
        previous = _RUNS_OF_MODELS.get(model) if model is not None else None
        if previous is not None and session.run is None:  # a new callback on a model trained before
            session.load_state_dict({"run_dir": previous[0]})
            self._steps_done = previous[1]
        if fit:  # `fit: started` before the run opens: its start writes both in one manifest write
            with guarded(session, f"{hook}: fit record"):
                self._begin_fit()
        new = session.run is None
        with guarded(session, f"{hook}: run start"):  # the first opening still raises: nothing ran yet
            session.open()
        if session.run is None:
            return
        if new:
            with guarded(session, f"{hook}: fingerprint"):
                session.write_fingerprint()
        if session.timings is None:
            with guarded(session, f"{hook}: step timing"):
                backend = keras.backend.backend()
                events = step_events(backend)
                self._device_steps = events is not None
                session.timings = RunTimings(self._profile, framework=backend, events=events)
        if model is not None:
            _RUNS_OF_MODELS[model] = (str(session.run.path), self._steps_done)

    def on_train_begin(self, logs: Optional[Mapping[str, Any]] = None) -> None:
        self._in_fit = True
        self._start("on_train_begin", fit=True)  # records `fit: started`: exiting before on_train_end is incomplete
        if self._session.enabled and self._session.run is not None:
            with guarded(self._session, "on_train_begin: tracker tags"):  # the active MLflow/W&B run learns it
                tag_active_runs(live_tags(self._session), self._session)
        resume = self._resume  # deviate audit --resume-at: no resume path or a bad K: stop after one step
        if resume is not None and self._session.enabled and self._model is not None and resume.begin(self.params):
            self._model.stop_training = True
        self._resume_record("on_train_begin")
        first = resume.plan.at if resume is not None and resume.plan.role == "resumed" else 0
        self._audit.start(self._model, keras.backend.backend(), first)
        self._arm_step_hooks()

    def _arm_step_hooks(self) -> None:
        """Decide once per fit what the per-step hooks do, so that they read a few attributes and branch no more."""
        session = self._session
        timings = session.timings if session.enabled else None
        self._step_clock = None
        if timings is not None and timings.window is None:  # the host's clock, or a chain of CUDA events
            self._step_clock = StepClock(timings.timer.record_event if self._device_steps else None)
        self._keep_logs = session.enabled
        self._slow_end = self._audit.recording or self._resume is not None
        self._slow_begin = self._slow_end or (timings is not None and self._step_clock is None)

    def _begin_fit(self) -> None:
        steps, epochs = (self.params or {}).get("steps"), (self.params or {}).get("epochs")
        if isinstance(steps, int) and isinstance(epochs, int):
            self._fit_plan = (self._steps_done, steps, epochs)
        else:  # a dataset of unknown length
            self._fit_plan = None
        plan = self._fit_plan
        self._session.begin_fit(planned_steps=None if plan is None else plan[0] + plan[1] * plan[2])

    def on_epoch_begin(self, epoch: int, logs: Optional[Mapping[str, Any]] = None) -> None:
        self._epoch = epoch
        plan, self._fit_plan = self._fit_plan, None
        if self._resume is not None:  # a restored fit starts at the epoch of its backup: global steps go on from it
            first = self._resume.epoch_begin(epoch, plan[1] if plan is not None else None)
            if first is not None and self._resume.plan.role == "resumed":
                self._steps_done = first
            self._resume_record("on_epoch_begin")
        if plan is not None and epoch > 0:  # fit(initial_epoch=...): fewer epochs than `epochs` are left
            first, steps, epochs = plan
            self._session.fit_planned = first + steps * max(epochs - epoch, 0)

    # The two per-step hooks are the hot path (docs/architecture.md, step 9): one clock reading and one append
    # each (StepClock); a profiling window, an audit or a resume point take the slow path (_batch_begin, _batch_end).
    def on_train_batch_begin(self, batch: int, logs: Optional[Mapping[str, Any]] = None) -> None:
        clock = self._step_clock
        if clock is not None:
            try:
                clock.starts.append(clock.now())
                clock.steps.append(self._steps_done + batch)
            except Exception as error:
                record_or_raise(self._session, "on_train_batch_begin: step timing", error)
        if self._slow_begin:
            self._batch_begin(batch)

    def _batch_begin(self, batch: int) -> None:
        # Called on the training loop's thread, also when batch ends are dispatched asynchronously: a step's
        # time runs from its start to the next step's start (or the end of the epoch's training).
        timings = self._session.timings
        if self._step_clock is None and timings is not None and self._session.enabled:
            with guarded(self._session, "on_train_batch_begin: step timing"):
                timings.step_started("train", self._epoch or 0, self._steps_done + batch)
        self._audit.begin_step(self._steps_done + batch)
        if self._resume is not None and self._model is not None:
            with guarded(self._session, "on_train_batch_begin: resume point"):
                self._resume.batch_start(self._model, self._steps_done + batch)
            self._resume_record("on_train_batch_begin")

    def on_train_batch_end(self, batch: int, logs: Optional[Mapping[str, Any]] = None) -> None:
        if logs and self._keep_logs:  # may run on a Keras dispatch thread: one append (atomic) here
            try:
                self._batches.append((self._steps_done + batch + 1, self._epoch or 0, time.time(), logs))
            except Exception as error:
                record_or_raise(self._session, "on_train_batch_end: metrics", error)
        if self._slow_end:
            self._batch_end(batch, logs)

    def _batch_end(self, batch: int, logs: Optional[Mapping[str, Any]]) -> None:
        self._audit.end_step(self._steps_done + batch, logs, self._model)
        if self._resume is not None and self._model is not None:
            with guarded(self._session, "on_train_batch_end: resume point"):
                if self._resume.batch_end(self._model, self._steps_done + batch):
                    self._model.stop_training = True
            self._resume_record("on_train_batch_end")

    def on_epoch_end(self, epoch: int, logs: Optional[Mapping[str, Any]] = None) -> None:
        hook, session = "on_epoch_end", self._session
        if session.timings is not None:
            with guarded(session, f"{hook}: step timing"):
                self._hand_over_steps()
                session.timings.step_ended()
        with guarded(session, f"{hook}: metrics"):
            self._record_epoch(epoch, logs)
        session.flush(hook=hook, when_due=True)  # short epochs share a write: see RunSession.flush
        if self._model is not None and session.run is not None:
            _RUNS_OF_MODELS[self._model] = (str(session.run.path), self._steps_done)
        if self._records is not None and logs is not None and self._records.config.due(epoch):
            with guarded(session, f"{hook}: predictions snapshot"):
                self._records.snapshot(self._model, epoch_snapshot(epoch), epoch, self._steps_done)

    def _record_epoch(self, epoch: int, logs: Optional[Mapping[str, Any]]) -> None:
        """Buffer the epoch's batch-end logs and its epoch logs (``val_*`` as stage ``val``)."""
        # Keras waits for every dispatched batch-end call before calling on_epoch_end
        with self._lock:
            batches, self._batches = sorted(self._batches, key=itemgetter(0)), []
        self._steps_done = batches[-1][0] if batches else self._steps_done + int(self.params.get("steps") or 0)
        recorder = self._session.recorder
        update, numbers = recorder.update_many, self._numbers
        for step, batch_epoch, wall_time, batch_logs in batches:
            update(
                step=step,
                epoch=batch_epoch,
                stage="train",
                scope="step",
                items=numbers(batch_logs),
                wall_time=wall_time,
            )
        if logs and self._session.enabled:
            now = time.time()
            train, val = split_val(self._numbers(logs))
            recorder.update_many(
                step=self._steps_done, epoch=epoch, stage="train", scope="epoch", items=train, wall_time=now
            )
            recorder.update_many(
                step=self._steps_done, epoch=epoch, stage="val", scope="epoch", items=val, wall_time=now
            )

    def on_train_end(self, logs: Optional[Mapping[str, Any]] = None) -> None:
        hook, session = "on_train_end", self._session
        self._in_fit = False
        if session.timings is not None:  # steps the epoch end did not see (none, unless a fit ends without one)
            with guarded(session, f"{hook}: step timing"):
                self._hand_over_steps()
        self._step_clock = None
        self._audit.end(hook)
        if self._resume is not None:
            with guarded(session, f"{hook}: resume point"):
                self._resume.train_end()
            self._resume_record(hook)
        if session.enabled and session.run is not None and self._model is not None:
            if self._records is not None:
                with guarded(session, f"{hook}: predictions snapshot"):
                    self._records.snapshot(self._model, FINAL_SNAPSHOT, self._epoch, self._steps_done)
            if self._weights is not None:
                with guarded(session, f"{hook}: weights record"):
                    named = [(variable.path, variable) for variable in self._model.weights]
                    write_weight_record(
                        session.run.path, weight_arrays(named, keras.ops.convert_to_numpy), self._weights
                    )
        if session.enabled:
            with guarded(session, f"{hook}: metrics filter check"):
                text = session.recorder.nothing_kept()
                if text:
                    warnings.warn(text, stacklevel=2)
        if session.enabled and session.run is not None:  # the fit ended as Keras ends it (epochs, early stopping)
            with guarded(session, f"{hook}: fit record"):  # written by close, at once: one manifest write
                session.end_fit(steps_done=self._steps_done, write=False)
        with guarded(session, f"{hook}: end of run"):
            session.close(hook=hook)

    def on_test_begin(self, logs: Optional[Mapping[str, Any]] = None) -> None:
        if self._in_fit and self._session.timings is not None:
            with guarded(self._session, "on_test_begin: step timing"):
                if self._step_clock is not None:
                    self._step_clock.stop()
                self._session.timings.step_ended()  # the epoch's last training step ends before validation
        if not self._in_fit:  # fit's own validation also calls the test hooks: its results come as val_*
            self._start("on_test_begin")

    def on_test_end(self, logs: Optional[Mapping[str, Any]] = None) -> None:
        if self._in_fit or not logs or not self._session.enabled:
            return
        hook, session = "on_test_end", self._session
        with guarded(session, f"{hook}: metrics"):
            session.recorder.update_many(
                step=self._steps_done,
                epoch=self._epoch,
                stage="test",
                scope="epoch",
                items=self._numbers(logs),
                wall_time=time.time(),
            )
        with guarded(session, f"{hook}: end of run"):
            session.close(hook=hook)

    def _hand_over_steps(self) -> None:
        """Give the steps timed by the hot path to the run's step timer (before each flush)."""
        clock, timings = self._step_clock, self._session.timings
        if clock is not None and timings is not None:
            clock.hand_over(timings.timer, self._epoch or 0)


def _is_chief() -> bool:
    """Only one process of a multi-process run records: rank/task zero (torch, TF, JAX conventions)."""
    if not is_rank_zero():
        return False
    jax = sys.modules.get("jax")
    if jax is not None and keras.backend.backend() == "jax":
        try:
            return int(jax.process_index()) == 0
        except Exception:  # JAX not initialised for distribution
            return True
    return True


def _close_at_exit(ref: weakref.ref[DeviateCallback]) -> None:
    """Flush what an interrupted ``fit`` buffered (Keras has no exception hook) when Python exits, and record how
    far the fit got: its ``fit`` record still says ``started`` (:mod:`deviate_cb.store.completion`)."""
    callback = ref()
    if callback is not None and callback._in_fit and callback._session.run is not None:
        with callback._lock:
            done = max((batch[0] for batch in callback._batches), default=callback._steps_done)
        callback.on_epoch_end(callback._epoch or 0, None)
        callback._audit.end("at exit")  # the steps audited before the fit stopped: `deviate audit` compares them
        # the exception that ended the process, when one did (the interpreter keeps it as sys.last_value);
        # none: it exited (sys.exit, the end of a script) while fit() was running
        raised = getattr(sys, "last_value", None)
        known = isinstance(raised, BaseException)
        error = raised if known else RuntimeError("the process exited while fit() was running")
        with guarded(callback._session, "at exit: end of run"):
            callback._session.close(error=error, hook="at exit", steps_done=done, exiting=not known)
