"""The Lightning internals shim (deviate_cb.capture.lightning_tap): every private attribute and method it relies on
exists on a real Trainer's loop objects during a tiny fit. A failure names each attribute the installed Lightning
no longer has, so that an upgrade that breaks the shim says where at once."""

from __future__ import annotations

import warnings
from typing import Any

import lightning as L
import torch

from deviate_cb.capture.lightning_tap import UNUSED_BATCH_HOOKS, step_counters
from lightning_cb.models import TinyModule, loader, trainer

# (what the shim reads, the object's path from the trainer, the attributes it needs there)
_LOOP_ATTRIBUTES = [
    ("training result collection", "fit_loop.epoch_loop._results", ("_forked_name", "_get_cache", "items")),
    ("running loop's result collection", "_results", ("_forked_name", "_get_cache", "items")),
    ("batch progress", "fit_loop.epoch_loop.batch_progress", ("increment_completed", "total")),
    ("batch counts", "fit_loop.epoch_loop.batch_progress.total", ("ready", "processed", "completed")),
    (
        "optimizer steps (automatic optimization)",
        "fit_loop.epoch_loop.automatic_optimization.optim_progress.optimizer.step.total",
        ("completed",),
    ),
    ("optimizer steps (manual optimization)", "fit_loop.epoch_loop.manual_optimization.optim_step_progress.total", ()),
    ("epoch loop", "fit_loop.epoch_loop", ("total_batch_idx", "global_step")),
]
_METRIC_ATTRIBUTES = ("_forward_cache", "_computed", "has_reset", "meta")
_META_ATTRIBUTES = ("on_step", "on_epoch")


def _missing_on(root: Any, path: str, names: tuple[str, ...]) -> list[str]:
    obj = root
    for part in path.split("."):
        if not hasattr(obj, part):
            return [f"trainer.{path} (no `{part}`)"]
        obj = getattr(obj, part)
    if obj is None:
        return [f"trainer.{path} is None during a training step"]
    return [f"trainer.{path}.{name}" for name in names if not hasattr(obj, name)]


class _Inspect(L.Callback):
    """Reads, in a training step's end, what the shim reads there."""

    def __init__(self) -> None:
        self.missing: list[str] = []
        self.counters: Any = "not read"

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.counters != "not read":
            return
        for _, path, names in _LOOP_ATTRIBUTES:
            self.missing += _missing_on(trainer, path, names)
        results = getattr(trainer.fit_loop.epoch_loop, "_results", None)
        for key, metric in dict(results.items() if results is not None else {}).items():
            self.missing += [
                f"result metric {key!r}.{name}" for name in _METRIC_ATTRIBUTES if not hasattr(metric, name)
            ]
            meta = getattr(metric, "meta", None)
            self.missing += [
                f"result metric {key!r}.meta.{name}" for name in _META_ATTRIBUTES if not hasattr(meta, name)
            ]
        progress = trainer.fit_loop.epoch_loop.batch_progress
        if getattr(type(progress), "increment_completed", None) is None:
            self.missing.append(f"{type(progress).__name__}.increment_completed (a method of the class)")
        self.counters = step_counters(trainer)


def test_the_installed_lightning_has_every_private_attribute_the_shim_uses() -> None:
    inspect = _Inspect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([inspect], max_epochs=1)
        fit.fit(TinyModule(), loader())
    assert inspect.missing == [], "Lightning no longer has what deviate_cb.capture.lightning_tap relies on: " + (
        "; ".join(inspect.missing)
    )
    assert inspect.counters is not None, "step_counters: Lightning's progress counters disagree with its properties"


def test_lightning_skips_a_per_batch_hook_set_to_none_on_the_instance() -> None:
    missing = [name for name in UNUSED_BATCH_HOOKS if not callable(getattr(L.Callback, name, None))]
    assert missing == [], f"lightning.pytorch.Callback no longer has the hooks {missing}"

    class SetAside(L.Callback):
        pass

    callback = SetAside()
    for name in (*UNUSED_BATCH_HOOKS, "on_train_batch_start", "on_train_batch_end", "on_before_backward"):
        setattr(callback, name, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = trainer([callback], max_epochs=1)
        fit.fit(TinyModule(), loader(), loader(shuffle=False))
    assert fit.state.finished, "Lightning's _call_callback_hooks no longer skips a hook set to None"
    assert torch.is_tensor(fit.callback_metrics.get("train_loss"))
