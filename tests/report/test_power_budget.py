"""``deviate power --budget``: the runs needed for ``--effect``, what they cost in run-hours (the mean measured wall
time, run.json ``duration_s``, of each group's completed replicas) and the smallest difference the runs a budget
buys detect, checked against deviate_cb.stats on real run directories and a real ``deviate-replicate`` study."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from deviate_cb.report.answers.budget import BUDGET_COLUMNS, parse_budget
from deviate_cb.report.answers.comparison import POWER_COLUMNS
from deviate_cb.stats import detectable_effect, runs_needed
from deviate_cb.stats.pilot import std_upper_limit
from tests.helpers.report_study import run_cli, write_run

ALGO = (0.851, 0.847, 0.853)
IMPL = (0.850, 0.852, 0.8515, 0.849)
ALGO_S = (590.0, 600.0, 574.0)  # mean 588 s: 9.8 min per run
IMPL_S = (120.0, 130.0, 110.0, 140.0)  # mean 125 s


@pytest.fixture
def store(tmp_path: Path) -> Path:
    for variant, values, seconds in (("algo", ALGO, ALGO_S), ("impl", IMPL, IMPL_S)):
        for k, (value, duration) in enumerate(zip(values, seconds, strict=True)):
            write_run(tmp_path, "mlp", variant, k, [("val", "val_acc", value)], duration_s=duration)
    # A replica that failed after a long time: its wall time is no run's cost
    write_run(tmp_path, "mlp", "algo", 9, [("val", "val_acc", 0.2)], status="failed", duration_s=99999.0)
    return tmp_path


def _json(capsys, *args: str) -> list[dict]:
    code, out, err = run_cli(capsys, "power", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_budget_numbers_match_the_stats(capsys, store: Path) -> None:
    rows = _json(capsys, str(store), "--metric", "val_acc", "--effect", "0.005", "--budget", "20h")
    plain = _json(capsys, str(store), "--metric", "val_acc", "--effect", "0.005")
    assert [r["group"] for r in rows] == ["experiment=mlp variant=algo", "experiment=mlp variant=impl"]
    for row, before, values, seconds in zip(rows, plain, (ALGO, IMPL), (ALGO_S, IMPL_S), strict=True):
        assert list(row) == [*POWER_COLUMNS, *BUDGET_COLUMNS]
        assert {k: row[k] for k in POWER_COLUMNS} == before  # nothing `deviate power` prints changes
        std = statistics.stdev(values)
        upper = std_upper_limit(std, len(values))  # planned on the std's 80% upper confidence limit
        n = runs_needed(upper, effect=0.005)
        assert row["runs_needed"] == n and row["runs_more"] == max(0, n - len(values))
        assert row["runs_at_estimate"] == runs_needed(std, effect=0.005) < n
        assert row["expected_power"] > 0.8
        assert row["run_s"] == pytest.approx(statistics.fmean(seconds)) and row["timed_runs"] == len(values)
        assert row["cost_h"] == pytest.approx(n * statistics.fmean(seconds) / 3600)
        assert (row["budget_h"], row["budget_group_h"]) == (20.0, 10.0)  # split evenly between the two groups
        afford = math.floor(10 * 3600 / statistics.fmean(seconds))
        assert row["budget_runs"] == afford
        assert row["budget_used_h"] == pytest.approx(afford * statistics.fmean(seconds) / 3600)
        assert row["budget_effect"] == pytest.approx(detectable_effect(afford, afford, upper), rel=1e-9)
        assert row["budget_effect_at_estimate"] == pytest.approx(detectable_effect(afford, afford, std), rel=1e-9)
        assert row["budget_effect"] < 0.005  # the budget buys more than the runs needed: it detects less
    algo = rows[0]
    assert (algo["runs_needed"], algo["runs_at_estimate"], algo["budget_runs"]) == (28, 8, 61)
    assert algo["budget_summary"] == (
        "experiment=mlp variant=algo val_acc: To detect a difference of 0.005 in val_acc with 80% power: 28 runs per "
        "group (25 more than the 3 made; planned on the 80% upper confidence limit of the std: at least 80% power "
        "with 80% confidence, 88% expected; 8 at the measured std), about 4.6 h of runs per group (measured 9.8 min "
        f"per run, the mean of 3). With 20 h: 61 runs per group (10 h each), which detect {algo['budget_effect']:.2g} "
        f"with 80% power at 80% confidence ({algo['budget_effect_at_estimate']:.2g} at the measured std)."
    )
    assert "(1 more than the 4 made;" in rows[1]["budget_summary"]  # the 4 made are enough at the measured std only


def test_table_leads_with_the_answer(capsys, store: Path) -> None:
    code, out, _ = run_cli(capsys, "power", str(store), "--metric", "val_acc", "--effect", "0.005", "--budget", "20")
    assert code == 0
    text = " ".join(out.split())
    assert text.startswith("experiment=mlp variant=algo val_acc: To detect a difference of 0.005 in val_acc with 80%")
    assert text.index("With 20 h: 61 runs per group") < text.index("power to detect a difference of 0.005")
    assert "the mean wall time (run.json `duration_s`)" in text and "split evenly between the two groups" in text
    assert "run-hours" in text
    code, md, _ = run_cli(capsys, "power", str(store), "--effect", "0.005", "--budget", "20h", "--format", "md")
    assert code == 0 and md.startswith("experiment=mlp variant=algo val_acc: To detect") and "| budget runs |" in md


def test_budget_without_effect_still_answers(capsys, store: Path) -> None:
    rows = _json(capsys, str(store), "--metric", "val_acc", "--budget", "90m")
    algo = rows[0]
    afford = math.floor(0.75 * 3600 / statistics.fmean(ALGO_S))
    assert (algo["effect"], algo["runs_needed"], algo["cost_h"], algo["budget_runs"]) == (None, None, None, afford)
    upper = std_upper_limit(statistics.stdev(ALGO), len(ALGO))
    assert algo["budget_effect"] == pytest.approx(detectable_effect(afford, afford, upper), rel=1e-9)
    assert algo["budget_summary"].startswith(
        "experiment=mlp variant=algo val_acc: for the runs needed, give `--effect` (the difference of val_acc to "
        "detect). With 1.5 h: 4 runs per group"
    )


def test_groups_without_measured_times_say_so(capsys, tmp_path: Path) -> None:
    for k, value in enumerate(ALGO):  # no duration_s recorded
        write_run(tmp_path, "mlp", "algo", k, [("val", "val_acc", value)])
    for k, value in enumerate(IMPL):  # two of four record one: the mean of those two
        timed = {"duration_s": 60.0 * (k + 1)} if k < 2 else {}
        write_run(tmp_path, "mlp", "impl", k, [("val", "val_acc", value)], **timed)
    algo, impl = _json(capsys, str(tmp_path), "--effect", "0.005", "--budget", "1h")
    assert (algo["run_s"], algo["cost_h"], algo["budget_runs"], algo["budget_effect"]) == (None, None, None, None)
    assert algo["runs_needed"] == runs_needed(std_upper_limit(statistics.stdev(ALGO), len(ALGO)), effect=0.005)
    assert algo["budget_summary"].endswith(
        "Its cost and what 1 h buys are not known: no completed run of this group records its wall time (run.json "
        "`duration_s`)."
    )
    assert (impl["run_s"], impl["timed_runs"], impl["budget_runs"]) == (90.0, 2, 20)


def test_a_budget_too_small_for_two_runs(capsys, store: Path) -> None:
    rows = _json(capsys, str(store), "--metric", "val_acc", "--effect", "0.005", "--budget", "15m")
    assert (rows[0]["budget_runs"], rows[0]["budget_effect"]) == (0, None)
    summary = rows[0]["budget_summary"]
    assert "With 0.25 h: 0 runs per group (7.5 min each at 9.8 min per run), fewer than the 2" in summary


def test_budget_on_a_table_has_no_wall_times(capsys, tmp_path: Path) -> None:
    table = tmp_path / "runs.csv"
    table.write_text("setting,acc\n" + "".join(f"a,{v}\n" for v in ALGO))
    args = ("power", "--table", str(table), "--group-by", "setting", "--effect", "0.005", "--budget", "2h")
    code, out, _ = run_cli(capsys, *args, "--format", "csv")
    assert code == 0 and out.splitlines()[0] == ",".join((*POWER_COLUMNS, *BUDGET_COLUMNS))
    (row,) = _json(capsys, *args[1:])
    assert row["run_s"] is None and "a --table holds no wall times" in row["budget_summary"]


@pytest.mark.parametrize(("text", "hours"), [("20h", 20.0), ("90m", 1.5), ("3600s", 1.0), ("1.5h", 1.5), ("2", 2.0)])
def test_budget_durations(text: str, hours: float) -> None:
    assert parse_budget(text) == pytest.approx(hours)


@pytest.mark.parametrize("text", ["abc", "0", "-1h", "20d", "", "nan", "h"])
def test_bad_budget_is_one_line(capsys, store: Path, text: str) -> None:
    code, out, err = run_cli(capsys, "power", str(store), "--effect", "0.005", f"--budget={text}")
    assert (code, out) == (2, "")
    assert err == f"deviate: error: `--budget` must be a duration such as 20h or 90m. Received: --budget={text}.\n"


def test_a_real_study_costs_its_manifests_durations(capsys, tmp_path: Path) -> None:
    from tests.helpers.replicate_helpers import child_env, trainer

    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", "--trainer", trainer("basic.py:echo"), "-n", "3",
         "--variant", "algo", "--experiment", "tiny", "--out", str(tmp_path / "runs")],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = sorted((tmp_path / "runs").glob("experiment=tiny/variant=algo/replica=*/run.json"))
    seconds = [json.loads(p.read_text())["duration_s"] for p in runs]
    assert len(seconds) == 3 and all(s > 0 for s in seconds)
    (row,) = _json(capsys, str(tmp_path / "runs"), "--metric", "np_rand", "--effect", "0.5", "--budget", "1h")
    assert row["run_s"] == pytest.approx(statistics.fmean(seconds)) and row["timed_runs"] == 3
    assert row["cost_h"] == pytest.approx(row["runs_needed"] * statistics.fmean(seconds) / 3600)
    afford = math.floor(1800 / statistics.fmean(seconds))
    assert row["budget_runs"] == afford
    upper = std_upper_limit(row["std"], row["n"])
    assert row["budget_effect"] == pytest.approx(detectable_effect(afford, afford, upper), rel=1e-9)
