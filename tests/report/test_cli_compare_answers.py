"""`deviate compare` answers that hold (issue 42): constant groups in words, the correction over the metrics of
interest, ASO in the metric's direction, the spread test's power in numbers, the skew caveat."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from deviate_cb.report.answers.comparison import compare_groups
from deviate_cb.report.reading.selection import RunValues
from deviate_cb.stats.spread import detectable_spread_ratio, spread_power
from tests.helpers.report_study import run_cli


def _table(path: Path, groups: dict[str, dict[str, list[float]]]) -> str:
    metrics = list(next(iter(groups.values())))
    lines = [",".join(["group", *metrics])]
    for name, values in groups.items():
        for k in range(len(values[metrics[0]])):
            lines.append(",".join([name, *(repr(values[m][k]) for m in metrics)]))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _runs(values: dict[str, list[float]]) -> list[RunValues]:
    n = len(next(iter(values.values())))
    return [RunValues({}, {m: xs[k] for m, xs in values.items()}) for k in range(n)]


def test_constant_groups_through_the_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _table(tmp_path / "t.csv", {"A": {"val_acc": [0.900] * 3}, "B": {"val_acc": [0.901] * 3}})
    args = ("compare", "--table", path, "--group-by", "group", "--a", "A", "--b", "B")
    code, out, err = run_cli(capsys, *args, "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["std_a"] == 0.0 and row["std_b"] == 0.0
    assert row["welch_p"] is None and row["cohens_d"] is None and row["mean_diff_ci_low"] is None  # was -1.04e13
    assert row["location_verdict"].startswith(
        "both groups constant: A 0.9 in all 3 runs, B 0.901 in all 3: no spread to test against"
    )
    assert "significant" not in row["verdict"] and "ASO" not in row["verdict"]
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and "e+13" not in out and "bit-identical by design (control)" in " ".join(out.split())


def _loss_study() -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """A 3x loss gap (d about -4.4, Welch p about 0.03) logged as val_loss and four near-duplicate training series."""
    a, b = [0.10, 0.12, 0.11], [0.30, 0.36, 0.24]
    names = ("val_loss", "train_loss", "train_loss_step", "train_loss_epoch", "train_nll")
    return (
        {m: [x + 1e-4 * i for x in a] for i, m in enumerate(names)},
        {m: [x + 1e-4 * i for x in b] for i, m in enumerate(names)},
    )


def test_correction_is_over_the_metrics_of_interest() -> None:
    a, b = _loss_study()
    rows = {r["metric"]: r for r in compare_groups(_runs(a), _runs(b), n_resamples=999)}
    val = rows["val_loss"]
    assert 0.01 < val["welch_p"] < 0.05 and val["cohens_d"] < -4
    # Holm over all five series gave 0.15: "no significant difference" for a 3x gap; the family is val_loss alone
    assert (val["family"], val["family_size"]) == ("interest", 1) and val["welch_p_corrected"] == val["welch_p"]
    assert val["location_verdict"].startswith("B is higher")
    assert val["verdict"].startswith("means: A < B (significant after holm), ASO: A almost dominates B")
    others = [r for m, r in rows.items() if m != "val_loss"]
    assert all((r["family"], r["family_size"]) == ("other", 4) for r in others)
    assert all("after holm over the 4 other metrics compared" in r["location_verdict"] for r in others)
    named = {
        r["metric"]: r for r in compare_groups(_runs(a), _runs(b), n_resamples=999, interest=["val_*", "train_nll"])
    }
    assert named["train_nll"]["family"] == "interest" and named["val_loss"]["family_size"] == 2
    assert "after holm over the 2 metrics of interest" in named["val_loss"]["location_verdict"]


def test_cli_names_the_family(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b = _loss_study()
    path = _table(tmp_path / "t.csv", {"A": a, "B": b})
    args = ("compare", "--table", path, "--group-by", "group", "--a", "A", "--b", "B")
    code, out, err = run_cli(capsys, *args)
    text = " ".join(out.split())
    assert code == 0, err
    assert "holm over the metrics of interest (val_loss: validation and test metrics, else all)" in text
    code, out, err = run_cli(capsys, *args, "--metric", "val_loss", "--metric", "train_loss", "--format", "json")
    rows = {r["metric"]: r for r in json.loads(out)}
    assert code == 0 and set(rows) == {"val_loss", "train_loss"} and rows["val_loss"]["family_size"] == 2


def test_spread_words_say_what_the_test_can_detect() -> None:
    g = np.random.default_rng(4)
    a, b = list(g.normal(0, 1, 5)), list(g.normal(0, 1, 5))
    (row,) = compare_groups(_runs({"acc": a}), _runs({"acc": b}), n_resamples=999)
    assert row["spread_p"] > 0.05
    three = spread_power(5, 5, 3.0)
    assert 0.04 < three < 0.13  # the issue measured 7.8%: "only large differences" was not true
    assert f"detects a 3x std ratio only {three:.0%} of the time and no ratio with 80% power" in row["spread_verdict"]
    assert "cannot show that the spreads are alike" in row["spread_verdict"]
    (row,) = compare_groups(_runs({"acc": list(g.normal(0, 1, 30))}), _runs({"acc": list(g.normal(0, 1, 30))}))
    if row["spread_p"] > 0.05:
        assert f"needs a ratio of {detectable_spread_ratio(30, 30):.2g}x for 80% power" in row["spread_verdict"]


@pytest.mark.parametrize(("n", "ratio"), [(5, 3.0), (10, 3.0), (20, 2.0)])
def test_spread_power_matches_an_independent_simulation(n: int, ratio: float) -> None:
    """Brown-Forsythe as SciPy's pooled t-test of absolute deviations from the median, on fresh draws."""
    from scipy.stats import ttest_ind

    g = np.random.default_rng(11)
    reps = 20000
    for sa, sb in ((ratio, 1.0), (1.0, ratio)):
        x, y = g.normal(0, sa, (reps, n)), g.normal(0, sb, (reps, n))
        u, v = np.abs(x - np.median(x, 1, keepdims=True)), np.abs(y - np.median(y, 1, keepdims=True))
        rejected = float(np.mean(ttest_ind(u, v, axis=1).pvalue <= 0.05))
        # spread_power is the lower of the two directions, from 4,000 draws (sd <= 0.008) + this one's (0.0035)
        assert spread_power(n, n, ratio) <= rejected + 0.03
    power = spread_power(n, n, ratio)
    assert min(power, 1 - power) >= 0 and (n < 20 or power > 0.6)


def test_skewed_runs_carry_the_caveat() -> None:
    a = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98, 1.01, 9.0]  # one diverged run: skewness about +3
    b = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98, 1.01, 0.99]
    (row,) = compare_groups(_runs({"acc": a}), _runs({"acc": b}), n_resamples=999)
    assert row["skewness_a"] > 2 and math.isfinite(row["skewness_b"])
    assert "skewed runs (sample skewness A +3.2): the interval may undercover at this n" in row["location_verdict"]
    (plain,) = compare_groups(_runs({"acc": b}), _runs({"acc": b[::-1]}), n_resamples=999)
    assert "skewed" not in plain["location_verdict"]


def test_the_family_counts_the_tests_made(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A constant metric has no p-value, so it is not counted in the family the correction is over."""
    groups = {
        "A": {"val_acc": [0.9] * 3, "val_loss": [0.30, 0.31, 0.29]},
        "B": {"val_acc": [0.901] * 3, "val_loss": [0.5, 0.6, 0.4]},
    }
    path = _table(tmp_path / "t.csv", groups)
    code, out, err = run_cli(capsys, "compare", "--table", path, "--group-by", "group", "--a", "A", "--b", "B")
    text = " ".join(out.split())
    assert code == 0, err
    assert "(Welch p 0.073)" in text and "after holm over the 2" not in text  # one test made: nothing to correct
    assert "0 (min)" in out  # ASO ran on the negated loss, and the table says so
