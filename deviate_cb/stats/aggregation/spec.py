"""The names of the per-run aggregates, and how ``"at_step=S"`` / ``"at_epoch=E"`` are spelled and parsed.

Example:
    >>> parse_aggregate("at_step=100"), parse_aggregate("last")
    (('at_step', 100), ('last', None))
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["AGGREGATES", "AT_AGGREGATES", "parse_aggregate", "validate_how"]

# The aggregates that need no argument (what `deviate report --aggregate` accepts) and those that need `at`.
AGGREGATES = ("last", "best", "mean")
AT_AGGREGATES = ("at_step", "at_epoch")


def parse_aggregate(how: str, at: Optional[int] = None) -> tuple[str, Optional[int]]:
    """Split an aggregate spelled ``"at_step=S"`` / ``"at_epoch=E"`` into its name and its step or epoch.

    Args:
        how: ``"last"``, ``"best"``, ``"mean"``, ``"at_step"``, ``"at_epoch"``, ``"at_step=S"`` or ``"at_epoch=E"``.
        at: The step or epoch, when ``how`` is ``"at_step"`` or ``"at_epoch"`` without ``=``.

    Returns:
        ``(name, at)``; ``at`` is ``None`` for ``last``, ``best`` and ``mean``.

    Example:
        >>> parse_aggregate("at_epoch=9"), parse_aggregate("at_step", at=100), parse_aggregate("best")
        (('at_epoch', 9), ('at_step', 100), ('best', None))
    """
    return _validate_parse_aggregate(how, at)


def validate_how(how: object, at: object = None) -> tuple[str, Optional[int]]:
    """``(name, at)`` of a valid ``how`` (and ``at``), else ``ValueError`` or ``TypeError`` saying what is wrong.

    Example:
        >>> validate_how("at_epoch", 3)
        ('at_epoch', 3)
    """
    names = (*AGGREGATES, *AT_AGGREGATES)
    spec = how
    if isinstance(how, str) and "=" in how:
        spec, _, text = how.partition("=")
        if spec not in AT_AGGREGATES:
            raise ValueError(f"`how` must be one of {', '.join(AGGREGATES)}. Received: how={how!r}.")
        try:
            parsed = int(text.strip())
        except ValueError:
            raise ValueError(f"`how` must give an integer after '='. Received: how={how!r}.") from None
        if at is not None and at != parsed:
            raise ValueError(f"`at` contradicts `how`. Received: how={how!r}, at={at!r}.")
        at = parsed
    if spec not in names:
        raise ValueError(f"`how` must be one of {', '.join(AGGREGATES)}. Received: how={how!r}.")
    if spec in AT_AGGREGATES:
        if at is None:
            raise ValueError(f"`at` must be given when how={spec!r}. Received: at=None.")
        if isinstance(at, bool) or not isinstance(at, (int, np.integer)):
            raise TypeError(f"`at` must be an integer. Received: at={at!r}.")
        return str(spec), int(at)
    if at is not None:
        raise ValueError(f"`at` applies to at_step and at_epoch only. Received: how={how!r}, at={at!r}.")
    return str(spec), None


def _validate_parse_aggregate(how: object, at: object) -> tuple[str, Optional[int]]:
    return validate_how(how, at)
