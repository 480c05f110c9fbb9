"""``deviate import tensorboard`` and ``deviate import csv-logs``: logs written by real Lightning runs (both
``TensorBoardLogger`` and ``CSVLogger``, with ``hparams.yaml``) and by Keras' ``TensorBoard`` callback become
replicas whose numbers ``deviate report`` gives back exactly as the training reported them.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from store_readers import manifests, report_rows

HERE = Path(__file__).resolve().parent
DEVIATE = str(Path(sys.executable).with_name("deviate"))
LRS = [0.1, 0.01]
SEEDS = [0, 1]


def deviate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DEVIATE, *args], capture_output=True, text=True, timeout=300, env={**os.environ})


@pytest.fixture(scope="module")
def lightning_logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    from tests.helpers.lightning_logs import train_runs

    root = tmp_path_factory.mktemp("lightning")
    return root, train_runs(root, LRS, SEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("source, folder", [("tensorboard", "tb"), ("csv-logs", "csv")])
def test_lightning_logs_become_groups_with_the_values_the_runs_reported(
    lightning_logs: tuple[Path, list[dict[str, Any]]], source: str, folder: str, tmp_path: Path
) -> None:
    root, trained = lightning_logs
    out = tmp_path / "runs"
    result = deviate("import", source, str(root / folder), "--group-by", "hparams.lr", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert f"experiment={folder}.lr-0.1 variant=imported: 2 new, 0 updated, 0 unchanged" in result.stdout

    rows = report_rows(out, deviate)
    assert "hp_metric" not in {metric for _, metric in rows}  # TensorBoardLogger's -1 placeholder is no result
    for lr in LRS:
        expected = [run["val_loss"] for run in trained if run["lr"] == lr]
        row = rows[(f"{folder}.lr-{lr}", "val_loss")]
        assert int(row["n"]) == 2
        assert float(row["mean"]) == pytest.approx(sum(expected) / 2, rel=1e-6)
        assert float(row["min"]) == pytest.approx(min(expected), rel=1e-6)

    by_version = {m["source"]["run_name"]: m for m in manifests(out)}
    for run in trained:
        manifest = by_version[f"version_{run['version']}"]
        assert manifest["status"] == "completed" and manifest["source"]["status"] is None
        assert manifest["seed"] == run["seed"] and manifest["seed_source"] == "hparams.seed"
        assert manifest["params"]["hparams.lr"] == str(run["lr"])
        assert manifest["source"]["tracker"] == source
        assert manifest["source"]["run_id"] == str((root / folder / f"version_{run['version']}").resolve())

    # full histories, stage and scope from the names, epochs from Lightning's `epoch` series
    run_dir = next(out.glob(f"experiment={folder}.lr-0.1/variant=imported/replica=0"))
    table = pq.read_table(run_dir / "metrics.parquet").to_pylist()
    steps = [r for r in table if r["name"] == "train_loss_step"]
    assert len(steps) == 12 and {r["scope"] for r in steps} == {"step"} and {r["stage"] for r in steps} == {"train"}
    val = [(r["stage"], r["scope"], r["epoch"]) for r in table if r["name"] == "val_loss"]
    assert val == [("val", "epoch", 0), ("val", "epoch", 1)]
    assert all((r["wall_time"] is None) == (source == "csv-logs") for r in table)

    # idempotent, and --min-step: runs whose logs end early are imported incomplete (left out)
    again = deviate("import", source, str(root / folder), "--group-by", "hparams.lr", "--out", str(out))
    assert f"experiment={folder}.lr-0.1 variant=imported: 0 new, 0 updated, 2 unchanged" in again.stdout
    assert again.returncode == 0 and len(manifests(out)) == 4
    other = tmp_path / "strict"
    strict = deviate("import", source, str(root / folder), "--min-step", "1000", "--out", str(other))
    assert strict.returncode == 0, strict.stderr
    assert {m["status"] for m in manifests(other)} == {"incomplete"}
    assert "before --min-step 1000" in manifests(other)[0]["reason"]


def keras_logs(logs: Path, update_freq: str) -> list[dict[str, list[float]]]:
    """Two real Keras fits (seeds 0 and 1) with the TensorBoard callback under ``logs``; their epoch losses."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    reported = []
    for seed in (0, 1):
        done = subprocess.run(
            [sys.executable, str(HERE / "keras_tensorboard.py"), str(logs / f"seed{seed}"), str(seed), update_freq],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=True,
        )
        reported.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return reported


@pytest.mark.slow
@pytest.mark.parametrize("update_freq", ["epoch", "1"])
def test_keras_tensorboard_callback_logs_are_one_run_per_folder(update_freq: str, tmp_path: Path) -> None:
    """Each fit is one replica (train/ and validation/ together); with ``update_freq`` in batches, ``batch_loss``
    and ``epoch_loss`` are kept apart, named as Keras names them (``batch_loss`` of scope step, ``loss`` of scope
    epoch), so the report's ``loss`` is the epochs'; ``evaluation_loss_vs_iterations`` is ``val_loss`` again."""
    logs = tmp_path / "keras_logs"
    reported = keras_logs(logs, update_freq)
    out = tmp_path / "runs"
    result = deviate("import", "tensorboard", str(logs), "--name", "keras", "--variant", "algo", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "experiment=keras variant=algo: 2 new, 0 updated, 0 unchanged" in result.stdout
    rows = report_rows(out, deviate)
    for metric in ("loss", "val_loss"):  # train/ and validation/ of one fit are one replica
        values = [r[metric][-1] for r in reported]
        assert float(rows[("keras", metric)]["mean"]) == pytest.approx(sum(values) / 2, rel=1e-6)
    batch = {"batch_loss"} if update_freq != "epoch" else set()
    assert {metric for _, metric in rows} == {"loss", "val_loss", "learning_rate", *batch}  # no evaluation_*
    best = deviate("report", str(out), "--aggregate", "best", "--format", "csv")
    assert best.returncode == 0, best.stderr
    best_rows = {row["metric"]: row for row in csv.DictReader(io.StringIO(best.stdout))}
    expected = [min(r["loss"]) for r in reported]  # the mean of each run's best epoch, never a batch's value
    assert float(best_rows["loss"]["mean"]) == pytest.approx(sum(expected) / 2, rel=1e-6)

    table = pq.read_table(next(out.glob("**/replica=0")) / "metrics.parquet").to_pylist()
    assert {(r["stage"], r["scope"]) for r in table if r["name"] == "val_loss"} == {("val", "epoch")}
    assert len([r for r in table if r["name"] == "val_loss"]) == 3
    assert {r["scope"] for r in table if r["name"] == "loss"} == {"epoch"}
    assert [r["value"] for r in table if r["name"] == "loss"] == pytest.approx(reported[0]["loss"], rel=1e-6)
    batches = [r for r in table if r["name"] == "batch_loss"]
    assert len(batches) == (0 if update_freq == "epoch" else 9)  # 48 training samples in batches of 16, 3 epochs
    assert {(r["stage"], r["scope"]) for r in batches} <= {("train", "step")}


def test_bad_log_folders_are_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "runs"
    sources = (("tensorboard", "holds no TensorBoard event file"), ("csv-logs", "holds no metrics.csv"))
    for source, expected in (*sources, ("csv", "holds no metrics.csv")):  # `csv`: csv-logs by the name users type
        for folder, words in ((empty, expected), (tmp_path / "missing", "must be an existing folder")):
            result = deviate("import", source, str(folder), "--out", str(out))
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 2 and len(lines) == 1 and words in lines[0], result.stderr
            assert not out.exists()


@pytest.mark.parametrize("source, package", [("tensorboard", "tensorboard"), ("mlflow", "mlflow")])
def test_a_missing_extra_is_named_in_one_line(tmp_path: Path, source: str, package: str) -> None:
    """The package made unimportable for one subprocess (a package of that name that refuses to import, first on
    PYTHONPATH): the command names the extra to install."""
    blocked = tmp_path / "blocked" / package
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not installed, for this test')\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "events.out.tfevents.1.host").write_bytes(b"")
    where = ["--tracking-uri", str(logs), "--experiment", "x"] if source == "mlflow" else [str(logs)]
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "blocked")}
    out = tmp_path / "runs"
    result = subprocess.run(
        [DEVIATE, "import", source, *where, "--out", str(out)], capture_output=True, text=True, timeout=300, env=env
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"pip install 'deviate-cb[{package}]'" in lines[0] and not out.exists()
