"""``deviate import mlflow`` of a sweep on a real MLflow server (loopback): the parent run that logs only params is
left out and said so, ``--filter`` (MLflow's search syntax), ``--run-name`` and ``--where`` choose runs, and a bad
filter is one line with exit status 2.

Every command runs as a real ``deviate`` subprocess against the suite's server (tests/trackers/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mlflow
import pytest
from mlflow.entities import Metric, Param, RunTag
from store_readers import manifests, report_rows

DEVIATE = str(Path(sys.executable).with_name("deviate"))
LRS = ("0.1", "0.01")


def deviate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "COLUMNS": "200"}
    return subprocess.run([DEVIATE, *args], capture_output=True, text=True, env=env, timeout=300)


def val_acc(lr: str, trial: int) -> float:
    return 0.6 + float(lr) + 0.01 * trial


@pytest.fixture(scope="module")
def sweep(mlflow_server: str) -> dict[str, Any]:
    return log_sweep(mlflow_server, "sweep")


def log_sweep(uri: str, name: str) -> dict[str, Any]:
    """An Optuna-shaped sweep: a parent run with the study's params only, six nested trials (two lr, three trials
    each) logging val_acc, each naming the parent in ``mlflow.parentRunId``."""
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(name)
    now = int(time.time() * 1000)
    parent = client.create_run(experiment_id, run_name="optuna-study")
    client.log_batch(parent.info.run_id, params=[Param("n_trials", "6"), Param("sampler", "TPESampler")])
    client.set_terminated(parent.info.run_id)
    trials = {}
    for lr in LRS:
        for trial in range(3):
            run = client.create_run(
                experiment_id,
                run_name=f"trial-{lr}-{trial}",
                tags={"mlflow.parentRunId": parent.info.run_id},
            )
            metrics = [Metric("val_acc", val_acc(lr, trial) - 0.1 * (e == 0), now + e, e) for e in (0, 1)]
            params = [Param("lr", lr), Param("seed", str(trial)), Param("optimizer", "adam" if trial else "sgd")]
            client.log_batch(run.info.run_id, metrics=metrics, params=params, tags=[RunTag("team", "vision")])
            client.set_terminated(run.info.run_id)
            trials[run.info.run_id] = (lr, trial)
    return {"parent": parent.info.run_id, "trials": trials, "experiment_id": experiment_id}


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.slow
def test_a_sweeps_parent_run_is_left_out_and_said(mlflow_server: str, sweep: dict[str, Any], tmp_path: Path) -> None:
    source = ["import", "mlflow", "--tracking-uri", mlflow_server, "--experiment", "sweep"]
    out = tmp_path / "runs"
    for extra in ([], ["--metric", "val_acc"]):  # both exited 2 on the parent, which records no metric
        result = deviate(*source, "--group-by", "params.lr", *extra, "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert "1 parent run left out" in result.stderr and "'optuna-study'" in result.stderr, result.stderr
    assert sorted(m["source"]["run_id"] for m in manifests(out)) == sorted(sweep["trials"])
    rows = report_rows(out, deviate)
    for lr in LRS:
        row = rows[(f"sweep.lr-{lr}", "val_acc")]
        assert int(row["n"]) == 3
        assert float(row["mean"]) == pytest.approx(sum(val_acc(lr, t) for t in range(3)) / 3, rel=1e-9)

    # --include-parents: the parent is a run again, and it recorded no metric (the old refusal, asked for)
    asked = deviate(*source, "--include-parents", "--out", str(tmp_path / "with-parent"))
    assert "recorded no metric" in one_line_error(asked) and "'optuna-study'" in asked.stderr


@pytest.mark.slow
def test_filter_run_name_and_where_choose_the_runs(mlflow_server: str, sweep: dict[str, Any], tmp_path: Path) -> None:
    source = ["import", "mlflow", "--tracking-uri", mlflow_server, "--experiment", "sweep"]
    cases = {
        ("--filter", "params.lr = '0.1'"): {k for k, (lr, _) in sweep["trials"].items() if lr == "0.1"},
        ("--filter", "attributes.run_name LIKE 'trial-0.01-%'"): {
            k for k, (lr, _) in sweep["trials"].items() if lr == "0.01"
        },
        ("--run-name", "trial-*-2"): {k for k, (_, trial) in sweep["trials"].items() if trial == 2},
        ("--where", "params.optimizer=sgd"): {k for k, (_, trial) in sweep["trials"].items() if trial == 0},
    }
    for k, ((option, value), expected) in enumerate(cases.items()):
        out = tmp_path / f"runs{k}"
        result = deviate(*source, option, value, "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert {m["source"]["run_id"] for m in manifests(out)} == expected, (option, value)
        if option == "--filter":  # the parent is known as one even where the filter leaves its trials out
            assert sweep["parent"] not in {m["source"]["run_id"] for m in manifests(out)}

    bad = deviate(*source, "--filter", "params.lr = ", "--out", str(tmp_path / "bad"))
    line = one_line_error(bad)
    assert "`--filter`" in line and "params.lr =" in line and "Expected" in line
    none = deviate(*source, "--where", "params.lr=0.5", "--out", str(tmp_path / "none"))
    assert "leaves no run" in one_line_error(none)
    malformed = deviate(*source, "--where", "lr", "--out", str(tmp_path / "none"))
    assert "`--where` takes KEY=VALUE" in one_line_error(malformed)
    assert not (tmp_path / "bad").exists() and not (tmp_path / "none").exists()


@pytest.mark.slow
def test_a_run_unchanged_since_its_import_is_not_read_again(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a server, a re-import reads only the histories of the runs whose listing changed (here a new value),
    and every history again when the options that shape a replica change."""
    import pyarrow.parquet as pq
    from mlflow.tracking import MlflowClient

    from deviate_cb.cli.main import main

    client = MlflowClient(tracking_uri=mlflow_server)
    experiment_id = client.create_experiment("unchanged")
    ids = []
    for seed in range(3):
        run = client.create_run(experiment_id, run_name=f"seed-{seed}")
        client.log_batch(run.info.run_id, metrics=[Metric(k, 0.5 + seed / 10, 1000 + s, s) for k in ("val_acc",
                         "loss") for s in (0, 1)], params=[Param("seed", str(seed))])  # fmt: skip
        client.set_terminated(run.info.run_id)
        ids.append(run.info.run_id)
    asked: list[str] = []
    real = MlflowClient.get_metric_history

    def counted(self: Any, run_id: str, key: str) -> Any:  # the real call, counted
        asked.append(run_id)
        return real(self, run_id, key)

    monkeypatch.setattr(MlflowClient, "get_metric_history", counted)
    out = tmp_path / "runs"
    command = ["import", "mlflow", "--tracking-uri", mlflow_server, "--experiment", "unchanged", "--out", str(out)]
    assert main(command) == 0 and sorted(asked) == sorted(ids * 2)  # two metrics of three runs
    asked.clear()
    assert main(command) == 0 and asked == []
    client.log_metric(ids[1], "val_acc", 0.99, step=2)
    asked.clear()
    assert main(command) == 0 and asked == [ids[1], ids[1]]
    (replica,) = [m for m in manifests(out) if m["source"]["run_id"] == ids[1]]
    table = pq.read_table(out / f"experiment={replica['experiment']}" / f"variant={replica['variant']}"
                          / f"replica={replica['replica']}" / "metrics.parquet").to_pylist()  # fmt: skip
    assert [(r["step"], r["value"]) for r in table if r["name"] == "val_acc"][-1] == (2, 0.99)
    asked.clear()
    assert main([*command, "--metric", "val_*"]) == 0 and len(asked) == 6  # other options: every run read whole
    asked.clear()
    assert main([*command, "--metric", "val_*"]) == 0 and asked == []

    # A store imported before listings were recorded: read whole once, unchanged, its listing recorded then
    import json

    for path in out.glob("**/run.json"):
        manifest = json.loads(path.read_text())
        del manifest["source"]["listing"]
        path.write_text(json.dumps(manifest))
    asked.clear()
    assert main(command) == 0 and len(asked) == 6
    asked.clear()
    assert main(command) == 0 and asked == []


@pytest.mark.slow
def test_an_imported_sweep_exported_again_is_linked_not_copied(mlflow_server: str, tmp_path: Path) -> None:
    """Import a sweep, export the store to the same server: the trials are the replicas (tagged with their study run,
    their sweep parent kept), the study runs go beside them in the sweep's experiment, and no run is copied."""
    logged = log_sweep(mlflow_server, "sweep-export")
    out = tmp_path / "runs"
    source = ["--tracking-uri", mlflow_server]
    imported = deviate("import", "mlflow", *source, "--experiment", "sweep-export", "--group-by", "params.lr",
                       "--out", str(out))  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    sent = deviate("export", "mlflow", str(out), *source, "--no-page")
    assert sent.returncode == 0, sent.stderr
    assert "0 exported, 0 replaced, 0 unchanged, 6 linked" in sent.stdout, sent.stdout
    client = mlflow.MlflowClient(tracking_uri=mlflow_server)
    after = client.search_runs([logged["experiment_id"]])
    studies = {r.info.run_id: r for r in after if r.data.tags.get("deviate.role") == "study"}
    assert len(after) == 7 + 2 and len(studies) == 2  # the parent, six trials, a study run per lr group
    for run in after:
        if run.info.run_id in logged["trials"]:
            assert run.data.tags["mlflow.parentRunId"] == logged["parent"]  # the sweep's nesting kept
            assert run.data.tags["deviate.study_run"] in studies
            assert run.data.tags["deviate.experiment"] == f"sweep-export.lr-{logged['trials'][run.info.run_id][0]}"
            assert run.data.tags["team"] == "vision" and run.data.params["lr"]  # the user's own, untouched
    assert all(client.get_experiment_by_name(f"sweep-export.lr-{lr}") is None for lr in LRS)

    # To another tracking URI there is nothing to attach to: copies, carrying the trials' own params and tags
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    copied = deviate(
        "export", "mlflow", str(out), "--tracking-uri", elsewhere, "--no-page", "--mlflow-experiment", "copies"
    )
    assert copied.returncode == 0, copied.stderr
    assert "6 exported" in copied.stdout, copied.stdout
    other = mlflow.MlflowClient(tracking_uri=elsewhere)
    runs = other.search_runs([other.get_experiment_by_name("copies").experiment_id])
    replicas = [r for r in runs if r.data.tags.get("deviate.role") == "replica"]
    assert len(replicas) == 6
    for run in replicas:
        assert run.data.params["lr"] in LRS and run.data.params["optimizer"] in ("adam", "sgd")
        assert run.data.tags["team"] == "vision" and "params.lr" not in run.data.params
