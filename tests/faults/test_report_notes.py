"""What the report leaves out, it says, once, and its numbers agree with each other.

Each test builds a real small study with the project's writers (manifests and metrics) and runs `deviate report`
or `deviate compare` in-process:

- bit-identical groups have a std of exactly 0 in the variance decomposition, as in the main table (no
  floating-point residue of 1e-16 becoming a spread, an interval excluding 0 or a huge ratio);
- `--decomposition` on a study without the paired variants says why, in one note line naming what it needs and
  what each experiment has;
- NaN and Inf values inside a series, which `--aggregate mean` and `best` leave out, are counted in one warning
  per metric; with `--aggregate last`, a run whose last value is NaN or Inf is named the same way;
- a damaged file is warned about once, whatever the format (the HTML page reads the metrics again for its curves).
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from deviate_cb.store.run_directory import METRICS_FILE
from tests.helpers.report_study import run_cli, write_run

IDENTICAL = 0.7  # np.std([0.7] * 3, ddof=1) is 1.36e-16, not 0, the naive way


def _lines(err: str, kind: str = "warning") -> list[str]:
    """The stderr lines of one kind; every line is one ``deviate: <kind>: ...`` line."""
    lines = err.splitlines()
    assert all(line.startswith("deviate: ") for line in lines), err
    return [line for line in lines if line.startswith(f"deviate: {kind}: ")]


# -- 1. bit-identical groups: std exactly 0 in the decomposition, as in the table --------------------------------


def _identical_study(root: Path) -> Path:
    """control and impl bit-identical at 0.7, algo spread; algo+impl bit-identical too (the share is undefined)."""
    for k in range(3):
        write_run(root, "mlp", "control", k, [("val", "val_acc", IDENTICAL)])
        write_run(root, "mlp", "impl", k, [("val", "val_acc", IDENTICAL)])
        write_run(root, "mlp", "algo+impl", k, [("val", "val_acc", IDENTICAL)])
        write_run(root, "mlp", "algo", k, [("val", "val_acc", 0.70 + k / 100)])
    return root


def test_identical_groups_have_std_zero_in_the_decomposition(capsys, tmp_path: Path) -> None:
    assert float(np.std([IDENTICAL] * 3, ddof=1)) > 0  # the residue this is about
    root = _identical_study(tmp_path)
    code, out, err = run_cli(capsys, "report", str(root), "--format", "json")
    assert code == 0, err
    table = {r["variant"]: r for r in json.loads(out)}
    assert table["control"]["std"] == 0.0 and table["impl"]["std"] == 0.0  # the main table
    code, out, err = run_cli(capsys, "report", str(root), "--decomposition", "--format", "json")
    assert code == 0, err
    rows = {r["pair"]: r for r in json.loads(out)}
    control = rows["control / algo"]
    assert control["std_narrow"] == 0.0 == table["control"]["std"]
    assert control["std_wide"] == pytest.approx(table["algo"]["std"], rel=1e-12)
    assert (control["share"], control["share_ci_low"], control["share_ci_high"]) == (0.0, 0.0, 0.0)
    both = rows["impl / algo+impl"]  # both groups identical: no spread to share, not a ratio of residues
    assert (both["std_narrow"], both["std_wide"]) == (0.0, 0.0)
    assert both["share"] is None and both["share_ci_low"] is None and both["share_ci_high"] is None
    assert both["note"] == "algo+impl has no spread (all runs equal), so the share is undefined"
    code, md, _ = run_cli(capsys, "report", str(root), "--format", "md")  # the same numbers in the text formats
    assert code == 0
    assert "| mlp | val_acc | control / algo | 3 / 3 | 0 | 0.01 | 0.000 | [0, 0] |  |" in md


def test_bootstrap_share_of_identical_runs_is_zero() -> None:
    from deviate_cb.stats import decompose

    spread = [0.70, 0.71, 0.72, 0.74]
    for method in ("F", "BCa", "percentile", "basic"):
        result = decompose([IDENTICAL] * 4, spread, method=method, rng=0)
        assert result.statistic == 0.0 and result.settings["std_impl"] == 0.0, method
        assert tuple(result.confidence_interval()) == (0.0, 0.0), method


# -- 2. --decomposition without the paired variants says why ------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_decomposition_without_pairs_says_why(capsys, tmp_path: Path, fmt: str) -> None:
    for k in range(3):
        write_run(tmp_path, "mlp", "algo", k, [("val", "val_acc", 0.8 + k / 100)])
        write_run(tmp_path, "cnn", "impl", k, [("val", "val_acc", 0.8 + k / 100)])
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--decomposition", "--format", fmt)
    assert code == 0, err
    if fmt == "csv":  # the data stay data: the header, no row
        assert len(list(csv.reader(io.StringIO(out)))) == 1
    else:
        assert json.loads(out) == []
    (note,) = _lines(err, "note")
    assert note == (
        "deviate: note: no variance decomposition: it needs the variants impl and algo+impl, or control and algo, in "
        "one experiment, each with completed runs; experiment cnn has impl (3 runs); experiment mlp has algo (3 runs)."
    )
    assert _lines(err) == []


def test_decomposition_with_pairs_has_no_note(capsys, tmp_path: Path) -> None:
    root = _identical_study(tmp_path)
    code, out, err = run_cli(capsys, "report", str(root), "--decomposition", "--format", "csv")
    assert code == 0 and len(list(csv.DictReader(io.StringIO(out)))) == 2
    assert _lines(err, "note") == []


# -- 3. NaN and Inf inside a series: counted and named -------------------------------------------------------------

NAN, INF = float("nan"), float("inf")
SERIES = {0: [0.50, NAN, 0.60], 1: [0.50, INF, -INF], 2: [0.55, 0.60, 0.65], 3: [NAN, NAN, NAN]}


def _nonfinite_study(root: Path, summaries: bool = True) -> Path:
    """val_loss holds NaN/Inf inside the series of runs 0, 1 and 3 (run 3: nothing finite); val_acc is clean."""
    for k, values in SERIES.items():
        rows = [("val", "val_loss", v) for v in values] + [("val", "val_acc", 0.8 + k / 100)]
        path = write_run(root, "mlp", "algo", k, rows)
        if not summaries:  # a file another tool wrote: no series summary in its footer, none in the manifest
            import pyarrow.parquet as pq

            table = pq.read_table(path / METRICS_FILE)
            pq.write_table(table.replace_schema_metadata({}), path / METRICS_FILE)
    return root


@pytest.mark.parametrize("summaries", [True, False], ids=["store-written", "no-summaries"])
@pytest.mark.parametrize("how", ["mean", "best"])
def test_nonfinite_values_left_out_are_counted(capsys, tmp_path: Path, how: str, summaries: bool) -> None:
    root = _nonfinite_study(tmp_path, summaries)
    code, out, err = run_cli(capsys, "report", str(root), "--aggregate", how, "--format", "json")
    assert code == 0, err
    kept = {"mean": "each run's mean is over its finite values", "best": "each run's best is its best finite value"}
    assert _lines(err) == [
        f"deviate: warning: metric `val_loss`: 6 NaN or Inf values, in 3 of 4 runs, are left out of --aggregate {how} "
        f"({kept[how]}); 1 of those runs has no finite value and is left out of the statistics."
    ]
    rows = {r["metric"]: r for r in json.loads(out)}
    assert (rows["val_loss"]["n"], rows["val_loss"]["n_nonfinite"]) == (3, 1)  # as the note says
    want = {"mean": np.mean([0.55, 0.5, 0.6]), "best": np.mean([0.5, 0.5, 0.55])}[how]
    assert rows["val_loss"]["mean"] == pytest.approx(want)


def test_nonfinite_last_values_are_named(capsys, tmp_path: Path) -> None:
    root = _nonfinite_study(tmp_path)
    code, out, err = run_cli(capsys, "report", str(root), "--format", "json")  # --aggregate last
    assert code == 0, err
    assert _lines(err) == [
        "deviate: warning: metric `val_loss`: the last value of 2 of 4 runs is NaN or Inf; --aggregate last leaves "
        "those runs out of the statistics (mean and best use each run's finite values)."
    ]
    rows = {r["metric"]: r for r in json.loads(out)}
    assert (rows["val_loss"]["n"], rows["val_loss"]["n_nonfinite"]) == (2, 2)


def test_no_note_for_finite_series_or_metrics_left_out(capsys, tmp_path: Path) -> None:
    root = _nonfinite_study(tmp_path)
    for how in ("mean", "best", "last"):  # val_acc alone: nothing to say
        args = ("--aggregate", how, "--metric", "val_acc", "--format", "csv")
        code, _, err = run_cli(capsys, "report", str(root), *args)
        assert code == 0 and _lines(err) == [], err


# -- 4. one warning per damaged file, whatever the format ----------------------------------------------------------


def _damaged_study(root: Path, damaged: str) -> Path:
    for variant in ("algo", "impl"):
        for k in range(3):
            rows = [("val", "val_acc", 0.8 + k / 100 + step / 50) for step in range(3)]
            write_run(root, "mlp", variant, k, rows)
    path = root / "experiment=mlp" / "variant=algo" / "replica=1" / damaged
    path.write_bytes(path.read_bytes()[: os.path.getsize(path) // 2])
    return path


@pytest.mark.parametrize("fmt", ["table", "md", "json", "html"])
def test_report_warns_once_per_damaged_file(capsys, tmp_path: Path, fmt: str) -> None:
    pytest.importorskip("matplotlib") if fmt == "html" else None
    path = _damaged_study(tmp_path, METRICS_FILE)
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--format", fmt)
    assert code == 0 and out, err
    naming = [line for line in _lines(err) if str(path) in line]
    assert len(naming) == 1 and "not a readable Parquet file" in naming[0], err


@pytest.mark.parametrize("damaged", [METRICS_FILE, "run.json"])
@pytest.mark.parametrize("fmt", ["table", "html"])
def test_compare_warns_once_per_damaged_file(capsys, tmp_path: Path, damaged: str, fmt: str) -> None:
    pytest.importorskip("matplotlib") if fmt == "html" else None
    path = _damaged_study(tmp_path, damaged)
    args = ("compare", str(tmp_path), "--a", "variant=algo", "--b", "variant=impl", "--format", fmt)
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and out, err
    naming = [line for line in _lines(err) if str(path) in line]
    assert len(naming) == 1, err


def test_compare_and_power_say_what_their_aggregate_left_out(capsys, tmp_path: Path) -> None:
    root = _nonfinite_study(tmp_path)
    code, _, err = run_cli(capsys, "compare", str(root), str(root), "--aggregate", "mean", "--metric", "val_loss")
    assert "6 NaN or Inf values, in 3 of 4 runs, are left out of --aggregate mean" in err, (code, err)
    code, _, err = run_cli(capsys, "power", str(root), "--aggregate", "mean", "--metric", "val_loss", "--effect", "0.1")
    assert "6 NaN or Inf values, in 3 of 4 runs, are left out of --aggregate mean" in err, (code, err)
