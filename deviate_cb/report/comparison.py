"""``deviate compare`` and ``deviate power``: per-metric rows built from two (or more) groups of runs.

:func:`compare_groups` runs :func:`deviate_cb.stats.compare` and Almost Stochastic Order per metric present
in both groups, corrects the Welch p-values across the metrics compared and writes a one-line verdict.
Metrics in one group only, or with fewer than two finite runs in a group, get a row with ``status
"skipped"`` and the ``reason``. :func:`power_rows` measures each group's spread and the runs needed.

Example:
    >>> from deviate_cb.report.selection import RunValues
    >>> a = [RunValues({}, {"acc": x}) for x in (0.84, 0.85, 0.86, 0.85)]
    >>> b = [RunValues({}, {"acc": x}) for x in (0.80, 0.82, 0.81, 0.83)]
    >>> compare_groups(a, b, n_resamples=999)[0]["verdict"]
    'A > B (significant after holm); ASO: A almost dominates B (eps 0.00)'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from deviate_cb.report.render import _cell
from deviate_cb.report.selection import RunValues
from deviate_cb.stats._results import json_value

__all__ = ["COMPARE_COLUMNS", "COMPARE_HUMAN", "POWER_COLUMNS", "POWER_HUMAN", "compare_groups", "power_rows"]

COMPARE_COLUMNS = (
    "metric", "status", "reason", "n_a", "n_b", "mean_a", "mean_b", "std_a", "std_b",
    "mean_diff", "mean_diff_ci_low", "mean_diff_ci_high", "welch_t", "welch_p", "welch_p_corrected",
    "mann_whitney_p", "cohens_d", "cohens_d_ci_low", "cohens_d_ci_high", "hedges_g", "hedges_g_ci_low",
    "hedges_g_ci_high", "p_a_gt_b", "p_a_gt_b_ci_low", "p_a_gt_b_ci_high", "variance_p", "aso_epsilon_min",
    "correction", "alpha", "level", "verdict",
)  # fmt: skip
POWER_COLUMNS = (
    "group", "metric", "n", "mean", "std", "effect", "alpha", "power", "runs_needed", "achieved_power", "summary",
)  # fmt: skip


def _values(runs: Sequence[RunValues], metric: str) -> list[float]:
    return [float(r.values[metric]) for r in runs if metric in r.values and math.isfinite(r.values[metric])]


def compare_groups(
    a: Sequence[RunValues],
    b: Sequence[RunValues],
    *,
    alpha: float = 0.05,
    correction: Optional[str] = "holm",
    level: float = 0.95,
    seed: int = 0,
    n_resamples: int = 9999,
) -> list[dict[str, Any]]:
    """One flat dict per metric (keys :data:`COMPARE_COLUMNS`): compared metrics first, then skipped ones."""
    from deviate_cb.stats import compare, correct

    names_a = {m for r in a for m in r.values}
    names_b = {m for r in b for m in r.values}
    compared: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for metric in sorted(names_a | names_b):
        row: dict[str, Any] = dict.fromkeys(COMPARE_COLUMNS, math.nan)
        x, y = _values(a, metric), _values(b, metric)
        row.update(metric=metric, n_a=len(x), n_b=len(y), correction=correction or "none", alpha=alpha, level=level)
        reason = ""
        if metric not in names_b or metric not in names_a:
            reason = f"only in group {'A' if metric in names_a else 'B'}"
        elif len(x) < 2 or len(y) < 2:
            reason = f"fewer than 2 finite runs in group {'A' if len(x) < 2 else 'B'}"
        if reason:
            row.update(status="skipped", reason=reason, verdict=f"not compared: {reason}")
            skipped.append(row)
            continue
        c = compare(x, y, alpha=alpha, level=level, rng=seed, n_resamples=n_resamples)
        aso = c.almost_stochastic_order
        row.update(status="compared", reason="", mean_a=c.mean_a, mean_b=c.mean_b, std_a=c.std_a, std_b=c.std_b)
        row.update(welch_t=c.welch_t.statistic, welch_p=c.welch_t.pvalue, mann_whitney_p=c.mann_whitney_u.pvalue)
        for key, result in (
            ("mean_diff", c.mean_difference),
            ("cohens_d", c.cohens_d),
            ("hedges_g", c.hedges_g),
            ("p_a_gt_b", c.prob_improvement),
        ):
            low, high = result.confidence_interval()
            row.update({key: float(result.statistic), f"{key}_ci_low": low, f"{key}_ci_high": high})
        row.update(variance_p=c.variance_test.pvalue, aso_epsilon_min=aso.statistic)
        compared.append(row)
    if compared:
        adjusted = correct([r["welch_p"] for r in compared], method=correction)
        for row, p in zip(compared, adjusted, strict=True):
            row["welch_p_corrected"] = float(p)
            row["verdict"] = _verdict(row, alpha, correction)
    return [{k: json_value(v) for k, v in r.items()} for r in (*compared, *skipped)]


def _verdict(row: dict[str, Any], alpha: float, correction: Optional[str]) -> str:
    from deviate_cb.stats import infer_direction

    p = row["welch_p_corrected"]
    if math.isnan(p):
        return "no test possible (both groups constant)"
    after = f"after {correction}" if correction else f"p <= {alpha:g}"
    if p <= alpha:
        sign = ">" if row["mean_diff"] > 0 else "<"
        text = f"A {sign} B (significant {after})"
        eps = row["aso_epsilon_min"]
        if sign == ">" and eps < 0.2 and infer_direction(row["metric"]) != "min":  # ASO: larger is better
            text += f"; ASO: A almost dominates B (eps {eps:.2f})"
        return text
    return "no significant difference" + (f" (after {correction})" if correction else "")


def power_rows(
    groups: Sequence[tuple[str, Sequence[RunValues]]],
    *,
    effect: float,
    alpha: float = 0.05,
    power: float = 0.8,
) -> list[dict[str, Any]]:
    """One flat dict per group and metric (keys :data:`POWER_COLUMNS`); ``summary`` says it in one sentence."""
    from deviate_cb.stats import power_report

    rows = []
    for label, runs in groups:
        for metric in sorted({m for r in runs for m in r.values}):
            x = _values(runs, metric)
            row: dict[str, Any] = dict.fromkeys(POWER_COLUMNS, None)
            row.update(group=label, metric=metric, n=len(x), effect=effect, alpha=alpha, power=power)
            if len(x) < 2:
                row["summary"] = f"{label} {metric}: fewer than 2 finite runs in this group; no spread to measure."
                rows.append(row)
                continue
            mean = sum(x) / len(x)
            if len(set(x)) == 1:  # std 0: the Python API's message would name its own arguments (std_a, std_b)
                row.update(mean=mean, std=0.0, summary=_no_spread(label, metric, len(x)))
                rows.append({k: json_value(v) for k, v in row.items()})
                continue
            try:
                r = power_report(x, effect=effect, alpha=alpha, power=power)
            except ValueError:  # the only one left: no number of runs up to 10^9 detects --effect
                std = float(np.std(x, ddof=1))
                row.update(mean=mean, std=std, summary=_too_small(label, metric, effect, std))
                rows.append({k: json_value(v) for k, v in row.items()})
                continue
            row.update(mean=mean, std=r.std_a, runs_needed=r.n_needed, achieved_power=r.achieved_power)
            row["summary"] = f"{label} {metric}: {r.summary()}"
            rows.append({k: json_value(v) for k, v in row.items()})
    return rows


def _no_spread(label: str, metric: str, n: int) -> str:
    return (
        f"{label} {metric}: the {n} runs are identical on this metric (std 0): with no spread there is nothing to "
        "plan (any difference shows in every run, and Welch's t-test needs a spread), so neither the runs needed "
        "nor the power is given."
    )


def _too_small(label: str, metric: str, effect: float, std: float) -> str:
    return (
        f"{label} {metric}: a difference of {effect:g} (--effect) is too small to detect with fewer than 10^9 "
        f"runs per group at the measured spread (std {std:.2g})."
    )


# Cells of the terminal table and Markdown (csv and json write every column of COMPARE_COLUMNS).
def _ci(row: dict, key: str) -> str:
    if row.get(key) is None:
        return "-"
    return f"{_cell(row[key])} [{_cell(row[key + '_ci_low'])}, {_cell(row[key + '_ci_high'])}]"


def _c(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: _cell(row.get(key))


COMPARE_HUMAN: dict[str, Callable[[dict[str, Any]], str]] = {
    "metric": _c("metric"),
    "n A/B": lambda r: f"{r['n_a']}/{r['n_b']}",
    "mean A": _c("mean_a"),
    "mean B": _c("mean_b"),
    "diff [CI]": lambda r: _ci(r, "mean_diff"),
    "p": _c("welch_p"),
    "p adj": _c("welch_p_corrected"),
    "MW p": _c("mann_whitney_p"),
    "d [CI]": lambda r: _ci(r, "cohens_d"),
    "g": _c("hedges_g"),
    "P(A>B) [CI]": lambda r: _ci(r, "p_a_gt_b"),
    "var p": _c("variance_p"),
    "ASO eps": _c("aso_epsilon_min"),
    "verdict": _c("verdict"),
}


POWER_HUMAN = {  # headers in words (csv and json keep the keys of POWER_COLUMNS)
    **{k: _c(k) for k in ("group", "metric", "n", "mean", "std")},
    "runs needed": _c("runs_needed"),
    "power now": _c("achieved_power"),
}
