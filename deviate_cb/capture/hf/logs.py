"""A Hugging Face ``Trainer``'s logs as metric rows: the stage each key belongs to, under the name the Trainer shows.

Example:
    >>> groups = trainer_log_groups({"loss": 0.7, "grad_norm": 1.5, "learning_rate": 5e-05, "epoch": 0.25})
    >>> groups[("train", "step")]
    [('loss', 0.7), ('grad_norm', 1.5), ('learning_rate', 5e-05)]
    >>> trainer_log_groups({"eval_loss": 0.69, "eval_runtime": 0.01, "epoch": 1.0})
    {('val', 'epoch'): [('eval_loss', 0.69), ('eval_runtime', 0.01)]}
    >>> epoch_index(0.25), epoch_index(1.0), epoch_index(1.25), epoch_index(None)
    (0, 0, 1, 0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Optional

__all__ = ["TRAIN_SUMMARY", "epoch_index", "trainer_facts", "trainer_log_groups"]

TRAIN_SUMMARY = frozenset(
    ("train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss")
)
"""The keys of the one log ``Trainer.train`` writes at its end: reductions over the whole fit (scope ``epoch``)."""

_SKIPPED = frozenset(("epoch", "step"))  # the position of a log, recorded in the step and epoch columns


def trainer_log_groups(items: Iterable[tuple[str, float]] | Mapping[str, Any]) -> dict[tuple[str, str], list[Any]]:
    """``(stage, scope) -> [(name, value), ...]`` for one ``on_log`` call, names kept as the Trainer logs them.

    ``eval_*`` keys (``Trainer.evaluate``, within or outside a fit) are stage ``val``, ``test_*`` keys
    (``evaluate(metric_key_prefix="test")``, ``predict``) stage ``test``, both reduced over their set (scope
    ``epoch``); the end-of-fit summary (:data:`TRAIN_SUMMARY`) is ``train``/``epoch``; every other key (``loss``,
    ``grad_norm``, ``learning_rate``, a user's ``self.log({...})``) is ``train``/``step``: the Trainer logs it
    every ``logging_steps`` optimizer steps, ``loss`` averaged over them. ``epoch`` is left out.
    """
    pairs = items.items() if isinstance(items, Mapping) else items
    groups: dict[tuple[str, str], list[Any]] = {}
    for name, value in pairs:
        if name in _SKIPPED:
            continue
        if name.startswith("eval_"):
            key = ("val", "epoch")
        elif name.startswith("test_"):
            key = ("test", "epoch")
        elif name in TRAIN_SUMMARY:
            key = ("train", "epoch")
        else:
            key = ("train", "step")
        groups.setdefault(key, []).append((name, value))
    return groups


def epoch_index(epoch: Optional[float]) -> int:
    """The zero-based epoch a ``TrainerState.epoch`` (``1.25``: a quarter into the second epoch) falls in.

    ``1.0`` is the last step of the first epoch (the Trainer counts an epoch done at its last step), so it is
    epoch 0, as an evaluation at that epoch's end is.
    """
    if epoch is None or not isinstance(epoch, (int, float)) or not math.isfinite(epoch) or epoch <= 0:
        return 0
    return max(math.ceil(epoch - 1e-9) - 1, 0)


def trainer_facts(args: Any, state: Any) -> dict[str, Any]:
    """What a ``Trainer`` tells about a run, for the fingerprint: seeds, determinism, batch and precision settings.

    Read from public ``TrainingArguments`` and ``TrainerState`` attributes only; a missing one is ``None``.

    Example:
        >>> class Args:
        ...     seed, data_seed, full_determinism, per_device_train_batch_size = 3, None, False, 8
        >>> facts = trainer_facts(Args(), None)
        >>> facts["seed"], facts["data_seed"], facts["per_device_train_batch_size"], facts["bf16"]
        (3, None, 8, None)
    """
    names = (
        "seed", "data_seed", "full_determinism", "per_device_train_batch_size", "gradient_accumulation_steps",
        "num_train_epochs", "max_steps", "learning_rate", "bf16", "fp16", "tf32", "torch_compile",
        "dataloader_num_workers", "n_gpu", "world_size", "parallel_mode", "optim", "lr_scheduler_type",
    )  # fmt: skip
    facts = {name: _plain(getattr(args, name, None)) for name in names}
    facts["planned_steps"] = _plain(getattr(state, "max_steps", None))
    return facts


def _plain(value: Any) -> Any:
    """A JSON-safe fact: numbers, text and ``None`` as they are, an enum by its value, anything else as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    inner = getattr(value, "value", None)
    return inner if isinstance(inner, (int, float, str)) else str(value)
