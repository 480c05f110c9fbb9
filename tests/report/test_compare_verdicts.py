"""`deviate compare`'s verdicts on both questions (do the means differ? do the spreads?), and that no verdict
contradicts the intervals printed beside it: over many random studies, "no significant difference" is never
shown next to an interval that excludes no-effect unless the verdict says the correction is why, and
"significant" never next to one that includes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from deviate_cb.report.answers.comparison import compare_groups
from deviate_cb.report.reading.selection import RunValues
from tests.helpers.report_study import run_cli, write_run


def _runs(values: dict[str, list[float]]) -> list[RunValues]:
    n = len(next(iter(values.values())))
    return [RunValues({}, {m: xs[k] for m, xs in values.items()}) for k in range(n)]


def _row(a: list[float], b: list[float], **kwargs) -> dict:
    (row,) = compare_groups(_runs({"acc": a}), _runs({"acc": b}), n_resamples=999, **kwargs)
    return row


G = np.random.default_rng(7)
BASE = list(0.80 + G.normal(0, 0.01, 8))


@pytest.mark.parametrize(
    ("a", "b", "means", "spread"),
    [
        ([x + 0.05 for x in BASE], BASE, "A is higher", "no significant difference in spread"),  # mean differs
        ([0.8 + 5 * (x - 0.8) for x in BASE], BASE[::-1], "no significant difference in means", "A spreads more"),
        ([0.9 + 5 * (x - 0.8) for x in BASE], BASE, "A is higher", "A spreads more"),  # both
        (BASE[:4], BASE[4:], "no significant difference in means", "no significant difference in spread"),
    ],
    ids=["mean", "spread", "both", "neither"],
)
def test_both_questions(a: list[float], b: list[float], means: str, spread: str) -> None:
    row = _row(a, b, correction=None)
    assert row["location_verdict"].startswith(means), row["location_verdict"]
    assert row["spread_verdict"].startswith(spread), row["spread_verdict"]
    higher, wider = means.startswith("A is higher"), spread.startswith("A spreads more")
    assert row["verdict"].startswith(f"means: {'A > B (significant' if higher else 'no significant difference'}")
    assert f"spread: {'A > B (significant' if wider else 'no significant difference'}" in row["verdict"]


def test_control_against_spread_is_a_spread_question(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The case of the issue: algo (spread) against control (identical); the means agree, the spreads do not."""
    values = [0.912, 0.90, 0.89, 0.905, 0.887, 0.915, 0.893, 0.901]
    for k, acc in enumerate(values):
        write_run(tmp_path, "mlp", "algo", k, [("val", "val_acc", acc)])
    for k in range(4):
        write_run(tmp_path, "mlp", "control", k, [("val", "val_acc", 0.90)])
    code, out, err = run_cli(capsys, "compare", str(tmp_path), "--a", "variant=algo", "--b", "variant=control",
                             "--format", "json")  # fmt: skip
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["location_verdict"].startswith("no significant difference in means")
    assert row["spread_p"] <= 0.05 and row["spread_verdict"].startswith("A spreads more (B's runs are identical)")
    assert row["verdict"] == "means: no significant difference after holm; spread: A > B (significant after holm)"


def _includes(low: float, high: float, value: float) -> bool:
    return low <= value <= high


@pytest.mark.slow
def test_no_verdict_contradicts_its_intervals() -> None:
    g = np.random.default_rng(0)
    seen = {"higher": 0, "none": 0, "spreads": 0, "same spread": 0}
    for trial in range(150):
        n_a, n_b = int(g.integers(3, 7)), int(g.integers(3, 7))
        shift, scale = g.choice([0.0, 0.5, 1.5, 3.0]), g.choice([1.0, 1.0, 3.0, 8.0])
        a, b = list(g.normal(shift, scale, n_a)), list(g.normal(0.0, 1.0, n_b))
        row = _row(a, b, correction=None, seed=trial)
        loc, spr = row["location_verdict"], row["spread_verdict"]
        diff = (row["mean_diff_ci_low"], row["mean_diff_ci_high"])
        d = (row["cohens_d_ci_low"], row["cohens_d_ci_high"])
        pab = (row["p_a_gt_b_ci_low"], row["p_a_gt_b_ci_high"])
        significant = row["welch_p"] <= 0.05
        # the mean difference, d and P(A>B) intervals invert Welch's test: each excludes no-effect iff p <= 0.05
        for (low, high), none in ((diff, 0.0), (d, 0.0), (pab, 0.5)):
            assert _includes(low, high, none) != significant, (row, low, high)
        if loc.startswith(("A is higher", "B is higher")):
            seen["higher"] += 1
            assert significant and ("+" if loc.startswith("A") else "-") == f"{row['mean_diff']:+}"[0]
        else:
            seen["none"] += 1
            assert loc.startswith("no significant difference in means") and "(95% CI, includes 0)" in loc
        ratio = (row["spread_ratio_ci_low"], row["spread_ratio_ci_high"])
        if spr.startswith(("A spreads more", "B spreads more")):
            seen["spreads"] += 1
            assert row["spread_p"] <= 0.05 and not _includes(*ratio, 1.0)
            assert (row["spread_ratio"] > 1) == spr.startswith("A")
        else:
            seen["same spread"] += 1
            assert row["spread_p"] > 0.05 and _includes(*ratio, 1.0), row
        assert all(math.isfinite(x) for x in diff)
    assert min(seen.values()) >= 10, seen  # every kind of verdict was met


def test_correction_is_named_when_it_is_the_reason() -> None:
    g = np.random.default_rng(3)
    base = {m: list(g.normal(0, 1, 5)) for m in ("m1", "m2", "m3", "m4", "m5")}
    shifted = dict(base, m1=[x + 1.6 for x in g.normal(0, 1, 5)])
    rows = {r["metric"]: r for r in compare_groups(_runs(shifted), _runs(base), n_resamples=999, seed=0)}
    raw_only = [r for r in rows.values() if r["welch_p"] <= 0.05 < r["welch_p_corrected"]]
    for row in raw_only:  # an interval that excludes 0 beside "not significant": the words say why
        assert row["location_verdict"].startswith("no significant difference after holm")
        assert "excludes 0 for this metric alone" in row["location_verdict"]
        assert not _includes(row["mean_diff_ci_low"], row["mean_diff_ci_high"], 0.0)
    assert all("after holm over the 5 metrics of interest)" in r["location_verdict"] for r in rows.values())


def test_two_runs_are_not_a_spread_test() -> None:
    """With 2 runs per group Brown-Forsythe always rejects: the verdict says the spread was not tested."""
    row = _row([0.80, 0.82], [0.80, 0.801, 0.799], correction=None)
    assert row["spread_p"] is None and row["spread_ratio_ci_low"] is None
    assert row["spread_verdict"].startswith("not tested: the Brown-Forsythe test needs at least 3 runs per group")
    assert row["verdict"].endswith("spread: not tested (fewer than 3 runs in a group)")
    assert row["location_verdict"].startswith("no significant difference in means")
