"""What the ``deviate_cb.stats`` snippet of docs/statistics.md takes as given: per-run values of a metric.

tests/test_readme_blocks.py runs this file before a ```python block marked
``<!-- readme-check: given tests/readme/stats_given.py (...) -->``. Accuracies of 5 to 8 runs per group (drawn
once, seeded), a pilot, runs of two noise variants, and scores of runs on three tasks with their task labels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["acc_a", "acc_b", "acc_c", "acc_runs", "algo_impl_runs", "impl_runs", "pilot_a", "scores", "tasks"]

_rng = np.random.default_rng(44)
acc_runs = 0.90 + 0.011 * _rng.standard_normal(8)
acc_a = 0.90 + 0.010 * _rng.standard_normal(6)
acc_b = 0.89 + 0.010 * _rng.standard_normal(6)
acc_c = 0.88 + 0.012 * _rng.standard_normal(6)
pilot_a = 0.90 + 0.004 * _rng.standard_normal(6)
impl_runs = 0.90 + 0.004 * _rng.standard_normal(8)
algo_impl_runs = 0.90 + 0.010 * _rng.standard_normal(8)
tasks = np.repeat(["cifar10", "svhn", "mnist"], 5)
scores = np.array([0.90, 0.95, 0.99]).repeat(5) + 0.01 * _rng.standard_normal(15)
