"""``deviate compare DIR --by KEY``: Almost Stochastic Order between the k groups one key splits the runs into.

Example:
    >>> from deviate_cb.report.reading.selection import RunValues
    >>> runs = [RunValues({"variant": v}, {"acc": x}) for v, base in (("a", 0.80), ("b", 0.90), ("c", 0.85))
    ...         for x in (base, base + 0.01, base + 0.02, base + 0.01)]
    >>> (ranked,) = rank_metrics(split_by(runs, "variant"), seed=0)
    >>> ranked.result.ranking, ranked.direction
    (('b', 'c', 'a'), 'max')
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Optional

import numpy as np

from deviate_cb.errors import UsageError
from deviate_cb.report.reading.selection import RunValues
from deviate_cb.stats._results import json_value
from deviate_cb.stats.multi_aso import MultiASO

__all__ = ["RANKING_COLUMNS", "MetricRanking", "order_text", "pair_rows", "rank_metrics", "split_by", "write_rankings"]

RANKING_COLUMNS = (
    "metric", "status", "reason", "direction", "a", "b", "rank_a", "rank_b", "n_a", "n_b", "mean_a", "mean_b",
    "eps_min", "violation_ratio", "permutation_p", "claimable", "a_dominates_b", "wins_a", "alpha", "pair_alpha",
    "n_comparisons", "threshold", "left_out", "pooled",
)  # fmt: skip


@dataclass(frozen=True)
class MetricRanking:
    """The k-group ASO of one metric.

    Attributes:
        metric: The metric's name.
        direction: ``"max"``, ``"min"`` (values negated for ASO) or ``"max?"`` (unknown; larger taken as better).
        result: The :class:`~deviate_cb.stats.multi_aso.MultiASO`, on the groups in ``result.groups``; ``None``
            when fewer than two groups hold two finite runs.
        n: Finite runs per group (every group).
        means: Mean per group in the metric's units (groups with a finite run).
        left_out: Groups with fewer than two finite runs, left out of the comparison.
        reason: Why the metric was not compared (empty when it was).
        pooled: Group -> what it pools (``pool=True`` only; groups of one configuration are absent).
    """

    metric: str
    direction: str
    result: Optional[MultiASO]
    n: Mapping[str, int] = field(default_factory=dict)
    means: Mapping[str, float] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()
    reason: str = ""
    pooled: Mapping[str, str] = field(default_factory=dict)


def split_by(runs: Sequence[RunValues], key: str, option: str = "--by") -> list[tuple[str, list[RunValues]]]:
    """The runs grouped by their value of ``key`` (or of each of the comma-separated keys, the values joined
    with ``/``), groups sorted by name.

    Raises:
        UsageError: A key no run has, or one that gives fewer than two groups.
    """
    known = sorted({k for r in runs for k in r.keys})
    keys = [k.strip() for k in key.split(",")]
    for one in keys:
        if one not in known:
            raise UsageError(
                f"`{option}` must be a partition key of the runs ({', '.join(known) or 'none found'}). "
                f"Received: {option}={key}."
            )
    groups: dict[str, list[RunValues]] = {}
    for run in runs:
        if all(k in run.keys for k in keys):
            groups.setdefault("/".join(run.keys[k] for k in keys), []).append(run)
    if len(groups) < 2:
        found = ", ".join(f"{key}={value}" for value in groups)
        raise UsageError(
            f"`{option}` must split the runs into at least 2 groups to rank. Received: {option}={key}, which "
            f"gives {len(groups)} group ({found})."
        )
    return sorted(groups.items())


def rank_metrics(
    groups: Sequence[tuple[str, Sequence[RunValues]]],
    *,
    alpha: float = 0.05,
    threshold: float = 0.2,
    seed: int = 0,
    directions: Optional[Mapping[str, str]] = None,
    n_resamples: int = 1000,
    pool: bool = False,
) -> list[MetricRanking]:
    """One :class:`MetricRanking` per metric of any group, sorted by name (seed ``seed`` for each metric).

    Raises:
        UsageError: A group of several configurations, unless ``pool=True``.
    """
    from deviate_cb.report.reading.group_identity import one_configuration
    from deviate_cb.stats import multi_aso, resolve_direction

    pooled = {}
    for name, runs in groups:
        words = one_configuration(
            runs,
            option="groups",
            received=f"group {name}: {len(runs)} runs",
            pool=pool,
            subject=f"group {name} holds",
            fix="Keep the runs of one {key} in each group (one of: {values})",
            pool_flag="pool=True",
        )
        if words:
            pooled[name] = words
    out = []
    for metric in sorted({m for _, runs in groups for r in runs for m in r.values}):
        values = {name: [float(r.values[metric]) for r in runs if metric in r.values] for name, runs in groups}
        finite = {name: [x for x in xs if math.isfinite(x)] for name, xs in values.items()}
        n = {name: len(xs) for name, xs in finite.items()}
        means = {name: sum(xs) / len(xs) for name, xs in finite.items() if xs}
        known = resolve_direction(metric, directions)
        direction = known or "max?"
        kept = {name: xs for name, xs in finite.items() if len(xs) >= 2}
        left_out = tuple(name for name in finite if len(finite[name]) < 2)
        if len(kept) < 2:
            reason = f"fewer than 2 groups with 2 finite runs ({len(kept)} of {len(finite)})"
            out.append(MetricRanking(metric, direction, None, n, means, left_out, reason, pooled))
            continue
        sign = -1.0 if known == "min" else 1.0
        result = multi_aso(
            {name: [sign * x for x in xs] for name, xs in kept.items()},
            alpha=alpha,
            threshold=threshold,
            n_resamples=n_resamples,
            rng=seed,
        )
        out.append(MetricRanking(metric, direction, result, n, means, left_out, pooled=pooled))
    return out


def pair_rows(rankings: Sequence[MetricRanking]) -> list[dict[str, Any]]:
    """One flat record per metric and ordered pair ``(a, b)`` (keys :data:`RANKING_COLUMNS`); a metric not
    compared gets one record with ``status "skipped"`` and the ``reason``."""
    rows: list[dict[str, Any]] = []
    for ranked in rankings:
        base: dict[str, Any] = dict.fromkeys(RANKING_COLUMNS)
        base.update(metric=ranked.metric, direction=ranked.direction, left_out=" ".join(ranked.left_out))
        base["pooled"] = "; ".join(f"{g} {words}" for g, words in sorted(ranked.pooled.items())) or None
        r = ranked.result
        if r is None:
            rows.append({**base, "status": "skipped", "reason": ranked.reason})
            continue
        rank = {name: i + 1 for i, name in enumerate(r.ranking)}
        base.update(status="compared", reason="", alpha=r.alpha, pair_alpha=r.pair_alpha)
        base.update(n_comparisons=r.n_comparisons, threshold=r.threshold)
        for i, a in enumerate(r.groups):
            for j, b in enumerate(r.groups):
                if i == j:
                    continue
                row = {**base, "a": a, "b": b, "rank_a": rank[a], "rank_b": rank[b], "wins_a": r.wins[i]}
                row["pooled"] = "; ".join(f"{g} {ranked.pooled[g]}" for g in (a, b) if g in ranked.pooled) or None
                row.update(n_a=ranked.n[a], n_b=ranked.n[b], mean_a=ranked.means[a], mean_b=ranked.means[b])
                row.update(eps_min=float(r.eps_min[i, j]), violation_ratio=float(r.violation_ratio[i, j]))
                row.update(permutation_p=float(r.pvalue[i, j]), claimable=bool(r.claimable[i, j]))
                row["a_dominates_b"] = bool(r.dominant[i, j])
                rows.append({k: json_value(v) for k, v in row.items()})
    return rows


def write_rankings(rankings: Sequence[MetricRanking], fmt: str, out: IO[str], *, title: str) -> None:
    """Per metric, the ``eps_min`` matrix (rows in ranking order) and the ranking, as ``table`` or ``md``."""
    from deviate_cb.report.text.safe import printable
    from deviate_cb.report.text.tables import cell, render_records

    md = fmt == "md"
    out.write(f"# {printable(title)}\n\n" if md else f"{printable(title)}\n\n")
    for ranked in rankings:
        r = ranked.result
        if r is None:
            line = printable(f"{ranked.metric}: not compared: {ranked.reason}.")
            out.write(f"## {line}\n\n" if md else f"{line}\n\n")
            continue
        order = [r.groups.index(name) for name in r.ranking]
        records = []
        for rank, i in enumerate(order, start=1):
            name = r.groups[i]
            record: dict[str, Any] = {"rank": rank, "group": name, "n": ranked.n[name], "mean": ranked.means[name]}
            record.update(dominates=r.wins[i], **{f"vs {r.groups[j]}": float(r.eps_min[i, j]) for j in order})
            records.append(record)
        columns = ("rank", "group", "n", "mean", "dominates", *(f"vs {r.groups[j]}" for j in order))
        human = {c: (lambda row, c=c: cell(json_value(row[c]))) for c in columns}
        heading = f"{ranked.metric} ({_direction_text(ranked.direction)}): " + order_text(r)
        if md:
            out.write(f"## {printable(heading)}\n\n")
        notes = _notes(ranked, r)
        text = render_records(records, columns, fmt, title="" if md else heading, human=human, notes=notes, file=out)
        out.write(text + "\n")
    out.flush()


def order_text(r: MultiASO) -> str:
    """The ranking in words that claim no more than the tests: ``>`` between neighbours where the first almost
    stochastically dominates the second, ``~`` where neither is shown to, and a note when no group dominates any.

    Example:
        >>> from deviate_cb.stats import multi_aso
        >>> order_text(multi_aso({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [11.0, 12.0, 13.0, 14.0, 15.0]}, rng=0))
        'b > a'
        >>> order_text(multi_aso({"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [1.5, 2.5, 2.0, 4.5, 3.5]}, rng=0))
        'a ~ b (no group almost dominates another)'
        >>> order_text(multi_aso({"a": [1.0, 2.0, 3.0], "b": [11.0, 12.0, 13.0]}, rng=0))  # 1 / C(6, 3) > 0.025
        'b ~ a (too few runs to claim that any group almost dominates another)'
    """
    dominant = r.dominant
    index = {name: i for i, name in enumerate(r.groups)}
    parts = [r.ranking[0]]
    for first, second in zip(r.ranking, r.ranking[1:], strict=False):
        parts.append(">" if dominant[index[first], index[second]] else "~")
        parts.append(second)
    text = " ".join(parts)
    if dominant.any():
        return text
    if r.claimable.shape == dominant.shape and not r.claimable[~np.eye(len(r.groups), dtype=bool)].any():
        return f"{text} (too few runs to claim that any group almost dominates another)"
    return f"{text} (no group almost dominates another)"


def _direction_text(direction: str) -> str:
    return {"max": "larger is better", "min": "smaller is better"}.get(direction, "larger taken as better")


def _notes(ranked: MetricRanking, r: MultiASO) -> tuple[str, ...]:
    notes = [
        f"eps_min of the row's group over the column's at confidence 1 - {r.alpha:g}/{r.n_comparisons} "
        f"(Bonferroni over the {r.n_comparisons} ordered pairs). The row almost stochastically dominates the "
        f"column where eps_min is below {r.threshold:g} and a one-sided permutation test (rank sum) puts the row "
        f"above the column at p <= {r.alpha:g}/{r.n_comparisons}: ASO's bootstrap bound alone called some pair "
        "of 3 identical groups dominant in 20% of studies at 5 runs; with the test every claim holds together "
        f"at {1 - r.alpha:.0%}. dominates: how many it does; ties ranked by the mean. In the order, "
        "'>': the group almost dominates the next, '~': neither is shown to dominate the other."
    ]
    off = ~np.eye(len(r.groups), dtype=bool)
    if r.claimable.shape == off.shape and not r.claimable[off].all():
        few = sorted({r.groups[i] for i, j in zip(*np.nonzero(off & ~r.claimable), strict=True)})
        what = "no pair" if not r.claimable[off].any() else f"pairs with {', '.join(few)}"
        notes.append(
            f"Too few runs: for {what}, no arrangement of the runs reaches p <= {r.alpha:g}/{r.n_comparisons} "
            f"(it needs 1 / C(n_a + n_b, n_a) <= {r.pair_alpha:.2g}, e.g. 5 and 5 runs among 3 groups), so "
            "'almost dominates' cannot be claimed there at this n."
        )
    if ranked.direction == "min":
        notes.append("Smaller is better for this metric: ASO ran on the negated values.")
    elif ranked.direction == "max?":
        notes.append(f"Direction of {ranked.metric} unknown: larger taken as better (--direction NAME=min flips it).")
    if ranked.left_out:
        notes.append(f"Left out (fewer than 2 finite runs): {', '.join(ranked.left_out)}.")
    return tuple(notes)
