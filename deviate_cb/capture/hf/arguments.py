"""``TrainingArguments`` as a replica has them: its seeds, ``full_determinism`` and default ``output_dir`` taken over.

The Trainer seeds from ``args.seed`` (``set_seed``, or ``enable_full_determinism`` when ``full_determinism``), and its
samplers from ``args.data_seed`` (else from torch's seed): each is mapped as any seed the project asks for
(:mod:`deviate_cb.capture.seed_takeover`), ``full_determinism`` follows the variant
(:mod:`deviate_cb.capture.switch_takeover`), and a run with no ``output_dir`` writes inside its run directory.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, Optional

from deviate_cb.capture.import_hooks import when_imported
from deviate_cb.capture.seed_takeover import take_over_seed
from deviate_cb.capture.switch_takeover import take_over_flag

__all__ = ["DEFAULT_OUTPUT_DIR", "TRAINING_ARGS_MODULE", "install_arguments_takeover", "patch_training_arguments"]

TRAINING_ARGS_MODULE = "transformers.training_args"
DEFAULT_OUTPUT_DIR = "trainer_output"
"""Where ``TrainingArguments`` without ``output_dir`` write (transformers 5: ``trainer_output`` in the working
directory, shared by every replica); in a replica, ``<run_dir>/trainer_output`` instead."""
_MARK = "__deviate_arguments_takeover__"


def install_arguments_takeover(run_dir: Optional[str] = None) -> None:
    """Patch ``TrainingArguments`` (and so its subclasses: ``Seq2SeqTrainingArguments``, TRL's configs) as soon as
    transformers defines it.

    Example:
        >>> install_arguments_takeover("/tmp/run")  # in a replica, before the user's module runs  # doctest: +SKIP
    """
    when_imported(TRAINING_ARGS_MODULE, lambda module: patch_training_arguments(module.TrainingArguments, run_dir))


def patch_training_arguments(cls: type, run_dir: Optional[str] = None) -> None:
    """Wrap ``cls.__post_init__`` so that every instance's seeds and ``full_determinism`` are taken over (idempotent).

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Arguments:
        ...     output_dir: Optional[str] = None
        ...     seed: int = 42
        ...     data_seed: Optional[int] = None
        ...     full_determinism: bool = False
        ...     def __post_init__(self):
        ...         self.output_dir = self.output_dir or "trainer_output"
        >>> patch_training_arguments(Arguments, "/runs/replica=0")
        >>> Arguments().output_dir, Arguments(output_dir="out").output_dir
        ('/runs/replica=0/trainer_output', 'out')
    """
    original: Callable[..., Any] = getattr(cls, "__post_init__", None) or (lambda self: None)
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def __post_init__(self: Any, *args: Any, **kwargs: Any) -> None:
        unset = getattr(self, "output_dir", None) is None
        original(self, *args, **kwargs)
        take_over_arguments(self, run_dir if unset else None)

    setattr(__post_init__, _MARK, True)
    setattr(cls, "__post_init__", __post_init__)  # noqa: B010


def take_over_arguments(args: Any, run_dir: Optional[str] = None) -> None:
    """Take over one ``TrainingArguments``' seed, data seed and ``full_determinism``; move a default ``output_dir``
    (``run_dir`` given: the project set none) into ``run_dir``. Never raises: a failure leaves the project's values."""
    name = type(args).__name__
    try:
        args.seed = take_over_seed(f"transformers.{name}.seed", args.seed)
        if getattr(args, "data_seed", None) is not None:
            args.data_seed = take_over_seed(f"transformers.{name}.data_seed", args.data_seed)
        if getattr(args, "full_determinism", False):
            args.full_determinism = take_over_flag(f"transformers.{name}(full_determinism=True)", True)
        if run_dir is not None and getattr(args, "output_dir", None) == DEFAULT_OUTPUT_DIR:
            args.output_dir = os.path.join(run_dir, DEFAULT_OUTPUT_DIR)
    except Exception:  # an arguments class of another shape: the project's values stand
        return
