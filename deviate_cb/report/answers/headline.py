"""The headline of a report: the answers a user came for, in words, computed once for every format.

Example:
    >>> from deviate_cb.report.answers.summary import Report, ReportRow
    >>> rows = (ReportRow("mlp", "control", "val_acc", "last", 3, 0.9, 0.0, 0.0, 0.9, 0.9, 0.0, 0.0, 0.0),)
    >>> values = {("mlp", "control", "val_acc"): (0.9, 0.9, 0.9)}
    >>> h = build_headlines(Report(rows, (), groups=(("mlp", "control", 3),), values=values))[0]
    >>> h.sentences[0]
    'control: the 3 runs are bit-identical on val_acc: no nondeterminism seen in 3 runs.'
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from deviate_cb.errors import UsageError
from deviate_cb.report.answers.decomposition import ABOVE_ONE, PAIRS
from deviate_cb.report.answers.records import Effect, Headline, NoiseLine, RunsNeeded, ShareLine
from deviate_cb.report.text.safe import percent
from deviate_cb.stats.directions import is_timing_metric

__all__ = ["build_headlines", "headline_metrics"]

# The spellings of impl and algo+impl the decomposition accepts; the variants whose seeds vary, most informative
# first: the spread "runs needed" is planned on.
(_IMPL_NAMES, _WIDE_NAMES), (_CONTROL_NAMES, _ALGO_NAMES) = PAIRS
_SEED_VARIANTS = (*_WIDE_NAMES, *_ALGO_NAMES)
_INTEREST = re.compile(r"(^|[/_.\-\s])(val|valid|validation|test|eval|evaluation)([/_.\-\s]|$)", re.IGNORECASE)


def headline_metrics(report: Any, patterns: Optional[Sequence[str]] = None) -> list[str]:
    """The metrics of interest, sorted by name (a stable order: the report's follows the CV).

    ``patterns`` (fnmatch on the metric's name) choose them; without, the metrics whose name marks a
    validation or test value (``val_acc``, ``val/loss``, ``test_f1``, ``eval_accuracy``), else every metric that
    is not a training metric, else all; the Hugging Face Trainer's timings (``eval_runtime``,
    ``eval_samples_per_second``, ``total_flos``) only where nothing else is left.

    Example:
        >>> from deviate_cb.report.answers.summary import Report, ReportRow
        >>> row = lambda m: ReportRow("e", "algo", m, "last", 3, 1.0, 0.1, 0.1, 0.9, 1.1, 0.2, 0.05, 0.6)
        >>> headline_metrics(Report((row("train_loss"), row("val_acc"), row("val_loss")), ()))
        ['val_acc', 'val_loss']
        >>> headline_metrics(Report((row("eval_loss"), row("eval_runtime"), row("eval_samples_per_second")), ()))
        ['eval_loss']
    """
    names = sorted({row.metric for row in report.rows})
    if patterns:
        return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)] or names
    names = [n for n in names if not is_timing_metric(n)] or names
    interest = [n for n in names if _INTEREST.search(n)]
    if interest:
        return interest
    untrained = [n for n in names if not re.search(r"(^|[/_.\-])train([/_.\-]|$)", n, re.IGNORECASE)]
    return untrained or names


def build_headlines(
    report: Any,
    *,
    problems: Sequence[Any] = (),
    metrics: Optional[Sequence[str]] = None,
    effect: Optional[Effect] = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> list[Headline]:
    """One :class:`Headline` per experiment and metric of interest (see docs/design/report.md).

    Args:
        report: A :class:`~deviate_cb.report.answers.summary.Report`; its decomposition rows give the share when
            present.
        problems: The study's :class:`~deviate_cb.report.answers.findings.Problem` list (``control_differs`` and
            ``determinism_not_in_effect`` change what the control sentence may claim).
        metrics: fnmatch patterns of the metrics to answer for (default: :func:`headline_metrics`).
        effect: The smallest difference worth reporting (default: 1% of the mean).
        alpha, power: Of the planned Welch t-test.
    """
    effect = effect or Effect()
    level = float(report.level)
    by_key = {(r.experiment, r.variant, r.metric): r for r in report.rows}
    out = []
    for metric in headline_metrics(report, metrics):
        for experiment in dict.fromkeys(r.experiment for r in report.rows if r.metric == metric):
            rows = {v: row for (e, v, m), row in by_key.items() if e == experiment and m == metric}
            values = {v: _finite(report.values.get((experiment, v, metric), ())) for v in rows}
            out.append(_headline(report, experiment, metric, rows, values, problems, effect, alpha, power, level))
    return out


def _headline(
    report: Any,
    experiment: str,
    metric: str,
    rows: Mapping[str, Any],
    values: Mapping[str, list[float]],
    problems: Sequence[Any],
    effect: Effect,
    alpha: float,
    power: float,
    level: float,
) -> Headline:
    lv = f"{level:.0%}"
    kinds = {(p.experiment, p.variant, p.kind) for p in problems}
    lines = {v: _noise_line(row, values[v]) for v, row in sorted(rows.items())}
    same = _identical_groups(values)
    lines = {v: _replace_identical(line, same.get(v, ())) for v, line in lines.items()}
    sentences: list[str] = []
    notes: list[str] = []
    control_line = lines.pop("control", None)
    control: Optional[str] = None
    if control_line is None:
        sentences.append("control: no control runs (`deviate-replicate --variant control` checks determinism).")
    elif control_line.n < 2:
        sentences.append(f"control: {control_line.n} completed run; at least 2 are needed to check determinism.")
    elif control_line.identical and (experiment, "control", "control_differs") not in kinds:
        control, sentence = _identical_control(report, experiment, metric, control_line.n)
        sentences.append(sentence)
    elif control_line.identical:
        control = "differs"
        sentences.append(
            f"control: identical on {metric} across {control_line.n} runs, but the runs differ on other metrics "
            "(see the problems; `deviate audit` finds the first step where they part)."
        )
    else:
        control = "differs"
        sentences.append(
            f"control: the {control_line.n} runs differ: std {_n(control_line.std)} {_std_ci(control_line, lv)}: "
            "determinism does not hold; "
            "`deviate audit` finds the first step and module where they part."
        )
    for line in lines.values():
        what = _NOISE_NAMES.get(line.variant, "noise")
        if line.n < 2:
            sentences.append(f"{what} ({line.variant}): {line.n} completed run; at least 2 are needed for a spread.")
        elif line.identical:
            twin = f"; identical to {', '.join(line.identical_to)}" if line.identical_to else ""
            sentences.append(
                f"{what} ({line.variant}): none seen: the {line.n} runs are identical (std 0; noise that shows in only "
                f"a few runs cannot be ruled out from {line.n}){twin}."
            )
        else:
            cv = "" if not math.isfinite(line.cv) else f", CV {percent(line.cv)}"
            std = f"std {_n(line.std)} {_std_ci(line, lv)}"
            sentences.append(f"{what} ({line.variant}): {std} over {line.n} runs{cv}.")
        if (experiment, line.variant, "identical_replicas") in kinds:
            notes.append(f"{line.variant}: replicas whose seeds differ came out identical: the seeds did not reach "
                         "the training (see the problems).")  # fmt: skip
    share = _share(report, experiment, metric, lines)
    if share is not None:
        sentences.append(_share_sentence(share, lines, lv))
        if share.problem:
            notes.append(f"problem: {share.problem}.")
        if share.caveat:
            notes.append(f"implementation share: {share.caveat}.")
    runs = _runs_needed(lines, effect, alpha, power)
    if runs is not None:
        sentences.append(_runs_sentence(runs))
    return Headline(experiment, metric, level, control, control_line, tuple(lines.values()), share, runs,
                    tuple(sentences), tuple(notes))  # fmt: skip


def _share_sentence(share: ShareLine, lines: Mapping[str, NoiseLine], lv: str) -> str:
    """The implementation share in words: the std ratio and the variance share, each with its interval; a set-up
    problem where the ratio is significantly above 1; never an interval that excludes its own estimate."""
    head = f"implementation share ({share.pair})"
    if share.reason:
        return f"{head}: not measurable here: {share.reason}."
    if share.share == 0.0:
        n = lines[share.pair.split(" / ")[0]].n
        return (
            f"{head}: 0: the {n} impl runs are identical (no implementation noise here: the kernels that ran are "
            f"deterministic, as on CPU; noise that shows in a few runs only, {n} runs cannot rule out)."
        )
    ratio = f"std ratio {_n(share.share, 2)} [{_n(share.ci_low, 2)}, {_n(share.ci_high, 2)}] ({lv} CI)"
    if share.problem:
        return f"{head}: {ratio}: a set-up problem: {share.problem}."
    variance = (
        f"variance share {_n(share.variance_share, 2)} [{_n(share.variance_ci_low, 2)}, "
        f"{_n(share.variance_ci_high, 2)}]"
    )
    if share.share > 1:
        return (
            f"{head}: {ratio}: above 1 but within noise of 1 (a sound set-up gives at most 1): implementation "
            f"noise alone may be all of the seed runs' spread ({variance})."
        )
    return (
        f"{head}: {ratio}; {variance}: the part of the seed runs' variance implementation noise alone keeps "
        "(the variance share is the std ratio squared)."
    )


def _identical_control(report: Any, experiment: str, metric: str, n: int) -> tuple[str, str]:
    """The control sentence of identical runs: bit-identical values, or values parsed from printed output
    (``--metric-regex``), identical only to the decimals they were printed with (the manifests'
    ``output_metrics_decimals``). Either way ``n`` identical runs show no nondeterminism; they cannot prove
    there is none."""
    seen = f"no nondeterminism seen in {n} runs"
    printed = _printed_decimals(report, experiment, metric)
    if printed is None:
        return "identical", f"control: the {n} runs are bit-identical on {metric}: {seen}."
    places = (
        f"the printed {printed} decimal{'s' * (printed != 1)}"
        if isinstance(printed, int) and printed >= 0
        else "the printed precision"
    )
    return "identical as printed", (
        f"control: the {n} runs are identical to {places} on {metric} (values parsed from the printed output, "
        f"not compared bit for bit): {seen} at that precision."
    )


def _printed_decimals(report: Any, experiment: str, metric: str) -> Union[int, str, None]:
    """``None`` when the control runs' values of ``metric`` were recorded as they are; else the fewest decimals any
    control run printed it with, or ``"unknown"`` when a run parsed it and recorded no decimals."""
    from deviate_cb.store.run_directory import read_run_manifest

    fewest: Union[int, str, None] = None
    for run in getattr(report, "completed", ()):
        if (run.experiment, run.variant) != (experiment, "control"):
            continue
        try:
            manifest = read_run_manifest(str(run.path / "run.json"))
        except (OSError, ValueError, UsageError):
            continue
        parsed = manifest.output_metrics
        if parsed is None or metric not in parsed:
            continue
        decimals = manifest.output_metrics_decimals
        places = decimals.get(metric) if decimals is not None else None
        if not isinstance(places, int) or isinstance(places, bool):
            fewest = "unknown"
        elif fewest != "unknown":
            fewest = places if fewest is None else min(int(fewest), places)
    return fewest


_NOISE_NAMES = {
    **dict.fromkeys(_WIDE_NAMES, "seed + implementation noise"),
    **dict.fromkeys(_ALGO_NAMES, "seed noise"),
    **dict.fromkeys(_IMPL_NAMES, "implementation noise"),
}


def _noise_line(row: Any, values: Sequence[float]) -> NoiseLine:
    from deviate_cb.stats.precision import std_interval_note

    identical = len(values) >= 2 and len(set(values)) == 1
    note = std_interval_note(values) if math.isnan(row.std_ci_low) else ""
    return NoiseLine(row.variant, row.n, row.mean, row.std, row.std_ci_low, row.std_ci_high, row.cv, identical,
                     std_note=note)  # fmt: skip


def _std_ci(line: NoiseLine, lv: str) -> str:
    """``[low, high] (95% CI)``, or why no interval holds (the runs cannot tell the std)."""
    if line.std_note:
        return f"(no interval: {line.std_note.replace('cannot tell the std', 'cannot tell it')})"
    return f"[{_n(line.std_ci_low)}, {_n(line.std_ci_high)}] ({lv} CI)"


def _replace_identical(line: NoiseLine, twins: tuple[str, ...]) -> NoiseLine:
    return dataclasses.replace(line, identical_to=twins) if twins else line


def _identical_groups(values: Mapping[str, list[float]]) -> dict[str, tuple[str, ...]]:
    """Variants whose runs gave exactly the same values as another variant's (same n, same sorted values)."""
    keys = {v: tuple(sorted(x)) for v, x in values.items() if len(x) >= 2}
    twins = {v: tuple(w for w in keys if w != v and keys[w] == k) for v, k in keys.items()}
    return {v: found for v, found in twins.items() if found}


def _share(report: Any, experiment: str, metric: str, lines: Mapping[str, NoiseLine]) -> Optional[ShareLine]:
    wide = next((v for v in _WIDE_NAMES if v in lines), None)
    impl = next((v for v in _IMPL_NAMES if v in lines), None)
    if wide is None and impl is None:
        if any(v in lines for v in _ALGO_NAMES):
            return ShareLine("impl / algo+impl", reason="no impl and algo+impl runs (`--variant impl` and "
                             "`--variant algo+impl` measure it)")  # fmt: skip
        return None
    pair = f"{impl or 'impl'} / {wide or 'algo+impl'}"
    if impl is None:
        return ShareLine(pair, reason="no impl runs (`--variant impl` measures it)")
    if wide is None:
        return ShareLine(pair, reason="no algo+impl runs (`--variant algo+impl` measures it)")
    narrow_line, wide_line = lines[impl], lines[wide]
    if narrow_line.n < 2 or wide_line.n < 2:
        return ShareLine(pair, reason="fewer than 2 completed runs in a variant")
    if wide_line.identical:
        return ShareLine(pair, reason=f"the {wide} runs have no spread (all identical), so the ratio is undefined")
    key = (experiment, metric, impl, wide)
    row = next((d for d in report.decomposition if (d.experiment, d.metric, d.narrow, d.wide) == key), None)
    if row is not None and row.note.startswith("not measurable"):  # impl ran deterministic: nothing to measure
        return ShareLine(pair, reason=row.note.removeprefix("not measurable: "))
    if narrow_line.identical:
        return ShareLine(pair, 0.0, 0.0, 0.0, reason="")
    if row is None or not math.isfinite(row.share):
        return ShareLine(pair, reason=(row.note if row is not None and row.note else "no decomposition computed"))
    problem = row.note.removeprefix(f"{ABOVE_ONE}: ") if row.note.startswith(ABOVE_ONE) else ""
    caveat = row.note if row.note.startswith("approximate interval") else ""
    variance = (row.variance_share, row.variance_share_ci_low, row.variance_share_ci_high)
    return ShareLine(pair, row.share, row.share_ci_low, row.share_ci_high, "", *variance, row.pvalue_equal_spread,
                     problem, caveat)  # fmt: skip


def _runs_needed(lines: Mapping[str, NoiseLine], effect: Effect, alpha: float, power: float) -> Optional[RunsNeeded]:
    chosen = next((lines[v] for v in _SEED_VARIANTS if v in lines), None)
    if chosen is None:
        chosen = next(iter(lines.values()), None)
    if chosen is None or chosen.n < 2 or not math.isfinite(chosen.std):
        return None
    size, basis = effect.of(chosen.mean, chosen.std)
    base = dict(variant=chosen.variant, std=chosen.std, effect=size, effect_basis=basis, alpha=alpha, power=power,
                n_now=chosen.n)  # fmt: skip
    if chosen.std == 0.0:
        return RunsNeeded(**base, runs_per_group=2, power_now=1.0, detectable_now=0.0,  # type: ignore[arg-type]
                          reason="the runs are identical: any difference shows in every run")  # fmt: skip
    if not (math.isfinite(size) and size > 0):
        return RunsNeeded(**base, runs_per_group=None, power_now=math.nan, detectable_now=math.nan,  # type: ignore[arg-type]
                          reason="no difference to plan for (the mean and the spread are 0)")  # fmt: skip
    from deviate_cb.stats import achieved_power, detectable_effect
    from deviate_cb.stats.pilot import assured_detectable_effect, expected_power, plan_runs

    interval = (chosen.std_ci_low, chosen.std_ci_high)
    printed = all(math.isfinite(v) for v in interval)  # the interval printed beside the std; else chi-square
    plan = plan_runs(chosen.std, chosen.n, effect=size, alpha=alpha, power=power,
                     std_interval=interval if printed else None)  # fmt: skip
    reason = "" if plan.runs_needed is not None else "more than 10^9 runs per group"
    now = achieved_power(chosen.n, chosen.n, chosen.std, effect=size, alpha=alpha)
    expected_now = expected_power(chosen.n, chosen.n, chosen.std, chosen.n, effect=size, alpha=alpha)
    assured = assured_detectable_effect(chosen.n, chosen.n, chosen.std, chosen.n, alpha=alpha, power=power)
    at_estimate = float(detectable_effect(chosen.n, chosen.n, chosen.std, alpha=alpha, power=power))
    return RunsNeeded(**base, runs_per_group=plan.runs_needed, power_now=now, detectable_now=assured,  # type: ignore[arg-type]
                      reason=reason, confidence=plan.confidence, std_upper=plan.std_upper,
                      expected_power=plan.expected_power, runs_at_estimate=plan.runs_at_estimate,
                      expected_power_at_estimate=plan.expected_power_at_estimate, runs_low=plan.runs_low,
                      runs_high=plan.runs_high, std_low=plan.std_low, std_high=plan.std_high,
                      expected_power_now=expected_now, detectable_at_estimate=at_estimate)  # fmt: skip


def _runs_sentence(r: RunsNeeded) -> str:
    """Runs needed with their uncertainty: the plan on the std's upper confidence limit (the probability it
    reaches the power, and its expected power), the plan at the measured std with its shortfall, the range
    across the std's interval, and what the runs made detect at the same confidence."""
    if r.reason and r.runs_per_group is not None and r.std == 0.0:
        return f"runs needed: {r.reason} ({r.variant})."
    if r.runs_per_group is None:
        return f"runs needed: {r.reason}."
    conf, pw = f"{r.confidence:.0%}", f"{r.power:.0%}"
    low, high = ("more than 10^9" if v is None else str(v) for v in (r.runs_low, r.runs_high))
    span = low if low == high else f"{low} to {high}"
    made = (
        f"{r.n_now} runs per group, as made, detect {_n(r.detectable_now)} with {pw} power at {conf} confidence "
        f"({_n(r.detectable_at_estimate)} at the measured std; {r.power_now:.0%} power for {_n(r.effect)}, "
        f"{r.expected_power_now:.0%} expected)"
        if math.isfinite(r.detectable_now)
        else f"{r.n_now} runs were made"
    )
    return (
        f"runs needed: {r.runs_per_group} per group to detect a difference of {_n(r.effect)} ({r.effect_basis}) "
        f"with {pw} power (Welch t, alpha {r.alpha:g}), planned on the {conf} upper confidence limit of the std "
        f"of {r.variant} ({_n(r.std_upper)} for a measured {_n(r.std)} over {r.n_now} runs): at least {pw} power "
        f"with {conf} confidence, {r.expected_power:.0%} expected (normal runs); at the measured std "
        f"{r.runs_at_estimate} (only {r.expected_power_at_estimate:.0%} expected), {span} across the std's "
        f"interval [{_n(r.std_low)}, {_n(r.std_high)}]; {made}."
    )


def _n(x: Optional[float], digits: int = 4) -> str:
    if x is None or not math.isfinite(x):
        return "-" if x is None or math.isnan(x) else ("inf" if x > 0 else "-inf")
    return f"{x:.{digits}g}" if abs(x) < 1e6 else f"{x:.{digits}e}"


def _finite(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]
