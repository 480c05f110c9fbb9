"""The adapters' per-step paths: a training step's time and logged values in a few attribute reads a step.

Lightning's is armed at each training epoch's start, its step's end hooked where Lightning counts the batch complete
(the shim in :mod:`deviate_cb.capture.lightning_tap`); Keras' reads one clock a step. Why: docs/design/capture.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Optional

from deviate_cb.capture.guard import record_or_raise
from deviate_cb.capture.lightning_tap import (
    LightningMetricTap,
    batch_progress,
    hook_completion,
    is_processed_not_completed,
    restore_hook,
    step_counters,
    training_results,
    unhook_completion,
)
from deviate_cb.capture.run_timings import HostSteps
from deviate_cb.capture.session import RunSession
from deviate_cb.capture.step_timer import StepTimer, cuda_events

__all__ = ["PENDING_STEPS", "HotPath", "StepClock", "StepHooks", "step_events"]

_perf_counter = time.perf_counter

PENDING_STEPS = 32
"""Steps whose logged values the hot path holds before converting them in one go (:meth:`HotPath.take`): a step then
costs two attribute reads a metric, and the conversion runs as one loop with its code in the cache."""
_step_caches = LightningMetricTap.step_caches  # one global lookup a step


class HotPath:
    """What the per-step hooks read in one training epoch: one attribute each. ``batches.ready - 1`` is
    ``total_batch_idx`` and ``optimizer_steps.completed`` is ``global_step``.

    Each step appends ``(global step, perf_counter at its end, what each metric of the plan holds)`` to
    :attr:`pending`; :meth:`take` turns up to :data:`PENDING_STEPS` of them into the recorder's rows, in order,
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
        :meth:`StepHooks.end_processed_step`) is not ended again; an error is a problem of the run, never raised
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
                if len(pending) >= PENDING_STEPS:
                    self.take()
        except Exception as error:
            record_or_raise(self.session, "on_train_batch_end: metrics", error)

    def completed(self) -> None:
        """Lightning counts the batch complete: the step ends, if one began (not a restart's count of the batch a
        checkpoint was saved in, before any step of this process)."""
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


class StepHooks:
    """Which path the callback's training-step hooks take in an epoch, and the hooks set aside or shadowed for it.

    Args:
        callback: The Lightning callback (its ``on_train_batch_start``/``_end`` may be set to None on it).
        base: The adapter's own class: a subclass's override of a step hook keeps it called every step.
        session: The run's session.
        tap: The callback's metric tap.
    """

    def __init__(self, callback: Any, base: type, session: RunSession, tap: LightningMetricTap) -> None:
        self.callback, self.base, self.session, self.tap = callback, base, session, tap
        self.hot: Optional[HotPath] = None  # what the per-step hooks need, armed at each training epoch's start
        self.completion: Optional[tuple[Any, Any, Any]] = None  # (batch progress, its shadow, what it calls)
        self.slow_step_open = False  # the slower path: a step began and its values were not read yet

    def _is_own(self, name: str) -> bool:
        return getattr(type(self.callback), name) is getattr(self.base, name)

    def _should_set_end_aside(self, one_shot: bool) -> bool:
        """Not where a subclass overrides on_train_batch_end or a wrapper is set on the instance (called every step,
        as they expect), nor where on_train_batch_start is not this class's own (it may not start the chain)."""
        return one_shot and self._is_own("on_train_batch_end") and "on_train_batch_end" not in self.callback.__dict__

    def arm(self, trainer: Any, *, slower: bool, read_slow_step: Callable[[], None]) -> None:
        """Decide for this training epoch whether the per-step hooks take the hot path, and resolve once what they
        read. ``slower``: an audit or a resume point (both hooks every step); ``read_slow_step``: reads a step's
        values on the slower path. On either path a step's values are read where Lightning counts its batch
        complete, where that can be hooked (:func:`~deviate_cb.capture.lightning_tap.hook_completion`)."""
        self.disarm()
        session, timings = self.session, self.session.timings
        if not session.enabled:  # a rank that records nothing
            return
        counters, results = step_counters(trainer), training_results(trainer)
        if counters is None or results is None:  # another Lightning layout: the properties, a step at a time
            return
        own = self._is_own("on_train_batch_start")  # it says when a step began
        steps = None if slower or timings is None else timings.host_steps("train", trainer.current_epoch)
        if steps is None:  # an audit, a resume point, a profiling window: both hooks every step
            if own:
                self.completion = hook_completion(batch_progress(trainer), lambda: self._slow_completed(read_slow_step))
            return
        # only the adapter's own hook sets itself aside: a subclass's override or a wrapper on the instance stays
        one_shot = own and self.callback.__dict__.get("on_train_batch_start") is None
        on_cpu = trainer.strategy.root_device.type == "cpu"  # values as floats: see step_values
        hot = self.hot = HotPath(steps, *counters, results, self.tap, session, on_cpu=on_cpu, one_shot=one_shot)
        if self._should_set_end_aside(one_shot):
            self.completion = hook_completion(batch_progress(trainer), hot.completed)
            if self.completion is not None:
                self.callback.on_train_batch_end = None

    def _slow_completed(self, read_slow_step: Callable[[], None]) -> None:
        """The slower path's step values, read where Lightning counts the batch complete (after the module's own
        on_train_batch_end, as Lightning's loggers read them); only after a step began (not a restart's count)."""
        if self.slow_step_open:
            self.slow_step_open = False
            read_slow_step()

    def end_processed_step(self) -> bool:
        """With the step's end hooked on Lightning's count of completed batches: end now a step that ran its
        training step and is not counted complete yet (a checkpoint saved, an exception raised in some callback's
        ``on_train_batch_end``), so that a checkpoint's rows include the step it was saved at. Returns whether a
        step had begun."""
        if self.completion is None or not is_processed_not_completed(self.completion[0]):
            return False
        began = self.slow_step_open if self.hot is None else self.hot.steps.started is not None
        self.completion[2]()  # what the count calls: the step ends now, and the count finds it ended
        return began

    def pause(self) -> None:
        """Training pauses (validation, the epoch's end): the next training step starts a new chain, timed from its
        own start (on_train_batch_start is called again), not from the last step's end."""
        hot = self.hot
        if hot is not None:
            hot.steps.started = None
            hot.take()
        restore_hook(self.callback, "on_train_batch_start")

    def disarm(self, *, pause: bool = True) -> None:
        """The per-step hooks take the slower path (and on_train_batch_start is called every step) until the next
        :meth:`arm`. ``pause``: forget the chain's open step (the next one has not begun); without it (an
        exception) the step in progress is kept, timed up to the end of the run."""
        completion, self.completion, self.slow_step_open = self.completion, None, False
        if completion is not None:
            unhook_completion(completion)
            restore_hook(self.callback, "on_train_batch_end")
        hot = self.hot
        if hot is not None:
            hot.take()
            if pause:
                hot.steps.started = None
        restore_hook(self.callback, "on_train_batch_start")
        self.hot = None


class StepClock:
    """Training steps timed with one clock reading a step, for the Keras adapter's hot path.

    ``on_train_batch_begin`` appends the step and a reading of :attr:`now` to :attr:`steps` and :attr:`starts`
    (one call, no object); a step lasts from its start to the next step's start, or to :meth:`stop` for the
    epoch's last one (its training ends: validation or the epoch end). :meth:`hand_over` gives the steps to the
    run's :class:`~deviate_cb.capture.step_timer.StepTimer` at the epoch end, the rows it would have recorded
    itself (``step_started``/``step_ended`` a step, two clock reads) with a flush still to come.

    Args:
        events: ``None``: the host clock (``time.perf_counter``). Else what records a CUDA event on the current
            stream and returns it (the step timer's
            :meth:`~deviate_cb.capture.step_timer.StepTimer.record_event`, Keras on torch with CUDA): each reading
            is an event, nothing waits, and the steps go to the timer as ``[start, end]`` events, read at its flush.

    Example:
        >>> clock, timer = StepClock(), StepTimer()
        >>> clock.steps += [0, 1]; clock.starts += [10.0, 10.5]
        >>> clock.stopped = 11.25
        >>> clock.hand_over(timer, epoch=0)
        >>> timer.columns(0).step, timer.columns(0).wall_s, clock.steps
        ([0, 1], [0.5, 0.75], [])
    """

    __slots__ = ("events", "now", "starts", "steps", "stopped")

    def __init__(self, events: Optional[Callable[[], Any]] = None) -> None:
        self.events = events is not None
        self.now: Callable[[], Any] = time.perf_counter if events is None else events
        self.steps: list[int] = []
        self.starts: list[Any] = []  # perf_counter readings, or events
        self.stopped: Any = None  # when the last step ended, once it has

    def stop(self) -> None:
        """The last step started ends now (nothing if no step is open)."""
        if self.steps and self.stopped is None:
            self.stopped = self.now()

    def hand_over(self, timer: StepTimer, epoch: int) -> None:
        """End the last step (if :meth:`stop` did not) and record every step in ``timer``; start afresh."""
        if not self.steps:
            return
        self.stop()
        steps, starts, stopped = self.steps, self.starts, self.stopped
        self.steps, self.starts, self.stopped = [], [], None
        ends = [*starts[1:], stopped]
        if self.events:
            timer.extend("train", epoch, steps, [[start, end] for start, end in zip(starts, ends, strict=True)])
        else:
            timer.extend("train", epoch, steps, [end - start for start, end in zip(starts, ends, strict=True)])


def step_events(backend: str) -> Optional[Callable[[], Any]]:
    """Device timing events for the step timer: CUDA events on torch with CUDA (read at the flush, no per-step
    synchronisation); ``None`` elsewhere (TensorFlow, JAX: the host clock, which never blocks)."""
    if backend == "torch":
        import torch

        if torch.cuda.is_available():
            return cuda_events("cuda")
    return None
