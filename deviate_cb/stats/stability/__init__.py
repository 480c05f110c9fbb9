"""Stability measures across runs: what identical runs disagree on, beyond a metric's spread.

- :mod:`~deviate_cb.stats.stability.predictions`: prediction churn, per-sample instability, majority vote.
- :mod:`~deviate_cb.stats.stability.groups`: per-class accuracy and sub-group rate spreads.
- :mod:`~deviate_cb.stats.stability.sketch`: random-projection weight sketches and weight distances.

All names are presented by :mod:`deviate_cb.stats`.
"""
