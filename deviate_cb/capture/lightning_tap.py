"""Lightning's internals behind one shim: the values a LightningModule logged, read from its result collections
(``_forward_cache``, ``_computed``: no ``.item()``, no device sync), and the loop objects the adapter's hot path reads
and hooks. The only module that touches Lightning's private attributes (Lightning 2.x; tests/lightning_cb/
test_internals_shim.py fails, naming the attribute, when the installed Lightning no longer has one).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import torch

__all__ = [
    "UNUSED_BATCH_HOOKS",
    "LightningMetricTap",
    "batch_progress",
    "hook_completion",
    "is_processed_not_completed",
    "loop_results",
    "restore_hook",
    "set_aside",
    "step_counters",
    "tensors_to_floats",
    "training_results",
    "unhook_completion",
]

_DTYPE = operator.attrgetter("dtype")


class LightningMetricTap:
    """Takes new step and epoch values out of a ``_ResultCollection``, each value once.

    Example:
        >>> tap = LightningMetricTap()
        >>> tap.step_values("train", None)
        []
    """

    def __init__(self) -> None:
        self._taken: dict[tuple[str, str, bool], Any] = {}  # epoch values: (stage, key, False) -> _computed
        self._taken_steps: dict[str, Any] = {}  # step values: collection key -> _forward_cache
        # per (stage, collection): (number of keys when planned, [(key, metric, forked step name)])
        self._plans: dict[tuple[str, int], tuple[int, list[tuple[str, Any, str]]]] = {}

    def step_plan(self, stage: str, results: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        """The collection's ``on_step`` metrics as ``(key, metric, name)``, rebuilt only when a new key appears
        (``len(results)`` changed): what :meth:`step_caches` reads and :meth:`take_step` takes from."""
        cached = self._plans.get((stage, id(results)))
        if cached is not None and cached[0] == len(results):
            return cached[1]
        plan = [
            (key, metric, results._forked_name(metric, True)[1])  # type: ignore[attr-defined]
            for key, metric in results.items()
            if metric.meta.on_step
        ]
        self._plans[(stage, id(results))] = (len(results), plan)
        return plan

    @staticmethod
    def step_caches(plan: Sequence[tuple[str, Any, str]]) -> list[Any]:
        """What each metric of ``plan`` holds as its last step value at this moment (``None`` once reset): read at
        a step's end, taken later with :meth:`take_step` (a Lightning hot path reads two attributes a metric per
        step and converts a batch of steps at once). A value read here stays alive until it is taken."""
        return [None if metric.has_reset else metric._forward_cache for _, metric, _ in plan]

    def take_step(
        self, plan: Sequence[tuple[str, Any, str]], caches: Sequence[Any], *, on_cpu: bool = False
    ) -> list[tuple[str, Any]]:
        """The values of ``caches`` (:meth:`step_caches` of the same ``plan``) not taken before, named as Lightning
        names them; steps must be taken in the order they ran. ``on_cpu``: see :meth:`step_values`."""
        taken = self._taken_steps  # keys differ across collections: their hook name (fx) is part of them
        values: list[tuple[str, Any]] = []
        for (key, _, name), cache in zip(plan, caches, strict=True):
            if cache is None or taken.get(key) is cache:
                continue
            taken[key] = cache
            if on_cpu and cache.is_cpu:
                values.append((name, cache.item()))
            else:  # Lightning detaches logged values unless `enable_graph=True`; never keep a graph alive
                values.append((name, cache.detach() if cache.requires_grad else cache))
        return values

    def step_values(
        self, stage: str, results: Optional[Mapping[str, Any]], *, on_cpu: bool = False
    ) -> list[tuple[str, Any]]:
        """Values logged with ``on_step=True`` since the last call, named as Lightning names them.

        ``on_cpu`` (the module trains on the CPU): each value as a Python float (``.item()``, exact, no device to
        wait for), so that no logged tensor outlives its step by much: holding a whole epoch of step tensors until
        the flush keeps memory from being reused, which slows the training steps that follow (their new tensors
        land in memory not in the cache) by more than converting costs. A value not on the CPU is kept as a tensor
        all the same.
        """
        if not results:
            return []
        plan = self.step_plan(stage, results)
        return self.take_step(plan, self.step_caches(plan), on_cpu=on_cpu)

    def epoch_values(
        self, stage: str, results: Optional[Mapping[str, Any]], *, keys: Optional[set[str]] = None
    ) -> list[tuple[str, torch.Tensor]]:
        """Epoch reductions not taken yet (computing them as Lightning would; call on every rank).

        Args:
            stage: ``train``, ``val`` or ``test``.
            results: The loop's result collection.
            keys: If given, the collection keys whose values were taken are added to it.
        """
        if not results:
            return []
        values = []
        for key, metric in results.items():
            if not metric.meta.on_epoch or metric.has_reset:
                continue
            value = results._get_cache(metric, False)  # type: ignore[attr-defined]
            computed = metric._computed
            if not isinstance(value, torch.Tensor) or self._taken.get((stage, key, False)) is computed:
                continue
            self._taken[(stage, key, False)] = computed
            values.append((results._forked_name(metric, False)[1], value.detach()))  # type: ignore[attr-defined]
            if keys is not None:
                keys.add(key)
        return values

    @staticmethod
    def late_epoch_values(
        results: Optional[Mapping[str, Any]], taken_keys: set[str], callback_metrics: Mapping[str, Any]
    ) -> list[tuple[str, torch.Tensor]]:
        """Epoch values logged after the callbacks' epoch-end hook (in the module's own ``on_*_epoch_end``).

        After the epoch, Lightning resets the collection but keeps the values in ``trainer.callback_metrics``.
        """
        if not results:
            return []
        values = []
        for key, metric in results.items():
            if key in taken_keys or not metric.meta.on_epoch:
                continue
            name = results._forked_name(metric, False)[1]  # type: ignore[attr-defined]
            value = callback_metrics.get(name)
            if isinstance(value, torch.Tensor):
                values.append((name, value.detach()))
        return values


def tensors_to_floats(values: list[Any]) -> list[float]:
    """Convert buffered values to floats with one device transfer per (device, dtype) group.

    Example:
        >>> tensors_to_floats([torch.tensor(0.5), 2, torch.tensor(float("nan")), torch.tensor([1.5])])
        [0.5, 2.0, nan, 1.5]
        >>> tensors_to_floats([torch.tensor(0.25), torch.tensor(2**40 + 1)])  # an int64 next to a float32: exact
        [0.25, 1099511627777.0]
    """
    first = values[0] if values else None
    if type(first) is float or (isinstance(first, torch.Tensor) and first.is_cpu):  # CPU: no device to go through
        try:  # `.item()` of each: exact, and about half the time of a stack of thousands of 0-d tensors
            if all([type(value) is float or (isinstance(value, torch.Tensor) and value.is_cpu) for value in values]):
                return [value if type(value) is float else float(value.item()) for value in values]
        except (RuntimeError, TypeError, ValueError):  # several elements (the first of each, below), complex
            pass
    elif isinstance(first, torch.Tensor):  # the usual case on a GPU: one device and dtype, one stack
        try:
            if len(set(map(_DTYPE, values))) == 1:  # no promotion: each value converts as alone
                stacked = torch.stack(values).reshape(len(values), -1)[:, 0]
                return stacked.cpu().double().tolist()  # type: ignore[no-any-return]
        except (AttributeError, TypeError, RuntimeError):  # not all tensors, shapes or devices differ
            pass
    floats: list[float] = [0.0] * len(values)
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for index, value in enumerate(values):
        if isinstance(value, torch.Tensor):
            groups.setdefault((value.device, value.dtype), []).append(index)
        else:
            floats[index] = float(value)
    for indices in groups.values():
        group = [values[i] for i in indices]
        try:  # the usual case: every value of the group has one shape (0-d, as self.log gives): one stack
            stacked = torch.stack(group).reshape(len(group), -1)[:, 0]
        except RuntimeError:  # shapes differ (0-d next to [1]): the first element of each
            stacked = torch.stack([value.reshape(-1)[0] for value in group])
        for index, number in zip(indices, stacked.cpu().double().tolist(), strict=True):
            floats[index] = number
    return floats


# -- the shim: the other private attributes of Lightning the adapter relies on (tests/lightning_cb/test_internals_shim)
UNUSED_BATCH_HOOKS = (
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_validation_batch_start",
    "on_test_batch_start",
    "on_predict_batch_start",
)
"""Per-batch hooks of ``lightning.pytorch.Callback`` that the adapter does not use (set aside on the instance)."""


def set_aside(callback: Any, base: type, names: Sequence[str]) -> None:
    """Set each hook of ``names`` to None on the instance, which Lightning's ``_call_callback_hooks`` skips (it calls
    only what is callable); a hook that a subclass of ``base`` overrides is kept."""
    for name in names:
        if getattr(type(callback), name) is getattr(base, name):
            setattr(callback, name, None)


def restore_hook(callback: Any, name: str) -> None:
    """Undo ``<name> = None`` on the instance (and nothing else set there)."""
    if name in callback.__dict__ and callback.__dict__[name] is None:
        del callback.__dict__[name]


def training_results(trainer: Any) -> Any:
    """The training epoch loop's result collection (``None`` outside a training epoch)."""
    return trainer.fit_loop.epoch_loop._results


def loop_results(trainer: Any) -> Any:
    """The result collection of the loop that runs now (validation, test)."""
    return trainer._results


def batch_progress(trainer: Any) -> Any:
    """The training epoch loop's batch progress (its ``increment_completed`` ends a step: :func:`hook_completion`)."""
    return trainer.fit_loop.epoch_loop.batch_progress


def hook_completion(progress: Any, completed: Callable[[], None]) -> Optional[tuple[Any, Any, Any]]:
    """Call ``completed`` where Lightning counts a training batch complete: ``progress.increment_completed`` (called
    once a batch, after every callback's and the module's ``on_train_batch_end`` and Lightning's logger connector,
    before the loggers read the step's values) shadowed on the instance by a function that calls ``completed`` and
    then counts. ``(progress, that function, completed)`` to undo it with (:func:`unhook_completion`), or ``None``
    where this Lightning keeps no such method, or something else shadowed it first."""
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


def unhook_completion(completion: tuple[Any, Any, Any]) -> None:
    """Undo :func:`hook_completion` (only the function it set)."""
    progress, hooked = completion[0], completion[1]
    if getattr(progress, "__dict__", {}).get("increment_completed") is hooked:
        del progress.__dict__["increment_completed"]


def is_processed_not_completed(progress: Any) -> bool:
    """Whether the batch progress counts a batch processed (its training step ran) but not completed yet."""
    batches = progress.total
    processed, completed = getattr(batches, "processed", None), getattr(batches, "completed", None)
    return processed == batches.ready and completed is not None and completed < processed


def step_counters(trainer: Any) -> Optional[tuple[Any, Any]]:
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
