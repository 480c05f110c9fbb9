"""`deviate compare`: groups by partition keys, two directories or tables; every number checked against SciPy."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from morin_tables import load, write_store, write_tables
from scipy import stats as sps

from deviate_cb.cli.main import main
from deviate_cb.report.answers.comparison import COMPARE_COLUMNS
from tests.helpers.report_study import run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("morin_store"))


@pytest.fixture(scope="module")
def morin_json(store: Path) -> list[dict]:
    import contextlib

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["compare", str(store), "--a", "variant=impl", "--b", "variant=algo+impl", "--format", "json"])
    assert code == 0
    return json.loads(buffer.getvalue())


def test_morin_seed_settings_on_store(morin_json: list[dict]) -> None:
    rows = {r["metric"]: r for r in morin_json}
    assert set(rows) == {"test_acc", "test_loss"}
    assert all(list(r) == list(COMPARE_COLUMNS) for r in morin_json)
    p_raw = []
    for column, metric in enumerate(("test_loss", "test_acc")):
        a, b, row = load("impl")[:, column], load("algo+impl")[:, column], rows[metric]
        assert (row["status"], row["n_a"], row["n_b"]) == ("compared", 50, 50)
        assert row["mean_a"] == pytest.approx(a.mean(), rel=1e-12)
        assert row["mean_diff"] == pytest.approx(a.mean() - b.mean(), rel=1e-9)
        assert row["welch_p"] == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-9)
        assert row["mann_whitney_p"] == pytest.approx(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        assert row["variance_p"] == pytest.approx(sps.levene(a, b, center="median").pvalue, rel=1e-9)
        pooled = np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
        assert row["cohens_d"] == pytest.approx((a.mean() - b.mean()) / pooled, rel=1e-9)
        assert row["mean_diff_ci_low"] < row["mean_diff"] < row["mean_diff_ci_high"]
        assert row["p_a_gt_b_ci_low"] <= row["p_a_gt_b"] <= row["p_a_gt_b_ci_high"]
        assert 0.0 <= row["aso_epsilon_min"] <= 1.0
        p_raw.append(row["welch_p"])
        # the two seed settings do not differ in mean: the plausible verdict
        assert row["verdict"].startswith("means: no significant difference after holm; spread: ")
    # Holm across the two metrics compared
    low, high = sorted(p_raw)
    expected = {low: min(1.0, 2 * low), high: max(min(1.0, 2 * low), high)}
    for row in morin_json:
        assert row["welch_p_corrected"] == pytest.approx(expected[row["welch_p"]])


def test_seed_makes_compare_reproducible(capsys, store: Path, morin_json: list[dict]) -> None:
    args = ("compare", str(store), "--a", "variant=impl", "--b", "variant=algo+impl", "--format", "json")
    assert json.loads(run_cli(capsys, *args, "--seed", "0")[1]) == morin_json
    other = json.loads(run_cli(capsys, *args, "--seed", "7")[1])
    assert other[0]["welch_p"] == morin_json[0]["welch_p"]


def test_tables_match_store(capsys, tmp_path: Path, morin_json: list[dict]) -> None:
    paths = write_tables(tmp_path)
    code, out, err = run_cli(
        capsys, "compare", "--table", str(paths["impl"]), "--table", str(paths["algo+impl"]), "--format", "json"
    )
    assert (code, err) == (0, "")
    assert json.loads(out) == morin_json
    one = ("compare", "--table", str(paths["all"]), "--group-by", "setting", "--a", "impl", "--b", "algo+impl")
    code, out, _ = run_cli(capsys, *one, "--metric", "test_acc", "--format", "json")
    (row,) = json.loads(out)
    (expected,) = [r for r in morin_json if r["metric"] == "test_acc"]
    assert code == 0 and row["welch_p_corrected"] == row["welch_p"]  # one metric: nothing to correct
    multi = ("welch_p_corrected", "spread_p_corrected", "spread_verdict", "location_verdict", "verdict", "family_size")
    assert {k: v for k, v in row.items() if k not in multi} == {  # corrected over 1 metric here, 2 there
        k: v for k, v in expected.items() if k not in multi
    }
    code, out, _ = run_cli(capsys, *one)
    assert code == 0 and "test_acc" in out and "no significant difference" in out


def _study(root: Path, make_run, shift: float = 0.05) -> Path:
    rng = np.random.default_rng(1)
    for variant, offset in (("new", shift), ("old", 0.0)):
        for k in range(8):
            acc = 0.8 + offset + 0.01 * rng.standard_normal()
            rows = [("val", "val_acc", acc), ("val", "val_loss", 1.0 - acc)]
            if variant == "new":
                rows.append(("val", "only_new", 1.0))
            if variant == "old" or k == 0:
                rows.append(("val", "sparse", 0.5 + k))
            make_run(root, "mlp", variant, k, rows)
    make_run(root, "mlp", "new", 99, [("val", "val_acc", -100.0)], status="failed", exit_code=1)
    return root


def test_significant_difference_and_skipped_metrics(capsys, tmp_path: Path, make_run) -> None:
    root = _study(tmp_path, make_run)
    code, out, err = run_cli(
        capsys, "compare", str(root), "--a", "variant=new", "--b", "variant=old", "--format", "json"
    )
    assert code == 0
    rows = {r["metric"]: r for r in json.loads(out)}
    assert rows["val_acc"]["verdict"].startswith("means: A > B (significant after holm)")
    # val_loss is lower-is-better: A's lower loss is better, so ASO (on the negated values) says A dominates
    assert rows["val_loss"]["verdict"].startswith("means: A < B (significant after holm), ASO: A almost dominates B")
    assert "lower is better" in rows["val_loss"]["verdict"] and rows["val_loss"]["direction"] == "min"
    assert rows["val_acc"]["n_a"] == 8  # the failed run is left out
    assert (rows["only_new"]["status"], rows["only_new"]["reason"]) == ("skipped", "only in group A")
    assert rows["sparse"]["reason"] == "fewer than 2 finite runs in group A"
    assert rows["sparse"]["welch_p"] is None
    assert "metric `only_new` not compared: only in group A." in err
    assert "replica=99 left out of the statistics: failed" in err
    code, out, _ = run_cli(capsys, "compare", str(root), "--a", "variant=new", "--b", "variant=old", "--format", "csv")
    assert code == 0
    table = list(csv.DictReader(io.StringIO(out)))
    assert tuple(table[0]) == COMPARE_COLUMNS and len(table) == 4
    code, out, _ = run_cli(capsys, "compare", str(root), "--a", "variant=new", "--b", "variant=old", "--format", "md")
    assert code == 0 and "| metric | n A/B |" in out and "not compared: only in group A" in out
    code, out, _ = run_cli(capsys, "compare", str(root), "--a", "variant=new", "--b", "variant=old")
    assert code == 0 and "A is higher: diff" in out and "significant" in out


def test_correction_none_and_and_terms(capsys, tmp_path: Path, make_run) -> None:
    root = _study(tmp_path, make_run)
    args = ("compare", str(root), "--format", "json", "--metric", "val_*", "--correction", "none")
    code, out, _ = run_cli(capsys, *args, "--a", "variant=new", "--a", "experiment=mlp", "--b", "variant=old")
    assert code == 0
    rows = json.loads(out)
    assert {r["metric"] for r in rows} == {"val_acc", "val_loss"}
    assert all(r["welch_p_corrected"] == r["welch_p"] for r in rows)
    assert rows[0]["verdict"].startswith("means: A > B (significant)") or "A < B" in rows[0]["verdict"]


def test_two_directories(capsys, tmp_path: Path, make_run) -> None:
    root = _study(tmp_path, make_run)
    a, b = root / "experiment=mlp" / "variant=new", root / "experiment=mlp" / "variant=old"
    code, out, _ = run_cli(capsys, "compare", str(a), str(b), "--format", "json", "--metric", "val_acc")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["n_a"], row["n_b"]) == (8, 8) and row["verdict"].startswith("means: A > B")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--a", "variant=new"), "deviate: error: with one source, both `--a` and `--b` are required."),
        (("--a", "variant", "--b", "variant=old"), "deviate: error: `--a` must be KEY=VALUE (e.g. variant=algo)."),
        (
            ("--a", "seed=1", "--b", "variant=old"),
            "deviate: error: `--a` names an unknown key. Received: --a=seed=1. Expected one of: experiment, replica, "
            "variant.",
        ),
        (
            ("--a", "variant=nope", "--b", "variant=old"),
            "deviate: error: `--a` matches no completed run. Received: --a variant=nope. Values present: variant: "
            "new, old.",
        ),
        (("--a", "variant=new", "--b", "variant=old", "--alpha", "2"), "deviate: error: `--alpha` must be in (0, 1)."),
    ],
)
def test_usage_errors_are_one_line(capsys, tmp_path: Path, make_run, args, message) -> None:
    root = _study(tmp_path, make_run)
    code, out, err = run_cli(capsys, "compare", str(root), *args)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1


def test_missing_table_is_one_line(capsys, tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "compare", "--table", str(tmp_path / "a.csv"), "--table", str(tmp_path / "b.csv"))
    assert (
        code == 2 and err == f"deviate: error: `--table` file does not exist. Received: --table='{tmp_path}/a.csv'.\n"
    )


def test_subprocess_end_to_end_on_morin_tables(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    paths = write_tables(tmp_path)
    cmd = [sys.executable, "-m", "deviate_cb.cli.main", "compare", "--table", str(paths["all"]), "--group-by"]
    cmd += ["setting", "--a", "impl", "--b", "algo+impl", "--metric", "test_acc", "--format", "json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert (proc.returncode, proc.stderr) == (0, "")
    (row,) = json.loads(proc.stdout)
    assert (row["n_a"], row["n_b"]) == (50, 50)
    assert row["verdict"].startswith("means: no significant difference after holm; spread: ")
    assert 0.05 < row["welch_p"] < 1 and 0.3 < row["p_a_gt_b"] < 0.6


def test_aso_is_not_quoted_for_a_loss(capsys, tmp_path: Path, make_run) -> None:
    """A higher loss is worse: ASO runs on the negated loss, so A (higher loss) does not dominate B."""
    root = _study(tmp_path, make_run, shift=-0.05)
    code, out, _ = run_cli(capsys, "compare", str(root), "--a", "variant=new", "--b", "variant=old", "--format", "json")
    rows = {r["metric"]: r for r in json.loads(out)}
    assert code == 0 and rows["val_loss"]["verdict"].startswith("means: A > B (significant after holm);")
    assert "ASO" not in rows["val_loss"]["verdict"]
    assert rows["val_loss"]["aso_epsilon_min"] > 0.8  # before: 0.0 (A's higher loss called "dominant")
    assert rows["val_loss"]["direction"] == "min" and rows["val_acc"]["direction"] == "max"
