"""Statistics of training variance: how noisy is it, and is A really better than B?

- per run: :func:`aggregate` (last, best, mean, at a step or epoch);
- across runs: :func:`describe` (spread with confidence intervals, robust extras), :func:`iqm` (the
  interquartile mean with Yuen's trimmed-mean t interval, or rliable's stratified bootstrap with strata);
- two groups: :func:`compare` (Welch/Student t, Mann-Whitney U, Cohen's d, Hedges' g, P(A>B), the mean
  difference with intervals from Welch's test, a variance test, :func:`spread_ratio` with the interval of the
  Brown-Forsythe test) and :func:`almost_stochastic_order`; :func:`correct` across metrics;
- k groups: :func:`multi_aso` (Almost Stochastic Order of every ordered pair, Bonferroni-corrected, a ranking);
- sequential stopping (issue 27): :func:`plan_sequential`, :func:`plan_looks`, :func:`sequential_look` (a
  group-sequential test with repeated confidence intervals), :func:`simulate_sequential`, :func:`naive_rate`,
  :func:`std_precision`, :func:`runs_for_precision`;
- planning: :func:`runs_needed`, :func:`achieved_power`, :func:`detectable_effect`, :func:`power_curve`,
  :func:`noether_runs`, :func:`power_report`;
- noise sources: :func:`decompose` (the share of spread due to implementation noise);
- model stability (issue 5): :func:`prediction_churn`, :func:`sample_instability`, :func:`per_class_accuracy`,
  :func:`subgroup_rates`, :func:`weight_distance` and :func:`weight_distance_from_sketches`; the test set's own
  sampling spread beside the run-to-run spread: :func:`sampling_spread`.

Plain functions do the maths; results are frozen objects in SciPy's style (``statistic``, ``pvalue``,
``confidence_interval(level)``, ``to_dict()``). Resampling functions take ``rng`` and never touch the global
random state. SciPy is imported only inside the functions that need it.

Example:
    >>> from deviate_cb.stats import aggregate, describe
    >>> runs = [[0.9, 0.80], [0.9, 0.84], [0.9, 0.82]]
    >>> round(describe([aggregate(r, "last") for r in runs]).std, 3)
    0.02
"""

from deviate_cb.stats._groups import ALTERNATIVES
from deviate_cb.stats._results import StatResult
from deviate_cb.stats.aggregation.arrow import AggregateResult, aggregate_table
from deviate_cb.stats.aggregation.series import aggregate
from deviate_cb.stats.aggregation.spec import AGGREGATES, AT_AGGREGATES, parse_aggregate
from deviate_cb.stats.aso import almost_stochastic_order, violation_ratio
from deviate_cb.stats.compare import Comparison, compare, mann_whitney_u, student_t, variance_test, welch_t
from deviate_cb.stats.correction import CORRECTIONS, correct, reject
from deviate_cb.stats.decompose import decompose
from deviate_cb.stats.describe import STD_CI_METHODS, Description, describe
from deviate_cb.stats.directions import DIRECTIONS, infer_direction, resolve_direction
from deviate_cb.stats.effect_size import cohens_d, hedges_g, mean_difference, prob_improvement
from deviate_cb.stats.interval_width import runs_for_precision, std_precision
from deviate_cb.stats.intervals import (
    ConfidenceInterval,
    bonett_std_interval,
    mean_confidence_interval,
    std_confidence_interval,
)
from deviate_cb.stats.iqm import iqm
from deviate_cb.stats.multi_aso import MultiASO, multi_aso
from deviate_cb.stats.planning import PowerReport, power_report
from deviate_cb.stats.power import (
    achieved_power,
    detectable_effect,
    noether_runs,
    power_curve,
    runs_needed,
)
from deviate_cb.stats.precision import PrecisionLook, precision_look, std_interval_note
from deviate_cb.stats.sequential import (
    SequentialLook,
    SequentialPlan,
    plan_looks,
    plan_sequential,
    sequential_look,
)
from deviate_cb.stats.spread import spread_ratio
from deviate_cb.stats.stability.groups import PerClassAccuracy, SubgroupRates, per_class_accuracy, subgroup_rates
from deviate_cb.stats.stability.predictions import (
    Churn,
    SampleInstability,
    align_runs,
    majority_vote,
    prediction_churn,
    sample_instability,
)
from deviate_cb.stats.stability.sampling import SamplingSpread, sampling_spread
from deviate_cb.stats.stability.sketch import (
    WeightDistance,
    jl_epsilon,
    sketch_vector,
    weight_distance,
    weight_distance_blocks,
    weight_distance_from_sketches,
)
from deviate_cb.stats.stopping import SequentialSimulation, naive_rate, simulate_sequential

__all__ = [
    "AGGREGATES",
    "ALTERNATIVES",
    "AT_AGGREGATES",
    "CORRECTIONS",
    "DIRECTIONS",
    "STD_CI_METHODS",
    "AggregateResult",
    "Churn",
    "Comparison",
    "ConfidenceInterval",
    "Description",
    "MultiASO",
    "PerClassAccuracy",
    "PowerReport",
    "PrecisionLook",
    "SampleInstability",
    "SamplingSpread",
    "SequentialLook",
    "SequentialPlan",
    "SequentialSimulation",
    "StatResult",
    "SubgroupRates",
    "WeightDistance",
    "achieved_power",
    "aggregate",
    "aggregate_table",
    "align_runs",
    "almost_stochastic_order",
    "bonett_std_interval",
    "cohens_d",
    "compare",
    "correct",
    "decompose",
    "describe",
    "detectable_effect",
    "hedges_g",
    "infer_direction",
    "iqm",
    "jl_epsilon",
    "majority_vote",
    "mann_whitney_u",
    "mean_confidence_interval",
    "mean_difference",
    "multi_aso",
    "naive_rate",
    "noether_runs",
    "parse_aggregate",
    "per_class_accuracy",
    "plan_looks",
    "plan_sequential",
    "power_curve",
    "power_report",
    "precision_look",
    "prediction_churn",
    "prob_improvement",
    "reject",
    "resolve_direction",
    "runs_for_precision",
    "runs_needed",
    "sample_instability",
    "sampling_spread",
    "sequential_look",
    "simulate_sequential",
    "sketch_vector",
    "spread_ratio",
    "std_confidence_interval",
    "std_interval_note",
    "std_precision",
    "student_t",
    "subgroup_rates",
    "variance_test",
    "violation_ratio",
    "weight_distance",
    "weight_distance_blocks",
    "weight_distance_from_sketches",
    "welch_t",
]
