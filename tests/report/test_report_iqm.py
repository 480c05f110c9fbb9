"""`deviate report --iqm`: the interquartile mean across each group's runs with its interval (Yuen's trimmed-mean
t), in every format."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from morin_tables import load, write_store, write_tables
from scipy import stats as sps

from deviate_cb.report.answers.summary import COLUMNS, IQM_COLUMNS
from deviate_cb.stats import iqm
from tests.helpers.report_study import run_cli


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("morin_iqm"))


def test_json_rows_hold_the_iqm_and_its_interval(capsys, store: Path) -> None:
    args = ("report", str(store), "--iqm", "--format", "json", "--level", "0.9", "--seed", "5")
    code, out, _ = run_cli(capsys, *args)
    assert code == 0
    rows = json.loads(out)
    assert all(list(r) == [*COLUMNS, *IQM_COLUMNS] for r in rows)
    for row in rows:
        x = load(row["variant"])[:, 0 if row["metric"] == "test_loss" else 1]
        assert row["iqm"] == pytest.approx(sps.trim_mean(x, 0.25), rel=1e-12)
        expected = iqm(x, level=0.9, n_resamples=9999, rng=5).confidence_interval(0.9)
        assert (row["iqm_ci_low"], row["iqm_ci_high"]) == (expected.low, expected.high)
    again = json.loads(run_cli(capsys, *args)[1])
    assert again == rows  # --seed: reproducible


def test_without_the_option_nothing_changes(capsys, store: Path) -> None:
    code, out, _ = run_cli(capsys, "report", str(store), "--format", "json")
    assert code == 0 and all(list(r) == list(COLUMNS) for r in json.loads(out))
    code, out, _ = run_cli(capsys, "report", str(store))
    assert code == 0 and "IQM" not in out


def test_csv_table_and_markdown(capsys, store: Path) -> None:
    code, out, _ = run_cli(capsys, "report", str(store), "--iqm", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and list(rows[0]) == [*COLUMNS, *IQM_COLUMNS] and float(rows[0]["iqm_ci_low"]) > 0
    code, out, _ = run_cli(capsys, "report", str(store), "--iqm")
    assert code == 0 and "IQM [CI]" in out and "95% CI by Yuen's trimmed-mean t" in " ".join(out.split())
    code, out, _ = run_cli(capsys, "report", str(store), "--iqm", "--format", "md")
    header = next(line for line in out.splitlines() if line.startswith("| experiment"))
    assert code == 0 and header.endswith("| range | IQM [CI] |")
    row = next(line for line in out.splitlines() if line.startswith("| resnet | impl | test_acc"))
    assert row.count("[") == 2  # the std's interval and the IQM's


def test_a_table_input(capsys, tmp_path: Path) -> None:
    paths = write_tables(tmp_path)
    args = ("report", "--table", str(paths["all"]), "--group-by", "setting", "--iqm", "--format", "json")
    code, out, _ = run_cli(capsys, *args)
    assert code == 0
    row = next(r for r in json.loads(out) if (r["variant"], r["metric"]) == ("impl", "test_acc"))
    assert row["iqm"] == pytest.approx(sps.trim_mean(load("impl")[:, 1], 0.25), rel=1e-12)


def test_iqm_with_other_rows_is_refused(capsys, store: Path) -> None:
    code, out, err = run_cli(capsys, "report", str(store), "--iqm", "--decomposition", "--format", "csv")
    assert (code, out) == (2, "")
    assert err == (
        "deviate: error: `--iqm` adds columns to the per-group rows, which `--decomposition` replaces. "
        "Received: --iqm with --decomposition.\n"
    )
