"""precision.py: when a std's interval holds, the planning precision, and one look of ``--until-precision``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deviate_cb.stats import runs_for_precision, std_precision
from deviate_cb.stats.intervals import bonett_std_interval, std_kurtosis
from deviate_cb.stats.precision import can_tell_along, planning_precision, precision_look, std_interval_note


@pytest.mark.parametrize("n", [5, 12, 40])
@pytest.mark.parametrize("kurtosis", [1.8, 3.0, 9.0])
def test_planning_precision_is_the_half_width_of_bonetts_interval(n: int, kurtosis: float) -> None:
    x = np.random.default_rng(n).normal(size=n)
    low, high = bonett_std_interval(x, 0.9, kurtosis)
    assert planning_precision(n, kurtosis, 0.9) == pytest.approx((high - low) / (2 * np.std(x, ddof=1)), rel=1e-12)
    assert std_precision(n, 0.9, kurtosis=kurtosis) == pytest.approx(planning_precision(n, kurtosis, 0.9))


def test_runs_for_precision_with_a_kurtosis_plans_for_the_tails() -> None:
    for kurtosis in (3.0, 9.0):
        n = runs_for_precision(0.25, kurtosis=kurtosis)
        assert std_precision(n, kurtosis=kurtosis) <= 0.25 < std_precision(n - 1, kurtosis=kurtosis)
    assert runs_for_precision(0.25, kurtosis=9.0) > 3 * runs_for_precision(0.25, kurtosis=3.0)
    assert runs_for_precision(0.2) == 53  # without a kurtosis: the chi-square (normal theory) number, as before
    with pytest.raises(ValueError, match=r"^`kurtosis` must be a number of at least 1 \(3: normal runs\)\. Received"):
        std_precision(10, kurtosis=0.5)


@pytest.mark.parametrize(
    ("values", "note"),
    [
        ([], "cannot tell the std from 0 runs"),
        ([0.9], "cannot tell the std from 1 run"),
        ([0.9, 0.91], "cannot tell the std from 2 runs with only 2 distinct values"),
        ([0.9, 0.9, 0.9, 0.9], "cannot tell the std from 4 runs with only 1 distinct value"),
        ([0.9, 0.9, 0.9, 0.91, 0.92], "cannot tell the std from 5 runs: only 2 differ from the other 3"),
        ([0.9, 0.9, 0.9, 0.91, 0.92, 0.93], ""),  # 3 differ
        ([0.9, 0.9, 0.91, 0.92], ""),  # no majority of equal runs
        ([0.9, 0.91, 0.92], ""),
    ],
)
def test_std_interval_note(values: list[float], note: str) -> None:
    assert std_interval_note(values) == note
    if len(values) >= 2:
        assert can_tell_along(np.array([values])).tolist() == [note == ""]


def test_the_look_uses_the_largest_kurtosis_of_the_looks_from_10_runs() -> None:
    x = np.r_[np.random.default_rng(3).normal(size=11), 8.0, np.random.default_rng(4).normal(0.0, 3.0, size=30)]
    at_12 = float(std_kurtosis(x[:12]))
    plain = precision_look(x, 0.25)
    kept = precision_look(x, 0.25, looks=[3, 12, 20])
    assert kept.kurtosis == max(at_12, float(std_kurtosis(x[:20])), float(std_kurtosis(x)))
    assert kept.kurtosis > plain.kurtosis == float(std_kurtosis(x))
    assert kept.precision > plain.precision and kept.low < plain.low < plain.std < plain.high < kept.high
    early = precision_look(x, 0.25, looks=[3, 5, 8])  # looks below 10 runs are left out
    assert early.kurtosis == plain.kurtosis


def test_a_look_is_json_ready_and_says_why_not() -> None:
    look = precision_look([0.9, 0.9, 0.9, 0.91], 0.25, last=True, name="acc")
    assert look.decision == "not known" and look.stop and math.isinf(look.precision)
    out = look.to_dict()
    assert out["precision"] is None and out["low"] is None and out["note"].startswith("cannot tell the std from 4")
    assert look.text == "after 4 runs: cannot tell the std of acc from 4 runs with only 2 distinct values (target ±25%)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"values": [1.0, float("nan"), 2.0]},
            r"^`values` must hold one finite value per run\. Received: 1 non-finite",
        ),
        ({"target": 0}, r"^`target` must be a positive number, e\.g\. 0\.25\. Received: target=0\.$"),
        ({"looks": [0]}, r"^`looks` must hold positive integers\. Received: looks=\[0\]\.$"),
        ({"level": 1.0}, r"^`level` must be"),
    ],
)
def test_bad_input_is_rejected(kwargs: dict, message: str) -> None:
    args = {"values": [1.0, 2.0, 3.0], "target": 0.25, **kwargs}
    with pytest.raises(ValueError, match=message):
        precision_look(args.pop("values"), args.pop("target"), **args)
