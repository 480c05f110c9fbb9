"""How the report names, selects and orients metrics: ``name``, or ``stage/name`` when a name is in several stages.

Example:
    >>> display = display_names([("train", "loss"), ("val", "loss"), ("val", "acc")])
    >>> sorted(display.values())
    ['acc', 'train/loss', 'val/loss']
    >>> sorted(kept_metrics(["val*"], display, None))
    ['acc', 'val/loss']
    >>> sorted(kept_metrics(["val_loss"], display, None))
    ['val/loss']
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

from deviate_cb.errors import UsageError

__all__ = ["direction_warnings", "display_names", "kept_metrics", "metric_options", "name_directions"]


def display_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """``(stage, name) -> metric``: the name, or ``stage/name`` for a name that occurs in several stages."""
    pairs = list(pairs)
    stages: dict[str, set[str]] = {}
    for stage, name in pairs:
        stages.setdefault(name, set()).add(stage)
    return {(stage, name): (f"{stage}/{name}" if len(stages[name]) > 1 else name) for stage, name in pairs}


def kept_metrics(patterns: Sequence[str], display: Mapping[tuple[str, str], str], stage: Optional[str]) -> set[str]:
    """The metrics whose name, ``stage/name`` or displayed name matches a ``--metric`` pattern.

    Raises:
        UsageError: No metric matches.
    """
    keep = {
        metric
        for (stage_, name), metric in display.items()
        if any(fnmatch.fnmatchcase(c, p) for p in patterns for c in _spellings(stage_, name, metric == name, metric))
    }
    if not keep and display:
        raise UsageError(
            f"`--metric` matches no metric{f' of stage {stage}' if stage else ''}. "
            f"Received: {metric_options(patterns)}. Expected one of: {', '.join(sorted(set(display.values())))}."
        )
    return keep


def metric_options(patterns: Iterable[str]) -> str:
    """``--metric`` patterns as the user typed them, for a message.

    Example:
        >>> metric_options(["val_accuracy", "val loss"])
        "--metric val_accuracy --metric 'val loss'"
    """
    import shlex

    return " ".join(f"--metric {shlex.quote(pattern)}" for pattern in patterns)


def name_directions(directions: Optional[Mapping[str, str]], display: Mapping[tuple[str, str], str]) -> dict:
    """Directions keyed by displayed metric: an entry for ``name`` covers every ``stage/name`` of it."""
    out: dict[str, str] = {}
    for (stage, name), metric in display.items():
        for key in _spellings(stage, name, metric == name):
            if directions and key in directions:
                out[metric] = directions[key]
    return out


def direction_warnings(directions: Optional[Mapping[str, str]], display: Mapping[tuple[str, str], str]) -> list[str]:
    """One line per ``--direction`` that names no metric of the report."""
    known = {key for (stage, name), metric in display.items() for key in _spellings(stage, name, metric == name)}
    return [
        f"`--direction {key}={(directions or {})[key]}` names no metric of this report; it is ignored."
        for key in sorted(set(directions or {}) - known)
    ]


def _spellings(stage: str, name: str, alone: bool, *more: str) -> tuple[str, ...]:
    """The words that name a metric: its name, ``stage/name``, and, for a name in several stages (``alone`` false:
    Keras logs ``loss`` for training and validation), ``stage_name`` as Keras spells it (``val_loss``)."""
    return (name, *more, f"{stage}/{name}") if alone else (name, *more, f"{stage}/{name}", f"{stage}_{name}")
