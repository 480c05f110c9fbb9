"""Which way a metric improves: ``"max"`` (accuracy-like) or ``"min"`` (loss- and error-like), from its name.

Example:
    >>> infer_direction("valMeanSquaredError"), infer_direction("top1"), infer_direction("lr")
    ('min', 'max', None)
    >>> resolve_direction("lr", {"lr": "min"})
    'min'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Optional

__all__ = ["DIRECTIONS", "infer_direction", "is_timing_metric", "resolve_direction", "validate_direction"]

DIRECTIONS = ("max", "min")

# How long and how fast a run went, and how much it computed, as the Hugging Face Trainer logs it beside its metrics
# (eval_runtime, train_samples_per_second, total_flos): never what the run learned; its times differ between
# bit-identical runs.
_TIMING = re.compile(r"(runtime|samples_per_second|steps_per_second|(^|_)flos)$", re.IGNORECASE)


def is_timing_metric(name: str) -> bool:
    """Whether a metric's name says it measures time or throughput, not the model (``eval_runtime``).

    Such values differ between bit-identical runs: the control check leaves them out, and the report answers for
    them only when asked to by name or when nothing else is recorded.

    Example:
        >>> [is_timing_metric(n) for n in ("eval_runtime", "train_samples_per_second", "total_flos", "eval_loss")]
        [True, True, True, False]
    """
    return bool(_TIMING.search(name))


# Name tokens that say "lower is better" / "higher is better". A name is split into tokens at anything
# that is not a letter or digit and at camelCase boundaries; the right-most token that is known decides.
# fmt: off
_MINIMISE = frozenset({
    "loss", "losses", "error", "errors", "err", "mse", "mae", "rmse", "rmsle", "msle", "mape", "smape", "nll",
    "perplexity", "ppl", "wer", "cer", "ter", "crossentropy", "xent", "ce", "bce", "kl", "kld", "divergence",
    "hinge", "fid", "lpips", "eer", "regret", "distance",
})
_MAXIMISE = frozenset({
    "acc", "accuracy", "top1", "top5", "f1", "fbeta", "auc", "auroc", "auprc", "precision", "prec", "recall", "iou",
    "miou", "jaccard", "dice", "map", "ap", "ndcg", "mrr", "bleu", "rouge", "meteor", "r2", "score", "psnr", "ssim",
    "kappa", "mcc", "reward", "return", "sensitivity", "specificity",
})
# fmt: on
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^0-9a-z]+")


def infer_direction(name: str) -> Optional[str]:
    """Whether a larger value of metric ``name`` is better (``"max"``), worse (``"min"``), or unknown (``None``).

    Args:
        name: A metric name such as ``val_acc``, ``train/loss`` or ``valMeanSquaredError``.

    Returns:
        ``"max"`` for accuracy-like names, ``"min"`` for loss- and error-like names, ``None`` otherwise.

    Example:
        >>> infer_direction("val_acc"), infer_direction("train_loss"), infer_direction("lr")
        ('max', 'min', None)
    """
    tokens = [t for t in _SPLIT.split(_CAMEL.sub("_", str(name)).lower()) if t]
    for token in reversed(tokens):
        for candidate in (token, token.rstrip("0123456789")):
            if candidate in _MINIMISE:
                return "min"
            if candidate in _MAXIMISE:
                return "max"
    return None


def resolve_direction(name: str, directions: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The direction of ``name``: an explicit entry in ``directions`` wins over :func:`infer_direction`.

    Example:
        >>> resolve_direction("val_acc", {"val_acc": "min"}), resolve_direction("val_acc")
        ('min', 'max')
    """
    if directions and name in directions:
        return validate_direction(directions[name], f"directions[{name!r}]")
    return infer_direction(name)


def validate_direction(direction: object, label: str = "direction") -> str:
    """``direction`` as a string when it is ``"max"`` or ``"min"``; else ``ValueError`` naming ``label``.

    Example:
        >>> validate_direction("max")
        'max'
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"`{label}` must be 'max' or 'min'. Received: {label}={direction!r}.")
    return str(direction)
