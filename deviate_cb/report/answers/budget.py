"""``deviate power --budget``: what the runs a power analysis asks for cost, and what a budget of run-hours buys.

Example:
    >>> parse_budget("90m"), parse_budget("1.5h"), parse_budget("3600s"), parse_budget("20")
    (1.5, 1.5, 1.0, 20.0)
    >>> plan = plan_budget(std=0.0034, n_made=3, run_s=588.0, effect=0.005, budget_h=20.0)
    >>> plan["runs_needed"], plan["runs_at_estimate"], plan["runs_more"], plan["budget_runs"]
    (34, 9, 31, 61)
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError
from deviate_cb.report.reading.selection import RunValues

__all__ = [
    "BUDGET_COLUMNS",
    "BUDGET_NOTE",
    "budget_rows",
    "format_hours",
    "parse_budget",
    "plan_budget",
    "spread_rows",
    "wall_times",
]

BUDGET_COLUMNS = (
    "run_s", "timed_runs", "runs_more", "cost_h", "budget_h", "budget_group_h", "budget_runs", "budget_used_h",
    "budget_effect", "budget_summary", "runs_at_estimate", "expected_power", "budget_effect_at_estimate",
)  # fmt: skip

BUDGET_NOTE = (
    "Cost per run: the mean wall time (run.json `duration_s`) of the group's completed replicas; costs are "
    "run-hours, the sum of the runs' wall times, whatever ran at once. The budget is split evenly between the "
    "two groups of a comparison, each assumed to cost what this group's runs measured; runs per group count "
    "the runs made."
)

_DURATION = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([hms]?)\s*$")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "": 3600.0}


def parse_budget(text: str) -> float:
    """``--budget`` in hours: ``20h``, ``90m``, ``3600s``, ``1.5h``; a plain number is hours.

    Raises:
        UsageError: Anything else, or a budget that is not positive and finite (one line).
    """
    match = _DURATION.match(text)
    hours = float(match.group(1)) * _SECONDS[match.group(2)] / 3600.0 if match else math.nan
    if not (math.isfinite(hours) and hours > 0):
        raise UsageError(f"`--budget` must be a duration such as 20h or 90m. Received: --budget={text}.")
    return hours


def _keys_of(path: Path, experiment: str, variant: str, replica: str) -> frozenset[tuple[str, str]]:
    """The keys :func:`~deviate_cb.report.reading.selection.store_runs` gives the run at ``path``."""
    keys = {}
    for part in Path(os.path.abspath(path)).parts:
        key, sep, text = part.partition("=")
        if sep and key and text:
            keys[key] = text
    keys.update(experiment=experiment, variant=variant, replica=replica)
    return frozenset(keys.items())


def wall_times(directory: str) -> dict[frozenset[tuple[str, str]], Optional[float]]:
    """Each completed run's wall time in seconds (manifest ``duration_s``; ``None`` where it records none that
    is a positive number), keyed by the run's keys as ``store_runs`` gives them (``frozenset(run.keys.items())``).
    """
    from deviate_cb.report.reading.runs import find_runs
    from deviate_cb.store.run_directory import MANIFEST_FILE, read_run_manifest

    times: dict[frozenset[tuple[str, str]], Optional[float]] = {}
    for record in find_runs(Path(directory)):
        if not record.completed:
            continue
        try:
            value = read_run_manifest(os.path.join(record.path, MANIFEST_FILE)).duration_s
        except (OSError, ValueError):  # read a moment ago by store_runs; gone or unreadable since: no time
            value = None
        good = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        times[_keys_of(record.path, record.experiment, record.variant, record.replica)] = value if good else None
    return times


def format_hours(seconds: float) -> str:
    """A duration for people, two significant figures: ``"45 s"``, ``"9.8 min"``, ``"2.3 h"``, ``"120 h"``.

    Example:
        >>> format_hours(588), format_hours(14 * 588), format_hours(36000), format_hours(432000)
        ('9.8 min', '2.3 h', '10 h', '120 h')
    """
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.0f} {unit}" if value >= 100 else f"{float(f'{value:.2g}'):g} {unit}"
    return f"{float(f'{seconds:.2g}'):g} s"


def plan_budget(
    *,
    std: Optional[float],
    n_made: int,
    run_s: Optional[float],
    effect: Optional[float],
    budget_h: float,
    alpha: float = 0.05,
    power: float = 0.8,
) -> dict[str, Any]:
    """The numbers of one group and metric: ``runs_needed`` (``None`` without ``effect``, a spread, or when no
    number up to 10^9 detects it; planned on the std's 80% upper confidence limit from ``n_made`` runs),
    ``runs_at_estimate`` (at the measured std), ``expected_power`` (of ``runs_needed``, averaged over the std's
    uncertainty), ``runs_more``, ``cost_h`` (run-hours of ``runs_needed`` runs), ``budget_runs`` (runs per group
    the budget buys, half of it each), ``budget_used_h``, ``budget_effect`` (what they detect with ``power`` at
    the std's upper limit) and ``budget_effect_at_estimate`` (at the measured std; both ``None`` below 2 runs or
    without a spread). ``run_s`` is the mean wall time of a run (``None`` when none was measured)."""
    from deviate_cb.stats import detectable_effect
    from deviate_cb.stats.pilot import assured_detectable_effect, plan_runs

    plan: dict[str, Any] = dict.fromkeys(("runs_needed", "runs_more", "cost_h", "budget_runs", "budget_used_h"))
    plan.update(budget_h=budget_h, budget_group_h=budget_h / 2.0, budget_effect=None)
    plan.update(runs_at_estimate=None, expected_power=None, budget_effect_at_estimate=None)
    spread = std is not None and math.isfinite(std) and std > 0 and n_made >= 2
    if spread and effect is not None:
        made = plan_runs(std, n_made, effect=effect, alpha=alpha, power=power)  # type: ignore[arg-type]
        plan.update(runs_needed=made.runs_needed, runs_at_estimate=made.runs_at_estimate)
        if made.runs_needed is not None:
            plan["expected_power"] = made.expected_power
    if plan["runs_needed"] is not None:
        plan["runs_more"] = max(0, plan["runs_needed"] - n_made)
        if run_s is not None:
            plan["cost_h"] = plan["runs_needed"] * run_s / 3600.0
    if run_s is not None:
        runs = math.floor(plan["budget_group_h"] * 3600.0 / run_s * (1 + 1e-12))
        plan.update(budget_runs=runs, budget_used_h=runs * run_s / 3600.0)
        if spread and runs >= 2:
            plan["budget_effect"] = assured_detectable_effect(runs, runs, std, n_made, alpha=alpha, power=power)  # type: ignore[arg-type]
            plan["budget_effect_at_estimate"] = detectable_effect(runs, runs, std, alpha=alpha, power=power)  # type: ignore[arg-type]
    return plan


def _sentence(row: Mapping[str, Any], budget_text: str, run_s: Optional[float], table: bool) -> str:
    label, metric, power = row["group"], row["metric"], f"{row['power']:.0%}"
    effect = row["effect"]
    parts = [f"{label} {metric}:"]
    if effect is None:
        parts.append(f"for the runs needed, give `--effect` (the difference of {metric} to detect).")
    elif row.get("runs_needed") is None:  # deviate power said why (one run, no spread, too small)
        parts.append(f"the runs needed to detect {effect:g} are not given: {row['summary'].split(': ', 1)[1]}")
    else:
        n, more = row["runs_needed"], row["runs_more"]
        made = f"{more} more than the {row['n']} made" if more else f"the {row['n']} made are enough"
        text = (
            f"To detect a difference of {effect:g} in {metric} with {power} power: {n} runs per group ({made}; "
            f"planned on the 80% upper confidence limit of the std: at least {power} power with 80% confidence, "
            f"{row['expected_power']:.0%} expected; {row['runs_at_estimate']} at the measured std)"
        )
        if run_s is not None:
            cost, each = format_hours(row["cost_h"] * 3600.0), format_hours(run_s)
            text += f", about {cost} of runs per group (measured {each} per run, the mean of {row['timed_runs']})."
        else:
            text += "."
        parts.append(text)
    if run_s is None:
        why = (
            "a --table holds no wall times"
            if table
            else "no completed run of this group records its wall time (run.json `duration_s`)"
        )
        parts.append(f"Its cost and what {budget_text} buys are not known: {why}.")
        return " ".join(parts)
    runs, each = row["budget_runs"], format_hours(row["budget_group_h"] * 3600.0)
    if runs < 2:
        parts.append(
            f"With {budget_text}: {runs} run{'' if runs == 1 else 's'} per group ({each} each at "
            f"{format_hours(run_s)} per run), fewer than the 2 Welch's t-test needs."
        )
    else:
        used = format_hours(row["budget_used_h"] * 3600.0)
        text = f"With {budget_text}: {runs} runs per group ({used} each)"
        if row["budget_effect"] is None:
            text += ", but with no measured spread the difference they detect cannot be given."
        else:
            text += (
                f", which detect {row['budget_effect']:.2g} with {power} power at 80% confidence "
                f"({row['budget_effect_at_estimate']:.2g} at the measured std)."
            )
        parts.append(text)
    return " ".join(parts)


def spread_rows(groups: Mapping[str, Sequence[RunValues]], *, alpha: float, power: float) -> list[dict[str, Any]]:
    """Rows like ``power_rows``' for no ``--effect``: per group and metric the finite runs, mean and std (``ddof=1``;
    ``None`` below 2 runs), ``effect``, ``runs_needed`` and ``achieved_power`` ``None``."""
    import statistics

    rows = []
    for label, runs in groups.items():
        for metric in sorted({m for r in runs for m in r.values}):
            x = [float(r.values[metric]) for r in runs if metric in r.values and math.isfinite(r.values[metric])]
            rows.append(
                {
                    "group": label, "metric": metric, "n": len(x), "mean": statistics.fmean(x) if x else None,
                    "std": statistics.stdev(x) if len(x) >= 2 else None, "effect": None, "alpha": alpha,
                    "power": power, "runs_needed": None, "achieved_power": None, "summary": "",
                }
            )  # fmt: skip
    return rows


def budget_rows(
    rows: Sequence[Mapping[str, Any]],
    groups: Mapping[str, Sequence[RunValues]],
    times: Mapping[frozenset[tuple[str, str]], Optional[float]],
    *,
    budget_h: float,
    budget_text: str,
    table: bool = False,
) -> list[dict[str, Any]]:
    """``deviate power``'s rows (one per group and metric) with :data:`BUDGET_COLUMNS` added.

    Args:
        rows: ``power_rows`` (or rows with their keys and ``effect=None``).
        groups: Each row's group label -> its runs.
        times: Wall time per run (:func:`wall_times`; empty for a --table).
        budget_h: ``--budget`` in hours.
        budget_text: ``--budget`` in words (``"20 h"``).
        table: The runs came from a ``--table`` (no wall times to read).
    """
    out = []
    for row in rows:
        measured = [times.get(frozenset(r.keys.items())) for r in groups[row["group"]]]
        known = [t for t in measured if t is not None]
        run_s = sum(known) / len(known) if known else None
        plan = plan_budget(
            std=row.get("std"), n_made=row["n"], run_s=run_s, effect=row["effect"], budget_h=budget_h,
            alpha=row["alpha"], power=row["power"],
        )  # fmt: skip
        new = {**row, **plan, "run_s": run_s, "timed_runs": len(known)}
        new["budget_summary"] = _sentence(new, budget_text, run_s, table)
        out.append(new)
    return out
