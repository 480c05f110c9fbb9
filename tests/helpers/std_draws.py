"""Runs of the shapes users' metrics have, with their true std: the std interval's and --until-precision's
coverage tests draw from the same ones."""

from __future__ import annotations

import math

import numpy as np

NAMES = ("normal", "ties", "lognormal", "mixture", "t3", "lognormal1")


def draw(name: str, shape: tuple[int, int], seed: int) -> tuple[np.ndarray, float]:
    """``shape`` runs of ``name`` (seeded) and the true std of one run.

    normal accuracies; tied accuracies (binomial(200, 0.9)/200); lognormal(0, 0.5) and lognormal(0, 1) losses;
    a mixture where implementation noise shows in 15% of runs; t with 3 degrees of freedom.
    """
    rng = np.random.default_rng(seed)
    if name == "normal":
        return rng.normal(0.9, 0.01, size=shape), 0.01
    if name == "ties":
        return rng.binomial(200, 0.9, size=shape) / 200, math.sqrt(0.09 / 200)
    if name == "lognormal":
        return rng.lognormal(0.0, 0.5, size=shape), math.sqrt((math.exp(0.25) - 1) * math.exp(0.25))
    if name == "mixture":
        noisy = rng.random(shape) < 0.15
        return np.where(noisy, 0.901 + 0.01 * rng.normal(size=shape), 0.901), 0.01 * math.sqrt(0.15)
    if name == "t3":
        return rng.standard_t(3, size=shape), math.sqrt(3.0)
    if name == "lognormal1":
        return rng.lognormal(0.0, 1.0, size=shape), math.sqrt((math.e - 1) * math.e)
    raise KeyError(name)
