"""Never pool what differs: a group whose completed replicas ran different configurations is not reported.

Example:
    >>> from pathlib import Path
    >>> from deviate_cb.report.reading.runs import RunRecord
    >>> def run(k, args):
    ...     config = {"mode": "trainer", "trainer": "t.py:main", "trainer_args": args, "variant": "algo"}
    ...     return RunRecord(Path(f"r{k}"), "t", "algo", str(k), "completed", configuration=config)
    >>> runs, lines = refuse_mixed_groups([run(0, ["0.1"]), run(1, ["0.1"]), run(2, ["0.01"])])
    >>> [r.status for r in runs]
    ['not pooled', 'not pooled', 'not pooled']
    >>> print(lines[0])  # doctest: +NORMALIZE_WHITESPACE
    experiment=t variant=algo is not reported: its completed replicas ran 2 configurations (replicas 0, 1: trainer
    arguments ['0.1']; replica 2: trainer arguments ['0.01']), and pooling them would count the difference as
    noise. Rerun the group with one configuration (deviate-replicate --force) or give each its own --experiment.
    >>> damaged = dataclasses.replace(run(3, ["0.1"]), configuration={"unreadable": "`configuration` is null"})
    >>> runs, lines = refuse_mixed_groups([run(0, ["0.1"]), run(1, ["0.1"]), damaged])
    >>> [r.status for r in runs]
    ['completed', 'completed', 'unknown configuration']
    >>> print(lines[0])  # doctest: +NORMALIZE_WHITESPACE
    r3/run.json: `configuration` is null; replica 3 of experiment=t variant=algo is left out of the statistics
    (its configuration is unknown, so it is never pooled); the other replicas are reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.store.configuration import (
    CONFIGURATION_LABELS,
    configuration_differences,
    describe_value,
    unreadable_reason,
)
from deviate_cb.store.run_directory import MANIFEST_FILE

__all__ = ["NOT_POOLED", "UNKNOWN_CONFIGURATION", "refuse_mixed_groups", "replica_list"]

NOT_POOLED = "not pooled"
UNKNOWN_CONFIGURATION = "unknown configuration"


def refuse_mixed_groups(runs: Sequence[RunRecord], *, pool: bool = False) -> tuple[list[RunRecord], list[str]]:
    """``runs`` with the completed replicas of every mixed group marked :data:`NOT_POOLED`, and one line per group.

    Args:
        runs: The runs of a study as :func:`~deviate_cb.report.reading.runs.read_runs` gives them.
        pool: Leave mixed groups as they are (the caller refuses or pools them); only the replicas of an unknown
            configuration are taken out.

    Returns:
        The runs in the same order (a run of a mixed group replaced by a copy with status ``not pooled`` and an
        ``error`` naming what it differs in; a run whose configuration cannot be read by one with status
        ``unknown configuration``) and the warning lines, one per mixed group and one per unreadable configuration.
    """
    out = list(runs)
    lines = []
    classes: dict[tuple[str, str], list[tuple[dict[str, Any], list[int]]]] = {}
    for index, run in enumerate(runs):
        if not run.completed or run.configuration is None:
            continue
        why = unreadable_reason(run.configuration)
        if why is not None:
            lines.append(
                f"{run.path / MANIFEST_FILE}: {why}; replica {run.replica} of experiment={run.experiment} "
                f"variant={run.variant} is left out of the statistics (its configuration is unknown, so it is never "
                "pooled); the other replicas are reported."
            )
            error = f"its {MANIFEST_FILE} records a configuration that cannot be read: {why}"
            out[index] = dataclasses.replace(run, status=UNKNOWN_CONFIGURATION, error=error, exit_code=None)
            continue
        if pool:
            continue
        found = classes.setdefault((run.experiment, run.variant), [])
        for representative, members in found:
            if not configuration_differences(representative, run.configuration):
                members.append(index)
                break
        else:
            found.append((run.configuration, [index]))
    for (experiment, variant), found in classes.items():
        if len(found) < 2:
            continue
        keys = _differing_keys([config for config, _ in found])
        described = "; ".join(
            f"{_replicas([runs[i] for i in members])}: {_values(config, keys)}" for config, members in found
        )
        lines.append(
            f"experiment={experiment} variant={variant} is not reported: its completed replicas ran {len(found)} "
            f"configurations ({described}), and pooling them would count the difference as noise. Rerun the group "
            "with one configuration (deviate-replicate --force) or give each its own --experiment."
        )
        for config, members in found:
            for i in members:
                others = "; ".join(_values(other, keys) for other, _ in found if other is not config)
                error = f"it ran {_values(config, keys)}, other completed replicas of its group ran {others}"
                out[i] = dataclasses.replace(runs[i], status=NOT_POOLED, error=error, exit_code=None, signal=None)
    return out, lines


def _differing_keys(configs: Sequence[dict[str, Any]]) -> list[str]:
    """The configuration keys on which any two of ``configs`` differ, in the order differences are named."""
    keys = []
    for key in CONFIGURATION_LABELS:
        if any(
            configuration_differences({key: a[key]}, {key: b[key]})
            for a in configs
            for b in configs
            if key in a and key in b
        ):
            keys.append(key)
    return keys


def _values(config: dict[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{CONFIGURATION_LABELS[key]} {describe_value(config.get(key))}" for key in keys)


def _replicas(runs: Sequence[RunRecord]) -> str:
    """``replica 2``, ``replicas 0, 1`` or ``replicas 0-9`` (what the problems list writes)."""
    numbers = [int(r.replica) for r in runs if r.replica.isdigit()]
    named = [r.replica for r in runs if not r.replica.isdigit()]
    if not named:
        return replica_list(numbers)
    return f"replica{'s' * (len(runs) > 1)} " + ", ".join([*(str(n) for n in sorted(numbers)), *named])


def replica_list(replicas: Iterable[int]) -> str:
    """``replica 3`` or ``replicas 0, 1, 2``; runs of four or more consecutive replicas as ``0-9``.

    Example:
        >>> replica_list([2]), replica_list([2, 0, 1]), replica_list([0, 1, 2, 3, 4, 7])
        ('replica 2', 'replicas 0, 1, 2', 'replicas 0-4, 7')
    """
    numbers = sorted(set(replicas))
    if len(numbers) == 1:
        return f"replica {numbers[0]}"
    parts: list[str] = []
    start = 0
    while start < len(numbers):
        end = start
        while end + 1 < len(numbers) and numbers[end + 1] == numbers[end] + 1:
            end += 1
        if end - start >= 3:
            parts.append(f"{numbers[start]}-{numbers[end]}")
        else:
            parts.extend(str(n) for n in numbers[start : end + 1])
        start = end + 1
    return "replicas " + ", ".join(parts)
