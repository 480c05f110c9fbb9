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

__all__ = ["DIRECTIONS", "infer_direction", "resolve_direction", "validate_direction"]

DIRECTIONS = ("max", "min")

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
