"""`deviate power`: runs needed per group and the power of the runs made, checked against deviate_cb.stats.power."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from morin_tables import load, write_store, write_tables

from deviate_cb.report.answers.comparison import POWER_COLUMNS
from deviate_cb.stats import achieved_power, runs_needed
from deviate_cb.stats.pilot import std_upper_limit
from tests.helpers.report_study import run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("morin_power"))


def test_power_per_group_and_metric(capsys, store: Path) -> None:
    code, out, err = run_cli(
        capsys, "power", str(store), "--effect", "0.002", "--metric", "test_acc", "--format", "json"
    )
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert [r["group"] for r in rows] == ["experiment=resnet variant=algo+impl", "experiment=resnet variant=impl"]
    for row, setting in zip(rows, ("algo+impl", "impl"), strict=True):
        x = load(setting)[:, 1]
        assert list(row) == list(POWER_COLUMNS)
        assert row["std"] == pytest.approx(x.std(ddof=1), rel=1e-12)
        # planned on the 80% upper confidence limit of the std of the 50 runs, the measured std's plan beside it
        upper = std_upper_limit(x.std(ddof=1), 50)
        assert row["runs_needed"] == runs_needed(upper, effect=0.002) > runs_needed(x.std(ddof=1), effect=0.002)
        assert row["achieved_power"] == pytest.approx(achieved_power(50, 50, x.std(ddof=1), effect=0.002))
        assert row["summary"].startswith(
            f"{row['group']} test_acc: To detect a difference of 0.002 at 80% power (alpha 0.05): "
            f"{row['runs_needed']} runs per group (at the 80% upper confidence limit of the std"
        )
        at_estimate = runs_needed(x.std(ddof=1), effect=0.002)
        assert f"at the measured std {at_estimate} (only " in row["summary"] and "with 80% confidence" in row["summary"]


def test_power_table_prints_the_sentences(capsys, store: Path) -> None:
    code, out, _ = run_cli(capsys, "power", str(store), "--effect", "0.01", "--group", "variant=impl", "--power", "0.9")
    assert code == 0
    assert "variant=algo+impl" not in out
    words = " ".join(out.split())  # the table wraps the sentences
    assert words.count("upper confidence limit of the std") == 2 and "at 90% power" in words
    code, md, _ = run_cli(capsys, "power", str(store), "--effect", "0.01", "--format", "md")
    assert code == 0 and md.startswith("# power to detect a difference of 0.01") and "| group | metric |" in md


def test_power_on_a_table(capsys, tmp_path: Path) -> None:
    paths = write_tables(tmp_path)
    args = ("power", "--table", str(paths["all"]), "--group-by", "setting", "--effect", "0.005", "--format", "csv")
    code, out, _ = run_cli(capsys, *args)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == ",".join(POWER_COLUMNS) and len(lines) == 5
    assert lines[1].startswith("setting=algo+impl,test_acc,50,")


def test_power_with_one_run_explains(capsys, tmp_path: Path, make_run) -> None:
    make_run(tmp_path, "mlp", "algo", 0, [("val", "val_acc", 0.8)])
    code, out, _ = run_cli(capsys, "power", str(tmp_path), "--effect", "0.01", "--format", "json")
    assert code == 0
    (row,) = json.loads(out)
    assert row["n"] == 1 and row["runs_needed"] is None and "fewer than 2 finite runs" in row["summary"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--effect", "0"), "deviate: error: `--effect` must be a positive number. Received: --effect=0.0."),
        (("--effect", "1", "--power", "1.5"), "deviate: error: `--power` must be in (0, 1). Received: --power=1.5."),
        (("--effect", "1", "--group", "variant"), "deviate: error: `--group` must be KEY=VALUE"),
        ((), "deviate: error: the following arguments are required: --effect."),
    ],
)
def test_power_usage_errors(capsys, store: Path, args, message) -> None:
    code, out, err = run_cli(capsys, "power", str(store), *args)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1


def test_power_on_identical_runs_says_so_without_internal_names(capsys, tmp_path: Path, make_run) -> None:
    for k in range(3):
        make_run(tmp_path, "mlp", "control", k, [("val", "val_acc", 0.8)])
    code, out, _ = run_cli(capsys, "power", str(tmp_path), "--effect", "0.01", "--format", "json")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["n"], row["std"], row["runs_needed"], row["achieved_power"]) == (3, 0.0, None, None)
    assert row["summary"].startswith(
        "experiment=mlp variant=control val_acc: the 3 runs are identical on this metric (std 0): with no spread"
    )
    assert "std_a" not in row["summary"] and "std_b" not in row["summary"]
    code, out, _ = run_cli(capsys, "power", str(tmp_path), "--effect", "0.01")
    assert code == 0 and "the 3 runs are identical on this metric (std 0)" in " ".join(out.split())


def test_power_with_an_effect_too_small_names_the_option(capsys, tmp_path: Path, make_run) -> None:
    for k, value in enumerate((0.80, 0.81, 0.82)):
        make_run(tmp_path, "mlp", "algo", k, [("val", "val_acc", value)])
    code, out, _ = run_cli(capsys, "power", str(tmp_path), "--effect", "1e-9", "--format", "json")
    assert code == 0
    (row,) = json.loads(out)
    assert row["runs_needed"] is None and row["std"] == pytest.approx(0.01)
    assert row["summary"] == (
        "experiment=mlp variant=algo val_acc: a difference of 1e-09 (--effect) is too small to detect with fewer "
        "than 10^9 runs per group at the measured spread (std 0.01)."
    )
