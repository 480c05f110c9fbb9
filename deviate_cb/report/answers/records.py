"""What a headline answers, as data: the effect worth reporting, the lines of noise, share and runs needed.

Example:
    >>> parse_effect("1%")
    Effect(value=None, relative=0.01)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Union

from deviate_cb.errors import UsageError

__all__ = ["HEADLINE_COLUMNS", "Effect", "Headline", "NoiseLine", "RunsNeeded", "ShareLine", "parse_effect"]

HEADLINE_COLUMNS = (
    "experiment",
    "metric",
    "kind",
    "variant",
    "n",
    "value",
    "ci_low",
    "ci_high",
    "level",
    "detail",
    "sentence",
)


@dataclass(frozen=True)
class Effect:
    """The smallest difference worth reporting: ``value`` in the metric's units, or ``relative`` of the mean."""

    value: Optional[float] = None
    relative: Optional[float] = 0.01

    def of(self, mean: float, std: float) -> tuple[float, str]:
        """The difference in the metric's units, and how it was chosen (for the sentence)."""
        if self.value is not None:
            return self.value, "--effect"
        rel = 0.01 if self.relative is None else self.relative
        if math.isfinite(mean) and mean != 0:
            return abs(mean) * rel, f"{rel * 100:g}% of the mean"
        return std, "one std of the seed noise (the mean is 0)"


def parse_effect(text: Union[str, float, None]) -> Effect:
    """``--effect``: a number in the metric's units (``0.005``), or a share of the mean (``1%``).

    Example:
        >>> parse_effect("2%"), parse_effect("0.005")
        (Effect(value=None, relative=0.02), Effect(value=0.005, relative=None))
    """
    if text is None:
        return Effect()
    raw = str(text).strip()
    try:
        if raw.endswith("%"):
            rel = float(raw[:-1]) / 100.0
            if not (math.isfinite(rel) and rel > 0):
                raise ValueError
            return Effect(None, rel)
        value = float(raw)
        if not (math.isfinite(value) and value > 0):
            raise ValueError
        return Effect(value, None)
    except ValueError:
        raise UsageError(
            f"`--effect` must be a positive number in the metric's units or a percentage of the mean such as 1%. "
            f"Received: --effect={raw!r}."
        ) from None


@dataclass(frozen=True)
class NoiseLine:
    """The spread of one variant on the metric: std (ddof=1) with its interval (Bonett's), or why none holds."""

    variant: str
    n: int
    mean: float
    std: float
    std_ci_low: float
    std_ci_high: float
    cv: float
    identical: bool
    identical_to: tuple[str, ...] = ()  # other variants whose runs gave exactly the same values
    std_note: str = ""  # why no std interval holds ("cannot tell the std from 5 runs: only 2 differ ..."), or ""


@dataclass(frozen=True)
class ShareLine:
    """The std ratio ``std(impl) / std(algo+impl)`` with its interval, and the variance share (its square, the
    part of the seed runs' variance implementation noise alone keeps) with its interval; ``problem`` says when
    the ratio is significantly above 1, which a sound set-up rules out."""

    pair: str
    share: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    reason: str = ""  # why it is not measurable here; empty when measured
    variance_share: float = math.nan
    variance_ci_low: float = math.nan
    variance_ci_high: float = math.nan
    pvalue: float = math.nan  # two-sided, equal spreads, by the interval's method
    problem: str = ""  # the set-up problem a share significantly above 1 shows; empty otherwise
    caveat: str = ""  # where the interval is approximate (impl noise that shows in a few runs only)


@dataclass(frozen=True)
class RunsNeeded:
    """Runs per group for ``power`` to detect ``effect`` with Welch's t-test, planned on the upper confidence
    limit of the measured std (:func:`~deviate_cb.stats.pilot.plan_runs`), with the plan's uncertainty.

    ``runs_per_group`` reaches ``power`` with probability ``confidence`` (normal runs); ``expected_power`` is
    its power averaged over the std's uncertainty; ``runs_at_estimate`` the runs at the measured std;
    ``runs_low``/``runs_high`` at the ends of the std's printed interval. ``detectable_now`` is what the runs
    made detect with ``power`` at the same confidence (``detectable_at_estimate`` at the measured std);
    ``power_now`` their power at the measured std, ``expected_power_now`` averaged over its uncertainty.
    """

    variant: str
    std: float
    effect: float
    effect_basis: str
    alpha: float
    power: float
    runs_per_group: Optional[int]
    n_now: int
    power_now: float
    detectable_now: float
    reason: str = ""
    confidence: float = 0.8
    std_upper: float = math.nan
    expected_power: float = math.nan
    runs_at_estimate: Optional[int] = None
    expected_power_at_estimate: float = math.nan
    runs_low: Optional[int] = None
    runs_high: Optional[int] = None
    std_low: float = math.nan
    std_high: float = math.nan
    expected_power_now: float = math.nan
    detectable_at_estimate: float = math.nan


@dataclass(frozen=True)
class Headline:
    """The answer for one experiment and metric: :attr:`sentences` in plain words, and the numbers behind them.

    Attributes:
        experiment, metric: What it answers for.
        level: Confidence level of every interval.
        control: ``"identical"``, ``"identical as printed"`` (values parsed from printed output, identical to
            the printed decimals), ``"differs"``, or ``None`` without control runs.
        control_line: The control runs' spread, when there are control runs.
        noise: Every other variant's spread.
        share: The implementation share, or why it is not measurable.
        runs: Runs needed, or ``None`` when no variant has a spread to plan on.
        sentences: One sentence per answer, in the order shown.
        notes: Caveats that go with the numbers (coverage of an interval at small n, problems of the study).
    """

    experiment: str
    metric: str
    level: float
    control: Optional[str]
    control_line: Optional[NoiseLine]
    noise: tuple[NoiseLine, ...]
    share: Optional[ShareLine]
    runs: Optional[RunsNeeded]
    sentences: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    def title(self) -> str:
        """What the sentences answer for: ``Answers for val_acc (experiment mlp)``."""
        return f"Answers for {self.metric} (experiment {self.experiment})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN and infinities become ``None``)."""
        return _json(asdict(self))

    def records(self) -> list[dict[str, Any]]:
        """Flat rows of :data:`HEADLINE_COLUMNS` (one per sentence), for CSV and Arrow."""
        out: list[dict[str, Any]] = []
        base = {"experiment": self.experiment, "metric": self.metric, "level": self.level}
        sentences = iter(self.sentences)
        if self.control_line is not None:
            c = self.control_line
            out.append({**base, "kind": "control", "variant": c.variant, "n": c.n, "value": c.std,
                        "ci_low": c.std_ci_low, "ci_high": c.std_ci_high, "detail": self.control,
                        "sentence": next(sentences, "")})  # fmt: skip
        elif self.control is None:
            out.append({**base, "kind": "control", "detail": "no control runs", "sentence": next(sentences, "")})
        for line in self.noise:
            out.append({**base, "kind": "noise", "variant": line.variant, "n": line.n, "value": line.std,
                        "ci_low": line.std_ci_low, "ci_high": line.std_ci_high,
                        "detail": "identical" if line.identical else f"cv {line.cv}",
                        "sentence": next(sentences, "")})  # fmt: skip
        if self.share is not None:
            s = self.share
            out.append({**base, "kind": "implementation share", "variant": s.pair, "value": s.share,
                        "ci_low": s.ci_low, "ci_high": s.ci_high, "detail": s.reason or s.problem,
                        "sentence": next(sentences, "")})  # fmt: skip
        if self.runs is not None:
            r = self.runs
            out.append({**base, "kind": "runs needed", "variant": r.variant, "n": r.n_now,
                        "value": r.runs_per_group, "detail": f"effect {r.effect:.4g} ({r.effect_basis})",
                        "sentence": next(sentences, "")})  # fmt: skip
        return [{k: _json(row.get(k)) for k in HEADLINE_COLUMNS} for row in out]


def _json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value
