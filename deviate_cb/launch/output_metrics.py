"""``--metric-regex``: final metrics read from what a replica printed, for scripts that only print their results.

Many published studies' scripts (and programs that are not Python at all) report results only as text:
``final: acc=0.8123 loss=0.4567``. Each ``--metric-regex`` is a regular expression with named groups; each
group names a metric. After a replica ends, its ``stdout.log`` and then ``stderr.log`` are read line by line
(streamed: logs of any size), and the **last** match of each group (stdout first) becomes a ``final`` metric
in ``metrics.parquet``, exactly like a value a ``--trainer`` function returns.

Example:
    >>> patterns = compile_metric_patterns(["acc=(?P<acc>[0-9.]+)", "loss=(?P<loss>[-0-9.e]+)"])
    >>> metrics_in_lines(["epoch 1 acc=0.5 loss=1.2", "final: acc=0.81 loss=0.45", "done"], patterns)
    {'acc': 0.81, 'loss': 0.45}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from deviate_cb.errors import UsageError

__all__ = ["compile_metric_patterns", "metrics_from_logs", "metrics_in_lines"]


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
    found: dict[str, float] = {}
    for line in lines:
        for pattern in patterns:
            for match in pattern.finditer(line):
                for name, text in match.groupdict().items():
                    value = _number(text)
                    if value is not None:
                        found[name] = value
    return found


def metrics_from_logs(paths: Sequence[Path], patterns: Sequence[re.Pattern[str]]) -> dict[str, float]:
    """Metrics matched in the logs at ``paths``: a metric found in an earlier log wins over a later log."""
    found: dict[str, float] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as handle:
                lines = (part for line in handle for part in line.split("\r"))  # progress bars redraw with \r
                for name, value in metrics_in_lines(lines, patterns).items():
                    found.setdefault(name, value)
        except OSError:
            continue
    return found


def _number(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return float(text.strip().rstrip("%,;"))
    except ValueError:
        return None
