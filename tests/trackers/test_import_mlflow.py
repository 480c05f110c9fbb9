"""``deviate import mlflow``: runs logged with the real MLflow client (a server on loopback, a ``sqlite:///`` store,
an ``mlruns/`` folder) become replicas that ``deviate report`` and ``compare`` read like ours.

Every command runs as a real ``deviate`` subprocess; the numbers asserted are the ones logged.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mlflow
import pytest
from mlflow.entities import Metric, Param
from store_readers import manifests, report_rows

DEVIATE = str(Path(sys.executable).with_name("deviate"))
LRS = ("0.1", "0.01")
SEEDS = (0, 1, 2)
STEPS = 6


def deviate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "COLUMNS": "200"}
    env.pop("MLFLOW_ALLOW_FILE_STORE", None)  # deviate import asks for the file store itself
    return subprocess.run([DEVIATE, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def final_val_acc(lr: str, seed: int) -> float:
    return 0.5 + float(lr) + 0.01 * seed + 0.001 * seed**2


def log_study(uri: str, experiment: str) -> dict[str, Any]:
    """Six finished runs (two lr groups, three seeds each), one failed, one still running; what was logged."""
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(experiment)
    logged: dict[str, Any] = {"finished": {}, "failed": None, "running": None}
    now = int(time.time() * 1000)
    for lr in LRS:
        for seed in SEEDS:
            run = client.create_run(experiment_id, run_name=f"lr{lr}-seed{seed}")
            metrics = [Metric("train_loss", 1.0 / (s + 1) + seed / 100, now + s, s) for s in range(STEPS)]
            metrics += [
                Metric("val_acc", final_val_acc(lr, seed) - 0.1 * (e == 0), now + 10 + e, 3 * e + 2) for e in (0, 1)
            ]
            metrics += [Metric("epoch", float(e), now + 10 + e, 3 * e + 2) for e in (0, 1)]
            params = [Param("lr", lr), Param("seed", str(seed))]
            client.log_batch(run.info.run_id, metrics=metrics, params=params)
            client.set_terminated(run.info.run_id)
            logged["finished"][run.info.run_id] = (lr, seed)
    failed = client.create_run(experiment_id, run_name="crashed")
    client.log_batch(failed.info.run_id, metrics=[Metric("train_loss", 9.0, now, 0)], params=[Param("lr", "0.1")])
    client.set_terminated(failed.info.run_id, status="FAILED")
    running = client.create_run(experiment_id, run_name="still-going")
    client.log_batch(running.info.run_id, metrics=[Metric("val_acc", 0.3, now, 2)], params=[Param("lr", "0.01")])
    logged["failed"], logged["running"] = failed.info.run_id, running.info.run_id
    return logged


@pytest.fixture(scope="module")
def server_study(mlflow_server: str) -> dict[str, Any]:
    return log_study(mlflow_server, "resnet")


@pytest.mark.slow
def test_a_server_experiment_becomes_groups_that_report_and_compare_read(
    mlflow_server: str, server_study: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    args = ["import", "mlflow", "--tracking-uri", mlflow_server, "--experiment", "resnet"]
    result = deviate(*args, "--group-by", "params.lr", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "experiment=resnet.lr-0.1 variant=imported: 4 new, 0 updated, 0 unchanged" in result.stdout
    assert "experiment=resnet.lr-0.01 variant=imported: 4 new, 0 updated, 0 unchanged" in result.stdout
    assert "failed (mlflow FAILED; run 'crashed'" in result.stdout
    assert "running (mlflow RUNNING; run 'still-going'" in result.stdout

    by_id = {m["source"]["run_id"]: m for m in manifests(out)}
    assert set(by_id) == {*server_study["finished"], server_study["failed"], server_study["running"]}
    for run_id, (lr, seed) in server_study["finished"].items():
        manifest = by_id[run_id]
        assert (
            manifest["status"] == "completed" and manifest["seed"] == seed and manifest["seed_source"] == "params.seed"
        )
        assert manifest["experiment"] == f"resnet.lr-{lr}" and manifest["params"]["params.lr"] == lr
        assert manifest["source"]["tracker"] == "mlflow" and manifest["source"]["uri"] == mlflow_server
        assert manifest["source"]["status"] == "FINISHED" and manifest["source"]["experiment"] == "resnet"
    assert by_id[server_study["failed"]]["status"] == "failed"
    assert by_id[server_study["running"]]["status"] == "running"

    # The full history: every logged value, in step order, epoch column from Lightning's `epoch` series
    import pyarrow.parquet as pq

    some_id = next(iter(server_study["finished"]))
    run_dir = next(
        p.parent for p in out.glob("**/run.json") if json.loads(p.read_text())["source"]["run_id"] == some_id
    )
    table = pq.read_table(run_dir / "metrics.parquet").to_pylist()
    assert [r["step"] for r in table if r["name"] == "train_loss"] == list(range(STEPS))
    val = [r for r in table if r["name"] == "val_acc"]
    assert [(r["step"], r["epoch"], r["stage"]) for r in val] == [(2, 0, "val"), (5, 1, "val")]
    assert all(r["wall_time"] > 1e9 for r in table) and not [r for r in table if r["name"] == "epoch"]

    rows = report_rows(out, deviate)
    for lr in LRS:
        row = rows[(f"resnet.lr-{lr}", "val_acc")]
        expected = [final_val_acc(lr, seed) for seed in SEEDS]
        assert int(row["n"]) == 3  # the failed and the running run are left out
        assert float(row["mean"]) == pytest.approx(sum(expected) / 3, rel=1e-9)
        assert float(row["min"]) == pytest.approx(min(expected)) and float(row["max"]) == pytest.approx(max(expected))

    compared = deviate(
        "compare", str(out), "--a", "experiment=resnet.lr-0.1", "--b", "experiment=resnet.lr-0.01", "--format", "json"
    )
    assert compared.returncode == 0, compared.stderr
    val_acc = next(r for r in json.loads(compared.stdout) if r["metric"] == "val_acc")
    assert val_acc["status"] == "compared" and val_acc["n_a"] == 3 and val_acc["n_b"] == 3
    assert val_acc["mean_diff"] == pytest.approx(0.09, abs=1e-9)

    status = deviate("status", str(out))
    assert status.returncode == 0, status.stderr
    assert "failed" in status.stdout and "running" in status.stdout

    power = deviate("power", str(out), "--effect", "0.01", "--metric", "val_acc", "--format", "csv")
    assert power.returncode == 0, power.stderr
    powered = list(csv.DictReader(io.StringIO(power.stdout)))
    assert sorted(int(row["n"]) for row in powered) == [3, 3]
    page = deviate("report", str(out), "--format", "html", "-o", str(tmp_path / "report.html"))
    assert page.returncode == 0, page.stderr
    assert "resnet.lr-0.01" in (tmp_path / "report.html").read_text()

    # idempotent: the same runs again are one replica each, found by run id
    again = deviate(*args, "--group-by", "params.lr", "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert "experiment=resnet.lr-0.1 variant=imported: 0 new, 0 updated, 4 unchanged" in again.stdout
    assert len(manifests(out)) == 8

    # the running run finishes in the tracker: a re-import updates its replica in place
    client = mlflow.MlflowClient(tracking_uri=mlflow_server)
    client.log_metric(server_study["running"], "val_acc", 0.6, step=5)
    client.set_terminated(server_study["running"])
    before = next(p.parent for p in out.glob("**/run.json") if server_study["running"] in p.read_text())
    third = deviate(*args, "--group-by", "params.lr", "--out", str(out))
    assert third.returncode == 0, third.stderr
    assert "experiment=resnet.lr-0.01 variant=imported: 0 new, 1 updated, 3 unchanged" in third.stdout
    assert len(manifests(out)) == 8 and json.loads((before / "run.json").read_text())["status"] == "completed"
    assert int(report_rows(out, deviate)[("resnet.lr-0.01", "val_acc")]["n"]) == 4
    client.delete_run(server_study["running"])  # the other tests see the study as logged


@pytest.mark.slow
def test_a_sqlite_store_is_read_in_one_query_and_a_mlruns_folder_through_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 logs into a folder only when asked
    for uri, cwd in ((f"sqlite:///{tmp_path / 'mlflow.db'}", None), ("mlruns", tmp_path)):
        logged = log_study(uri if cwd is None else str(tmp_path / uri), "vit")
        out = tmp_path / f"runs-{uri.partition(':')[0]}"
        result = deviate(
            "import",
            "mlflow",
            "--tracking-uri",
            uri,
            "--experiment",
            "vit",
            "--group-by",
            "params.lr,params.seed",
            "--variant",
            "algo+impl",
            "--out",
            str(out),
            cwd=cwd,
        )
        assert result.returncode == 0, result.stderr
        assert "experiment=vit.lr-0.1.seed-2 variant=algo+impl: 1 new" in result.stdout
        rows = report_rows(out, deviate)
        for lr, seed in logged["finished"].values():
            assert float(rows[(f"vit.lr-{lr}.seed-{seed}", "val_acc")]["mean"]) == pytest.approx(
                final_val_acc(lr, seed)
            )
        # the runs without a seed param (the failed and the running one) are grouped under seed-none
        assert {m["experiment"] for m in manifests(out) if m["status"] != "completed"} == {
            "vit.lr-0.1.seed-none",
            "vit.lr-0.01.seed-none",
        }


@pytest.mark.slow
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    mlflow_server: str, server_study: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    base = ["import", "mlflow", "--out", str(out)]
    cases = {
        "does not answer": [*base, "--tracking-uri", "http://127.0.0.1:9", "--experiment", "resnet"],
        "names no experiment": [*base, "--tracking-uri", mlflow_server, "--experiment", "nope"],
        "names a key no run has": [
            *base,
            "--tracking-uri",
            mlflow_server,
            "--experiment",
            "resnet",
            "--group-by",
            "params.bs",
        ],
        "did not record": [*base, "--tracking-uri", mlflow_server, "--experiment", "resnet", "--metric", "test_f1"],
        "takes keys such as": [*base, "--tracking-uri", mlflow_server, "--experiment", "resnet", "--group-by", "lr"],
        "SQLite file that does not exist": [
            *base,
            "--tracking-uri",
            f"sqlite:///{tmp_path}/none.db",
            "--experiment",
            "x",
        ],
    }
    for expected, args in cases.items():
        result = deviate(*args)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("deviate: error: ") and expected in lines[0], lines
        assert "Traceback" not in result.stderr and not out.exists()
