"""When the rounds of ``--until-decided`` and ``--until-precision`` stop: their options, frozen and checked once.

Example:
    >>> rule = StoppingRule(metric="val_acc", max_runs=20, against=("experiment=base",))
    >>> rule.decides, rule.direction, rule.threshold
    (True, 'max', None)
    >>> StoppingRule(metric="val_acc", max_runs=20, precision=0.25).decides
    False
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Optional

from deviate_cb.errors import UsageError
from deviate_cb.launch.spec import number

__all__ = ["StoppingRule"]


@dataclass(frozen=True)
class StoppingRule:
    """The rounds' options: ``against`` (``KEY=VALUE`` terms naming the group B) until the sequential test decides,
    or ``precision`` until the std of ``metric`` is known to that relative half-width of its interval.

    ``direction`` is inferred from the metric's name when not given (``--until-decided`` refuses a name that
    does not tell); ``boundary`` (``"obf"``, ``"pocock"``, ``None``: the one a recorded sequence was planned
    with) shapes the test's levels; ``on="improvement"`` decides on P(A>B) against ``threshold`` (0.75 when not
    given, Bouthillier et al. 2021) instead of the mean difference.

    Raises:
        UsageError: An option out of its range, or options that do not go together.
    """

    metric: str
    max_runs: int
    against: tuple[str, ...] = ()
    precision: Optional[float] = None
    direction: Optional[str] = None
    effect: Optional[float] = None
    alpha: float = 0.05
    on: str = "mean"
    level: float = 0.95
    boundary: Optional[str] = None
    threshold: Optional[float] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "against", tuple(self.against))
        self._check_options()
        object.__setattr__(self, "threshold", self._threshold())
        object.__setattr__(self, "direction", self._direction())

    @property
    def decides(self) -> bool:
        """``--until-decided`` (against another group), not ``--until-precision``."""
        return self.precision is None

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> StoppingRule:
        """The rule the flags of :func:`~deviate_cb.launch.arguments.add_rounds_arguments` give, as typed."""
        if ns.until_decided and ns.until_precision is not None:
            raise UsageError("give `--until-decided` or `--until-precision`, not both. Received: both.")
        if ns.max_runs is None:
            raise UsageError("`--max-runs` is required with --until-decided and --until-precision. Received: none.")
        numbers = {
            "--max-runs": number(ns.max_runs, int),
            "--alpha": number(ns.alpha, float),
            "--effect": None if ns.effect is None else number(ns.effect, float),
            "--until-precision": None if ns.until_precision is None else number(ns.until_precision, float),
            "--level": number(ns.level, float),
            "--threshold": None if ns.threshold is None else number(ns.threshold, float),
        }
        for option, value in numbers.items():
            if isinstance(value, str):
                raise UsageError(f"`{option}` must be a number. Received: {option}={value}.")
        return cls(
            metric=ns.metric or "",
            max_runs=numbers["--max-runs"],
            against=tuple(ns.against),
            precision=numbers["--until-precision"],
            direction=ns.direction,
            effect=numbers["--effect"],
            alpha=numbers["--alpha"],
            on=ns.on,
            level=numbers["--level"],
            boundary=ns.boundary,
            threshold=numbers["--threshold"],
        )

    def check_runs(self, runs: int) -> None:
        """Refuse a first round (``-n``) larger than ``max_runs``, and a sequential test with fewer than 3 runs a
        group at its end."""
        max_runs = self.max_runs
        if max_runs < runs:
            raise UsageError(f"`--max-runs` must be at least -n ({runs}). Received: --max-runs={max_runs}.")
        if self.decides and max_runs < 3:
            raise UsageError(
                f"`--max-runs` must be at least 3 with --until-decided (a look needs 3 runs a group: the test's "
                f"skewness term needs each group's third cumulant). Received: --max-runs={max_runs}."
            )

    def _check_options(self) -> None:
        max_runs, precision = self.max_runs, self.precision
        if not self.metric:
            raise UsageError("`--metric` is required with --until-decided and --until-precision. Received: none.")
        if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 2:
            raise UsageError(f"`--max-runs` must be an integer >= 2. Received: --max-runs={max_runs!r}.")
        if precision is None and not self.against:
            raise UsageError(
                "`--until-decided` needs `--against KEY=VALUE`, the group to compare with. Received: none."
            )
        if precision is not None and self.against:
            raise UsageError("`--until-precision` replicates one group; `--against` belongs to --until-decided.")
        if precision is not None and not 0 < precision < 1:
            raise UsageError(
                f"`--until-precision` must be in (0, 1), e.g. 0.25. Received: --until-precision={precision}."
            )
        if precision is not None and max_runs < 3:
            raise UsageError(
                "`--max-runs` must be at least 3 with --until-precision (a std's interval needs 3 runs that "
                f"differ). Received: --max-runs={max_runs}."
            )
        if not 0 < self.alpha < 0.5:
            raise UsageError(f"`--alpha` must be in (0, 0.5). Received: --alpha={self.alpha}.")
        effect = self.effect
        if effect is not None and not (math.isfinite(effect) and effect > 0):
            raise UsageError(
                f"`--effect` must be a positive number in the metric's units. Received: --effect={effect}."
            )
        if self.on not in ("mean", "spread", "improvement"):
            raise UsageError(f"`--on` must be mean, spread or improvement. Received: --on={self.on}.")
        if not 0 < self.level < 1:
            raise UsageError(f"`--level` must be in (0, 1). Received: --level={self.level}.")
        if self.boundary is not None and self.boundary not in ("obf", "pocock"):
            raise UsageError(f"`--boundary` must be obf or pocock. Received: --boundary={self.boundary}.")

    def _threshold(self) -> Optional[float]:
        """The P(A>B) threshold: default 0.75 with ``on="improvement"``, refused otherwise."""
        threshold, effect = self.threshold, self.effect
        if self.on != "improvement":
            if threshold is not None:
                raise UsageError(f"`--threshold` goes with `--on improvement`. Received: --threshold={threshold}.")
            return None
        if effect is not None:
            raise UsageError(
                "`--effect` does not go with `--on improvement`: --threshold says what matters. "
                f"Received: --effect={effect}."
            )
        from deviate_cb.stats.improvement_look import DEFAULT_THRESHOLD

        if threshold is None:
            return DEFAULT_THRESHOLD
        if isinstance(threshold, bool) or not 0.5 < threshold < 1:
            raise UsageError(f"`--threshold` must be in (0.5, 1), e.g. 0.75. Received: --threshold={threshold}.")
        return float(threshold)

    def _direction(self) -> Optional[str]:
        """``max`` or ``min``: as given, else from the metric's name (``None`` only for ``--until-precision``)."""
        if self.direction is not None:
            if self.direction not in ("max", "min"):
                raise UsageError(f"`--direction` must be max or min. Received: --direction={self.direction}.")
            return self.direction
        from deviate_cb.stats.directions import infer_direction

        direction = infer_direction(self.metric)
        if direction is None and self.decides:
            raise UsageError(
                f"cannot tell whether a higher or a lower {self.metric} is better: pass --direction max or "
                f"--direction min. Received: --metric {self.metric}."
            )
        return direction
