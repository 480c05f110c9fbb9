"""A group is one configuration: the runs a selector gives are checked before any statistic pools them.

Example:
    >>> from deviate_cb.report.reading.selection import RunValues
    >>> runs = [RunValues({"experiment": "mlp", "variant": v, "replica": str(k)}, {"acc": 0.9})
    ...         for v, n in (("algo+impl", 2), ("control", 3)) for k in range(n)]
    >>> one_configuration(runs[2:], option="--b", received="--b experiment=mlp variant=control")
    ''
    >>> try:
    ...     one_configuration(runs, option="--b", received="--b experiment=mlp")
    ... except ValueError as exc:
    ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
    `--b` matches runs of 2 configurations, and a group is one configuration: experiment=mlp variant=algo+impl
    (2 runs), experiment=mlp variant=control (3 runs). Received: --b experiment=mlp. Add variant=... to --b (one
    of: algo+impl, control), or pass --pool to pool them on purpose.
    >>> one_configuration(runs, option="--b", received="--b experiment=mlp", pool=True)
    'pools 2 configurations: experiment=mlp variant=algo+impl (2 runs), experiment=mlp variant=control (3 runs)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deviate_cb.errors import UsageError
from deviate_cb.report.reading.selection import RunValues
from deviate_cb.store.configuration import CONFIGURATION_LABELS, configuration_differences, describe_value

__all__ = ["Configuration", "configurations", "one_configuration"]

_FIRST = ("experiment", "variant")  # named first, and always, in a configuration's label


@dataclass(frozen=True)
class Configuration:
    """The runs of one configuration: ``keys`` (without the run's own keys), the recorded ``recorded``
    configuration (``None`` when none is recorded) and the ``runs``."""

    keys: tuple[tuple[str, str], ...]
    recorded: Any
    runs: tuple[RunValues, ...]


def _identity(run: RunValues) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in run.keys.items() if k not in run.run_keys))


def configurations(runs: Sequence[RunValues]) -> list[Configuration]:
    """``runs`` split into configurations, in the order each first appears.

    Two runs are of one configuration when their keys other than their run keys are equal and their recorded
    configurations do not differ (a run that records none is not compared).
    """
    found: list[list[Any]] = []  # [keys, recorded, members]
    for run in runs:
        identity = _identity(run)
        for entry in found:
            keys, recorded, members = entry
            if keys != identity:
                continue
            if recorded is not None and run.configuration is not None:
                if configuration_differences(recorded, run.configuration):
                    continue
            elif recorded is None:  # the first run that records one speaks for the configuration
                entry[1] = run.configuration
            members.append(run)
            break
        else:
            found.append([identity, run.configuration, [run]])
    return [Configuration(keys, recorded, tuple(members)) for keys, recorded, members in found]


def one_configuration(
    runs: Sequence[RunValues],
    *,
    option: str,
    received: str,
    pool: bool = False,
    fix: str = "Add {key}=... to {option} (one of: {values})",
    pool_flag: str = "--pool",
    subject: str = "",
) -> str:
    """Check that ``runs`` are one configuration.

    Args:
        runs: The runs of one group.
        option: The option that chose them (``--a``, ``--b``, ``--group``, ``--by``, ``a``), named in the message.
        received: What the option received, as the message quotes it.
        pool: Pool several configurations on purpose: no error, the words that say so are returned.
        fix: What to do when keys tell the configurations apart (``{key}``, ``{values}``, ``{option}``).
        pool_flag: How the caller pools on purpose (``--pool``; ``pool=True`` from Python).
        subject: The start of the message (default: ``\\`OPTION\\` matches``).

    Returns:
        ``""`` for one configuration, else (``pool``) ``"pools N configurations: ..."``.

    Raises:
        UsageError: Several configurations and not ``pool``.
    """
    found = configurations(runs)
    if len(found) < 2:
        return ""
    named = ", ".join(_label(c, found) for c in found)
    if pool:
        return f"pools {len(found)} configurations: {named}"
    differing = [k for k in sorted({k for c in found for k, _ in c.keys}, key=_order) if _differs(k, found)]
    if differing:
        key = differing[0]
        values = sorted({dict(c.keys).get(key, "") for c in found})
        what = fix.format(key=key, option=option, values=", ".join(values))
    else:
        what = (
            "Its replicas ran different configurations: rerun the group with one (deviate-replicate --force) or give "
            "each its own --experiment"
        )
    start = subject or f"`{option}` matches"
    raise UsageError(
        f"{start} runs of {len(found)} configurations, and a group is one configuration: {named}. Received: "
        f"{received}. {what}, or pass {pool_flag} to pool them on purpose."
    )


def _order(key: str) -> tuple[int, str]:
    return (_FIRST.index(key) if key in _FIRST else len(_FIRST), key)


def _differs(key: str, found: Sequence[Configuration]) -> bool:
    return len({dict(c.keys).get(key) for c in found}) > 1


def _label(config: Configuration, found: Sequence[Configuration]) -> str:
    """``experiment=mlp variant=control (3 runs)``: its keys (experiment and variant first), and what the
    recorded configuration differs in when the keys do not tell it apart."""
    keys = dict(config.keys)
    words = [f"{k}={keys[k]}" for k in sorted(keys, key=_order)]
    twins = [c for c in found if c.keys == config.keys]
    if len(twins) > 1:
        words.append(_recorded_words(config.recorded, [c.recorded for c in twins]))
    n = len(config.runs)
    return f"{' '.join(words)} ({n} run{'s' * (n != 1)})"


def _recorded_words(recorded: Any, others: Sequence[Any]) -> str:
    """``with trainer arguments ['0.1']``: the recorded values on which configurations of equal keys differ."""
    if recorded is None:
        return "with no recorded configuration"
    labels = []
    for key, label in CONFIGURATION_LABELS.items():
        mine = {key: recorded[key]} if key in recorded else {}
        if any(
            other is not None and configuration_differences(mine, {key: other[key]} if key in other else {})
            for other in others
        ):
            labels.append(f"{label} {describe_value(recorded.get(key))}")
    return "with " + (", ".join(labels) or "another configuration")
