"""Read what a LightningModule logged with ``self.log`` straight from Lightning's result collections.

Lightning keeps each logged value in a ``_ResultCollection`` (one per loop): the last step's value in
``_forward_cache`` (a fresh clone per ``self.log`` call) and the epoch reduction in ``_computed``. Reading
those objects costs no ``.item()`` and no device sync; comparing object identity with the last value taken
tells whether a metric was logged again since. ``trainer.callback_metrics`` is not enough: it never holds
step-level validation/test values, and the values a module logs in its own ``on_*_epoch_end`` hooks arrive
after the callbacks' hooks ran. This module is the only place that touches those internals (Lightning 2.x).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import torch

__all__ = ["LightningMetricTap", "tensors_to_floats"]

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
