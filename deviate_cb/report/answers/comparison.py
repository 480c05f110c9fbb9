"""``deviate compare`` and ``deviate power``: per-metric rows built from two (or more) groups of runs.

Example:
    >>> from deviate_cb.report.reading.selection import RunValues
    >>> a = [RunValues({}, {"acc": x}) for x in (0.84, 0.85, 0.86, 0.85)]
    >>> b = [RunValues({}, {"acc": x}) for x in (0.80, 0.82, 0.81, 0.83)]
    >>> row = compare_groups(a, b, n_resamples=999)[0]
    >>> for part in row["verdict"].split("; "):
    ...     print(part)
    means: A > B (significant after holm), ASO: A almost dominates B (eps 0.00)
    spread: no significant difference after holm
    >>> row["location_verdict"].split(" (Welch")[0]
    'A is higher: diff +0.035 [+0.01545, +0.05455] (95% CI); d 3.24 [0.8178, 5.576], P(A>B) 1 [0.7185, 1]'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from deviate_cb.report.answers.compare_notes import (
    family_text,
    improvement_verdict,
    metrics_of_interest,
    power_words,
    skew_note,
    skewness,
)
from deviate_cb.report.reading.selection import RunValues
from deviate_cb.report.text.tables import cell
from deviate_cb.stats._results import json_value

__all__ = [
    "COMPARE_COLUMNS",
    "COMPARE_HUMAN",
    "IMPROVEMENT_HUMAN",
    "POWER_COLUMNS",
    "POWER_HUMAN",
    "compare_groups",
    "location_verdict",
    "power_rows",
    "spread_verdict",
]

COMPARE_COLUMNS = (
    "metric", "status", "reason", "n_a", "n_b", "mean_a", "mean_b", "std_a", "std_b",
    "mean_diff", "mean_diff_ci_low", "mean_diff_ci_high", "welch_t", "welch_p", "welch_p_corrected",
    "mann_whitney_p", "cohens_d", "cohens_d_ci_low", "cohens_d_ci_high", "hedges_g", "hedges_g_ci_low",
    "hedges_g_ci_high", "p_a_gt_b", "p_a_gt_b_ci_low", "p_a_gt_b_ci_high", "variance_p",
    "spread_ratio", "spread_ratio_ci_low", "spread_ratio_ci_high", "spread_p", "spread_p_corrected",
    "aso_epsilon_min", "direction", "correction", "family", "family_size", "alpha", "level", "skewness_a",
    "skewness_b", "notes", "improvement_threshold", "improvement_verdict", "location_verdict", "spread_verdict",
    "verdict", "sequential_note", "pooled",
)  # fmt: skip
POWER_COLUMNS = (
    "group", "metric", "n", "mean", "std", "effect", "alpha", "power", "runs_needed", "achieved_power", "summary",
    "pooled",
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
    directions: Optional[Mapping[str, str]] = None,
    interest: Optional[Sequence[str]] = None,
    improvement_threshold: Optional[float] = None,
    pool: bool = False,
) -> list[dict[str, Any]]:
    """One flat dict per metric (keys :data:`COMPARE_COLUMNS`): compared metrics first, then skipped ones.

    ``directions`` (``{metric: "max" | "min"}``, else inferred from the name) orients ASO: a lower-is-better
    metric is compared negated. The correction runs over the metrics of interest (``family "interest"``): those
    matching the ``interest`` patterns (``--metric``), else the headline metrics
    (:func:`~deviate_cb.report.answers.headline.headline_metrics`: validation and test metrics); the other metrics
    compared form a second family of their own (``family "other"``), so near-duplicate logged series do not
    dilute the answer the user came for. ``improvement_threshold`` (``--on improvement``; e.g. 0.75, as
    Bouthillier et al. 2021) adds the decision on P(A>B) (:func:`~deviate_cb.report.answers.compare_notes.
    improvement_verdict`) as ``improvement_verdict``, first in ``verdict``. Each group must be one configuration
    (its runs' keys other than their replica, and their recorded configurations, agree): a group of several raises
    a :class:`~deviate_cb.errors.UsageError` (a ``ValueError``) naming them, unless ``pool=True``, which pools
    them and says so in every row's ``pooled``.
    """
    if improvement_threshold is not None and (
        isinstance(improvement_threshold, bool)
        or not isinstance(improvement_threshold, (int, float))
        or not 0.5 <= improvement_threshold < 1.0
    ):
        raise ValueError(
            "`improvement_threshold` must be a number in [0.5, 1). "
            f"Received: improvement_threshold={improvement_threshold!r}."
        )
    from deviate_cb.stats import compare, correct, resolve_direction

    pooled = "; ".join(
        f"{name.upper()} {words}"
        for name, runs in (("a", a), ("b", b))
        if (words := _one_configuration(runs, name, pool))
    )
    names_a = {m for r in a for m in r.values}
    names_b = {m for r in b for m in r.values}
    compared: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for metric in sorted(names_a | names_b):
        row: dict[str, Any] = dict.fromkeys(COMPARE_COLUMNS, math.nan)
        x, y = _values(a, metric), _values(b, metric)
        row.update(metric=metric, n_a=len(x), n_b=len(y), correction=correction or "none", alpha=alpha, level=level)
        row["pooled"] = pooled or None
        reason = ""
        if metric not in names_b or metric not in names_a:
            reason = f"only in group {'A' if metric in names_a else 'B'}"
        elif len(x) < 2 or len(y) < 2:
            reason = f"fewer than 2 finite runs in group {'A' if len(x) < 2 else 'B'}"
        if reason:
            row.update(status="skipped", reason=reason, verdict=f"not compared: {reason}")
            skipped.append(row)
            continue
        known = resolve_direction(metric, directions)
        c = compare(x, y, alpha=alpha, level=level, rng=seed, n_resamples=n_resamples, direction=known or "max")
        aso = c.almost_stochastic_order
        row.update(status="compared", reason="", mean_a=c.mean_a, mean_b=c.mean_b, std_a=c.std_a, std_b=c.std_b)
        row.update(direction=known or "max?", notes=" ".join(c.notes), **skewness(x, y))
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
        ratio = c.spread_ratio  # std(A) / std(B), its interval inverting Brown-Forsythe, and that test's p
        row["spread_ratio"] = float(ratio.statistic)
        if min(len(x), len(y)) < _SPREAD_RUNS:  # 2 runs: equal deviations, Brown-Forsythe always "rejects"
            row.update(spread_p=math.nan, spread_ratio_ci_low=math.nan, spread_ratio_ci_high=math.nan)
        else:
            low, high = ratio.confidence_interval(level)
            row.update(spread_p=ratio.pvalue, spread_ratio_ci_low=low, spread_ratio_ci_high=high)
        compared.append(row)
    wanted = set(metrics_of_interest([r["metric"] for r in compared], interest))
    keys = ("welch_p", "spread_p")
    for family in ("interest", "other"):
        members = [r for r in compared if (r["metric"] in wanted) == (family == "interest")]
        for row in members:
            row.update(family=family, family_size=len(members))
        for key in keys:
            ps = [r[key] for r in members]
            finite = [i for i, p in enumerate(ps) if not math.isnan(p)]
            adjusted: list[float] = list(correct([ps[i] for i in finite], method=correction)) if finite else []
            for row in members:
                row[f"{key}_corrected"] = math.nan
            for i, p in zip(finite, adjusted, strict=True):
                members[i][f"{key}_corrected"] = float(p)
    for row in compared:  # the family size the correction used: the finite p-values of the row's family
        tested = {k: sum(1 for r in compared if r["family"] == row["family"] and not math.isnan(r[k])) for k in keys}
        row["location_verdict"] = location_verdict(row, alpha, correction, tested["welch_p"])
        row["spread_verdict"] = spread_verdict(row, alpha, correction, tested["spread_p"])
        row["verdict"] = _verdict(row, alpha, correction)
        if improvement_threshold is not None:
            row["improvement_threshold"] = improvement_threshold
            row["improvement_verdict"] = improvement_verdict(row, improvement_threshold)
            row["verdict"] = f"improvement: {row['improvement_verdict'].split(':')[0]}; {row['verdict']}"
    return [{k: _value(k, v) for k, v in r.items()} for r in (*compared, *skipped)]


def _one_configuration(runs: Sequence[RunValues], name: str, pool: bool) -> str:
    """``""`` when ``runs`` are one configuration, else (``pool``) the words that say what they pool."""
    from deviate_cb.report.reading.group_identity import one_configuration

    return one_configuration(
        runs,
        option=name,
        received=f"{name}: {len(runs)} runs",
        pool=pool,
        fix="Keep the runs of one {key} (one of: {values})",
        pool_flag="pool=True",
    )


def _value(key: str, value: Any) -> Any:
    """A row's value: NaN as ``None``; an unbounded spread ratio or interval end stays ``inf`` for the table and
    CSV (JSON writes ``null``)."""
    if key.startswith("spread_ratio") and isinstance(value, float) and math.isinf(value):
        return value
    return json_value(value)


_SPREAD_RUNS = 3  # Brown-Forsythe compares absolute deviations from the median: 2 runs give two equal ones


def _verdict(row: dict[str, Any], alpha: float, correction: Optional[str]) -> str:
    """The short verdict of both questions: ``means: ...; spread: ...`` (the sentences are in
    ``location_verdict`` and ``spread_verdict``)."""
    means = _short(row, "welch_p_corrected", "mean_diff", alpha, correction)
    better = "A < B (significant" if row.get("direction") == "min" else "A > B (significant"
    if means.startswith(better) and row["aso_epsilon_min"] < 0.2:  # ASO ran on the better-is-larger scale
        lower = "; lower is better" if row.get("direction") == "min" else ""
        means += f", ASO: A almost dominates B (eps {row['aso_epsilon_min']:.2f}{lower})"
    spread = _short(row, "spread_p_corrected", "spread_log", alpha, correction)
    return f"means: {means}; spread: {spread}"


def _short(row: dict[str, Any], key: str, sign_of: str, alpha: float, correction: Optional[str]) -> str:
    p = row[key]
    if sign_of == "spread_log":
        ratio = row["spread_ratio"]
        positive = ratio > 1 if not math.isnan(ratio) else False
        if row["std_a"] == 0 and row["std_b"] == 0:
            return "both groups identical across runs"
        if min(row["n_a"], row["n_b"]) < _SPREAD_RUNS:
            return f"not tested (fewer than {_SPREAD_RUNS} runs in a group)"
    else:
        positive = row["mean_diff"] > 0
        if row["std_a"] == 0 and row["std_b"] == 0:
            return (
                "equal (every run identical)"
                if row["mean_diff"] == 0
                else f"A {'>' if positive else '<'} B in every run (both groups constant: not tested)"
            )
    if math.isnan(p):
        return "no test possible"
    after = f" after {correction}" if correction else ""
    if p <= alpha:
        return f"A {'>' if positive else '<'} B (significant{after})"
    return f"no significant difference{after}"


def location_verdict(row: Mapping[str, Any], alpha: float, correction: Optional[str], m: int) -> str:
    """The means, in words that agree with the intervals printed beside them.

    The mean difference's interval is Welch's (the test's own), and the intervals of Cohen's d and P(A>B) invert
    the same test, so each excludes "no effect" exactly when Welch's p is at most ``1 - level``; the verdict says
    when the correction over ``m`` metrics is what keeps an excluded "no effect" from being significant.
    """
    level = row["level"]
    diff = f"{_signed(row['mean_diff'])} [{_signed(row['mean_diff_ci_low'])}, {_signed(row['mean_diff_ci_high'])}]"
    effect = (
        f"; d {cell(row['cohens_d'])} [{cell(row['cohens_d_ci_low'])}, {cell(row['cohens_d_ci_high'])}]"
        f", P(A>B) {cell(row['p_a_gt_b'])} [{cell(row['p_a_gt_b_ci_low'])}, {cell(row['p_a_gt_b_ci_high'])}]"
    )
    if row["std_a"] == 0 and row["std_b"] == 0:
        a, b = f"{row['mean_a']:.6g}", f"{row['mean_b']:.6g}"
        if row["mean_diff"] == 0:
            return f"means equal: every run of both groups gave {a}; no spread to test against"
        return (
            f"both groups constant: A {a} in all {row['n_a']} runs, B {b} in all {row['n_b']}: no spread to test "
            "against (no p-value, effect size or interval); the difference is exact only if the runs are "
            "bit-identical by design (control)"
        )
    p, p_adj = row["welch_p"], row["welch_p_corrected"]
    over = f" over {family_text(row, m)}" if row.get("family") else f" over {m} metrics"
    tested = f"Welch p {_p(p)}" + (f", {_p(p_adj)} after {correction}{over}" if correction and m > 1 else "")
    lv = f"{level:.0%}"
    skew = skew_note(row)
    if math.isnan(p):
        return f"no test possible: diff {diff}"
    higher = "A" if row["mean_diff"] > 0 else "B"
    if p_adj <= alpha:
        return f"{higher} is higher: diff {diff} ({lv} CI){effect} ({tested}){skew}"
    if p <= 1 - level:
        return (
            f"no significant difference after {correction}: diff {diff} ({lv} CI, excludes 0 for this metric alone)"
            f"{effect} ({tested}){skew}"
        )
    return f"no significant difference in means: diff {diff} ({lv} CI, includes 0){effect} ({tested}){skew}"


def spread_verdict(row: Mapping[str, Any], alpha: float, correction: Optional[str], m: int) -> str:
    """The spreads, in words that agree with the interval of std(A) / std(B) printed beside them (the interval
    inverts the Brown-Forsythe test, so it excludes 1 exactly when that test's p is at most ``1 - level``)."""
    level = row["level"]
    lv = f"{level:.0%}"
    std_a, std_b = row["std_a"], row["std_b"]
    stds = f"std A {cell(std_a)}, std B {cell(std_b)}"
    if std_a == 0 and std_b == 0:
        return "both groups are identical across their runs (std 0): no spread to compare"
    if min(row["n_a"], row["n_b"]) < _SPREAD_RUNS:
        return (
            f"not tested: the Brown-Forsythe test needs at least {_SPREAD_RUNS} runs per group (n = {row['n_a']}/"
            f"{row['n_b']}: with 2 runs the deviations from the median are equal, and it would always reject); "
            f"std ratio A/B {_inf(row['spread_ratio'])}, {stds}"
        )
    p, p_adj = row["spread_p"], row["spread_p_corrected"]
    over = f" over {family_text(row, m)}" if row.get("family") else f" over {m} metrics"
    tested = f"Brown-Forsythe p {_p(p)}" + (f", {_p(p_adj)} after {correction}{over}" if correction and m > 1 else "")
    low, high = row["spread_ratio_ci_low"], row["spread_ratio_ci_high"]
    ratio = f"std ratio A/B {_inf(row['spread_ratio'])}"
    if low is not None and not math.isnan(low):
        ratio += f" [{_inf(low)}, {_inf(high)}] ({lv} CI)"
    constant = " (A's runs are identical)" if std_a == 0 else " (B's runs are identical)" if std_b == 0 else ""
    if math.isnan(p):
        return f"no test possible: {stds}"
    if p_adj <= alpha:
        more = "A" if (std_b == 0 or (std_a != 0 and std_a > std_b)) else "B"
        return f"{more} spreads more{constant}: {ratio}, {stds} ({tested})"
    if p <= 1 - level:
        alone = "; the interval excludes 1 for this metric alone"
        return f"no significant difference in spread after {correction}: {ratio}, {stds} ({tested}{alone})"
    return f"no significant difference in spread{constant}: {ratio}, {stds} ({tested}{power_words(row, alpha)})"


def _inf(x: Any) -> str:
    """A ratio's cell: ``inf`` for an unbounded end (a constant group), else as
    :func:`~deviate_cb.report.text.tables.cell`."""
    return "inf" if isinstance(x, float) and math.isinf(x) and x > 0 else cell(x)


def _signed(x: float) -> str:
    if x is None or math.isnan(x):
        return "-"
    return f"{x:+.4g}"


def _p(p: float) -> str:
    if p is None or math.isnan(p):
        return "-"
    return f"{p:.2g}" if p >= 0.001 else "< 0.001"


def power_rows(
    groups: Sequence[tuple[str, Sequence[RunValues]]],
    *,
    effect: float,
    alpha: float = 0.05,
    power: float = 0.8,
    pool: bool = False,
) -> list[dict[str, Any]]:
    """One flat dict per group and metric (keys :data:`POWER_COLUMNS`); ``summary`` says it in one sentence.

    A group of several configurations raises a :class:`~deviate_cb.errors.UsageError` unless ``pool=True``
    (then its rows' ``pooled`` says what it pools).
    """
    from deviate_cb.stats import power_report

    rows = []
    pooled = {label: _one_configuration(runs, label, pool) for label, runs in groups}
    for label, runs in groups:
        for metric in sorted({m for r in runs for m in r.values}):
            x = _values(runs, metric)
            row: dict[str, Any] = dict.fromkeys(POWER_COLUMNS, None)
            row.update(group=label, metric=metric, n=len(x), effect=effect, alpha=alpha, power=power)
            row["pooled"] = pooled[label] or None
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
                from deviate_cb.stats._std import guarded_std

                std = guarded_std(x)
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
    return f"{_inf(row[key])} [{_inf(row[key + '_ci_low'])}, {_inf(row[key + '_ci_high'])}]"


def _c(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: cell(row.get(key))


_ASO_DIRECTION = {"min": " (min)", "max?": " (max?)"}  # ASO's orientation where it is not plainly larger-better

COMPARE_HUMAN: dict[str, Callable[[dict[str, Any]], str]] = {
    "metric": _c("metric"),
    "n A/B": lambda r: f"{r['n_a']}/{r['n_b']}",
    "mean A": _c("mean_a"),
    "mean B": _c("mean_b"),
    "diff [CI]": lambda r: _ci(r, "mean_diff"),
    "p": _c("welch_p"),
    "p adj": _c("welch_p_corrected"),
    "d [CI]": lambda r: _ci(r, "cohens_d"),
    "P(A>B) [CI]": lambda r: _ci(r, "p_a_gt_b"),
    "std A/B [CI]": lambda r: _ci(r, "spread_ratio"),
    "spread p adj": _c("spread_p_corrected"),
    "ASO eps": lambda r: cell(r.get("aso_epsilon_min")) + _ASO_DIRECTION.get(r.get("direction") or "", ""),
    "means": lambda r: r.get("location_verdict") or r.get("verdict") or "",
    "spread": lambda r: r.get("spread_verdict") or "",
}
IMPROVEMENT_HUMAN = {"improvement": lambda r: r.get("improvement_verdict") or ""}  # with --on improvement


POWER_HUMAN = {  # headers in words (csv and json keep the keys of POWER_COLUMNS)
    **{k: _c(k) for k in ("group", "metric", "n", "mean", "std")},
    "runs needed": _c("runs_needed"),
    "power now": lambda r: "-" if r.get("achieved_power") is None else f"{r['achieved_power']:.0%}",  # as worded
}
