"""`deviate report --table`: results from elsewhere, the variance decomposition, and the Morin (2020) validation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from morin_tables import load, write_store, write_tables

from deviate_cb.report.answers.decomposition import decompose_series
from tests.helpers.report_study import run_cli


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_tables(tmp_path_factory.mktemp("morin_tables"))


def test_report_table_reproduces_paper_same_seed_stds(capsys, tables) -> None:
    code, out, err = run_cli(
        capsys, "report", "--table", str(tables["all"]), "--group-by", "setting", "--format", "json"
    )
    assert (code, err) == (0, "")
    rows = {(r["variant"], r["metric"]): r for r in json.loads(out)}
    assert set(rows) == {(v, m) for v in ("impl", "algo+impl") for m in ("test_loss", "test_acc")}
    for metric, published in (("test_loss", 1.995e-2), ("test_acc", 3.020e-3)):
        row = rows[("impl", metric)]
        assert row["n"] == 50 and row["experiment"] == "all"
        population = row["std"] * math.sqrt(49 / 50)
        assert float(f"{population:.4g}") == published
    data = load("algo+impl")
    assert rows[("algo+impl", "test_loss")]["std"] == pytest.approx(data[:, 0].std(ddof=1), rel=1e-12)


def test_report_table_decomposition_share_of_column_one(capsys, tables) -> None:
    args = ("report", "--table", str(tables["all"]), "--group-by", "setting")
    code, out, _ = run_cli(capsys, *args, "--format", "json", "--decomposition")
    assert code == 0
    rows = {r["metric"]: r for r in json.loads(out)}
    loss = rows["test_loss"]
    assert (loss["pair"], loss["n_narrow"], loss["n_wide"]) == ("impl / algo+impl", 50, 50)
    assert round(loss["share"], 3) == 0.759
    assert loss["share_ci_low"] < loss["share"] < loss["share_ci_high"]
    assert round(rows["test_acc"]["share"], 3) == 0.902
    # same seed, same numbers; the table and md formats show it after the per-group tables
    assert run_cli(capsys, *args, "--format", "json", "--decomposition")[1] == out
    code, md, _ = run_cli(capsys, *args, "--format", "md")
    assert code == 0 and "## Variance decomposition" in md and "| all | test_loss | impl / algo+impl |" in md
    code, text, _ = run_cli(capsys, *args)
    assert code == 0 and text.index("Variance decomposition") > text.index("variant=impl")
    assert "0.759" in text


def test_report_store_decomposition_matches_table(capsys, tmp_path: Path) -> None:
    root = write_store(tmp_path)
    code, out, _ = run_cli(capsys, "report", str(root), "--format", "json", "--decomposition")
    assert code == 0
    rows = {r["metric"]: r for r in json.loads(out)}
    assert round(rows["test/test_loss" if "test/test_loss" in rows else "test_loss"]["share"], 3) == 0.759
    # the default JSON (per-group rows) is unchanged: a list of the report's rows
    code, out, _ = run_cli(capsys, "report", str(root), "--format", "json")
    assert code == 0 and {r["variant"] for r in json.loads(out)} == {"impl", "algo+impl"}
    assert "share" not in json.loads(out)[0]


def test_decompose_series_control_algo_and_too_few_runs() -> None:
    series = {
        ("e", "control", "acc"): [0.5, 0.51, 0.49, 0.5],
        ("e", "algo", "acc"): [0.4, 0.6, 0.5, 0.45],
        ("e", "control", "loss"): [1.0],
        ("e", "algo", "loss"): [1.0, 2.0],
        ("e", "algo", "only_algo"): [1.0, 2.0],
    }
    rows = {r.metric: r for r in decompose_series(series, seed=0)}
    assert set(rows) == {"acc", "loss"}
    x, y = np.array(series[("e", "control", "acc")]), np.array(series[("e", "algo", "acc")])
    assert rows["acc"].share == pytest.approx(x.std(ddof=1) / y.std(ddof=1))
    assert rows["acc"].pair == "control / algo"
    assert math.isnan(rows["loss"].share) and "fewer than 2" in rows["loss"].note


def test_parquet_table_and_ignored_columns_warning(capsys, tmp_path: Path) -> None:
    path = tmp_path / "runs.parquet"
    pq.write_table(
        pa.table({"arm": ["a", "a", "b", "b"], "acc": [0.8, 0.82, 0.7, 0.74], "note": ["x", "y", "z", "w"]}), path
    )
    code, out, err = run_cli(capsys, "report", "--table", str(path), "--group-by", "arm", "--format", "csv")
    assert code == 0
    assert err == "deviate: warning: runs.parquet: non-numeric column ignored as a metric: note.\n"
    lines = out.splitlines()
    assert len(lines) == 3 and lines[1].startswith("runs,a,acc,as given,2,")


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (None, (), "deviate: error: `--table` file does not exist. Received: --table="),
        ("a,b\n", ("--group-by", "a"), "deviate: error: `--table` table is empty (no rows). Received: --table="),
        (
            "g,x\nu,1\n",
            ("--group-by", "nope"),
            "deviate: error: `--group-by` names no column of t.csv. Received: --group-by='nope'. "
            "Expected one of: g, x.",
        ),
        ("g,h\nu,v\n", ("--group-by", "g"), "deviate: error: `--table` has no numeric column to use as a metric."),
    ],
)
def test_table_errors_are_one_line(capsys, tmp_path: Path, content, args, message) -> None:
    path = tmp_path / "t.csv"
    if content is not None:
        path.write_text(content)
    code, out, err = run_cli(capsys, "report", "--table", str(path), *args)
    assert (code, out) == (2, "")
    assert err.startswith(message) and err.count("\n") == 1


def test_dir_and_table_together_is_an_error(capsys, tables) -> None:
    code, _, err = run_cli(capsys, "report", "somewhere", "--table", str(tables["all"]))
    assert code == 2 and err.startswith("deviate: error: give either DIR or `--table`, not both.")


@pytest.mark.parametrize(
    ("command", "option", "received"),
    [
        (("report",), ("--aggregate", "best"), "--aggregate=best"),
        (("report",), ("--stage", "val"), "--stage=val"),
        (("compare", "--a", "setting=same_seed", "--b", "setting=different_seeds"), ("--aggregate", "last"), None),
        (("compare", "--a", "x=1", "--b", "x=2"), ("--direction", "acc=min"), "--direction=acc=min"),
        (("power", "--effect", "0.5"), ("--aggregate", "mean"), "--aggregate=mean"),
    ],
)
def test_per_run_options_are_refused_with_a_table(capsys, tables, command, option, received) -> None:
    # A table already holds one value per run: reducing options would be silently ignored, so they are refused.
    code, out, err = run_cli(capsys, *command, "--table", str(tables["all"]), "--group-by", "setting", *option)
    flag = option[0]
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"deviate: error: `{flag}` does not apply to `--table`")
    assert f"Received: {received or flag + '=' + option[1]} with --table." in err
