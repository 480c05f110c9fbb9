"""The variance decomposition of a study that holds several variants of one experiment.

Example:
    >>> series = {("mlp", "impl", "acc"): [0.80, 0.82, 0.81, 0.83], ("mlp", "algo+impl", "acc"): [0.78, 0.84, 0.80, 0.86]}
    >>> row = decompose_series(series)[0]
    >>> row.pair, round(row.share, 3)
    ('impl / algo+impl', 0.354)
"""  # noqa: E501

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

__all__ = ["ABOVE_ONE", "DECOMPOSITION_COLUMNS", "PAIRS", "DecompositionRow", "decompose_series", "missing_note"]

ABOVE_ONE = "set-up problem"  # how a note of a share significantly above 1 starts

# (narrow setting, wide setting): accepted spellings of each variant name.
PAIRS = (
    (("impl",), ("algo+impl", "algo_impl", "algo-impl")),
    (("control",), ("algo",)),
)
DECOMPOSITION_COLUMNS = (
    "experiment",
    "metric",
    "pair",
    "narrow",
    "wide",
    "n_narrow",
    "n_wide",
    "std_narrow",
    "std_wide",
    "share",
    "share_ci_low",
    "share_ci_high",
    "level",
    "note",
    "variance_share",
    "variance_share_ci_low",
    "variance_share_ci_high",
    "pvalue_equal_spread",
    "method",
)


@dataclass(frozen=True)
class DecompositionRow:
    """The std ratio ``std(narrow) / std(wide)`` of one metric of one experiment with its interval, and the
    variance share (the ratio squared) with its interval; ``pvalue_equal_spread`` tests equal spreads by the
    interval's method (``method``)."""

    experiment: str
    metric: str
    pair: str
    narrow: str
    wide: str
    n_narrow: int
    n_wide: int
    std_narrow: float
    std_wide: float
    share: float
    share_ci_low: float
    share_ci_high: float
    level: float
    note: str = ""
    variance_share: float = math.nan
    variance_share_ci_low: float = math.nan
    variance_share_ci_high: float = math.nan
    pvalue_equal_spread: float = math.nan
    method: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The row as a dict with the keys of :data:`DECOMPOSITION_COLUMNS`."""
        return asdict(self)


def decompose_series(
    series: Mapping[tuple[str, str, str], Sequence[float]],
    *,
    level: float = 0.95,
    seed: int = 0,
    deterministic: Optional[Mapping[tuple[str, str], str]] = None,
) -> list[DecompositionRow]:
    """Decomposition rows for every ``(experiment, metric)`` present in both variants of a known pair.

    Args:
        series: ``(experiment, variant, metric) -> per-run values``.
        level: Confidence level of the interval.
        seed: Bootstrap seed.
        deterministic: ``(experiment, variant) -> what was on`` for the groups of ``impl`` or ``algo+impl`` whose
            replicas ran with determinism in effect: their pair is not measurable.

    Example:
        >>> series = {("m", "impl", "acc"): [0.8, 0.8, 0.8], ("m", "algo+impl", "acc"): [0.7, 0.8, 0.9]}
        >>> row = decompose_series(series, deterministic={("m", "impl"): "TensorFlow op determinism"})[0]
        >>> row.note
        'not measurable: determinism was in effect in impl (TensorFlow op determinism)'
    """
    from deviate_cb.stats import decompose

    variants: dict[str, set[str]] = {}
    for experiment, variant, _ in series:
        variants.setdefault(experiment, set()).add(variant)
    rows = []
    for experiment in sorted(variants):
        for narrow_names, wide_names in PAIRS:
            narrow = next((v for v in narrow_names if v in variants[experiment]), None)
            wide = next((v for v in wide_names if v in variants[experiment]), None)
            if narrow is None or wide is None:
                continue
            metrics = sorted(
                {m for (e, v, m) in series if e == experiment and v == narrow}
                & {m for (e, v, m) in series if e == experiment and v == wide}
            )
            for metric in metrics:
                x = _finite(series[(experiment, narrow, metric)])
                y = _finite(series[(experiment, wide, metric)])
                on = [(v, (deterministic or {}).get((experiment, v))) for v in (narrow, wide) if narrow == "impl"]
                on = [(v, what) for v, what in on if what]
                if on:
                    nan = math.nan
                    where = "; ".join(f"in {v} ({what})" for v, what in on)
                    note = f"not measurable: determinism was in effect {where}"
                    head = (experiment, metric, f"{narrow} / {wide}", narrow, wide, len(x), len(y))
                    rows.append(DecompositionRow(*head, nan, nan, nan, nan, nan, level, note))
                    continue
                rows.append(_row(decompose, experiment, metric, narrow, wide, x, y, level, seed))
    return rows


def _row(
    decompose: Any,
    experiment: str,
    metric: str,
    narrow: str,
    wide: str,
    x: list[float],
    y: list[float],
    level: float,
    seed: int,
) -> DecompositionRow:
    head = (experiment, metric, f"{narrow} / {wide}", narrow, wide, len(x), len(y))
    if len(x) < 2 or len(y) < 2:
        nan = math.nan
        return DecompositionRow(*head, nan, nan, nan, nan, nan, level, "fewer than 2 finite runs in a group")
    try:
        result = decompose(x, y, level=level, rng=seed)
    except ValueError as exc:  # degenerate data
        nan = math.nan
        return DecompositionRow(*head, nan, nan, nan, nan, nan, level, f"no interval: {' '.join(str(exc).split())}")
    # The stds as the statistics computed them: exactly 0 for bit-identical runs, as in the report's table
    std_x, std_y = float(result.settings["std_impl"]), float(result.settings["std_algo_impl"])
    low, high = result.confidence_interval()
    settings = result.settings
    note = "" if std_x == 0.0 else str(settings.get("note", ""))  # identical narrow runs: [0, 0], said in the headline
    if std_y == 0.0:  # the statistics name their argument (`algo_impl`); here the variant has a name
        note = f"{wide} has no spread (all runs equal), so the share is undefined"
    elif settings.get("above_one"):
        note = (
            f"{ABOVE_ONE}: the {narrow} runs spread more than the {wide} runs (p = {result.pvalue:.2g}), which a "
            f"sound set-up rules out ({narrow} noise is part of {wide}'s): check that both ran on the same machines "
            "and software, that the variants are not mislabelled, and that the impl runs did not all take one "
            "unlucky seed"
        )
    elif settings.get("few_runs_note"):
        note = f"approximate interval: {settings['few_runs_note']}"
    share = float(result.statistic)
    return DecompositionRow(
        *head, std_x, std_y, share, low, high, level, note, float(settings.get("variance_share", math.nan)),
        low**2, high**2, float(result.pvalue), str(settings["method"]),
    )  # fmt: skip


def _finite(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def missing_note(groups: Sequence[tuple[str, str, int]], rows: Sequence[DecompositionRow] = ()) -> str:
    """Why a study has no decomposition row, in one line (``""`` when ``rows`` holds some): the variants it
    needs and those each experiment has (``groups``: ``(experiment, variant, completed runs)``, as
    :attr:`Report.groups <deviate_cb.report.answers.summary.Report.groups>`).

    Example:
        >>> missing_note([("mlp", "algo", 3), ("mlp", "impl", 0)])
        'no variance decomposition: it needs the variants impl and algo+impl, or control and algo, in one experiment, each with completed runs; experiment mlp has algo (3 runs), impl (no completed run).'
    """  # noqa: E501
    if rows:
        return ""
    variants: dict[str, list[str]] = {}
    paired = []
    for experiment, variant, n in groups:
        variants.setdefault(experiment, []).append(f"{variant} ({_runs(n)})")
    for experiment in variants:
        present = {v for e, v, n in groups if e == experiment and n > 0}
        if any(any(v in present for v in narrow) and any(v in present for v in wide) for narrow, wide in PAIRS):
            paired.append(experiment)
    if paired:
        return f"no variance decomposition: the paired variants of experiment {', '.join(paired)} share no metric."
    shown = [f"experiment {e} has {', '.join(vs)}" for e, vs in list(variants.items())[:_SHOWN]]
    more = f"; {len(variants) - _SHOWN} more experiments" if len(variants) > _SHOWN else ""
    has = "; ".join(shown) + more if shown else "the study has no runs"
    return (
        "no variance decomposition: it needs the variants impl and algo+impl, or control and algo, in one "
        f"experiment, each with completed runs; {has}."
    )


_SHOWN = 5  # experiments named in the note, at most


def _runs(n: int) -> str:
    return "no completed run" if n == 0 else f"{n} run" + ("s" if n != 1 else "")
