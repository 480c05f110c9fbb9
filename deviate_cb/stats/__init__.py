"""Statistics of training variance: how noisy is it, and is A really better than B?

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
