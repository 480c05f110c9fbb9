"""Hugging Face adapter: ``DeviateCallback`` captures every value a ``transformers.Trainer`` (or TRL trainer) logs.

Example:

    >>> from deviate_cb.transformers import DeviateCallback
    >>> Trainer(model=model, args=args, train_dataset=train, callbacks=[DeviateCallback()])  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import os
import sys
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from transformers import TrainerCallback

from deviate_cb.capture.determinism import seed_everything
from deviate_cb.capture.guard import guarded, record_or_raise
from deviate_cb.capture.hf.logs import epoch_index, trainer_facts, trainer_log_groups
from deviate_cb.capture.hf.predictions import TrainerPredictions, check_trainer_predictions
from deviate_cb.capture.hf.resume import TrainerResumePoint
from deviate_cb.capture.log_numbers import LogNumbers
from deviate_cb.capture.resume_state import RESUME_FROM_ENV, resume_plan
from deviate_cb.capture.run_timings import RunTimings
from deviate_cb.capture.session import RunSession
from deviate_cb.capture.stability.collector import FINAL_SNAPSHOT, epoch_snapshot, write_weight_record
from deviate_cb.capture.stability.extract import weight_arrays
from deviate_cb.capture.stability.settings import Predictions, Weights, parse_predictions, parse_weights
from deviate_cb.capture.step_timer import cuda_events
from deviate_cb.capture.tracker_tags import live_tags, tag_active_runs
from deviate_cb.context import Deterministic, is_rank_zero
from deviate_cb.profiling.window import ProfileWindow
from deviate_cb.store.manifest import CaptureRecord

try:  # transformers >= 4.42: a callback's state travels in the checkpoint's trainer_state.json
    from transformers.trainer_callback import ExportableState
except ImportError:  # pragma: no cover - older transformers: a resumed run starts a new run directory

    class ExportableState:  # type: ignore[no-redef]
        """Stand-in where transformers has no stateful callbacks."""


__all__ = ["DeviateCallback", "Predictions", "ProfileWindow", "Weights"]

_STATE_KEY = "deviate_run"  # the attribute of state()["attributes"] holding the session's state


class DeviateCallback(TrainerCallback, ExportableState):
    """Capture every value a ``Trainer`` logs, with seeds, determinism, step times and a fingerprint.

    Records each ``on_log`` under the name the Trainer logs (``loss``, ``grad_norm``, ``learning_rate``,
    ``eval_loss``, ``eval_accuracy``, a ``compute_metrics`` key), at the Trainer's ``global_step`` and the epoch it
    falls in: ``eval_*`` as stage ``val`` and ``test_*`` (``evaluate(metric_key_prefix="test")``, ``predict``) as
    stage ``test``, each reduced over its set (scope ``epoch``); the training logs every ``logging_steps`` as
    ``train``/``step`` (``loss`` is the Trainer's mean over those steps); the end-of-fit summary (``train_loss``,
    ``train_runtime``, ...) as ``train``/``epoch``. Every optimizer step's wall time goes to ``timings.parquet``.
    ``train()`` is recorded as ``fit: started`` at ``on_train_begin`` and ``fit: ended`` at ``on_train_end``, so a
    process that exits in the middle of ``train()`` is recorded ``incomplete`` (:mod:`deviate_cb.store.completion`).
    Only the world's process zero records (``accelerate launch``, ``torchrun``).

    Under ``deviate-replicate`` the callback is added to every ``Trainer`` (subclasses too: TRL's, a project's own)
    with no edit, and the replica's run directory, seed and determinism are used: ``TrainingArguments.seed`` and
    ``data_seed`` are mapped from the replica's seed, ``full_determinism`` follows the variant. Standalone, the run
    goes to ``<out_dir>/experiment=<experiment>/variant=standalone/replica=<k>/``.

    Args:
        out_dir: Root of the run store when standalone. Default: ``deviate_runs``.
        experiment: Experiment name when standalone. Default: the script's name.
        seed: Seed for ``random``, NumPy and torch, applied when the callback is created and again at the
            ``Trainer``'s end of construction, where it also becomes ``args.seed`` (the Trainer's own
            ``set_seed(args.seed)`` ran before: data order and dropout follow ``seed``; the model's initial
            weights follow it only when the callback is created before the model, or with ``model_init``).
            ``None``: not seeded; ``run.json`` records the seed the Trainer set.
        deterministic: ``True`` turns torch's deterministic algorithms and cuDNN's on, ``"warn"`` the warn-only
            mode, ``False``/``None`` leaves them alone (``TrainingArguments(full_determinism=True)`` does it too).
            What is in effect is verified and recorded.
        metrics: Metric names or ``fnmatch`` patterns to keep (names as logged: ``loss``, ``eval_*``).
        predictions: Record per-sample predictions for prediction churn and per-class or per-group spreads
            (``predictions.parquet``): ``True`` runs the model on the Trainer's evaluation set at the end of
            ``train()`` (snapshot ``final``); ``Predictions(data=..., every_n_epochs=k, groups={...})`` on ``data``
            (a ``DataLoader`` of dict batches, or a ``datasets.Dataset``, batched in order), also after every k-th
            epoch (``epoch=<e>``). Outputs are ``logits`` (``output_key`` chooses another), labels the batch's
            ``labels``/``label``. Checked at ``on_train_begin``: no evaluation set and no ``data`` is refused then.
            Default: off.
        weights: Record the final weights at the end of ``train()``: a sketch (``weights_sketch.npz``), with
            ``Weights(full=True)`` the full weights; every floating-point entry of the model's ``state_dict``.
            Default: off.
        profile: Profile a short window of training steps with ``torch.profiler`` (``True``, a dict of
            ``wait``/``warmup``/``active``/``repeat`` or a :class:`~deviate_cb.profiling.window.ProfileWindow`).

    A checkpoint (``save_strategy``) carries the run's state in ``trainer_state.json``; ``train(
    resume_from_checkpoint=...)`` continues the same run directory, its values after the checkpoint replaced. Under
    ``deviate audit --resume-at K`` the callback digests the states around step K and has the Trainer save
    ``checkpoint-K`` (:mod:`deviate_cb.capture.hf.resume`).
    Once the run has started the callback never raises into training: a failed recording step becomes a warning
    and a ``problems`` entry of ``run.json``.

    Example:
        >>> from transformers import TrainingArguments  # doctest: +SKIP
        >>> args = TrainingArguments("out", eval_strategy="epoch", logging_steps=10)  # doctest: +SKIP
        >>> trainer = Trainer(model, args, train_dataset=train, eval_dataset=val,
        ...                   callbacks=[DeviateCallback(experiment="bert-sst2")])  # doctest: +SKIP
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
    ) -> None:
        self._arguments = {"out_dir": None if out_dir is None else os.fspath(out_dir), "experiment": experiment,
                           "seed": seed, "deterministic": deterministic,
                           "metrics": None if metrics is None else list(metrics)}  # fmt: skip
        self._profile = ProfileWindow.coerce(profile)
        self._weights = parse_weights(weights)
        self._predictions = parse_predictions(predictions)
        self._session = RunSession(
            out_dir, experiment=experiment, seed=seed, deterministic=deterministic, metrics=metrics,
            framework="transformers",
        )  # fmt: skip
        self._session.apply_requested()
        self._records = TrainerPredictions(self._predictions, self._session) if self._predictions else None
        self._numbers = LogNumbers()
        self._in_train = False
        self._step = 0  # the Trainer's global step at the last hook
        self._epoch = 0
        self._restored: Optional[Mapping[str, Any]] = None  # set by the Trainer from a checkpoint (state())
        plan = resume_plan()  # deviate audit --resume-at: this replica's part (deviate_cb.capture.hf.resume)
        self._resume = TrainerResumePoint(plan, os.environ.get(RESUME_FROM_ENV, "")) if plan is not None else None
        atexit.register(_close_at_exit, weakref.ref(self))

    @property
    def run_dir(self) -> Optional[os.PathLike[str]]:
        """The run directory once the run has started (``None`` before, and on other processes than zero)."""
        return self._session.run.path if self._session.run is not None else None

    # -- lifecycle -----------------------------------------------------------------------------------------
    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        session = self._session
        if session.context is None and session.seed is not None and args.seed != session.seed:
            args.seed = session.seed  # the Trainer seeded from args.seed in its constructor: the callback's wins
            seed_everything(session.seed)
        session.apply_requested(seed=False)  # full_determinism flipped the switches: a requested value wins

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._in_train = True
        self._position(state)
        session = self._session
        if not self._should_record(state):
            return
        if self._predictions is not None:  # before anything is written: a refused setting stops train() at once
            check_trainer_predictions(self._predictions, args)
        self._resume_from(state)
        with guarded(session, "on_train_begin: fit record"):  # `fit: started`: exiting before on_train_end: incomplete
            session.begin_fit(planned_steps=getattr(state, "max_steps", None))  # checked by begin_fit
        self._start(args, state, "on_train_begin")
        session.apply_requested(seed=False)
        if session.timings is None and session.run is not None:
            with guarded(session, "on_train_begin: step timing"):
                session.timings = RunTimings(self._profile, framework="torch", events=cuda_events(args.device))
        if session.run is not None:
            with guarded(session, "on_train_begin: tracker tags"):  # the Trainer's MLflow/W&B run learns it
                tag_active_runs(live_tags(session), session)

    # The per-step events are the hot path: a few attribute reads and the step timer, no context manager.
    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        timings = self._session.timings
        if timings is not None and self._session.enabled:
            try:
                timings.step_started("train", epoch_index(state.epoch), state.global_step)
            except Exception as error:
                record_or_raise(self._session, "on_step_begin: step timing", error)
        if self._resume is not None and self._resume.step_begin(args, state, kwargs):
            self._resume_record("on_step_begin")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        timings = self._session.timings
        if timings is not None and self._session.enabled:
            try:
                timings.step_ended()
            except Exception as error:
                record_or_raise(self._session, "on_step_end: step timing", error)
        if self._resume is not None and self._resume.step_end(args, state, control, kwargs):
            self._resume_record("on_step_end")

    def on_log(
        self, args: Any, state: Any, control: Any, logs: Optional[Mapping[str, Any]] = None, **kwargs: Any
    ) -> None:
        if logs:
            self._record(args, state, logs, "on_log")

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        if metrics:  # predict() hands its metrics here only: it does not log them
            self._record(args, state, metrics, "on_predict")

    def on_epoch_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._position(state)
        records = self._records
        if records is not None and records.config.data is not None and records.config.due(self._epoch):
            with guarded(self._session, "on_epoch_end: predictions snapshot"):
                records.snapshot(model, None, epoch_snapshot(self._epoch), epoch=self._epoch, step=self._step,
                                 batch_size=args.per_device_eval_batch_size)  # fmt: skip
        self._session.flush(hook="on_epoch_end", when_due=True)  # short epochs share a write: RunSession.flush

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._session.flush(hook="on_save")

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        hook, session = "on_train_end", self._session
        self._in_train = False
        self._position(state)
        if not session.enabled or session.run is None:
            return
        if self._records is not None:  # the Trainer's evaluation DataLoader exists once it evaluated
            with guarded(session, f"{hook}: predictions snapshot"):
                self._records.snapshot(model, kwargs.get("eval_dataloader"), FINAL_SNAPSHOT, epoch=self._epoch,
                                       step=self._step, batch_size=args.per_device_eval_batch_size)  # fmt: skip
        if self._weights is not None and model is not None:
            with guarded(session, f"{hook}: weights record"):
                named = [(name, t) for name, t in model.state_dict().items() if t.is_floating_point()]
                arrays = weight_arrays(named, lambda t: t.detach().float().cpu().numpy())
                write_weight_record(session.run.path, arrays, self._weights)
        with guarded(session, f"{hook}: metrics filter check"):
            text = session.recorder.nothing_kept()
            if text:
                warnings.warn(text, stacklevel=2)
        with guarded(session, f"{hook}: fit record"):  # written by close, at once: one manifest write
            session.end_fit(steps_done=state.global_step, write=False)
        with guarded(session, f"{hook}: end of run"):
            session.close(hook=hook)

    def _resume_record(self, hook: str) -> None:
        run, point = self._session.run, self._resume
        if run is not None and point is not None and self._session.enabled:
            with guarded(self._session, f"{hook}: resume point"):
                run.record(CaptureRecord(resume=point.record))

    # -- checkpoints: the Trainer keeps ExportableState callbacks' state() in trainer_state.json ----------------
    def state(self) -> dict[str, Any]:
        """The run's state for a checkpoint: the rows written so far (flushed first), the run directory."""
        session, saved = self._session, None
        session.flush(hook="state")  # a checkpoint's rows are on disk before it records how many
        with guarded(session, "state: checkpoint state"):  # a checkpoint is saved without it
            saved = session.state_dict() if session.run is not None else None
        arguments = {key: value for key, value in self._arguments.items() if _json_plain(value)}
        return {"args": arguments, "attributes": {_STATE_KEY: saved}}

    # -- helpers -------------------------------------------------------------------------------------------
    def _should_record(self, state: Any) -> bool:
        """Whether this process records: the world's process zero (every other records nothing)."""
        zero = getattr(state, "is_world_process_zero", None)
        self._session.enabled = bool(zero) if isinstance(zero, bool) else is_rank_zero()
        return self._session.enabled

    def _position(self, state: Any) -> None:
        self._step = _int_or_none(getattr(state, "global_step", None)) or 0
        self._epoch = epoch_index(getattr(state, "epoch", None))

    def _resume_from(self, state: Any) -> None:
        """A resumed ``train()``: continue the run the checkpoint names (its rows after the checkpoint dropped)."""
        saved = self._restored
        if saved is None:
            stored = (getattr(state, "stateful_callbacks", None) or {}).get(type(self).__name__)
            stored = stored[0] if isinstance(stored, list) and stored else stored
            attributes = stored.get("attributes") if isinstance(stored, Mapping) else None
            saved = attributes.get(_STATE_KEY) if isinstance(attributes, Mapping) else None
        if isinstance(saved, Mapping) and _int_or_none(getattr(state, "global_step", None)):
            self._session.load_state_dict(saved)

    @property
    def deviate_run(self) -> Optional[Mapping[str, Any]]:
        """The run's state as :meth:`state` saved it, set by the Trainer on a callback it restores from a checkpoint
        (``restore_callback_states_from_checkpoint=True``); read at ``on_train_begin``."""
        return self._restored

    @deviate_run.setter
    def deviate_run(self, value: Optional[Mapping[str, Any]]) -> None:
        self._restored = value

    def _start(self, args: Any, state: Any, hook: str) -> None:
        session = self._session
        new = session.run is None
        with guarded(session, f"{hook}: run start"):  # the first opening still raises: nothing ran yet
            session.open()
        if new and session.run is not None:
            with guarded(session, f"{hook}: fingerprint"):
                session.write_fingerprint(
                    dataloader_workers=_int_or_none(getattr(args, "dataloader_num_workers", None)),
                    extra={"transformers": trainer_facts(args, state)},
                )

    def _record(self, args: Any, state: Any, logs: Mapping[str, Any], hook: str) -> None:
        self._position(state)
        session = self._session
        if not self._should_record(state):
            return
        if session.run is None or not self._in_train:  # evaluate()/predict() outside train(): a run of their own
            self._start(args, state, hook)
        now, update = time.time(), session.recorder.update_many
        try:  # every `logging_steps` steps: no context manager here either
            for (stage, scope), items in trainer_log_groups(self._numbers(logs)).items():
                update(step=self._step, epoch=self._epoch, stage=stage, scope=scope, items=items, wall_time=now)
        except Exception as error:
            record_or_raise(session, f"{hook}: metrics", error)
        if not self._in_train:  # outside train() the values are the whole call's: written now
            with guarded(session, f"{hook}: end of run"):
                session.close(hook=hook)


def _int_or_none(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _json_plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str)) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value))  # fmt: skip


def _close_at_exit(ref: weakref.ref[DeviateCallback]) -> None:
    """Write what an interrupted ``train()`` buffered when Python exits (the Trainer has no exception hook), and
    record how far it got: its ``fit`` record still says ``started`` (:mod:`deviate_cb.store.completion`)."""
    callback = ref()
    if callback is None or not callback._in_train or callback._session.run is None:
        return
    raised = getattr(sys, "last_value", None)  # the exception that ended the process, when one did
    known = isinstance(raised, BaseException)
    error = raised if known else RuntimeError("the process exited while train() was running")
    with guarded(callback._session, "at exit: end of run"):
        callback._session.close(error=error, hook="at exit", steps_done=callback._step, exiting=not known)
