"""Runs as flat records: their keys (Hive partitions, or a table's text columns) and one value per metric.

Example:
    >>> runs = [RunValues({"variant": "a"}, {"acc": 0.8}), RunValues({"variant": "b"}, {"acc": 0.7})]
    >>> [r.values["acc"] for r in select(runs, [("variant", "b")], "--b")]
    [0.7]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError

__all__ = ["RunValues", "metric_names", "parse_term", "select", "store_runs"]


@dataclass(frozen=True)
class RunValues:
    """One run: ``keys`` (partition or column name -> value as text) and ``values`` (metric -> number).

    ``run_keys`` are the keys that name the run itself (its replica, seed or name), not its configuration;
    ``configuration`` is the configuration its manifest records (``None``: none recorded, or a table's row).
    """

    keys: Mapping[str, str]
    values: Mapping[str, float] = field(default_factory=dict)
    run_keys: frozenset[str] = frozenset({"replica"})
    configuration: Optional[Mapping[str, Any]] = None


def parse_term(text: str, option: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> ``(KEY, VALUE)``; a one-line :class:`UsageError` otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise UsageError(f"`{option}` must be KEY=VALUE (e.g. variant=algo). Received: {option}={text!r}.")
    return key.strip(), value.strip()


def select(runs: Sequence[RunValues], terms: Sequence[tuple[str, str]], option: str) -> list[RunValues]:
    """The runs whose keys match every ``(key, value)`` term.

    Raises:
        UsageError: A key no run has, or terms no run matches.
    """
    known = sorted({k for r in runs for k in r.keys})
    for key, value in terms:
        if key not in known:
            raise UsageError(
                f"`{option}` names an unknown key. Received: {option}={key}={value}. "
                f"Expected one of: {', '.join(known)}."
            )
    chosen = [r for r in runs if all(r.keys.get(k) == v for k, v in terms)]
    if not chosen:
        text = " ".join(f"{option} {k}={v}" for k, v in terms)
        seen = {k: sorted({r.keys[k] for r in runs if k in r.keys}) for k, _ in terms}
        values = "; ".join(f"{k}: {', '.join(vs)}" for k, vs in seen.items())
        raise UsageError(f"`{option}` matches no completed run. Received: {text}. Values present: {values}.")
    return chosen


def metric_names(runs: Sequence[RunValues]) -> list[str]:
    """Every metric name of ``runs``, sorted."""
    return sorted({m for r in runs for m in r.values})


def store_runs(
    directory: str,
    *,
    aggregate: str = "last",
    directions: Optional[Mapping[str, str]] = None,
    metrics: Optional[Sequence[str]] = None,
    warnings: Optional[list[str]] = None,
    mixed: bool = False,
) -> list[RunValues]:
    """The completed runs of a study directory, keyed by every ``key=value`` folder of their path.

    Runs that did not complete are left out with one warning each (appended to ``warnings``). ``mixed``: the
    completed runs of a group whose replicas ran different configurations are kept (each run carries its
    recorded ``configuration``, for :mod:`deviate_cb.report.reading.group_identity` to refuse or pool), instead of
    being left out as ``not pooled``.
    """
    from deviate_cb.report.reading.loading import excluded_line, load_per_run

    loaded = load_per_run(
        Path(directory), aggregate=aggregate, directions=directions, metrics=metrics, pool_configurations=mixed
    )
    if warnings is not None:
        warnings.extend(loaded.warnings)
        warnings.extend(excluded_line(r) for r in loaded.runs if not r.completed)
    values: dict[int, dict[str, float]] = {}
    for _, _, run, metric, value in loaded.rows:
        values.setdefault(run, {})[metric] = value
    out = []
    for i, record in enumerate(loaded.completed):
        keys = {}
        for part in Path(os.path.abspath(record.path)).parts:
            key, sep, text = part.partition("=")
            if sep and key and text:
                keys[key] = text
        keys.update(experiment=record.experiment, variant=record.variant, replica=record.replica)
        out.append(RunValues(keys, values.get(i, {}), configuration=record.configuration))
    return out
