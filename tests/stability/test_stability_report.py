"""`deviate report` on a study whose runs saved predictions and weights: the stability section and its errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from stability_models import train_tiny

from deviate_cb.store.predictions import PREDICTIONS_FILE, write_predictions
from deviate_cb.store.weights import WEIGHTS_SKETCH_FILE, write_weights
from tests.helpers.report_study import run_cli, write_run

SEEDS = {"algo": [0, 1, 2, 3], "control": [7, 7, 7, 7]}


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real tiny torch runs: `control` replicas share a seed (identical), `algo` replicas do not."""
    root = tmp_path_factory.mktemp("study")
    sex = np.where(np.arange(256) % 3 == 0, "f", "m")
    for variant, seeds in SEEDS.items():
        for k, seed in enumerate(seeds):
            weights, logits, labels = train_tiny(seed, steps=8)
            acc = float((logits.argmax(1) == labels).mean())
            path = write_run(root, "mlp", variant, k, [("val", "val_acc", acc)])
            write_predictions(path, outputs=logits, labels=labels, groups={"sex": sex})
            write_weights(path, weights, sketch_dim=128, full=variant == "control")
    write_run(root, "mlp", "algo", 9, [("val", "val_acc", 0.1)], status="failed")  # left out
    return root


def _rows(out: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(out)))


def test_stability_rows_of_control_and_algo(capsys, study: Path) -> None:
    code, out, err = run_cli(capsys, "report", str(study), "--stability", "--format", "csv")
    assert (code, err.count("left out")) == (0, 1)
    rows = {(r["variant"], r["measure"], r["item"]): r for r in _rows(out)}
    control, algo = ("control", "churn", ""), ("algo", "churn", "")
    assert float(rows[control]["mean"]) == 0.0 and float(rows[control]["max"]) == 0.0
    assert float(rows[algo]["mean"]) > 0 and rows[algo]["n_runs"] == "4" and rows[algo]["note"] == "6 pairs"
    distance = rows[("control", "weight_distance", "exact")]
    assert float(distance["mean"]) == 0.0 and float(distance["max"]) == 0.0
    sketched = rows[("algo", "weight_distance", "sketch")]
    assert 0 < float(sketched["low"]) <= float(sketched["mean"]) <= float(sketched["high"])
    assert "probability >= 0.95" in sketched["note"]
    assert {("algo", f"subgroup_{r}", f"sex={g}") for r in ("accuracy", "fpr", "fnr") for g in "fm"} <= set(rows)
    assert ("algo", "class_accuracy", "2") in rows
    worst = next(r for r in rows.values() if (r["variant"], r["measure"]) == ("algo", "class_accuracy_worst"))
    assert float(worst["ratio"]) > 0 and worst["note"] == "largest per-class std / overall-accuracy std"
    assert float(rows[("control", "unstable_samples", "")]["mean"]) == 0.0


def test_json_rows_match_the_csv(capsys, study: Path) -> None:
    code, out, _ = run_cli(capsys, "report", str(study), "--stability", "--format", "json")
    records = json.loads(out)
    assert code == 0 and records[0]["measure"] == "churn" and records[0]["variant"] == "algo"
    assert all(set(r) == set(records[0]) for r in records)


def test_markdown_and_table_end_with_the_section(capsys, study: Path) -> None:
    code, md, _ = run_cli(capsys, "report", str(study), "--format", "md")
    assert code == 0 and "val_acc" in md
    assert "## Stability: experiment=mlp variant=algo" in md and "## Stability: experiment=mlp variant=control" in md
    assert "### Sub-groups by sex" in md and "### Top-10 unstable samples" in md
    control = md.split("## Stability: experiment=mlp variant=control")[1]
    assert "| churn (pairwise disagreement) | mean 0, std 0 over 6 pairs (min 0, max 0) |" in control
    assert "mean 0, std 0 (min 0, max 0); exact" in control and "Top-10" not in control
    code, table, _ = run_cli(capsys, "report", str(study))
    assert code == 0 and "Stability: experiment=mlp variant=algo" in table
    assert "sketch estimate (k=128)" in table and "agreement with the majority vote" in table


def test_the_stability_section_wraps_at_the_width(capsys, monkeypatch: pytest.MonkeyPatch, study: Path) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    code, table, _ = run_cli(capsys, "report", str(study))
    lines = table.splitlines()
    assert code == 0 and max(map(len, lines)) <= 60, [line for line in lines if len(line) > 60]
    section = " ".join(table.split("Stability: experiment=mlp variant=algo")[1].split())
    assert "agreement with the majority vote" in section and "sketch estimate (k=128)" in section


def test_no_section_without_predictions_or_weights(capsys, tmp_path: Path) -> None:
    write_run(tmp_path, "mlp", "algo", 0, [("val", "val_acc", 0.8)])
    write_run(tmp_path, "mlp", "algo", 1, [("val", "val_acc", 0.9)])
    code, md, _ = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    assert code == 0 and "Stability" not in md
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--stability", "--format", "json")
    assert (code, out) == (0, "[]\n")


def _two_runs(root: Path) -> list[Path]:
    paths = [write_run(root, "mlp", "algo", k, [("val", "val_acc", 0.8)]) for k in range(2)]
    for k, path in enumerate(paths):
        write_predictions(path, outputs=np.array([0, 1, 1, k]), labels=[0, 1, 1, 0])
    return paths


def _stability_of(out: str) -> dict[tuple[str, str], dict]:
    return {(r["measure"], r["item"]): r for r in json.loads(out)}


def _file_warnings(err: str) -> list[str]:
    """The warnings of ``err`` but the problem of replicas with identical metrics (these runs log one value)."""
    return [line for line in err.splitlines() if "came out bit-identical" not in line]


def test_corrupt_predictions_file_is_one_warning_and_left_out(capsys, tmp_path: Path) -> None:
    paths = _two_runs(tmp_path)
    paths.append(write_run(tmp_path, "mlp", "algo", 2, [("val", "val_acc", 0.7)]))
    write_predictions(paths[2], outputs=np.array([0, 1, 0, 0]), labels=[0, 1, 1, 0])
    (paths[1] / PREDICTIONS_FILE).write_bytes(b"not parquet")
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--stability", "--format", "json")
    (line,) = _file_warnings(err)
    assert code == 0 and line.startswith(f"deviate: warning: {paths[1] / PREDICTIONS_FILE}: not a readable Parquet")
    assert line.endswith("left out of the stability measures.")
    churn = _stability_of(out)[("churn", "")]
    assert churn["n_runs"] == 2 and churn["mean"] == 0.25  # runs 0 and 2 differ on 1 of 4 samples


def test_mismatched_sketches_leave_one_out_with_a_warning(capsys, tmp_path: Path) -> None:
    paths = _two_runs(tmp_path)
    paths.append(write_run(tmp_path, "mlp", "algo", 2, [("val", "val_acc", 0.8)]))
    write_weights(paths[0], [("w", np.ones(10))], sketch_seed=0)
    write_weights(paths[1], [("w", np.ones(10))], sketch_seed=1)
    write_weights(paths[2], [("w", np.arange(10.0))], sketch_seed=0)
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--stability", "--format", "csv")
    (line,) = _file_warnings(err)
    assert code == 0 and line.startswith(f"deviate: warning: {paths[1] / WEIGHTS_SKETCH_FILE}: sketch seed 1 differs")
    distance = next(r for r in _rows(out) if r["measure"] == "weight_distance")
    assert distance["n_runs"] == "2" and float(distance["mean"]) > 0


def test_different_full_weight_layouts_leave_one_out_with_a_warning(capsys, tmp_path: Path) -> None:
    paths = _two_runs(tmp_path)
    paths.append(write_run(tmp_path, "mlp", "algo", 2, [("val", "val_acc", 0.8)]))
    write_weights(paths[0], [("w", np.ones(10))], full=True)
    write_weights(paths[1], [("w", np.ones(5)), ("b", np.ones(5))], full=True)
    write_weights(paths[2], [("w", np.ones(10))], full=True)
    code, md, err = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    # the sketch of run 1 differs in layout too: one warning per file of run 1
    full, sketch = _file_warnings(err)
    assert code == 0 and full.startswith(f"deviate: warning: {paths[1] / 'weights.npz'}: parameter layout differs")
    assert sketch.startswith(f"deviate: warning: {paths[1] / WEIGHTS_SKETCH_FILE}: parameter layout (10 weights")
    assert "mean 0, std - (min 0, max 0); exact" in md and "weight distance over the 2 of 3 runs" in md


def test_classification_and_regression_runs_in_one_group_leave_the_odd_one_out(capsys, tmp_path: Path) -> None:
    paths = [write_run(tmp_path, "mlp", "algo", k, [("val", "val_acc", 0.8)]) for k in range(3)]
    write_predictions(paths[0], outputs=np.array([0, 1, 1]), labels=[0, 1, 1])
    write_predictions(paths[1], outputs=np.array([0.5, 1.5, 2.5]), labels=[0.5, 1.5, 2.5])
    write_predictions(paths[2], outputs=np.array([0, 1, 0]), labels=[0, 1, 1])
    code, md, err = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    assert code == 0 and _file_warnings(err) == [
        f"deviate: warning: {paths[1] / PREDICTIONS_FILE}: regression predictions in a group of classification runs; "
        "left out of the stability measures."
    ]
    assert "2 runs with predictions (snapshot final, 3 samples, classification)" in md


def test_runs_on_different_samples_use_the_common_ones(capsys, tmp_path: Path) -> None:
    paths = [write_run(tmp_path, "mlp", "algo", k, [("val", "val_acc", 0.8)]) for k in range(2)]
    write_predictions(paths[0], outputs=np.array([0, 1, 1]), labels=[0, 1, 1], sample=[0, 1, 2])
    write_predictions(paths[1], outputs=np.array([1, 0, 1]), labels=[1, 0, 1], sample=[2, 0, 7])
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--stability", "--format", "json")
    assert code == 0
    assert "runs were evaluated on different samples; using the 2 they share" in err
    churn = next(r for r in json.loads(out) if r["measure"] == "churn")
    assert (churn["n_samples"], churn["mean"]) == (2, 0.0)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--stability", "--decomposition"],
            "give one of `--decomposition`, `--stability`, `--timings`, `--headline`.",
        ),
        (["--positive", "yes"], "argument --positive: invalid int value: 'yes'."),
    ],
)
def test_bad_options(capsys, tmp_path: Path, extra: list[str], message: str) -> None:
    _two_runs(tmp_path)
    code, _, err = run_cli(capsys, "report", str(tmp_path), *extra)
    assert code == 2 and err.startswith(f"deviate: error: {message}")


def test_stability_needs_dir(capsys, tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("variant,acc\na,1\na,2\n")
    code, _, err = run_cli(capsys, "report", "--table", str(table), "--group-by", "variant", "--stability")
    assert code == 2 and "`--stability` needs DIR" in err


def test_positive_class_reaches_the_rates(capsys, tmp_path: Path) -> None:
    paths = [write_run(tmp_path, "mlp", "algo", k, [("val", "val_acc", 0.8)]) for k in range(2)]
    for k, path in enumerate(paths):
        write_predictions(path, outputs=np.array([0, 0, 1, k]), labels=[0, 0, 1, 1], groups={"g": ["x"] * 4})
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--stability", "--format", "json", "--positive", "0")
    fnr = next(r for r in json.loads(out) if r["measure"] == "subgroup_fnr" and r["item"] == "g=x")
    fpr = next(r for r in json.loads(out) if r["measure"] == "subgroup_fpr" and r["item"] == "g=x")
    # positive class 0: no false negatives; run 0 predicts 0 for sample 3 (class 1): FPR 1/2, run 1: 0
    assert code == 0 and fnr["mean"] == 0.0 and fpr["mean"] == 0.25 and fpr["note"] == "positive class 0"


def test_regression_predictions_and_weights_only_groups(capsys, tmp_path: Path) -> None:
    for k in range(3):
        path = write_run(tmp_path, "reg", "algo", k, [("val", "val_loss", 0.1)])
        # targets 0, 1, 2; run k predicts them shifted by k / 10
        write_predictions(path, outputs=np.array([0.0, 1.0, 2.0]) + k / 10, labels=[0.0, 1.0, 2.0])
        only_weights = write_run(tmp_path, "reg", "weights", k, [("val", "val_loss", 0.1)])
        write_weights(only_weights, [("w", np.arange(5.0) + k)], sketch_dim=64)
    code, out, _ = run_cli(capsys, "report", str(tmp_path), "--stability", "--format", "json")
    rows = {(r["variant"], r["measure"]): r for r in json.loads(out)}
    assert code == 0 and ("algo", "churn") not in rows
    assert rows[("algo", "value_std")]["mean"] == pytest.approx(0.1)  # std of {0, 0.1, 0.2} per sample
    assert rows[("algo", "rmse")]["mean"] == pytest.approx(0.1) and rows[("algo", "rmse")]["std"] == pytest.approx(0.1)
    distance = rows[("weights", "weight_distance")]
    assert distance["item"] == "sketch" and distance["n_runs"] == 3 and distance["mean"] > 0
    code, md, _ = run_cli(capsys, "report", str(tmp_path), "--format", "md")
    assert "| per-sample std of predictions | mean 0.1, max 0.1 |" in md and "3 runs with weights." in md


def test_build_stability_from_runs_already_read(study: Path) -> None:
    """`runs=` (as `deviate report` passes them) gives what searching the directory gives, and only those runs."""
    from deviate_cb.report.answers.stability.build import build_stability
    from deviate_cb.report.answers.stability.rows import stability_rows
    from deviate_cb.report.reading.runs import find_runs

    runs = find_runs(study)
    assert stability_rows(build_stability(study, runs=runs)) == stability_rows(build_stability(study))
    control = [r for r in runs if r.variant == "control"]
    assert [g.variant for g in build_stability(study, runs=control)] == ["control"]
    assert build_stability(study, runs=[]) == []
