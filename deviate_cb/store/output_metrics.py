"""``--metric-regex``: final metrics read from what a replica printed, for scripts that only print their results.

Example:
    >>> patterns = compile_metric_patterns(["acc=(?P<acc>[0-9.]+)", "loss=(?P<loss>[-0-9.e]+)"])
    >>> metrics_in_lines(["epoch 1 acc=0.5 loss=1.2", "final: acc=0.81 loss=0.45", "done"], patterns)
    {'acc': 0.81, 'loss': 0.45}
    >>> values, decimals = parsed_metrics_in_lines(["final: acc=0.8123 loss=4.5e-01"], patterns)
    >>> values, decimals
    ({'acc': 0.8123, 'loss': 0.45}, {'acc': 4, 'loss': 2})
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

from deviate_cb.errors import UsageError
from deviate_cb.store.bounded_read import open_regular

__all__ = [
    "compile_metric_patterns",
    "metrics_from_logs",
    "metrics_in_lines",
    "parsed_metrics_from_logs",
    "parsed_metrics_in_lines",
    "printed_decimals",
]

_PRINTED = re.compile(r"^[+-]?(?:\d+\.?(\d*)|\.(\d+))(?:[eE]([+-]?\d+))?$")


def compile_metric_patterns(texts: Sequence[str]) -> list[re.Pattern[str]]:
    """Compile ``--metric-regex`` values; each must be valid and hold at least one named group.

    Raises:
        UsageError: One line naming ``--metric-regex``, the value and what was wrong.
    """
    patterns = []
    for text in texts:
        try:
            pattern = re.compile(text)
        except re.error as exc:
            raise UsageError(
                f"`--metric-regex` must be a regular expression: {exc}. Received: --metric-regex={text}."
            ) from None
        if not pattern.groupindex:
            raise UsageError(
                "`--metric-regex` must name the metric with a named group, e.g. 'acc=(?P<acc>[0-9.]+)'. "
                f"Received: --metric-regex={text}."
            )
        patterns.append(pattern)
    return patterns


def metrics_in_lines(lines: Iterable[str], patterns: Sequence[re.Pattern[str]]) -> dict[str, float]:
    """The last value of each named group matched in ``lines`` that reads as a number."""
    return parsed_metrics_in_lines(lines, patterns)[0]


def parsed_metrics_in_lines(
    lines: Iterable[str], patterns: Sequence[re.Pattern[str]]
) -> tuple[dict[str, float], dict[str, int]]:
    """The last value of each named group matched in ``lines`` that reads as a number, and the decimals it was
    printed with (:func:`printed_decimals`; absent for ``inf`` and ``nan``)."""
    found: dict[str, float] = {}
    decimals: dict[str, int] = {}
    for line in lines:
        for pattern in patterns:
            for match in pattern.finditer(line):
                for name, text in match.groupdict().items():
                    value = _number(text)
                    if value is not None:
                        found[name] = value
                        places = printed_decimals(text)
                        if places is None:
                            decimals.pop(name, None)
                        else:
                            decimals[name] = places
    return found, decimals


def printed_decimals(text: object) -> int | None:
    """The decimal places a number was printed with: the last digit's place after the point (negative for
    ``1.2e3``: hundreds); ``None`` when ``text`` is no plain decimal number (``inf``, ``nan``, ``0x1f``).

    Example:
        >>> printed_decimals("0.8123"), printed_decimals("81.2%"), printed_decimals("7"), printed_decimals("1.25e-3")
        (4, 1, 0, 5)
        >>> printed_decimals("1.2e3"), printed_decimals("nan")
        (-2, None)
    """
    if not isinstance(text, str):
        return None
    match = _PRINTED.match(text.strip().rstrip("%,;"))
    if match is None:
        return None
    fraction = match.group(1) if match.group(1) is not None else match.group(2)
    return len(fraction or "") - int(match.group(3) or 0)


def metrics_from_logs(paths: Sequence[Path], patterns: Sequence[re.Pattern[str]]) -> dict[str, float]:
    """Metrics matched in the logs at ``paths``: a metric found in an earlier log wins over a later log."""
    return parsed_metrics_from_logs(paths, patterns)[0]


def parsed_metrics_from_logs(
    paths: Sequence[Path], patterns: Sequence[re.Pattern[str]]
) -> tuple[dict[str, float], dict[str, int]]:
    """:func:`metrics_from_logs` and the decimals each value was printed with (the manifest's
    ``output_metrics_decimals``)."""
    found: dict[str, float] = {}
    decimals: dict[str, int] = {}
    for path in paths:
        try:
            with _open_log(path) as handle:
                lines = (part for line in handle for part in line.split("\r"))  # progress bars redraw with \r
                values, places = parsed_metrics_in_lines(lines, patterns)
        except OSError:
            continue
        for name, value in values.items():
            if name not in found:
                found[name] = value
                if name in places:
                    decimals[name] = places[name]
    return found, decimals


def _open_log(path: Path) -> TextIO:
    """The log at ``path`` as text, opened without blocking: anything but a regular file (a FIFO left in the run
    directory would block the launcher forever) is an :class:`OSError`, and the log is left unread."""
    handle = open_regular(path, refuse=_not_a_log)
    return io.TextIOWrapper(handle, encoding="utf-8", errors="replace", newline="")


def _not_a_log(path: Path, reason: str) -> OSError:
    return OSError(f"{path}: not a regular file")


def _number(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return float(text.strip().rstrip("%,;"))
    except ValueError:
        return None
