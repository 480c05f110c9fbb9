"""`deviate export mlflow`: a real study (deviate-replicate on a tiny Lightning trainer) sent to a real MLflow server.

The server is the suite's loopback server (tests/trackers/conftest.py, SQLite backend). Read back with MlflowClient:
one parent run per experiment with the report's answers and the HTML page, one child per replica with its whole
metric history (equal to our Parquet), params and tags; a failed replica is FAILED, never FINISHED; exporting again
changes nothing. Bad input is one line with exit status 2 and nothing created on the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = "tiny"

TRAINER = """
import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader(shuffle):
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(32, 4, generator=gen)
    y = (x[:, 0] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=8, shuffle=shuffle)


def main(ctx):
    torch.set_num_threads(1)
    if ctx.variant == "algo" and ctx.replica == 2:
        raise RuntimeError("replica 2 fails on purpose")
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu",
                        default_root_dir=ctx.run_dir)
    trainer.fit(Tiny(), loader(True), loader(False))
"""


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def deviate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", *args], cwd=cwd, env=env or child_env(), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """control x2 and algo x3 (replica 2 of algo fails) of a tiny Lightning trainer, replicated for real."""
    folder = tmp_path_factory.mktemp("export-study")
    (folder / "train.py").write_text(textwrap.dedent(TRAINER))
    out = folder / "runs"
    for variant, n in (("control", "2"), ("algo", "3")):
        proc = subprocess.run(
            [sys.executable, "-m", "deviate_cb.cli.replicate", "--trainer", "train.py:main", "-n", n, "--variant",
             variant, "--experiment", EXPERIMENT, "--out", str(out), "--parallel", "1"],
            cwd=folder, env=child_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr[-3000:]
    statuses = {p.parent.name + "/" + p.name: json.loads((p / "run.json").read_text())["status"]
                for p in out.glob("experiment=*/variant=*/replica=*")}  # fmt: skip
    assert sorted(statuses.values()) == ["completed"] * 4 + ["failed"], statuses
    yield out


def client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def study_runs(uri: str, name: str) -> tuple[Any, list[Any]]:
    """(parent, children) of the MLflow experiment ``name``."""
    c = client(uri)
    experiment = c.get_experiment_by_name(name)
    assert experiment is not None
    runs = list(c.search_runs([experiment.experiment_id], max_results=1000))
    parents = [r for r in runs if r.data.tags.get("deviate.role") == "study"]
    assert len(parents) == 1, [r.data.tags for r in runs]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    return parents[0], children


@pytest.mark.slow
def test_export_sends_parent_and_replicas_and_is_idempotent(study: Path, mlflow_server: str, tmp_path: Path) -> None:
    first = deviate("export", "mlflow", str(study), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                    "export-one", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "5 exported" in first.stdout, first.stdout
    assert "View run" not in first.stdout + first.stderr  # MLflow's two lines per run ended, not ours

    parent, children = study_runs(mlflow_server, "export-one")
    assert parent.info.status == "FINISHED"
    # The report's answers as metrics: mean, std and its interval per variant on the metric of interest.
    for variant in ("control", "algo"):
        for what in ("mean", "std", "n") + (("std_ci_low", "std_ci_high") if variant == "control" else ()):
            assert f"val_acc/{variant}/{what}" in parent.data.metrics, sorted(parent.data.metrics)
    # algo's 2 runs are identical on one CPU: std 0, but no interval (equal runs do not show the std is 0);
    # control is bit-identical by design: [0, 0]
    assert "val_acc/algo/std_ci_low" not in parent.data.metrics
    assert parent.data.metrics["val_acc/control/std_ci_high"] == 0.0
    assert parent.data.metrics["val_acc/algo/n"] == 2  # the failed replica is not counted
    assert parent.data.metrics["val_acc/control/std"] == 0.0  # control is bit-identical on one CPU
    artifacts = [f.path for f in client(mlflow_server).list_artifacts(parent.info.run_id)]
    assert artifacts == ["deviate-figures", "deviate-report.html"]
    # The page's figures as files MLflow's artifact view shows: the curves (mean, band, every run) among them
    shown = [f.path for f in client(mlflow_server).list_artifacts(parent.info.run_id, "deviate-figures")]
    assert "deviate-figures/training-curves-of-val_acc.svg" in shown, shown
    svg = Path(client(mlflow_server).download_artifacts(parent.info.run_id, "deviate-figures/training-curves-of-val_acc"
                                                        ".svg", str(tmp_path))).read_text()  # fmt: skip
    assert svg.startswith("<svg") and 'xmlns="http://www.w3.org/2000/svg"' in svg and "val_acc" in svg
    page = Path(client(mlflow_server).download_artifacts(parent.info.run_id, "deviate-report.html", str(tmp_path)))
    assert "<html" in page.read_text().lower() and "val_acc" in page.read_text()

    assert len(children) == 5
    by_name = {r.info.run_name: r for r in children}
    assert set(by_name) == {"control/replica=0", "control/replica=1", "algo/replica=0", "algo/replica=1",
                            "algo/replica=2"}  # fmt: skip
    failed = by_name["algo/replica=2"]
    assert failed.info.status == "FAILED" and failed.data.tags["deviate.status"] == "failed"
    assert "fails on purpose" in failed.data.tags["deviate.error"]
    for name, run in by_name.items():
        variant, replica = name.split("/replica=")
        tags = run.data.tags
        manifest = json.loads((study / f"experiment={EXPERIMENT}" / f"variant={variant}" / f"replica={replica}"
                               / "run.json").read_text())  # fmt: skip
        assert tags["deviate.experiment"] == EXPERIMENT and tags["deviate.variant"] == variant
        assert tags["deviate.replica"] == replica and tags["deviate.seed"] == str(manifest["seed"])
        assert tags["deviate.determinism"] == "true"  # control and algo both ask for determinism
        assert tags["deviate.torch"].startswith("2.") and tags["deviate.device"].startswith("cpu")
        assert run.data.params["seed"] == str(manifest["seed"])
        assert run.data.params["configuration.variant"] == variant
        if name != "algo/replica=2":
            assert run.info.status == "FINISHED"
            assert "torch" in tags["deviate.determinism_in_effect"].lower(), tags
            # Every value of the history, with its step, equals our Parquet.
            rows = pq.read_table(study / f"experiment={EXPERIMENT}" / f"variant={variant}" / f"replica={replica}"
                                 / "metrics.parquet").to_pylist()  # fmt: skip
            expected = [(r["step"], r["value"]) for r in rows if r["name"] == "val_acc"]
            history = client(mlflow_server).get_metric_history(run.info.run_id, "val_acc")
            assert sorted((m.step, m.value) for m in history) == sorted(expected) and len(expected) == 2
            wall = {r["step"]: r["wall_time"] for r in rows if r["name"] == "val_acc"}
            assert all(m.timestamp == round(wall[m.step] * 1000) for m in history)
    seeds = {by_name[f"algo/replica={k}"].data.tags["deviate.seed"] for k in range(2)}
    assert len(seeds) == 2  # algo varies the seed

    again = deviate("export", "mlflow", str(study), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                    "export-one", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "0 exported" in again.stdout and "5 unchanged" in again.stdout, again.stdout
    parent2, children2 = study_runs(mlflow_server, "export-one")
    assert parent2.info.run_id == parent.info.run_id
    assert sorted(r.info.run_id for r in children2) == sorted(r.info.run_id for r in children)

    # The failed replica runs again (a new attempt): its old run is replaced, the others are left alone.
    from deviate_cb.store.run_directory import RunDirectory

    rerun = RunDirectory(study / f"experiment={EXPERIMENT}" / "variant=algo" / "replica=2")
    rerun.update_manifest(attempt=2, started_at="2026-11-26T00:00:00+00:00")
    third = deviate("export", "mlflow", str(study), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                    "export-one", cwd=tmp_path)  # fmt: skip
    assert third.returncode == 0, third.stderr
    assert "0 exported, 1 replaced, 4 unchanged" in third.stdout, third.stdout
    _, children3 = study_runs(mlflow_server, "export-one")
    assert len(children3) == 5
    (new,) = [r for r in children3 if r.info.run_name == "algo/replica=2"]
    assert new.info.run_id != failed.info.run_id and new.info.status == "FAILED"
    assert client(mlflow_server).get_run(failed.info.run_id).info.lifecycle_stage == "deleted"


@pytest.mark.slow
def test_unreachable_server_is_one_line_and_creates_nothing(study: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = deviate("export", "mlflow", str(study), "--tracking-uri", f"http://127.0.0.1:{port}", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("deviate: error: `--tracking-uri`"), proc.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_bad_study_and_missing_extra(study: Path, mlflow_server: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    before = [e.name for e in client(mlflow_server).search_experiments()]
    for target, more in ((empty, ()), (tmp_path / "missing", ()), (study, ("--metric", "no_such_metric"))):
        proc = deviate("export", "mlflow", str(target), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                       "never-made", *more, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("deviate: error:"), proc.stderr
    assert [e.name for e in client(mlflow_server).search_experiments()] == before

    hide = "import sys; sys.modules['mlflow'] = None; from deviate_cb.cli.main import main; raise SystemExit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", hide, "export", "mlflow", str(empty), "--tracking-uri", mlflow_server],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "pip install 'deviate-cb[mlflow]'" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_sqlite_store_and_a_killed_replica(tmp_path: Path) -> None:
    """Any MLflow tracking URI works (here a SQLite store); a killed replica is KILLED, not FINISHED."""
    from deviate_cb.store.run_directory import RunDirectory, run_path

    root = tmp_path / "runs"
    for k, status in enumerate(["completed", "completed", "killed"]):
        run = RunDirectory(run_path(root, "mlp", "algo", k))
        run.update_manifest(status=status, seed=k, variant="algo", replica=k, signal="SIGKILL" if k == 2 else None)
        run.metrics().append({"step": [3], "epoch": [0], "stage": ["val"], "scope": ["epoch"], "name": ["val_acc"],
                              "value": [0.8 + k / 100], "wall_time": [10.0]})  # fmt: skip
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = deviate("export", "mlflow", str(root), "--tracking-uri", uri, "--no-page", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    parent, children = study_runs(uri, "mlp")
    statuses = {r.info.run_name: (r.info.status, r.data.tags["deviate.status"]) for r in children}
    assert statuses == {"algo/replica=0": ("FINISHED", "completed"), "algo/replica=1": ("FINISHED", "completed"),
                        "algo/replica=2": ("KILLED", "killed")}  # fmt: skip
    assert parent.data.metrics["val_acc/algo/n"] == 2
    assert client(uri).list_artifacts(parent.info.run_id) == []  # --no-page


@pytest.mark.slow
def test_an_exported_study_imports_back_as_it_was_and_deletions_are_marked(
    study: Path, mlflow_server: str, tmp_path: Path
) -> None:
    """Export, then import the MLflow experiment: the study run (a parent) is left out, each replica goes back to
    its experiment and variant by its deviate.* tags with its seed (control never pooled with algo); a run deleted
    in MLflow is marked deleted at the next import, left out of the report, and not exported again."""
    sent = deviate("export", "mlflow", str(study), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                   "round-trip", "--no-page", cwd=tmp_path)  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    back = tmp_path / "back"
    source = ["import", "mlflow", "--tracking-uri", mlflow_server, "--experiment", "round-trip", "--out", str(back)]
    first = deviate(*source, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "1 parent run left out" in first.stderr and "placed by their deviate.experiment" in first.stderr
    assert f"experiment={EXPERIMENT} variant=control: 2 new" in first.stdout, first.stdout
    assert f"experiment={EXPERIMENT} variant=algo: 3 new" in first.stdout, first.stdout

    def placed(store: Path) -> dict[tuple[str, str], tuple[str, Any]]:
        found = {}
        for path in store.glob("experiment=*/variant=*/replica=*/run.json"):
            manifest = json.loads(path.read_text())
            key = (
                manifest["source"]["run_name"]
                if "source" in manifest
                else f"{manifest['variant']}/replica=" + str(manifest["replica"])
            )
            found[(manifest["experiment"], key)] = (manifest["status"], manifest["seed"])
        return found

    assert placed(back) == placed(study)  # experiment, variant, replica's status and seed, each as it was

    def report(store: Path) -> dict[str, dict[str, str]]:
        done = deviate("report", str(store), "--format", "csv", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        import csv
        import io

        return {row["variant"]: row for row in csv.DictReader(io.StringIO(done.stdout)) if row["metric"] == "val_acc"}

    assert {v: r["n"] for v, r in report(back).items()} == {"control": "2", "algo": "2"}

    _, children = study_runs(mlflow_server, "round-trip")
    (gone,) = [r for r in children if r.info.run_name == "control/replica=1"]
    client(mlflow_server).delete_run(gone.info.run_id)
    again = deviate(*source, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"experiment={EXPERIMENT} variant=control: 0 new, 1 updated, 1 unchanged" in again.stdout, again.stdout
    assert "deleted (mlflow DELETED" in again.stdout, again.stdout
    (marked,) = [m for m in map(json.loads, map(Path.read_text, back.glob("**/run.json")))
                 if m["source"]["run_id"] == gone.info.run_id]  # fmt: skip
    assert marked["status"] == "deleted" and "deleted in MLflow" in marked["reason"]
    assert report(back)["control"]["n"] == "1"

    # Exported again: the runs it came from are attached to the new study run, not copied (the deleted one left out)
    resent = deviate("export", "mlflow", str(back), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                     "re-exported", "--no-page", cwd=tmp_path)  # fmt: skip
    assert resent.returncode == 0, resent.stderr
    assert "0 exported, 0 replaced, 0 unchanged, 4 linked" in resent.stdout, resent.stdout
    study_run, copies = study_runs(mlflow_server, "re-exported")
    assert copies == []
    originals = [client(mlflow_server).get_run(r.info.run_id) for r in children if r.info.run_id != gone.info.run_id]
    assert {r.data.tags["deviate.study_run"] for r in originals} == {study_run.info.run_id}
    again = deviate("export", "mlflow", str(back), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                    "re-exported", "--no-page", cwd=tmp_path)  # fmt: skip
    assert "0 exported, 0 replaced, 4 unchanged" in again.stdout, again.stdout

    # A copy of the study folder is the same study: exported again, its runs are found (the one deleted in MLflow
    # is sent again: the study still has it)
    import shutil

    copied = tmp_path / "copied"
    shutil.copytree(study, copied)
    first_again = deviate("export", "mlflow", str(copied), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                          "round-trip", "--no-page", cwd=tmp_path)  # fmt: skip
    assert first_again.returncode == 0, first_again.stderr
    assert "1 exported, 0 replaced, 4 unchanged" in first_again.stdout, first_again.stdout


@pytest.mark.slow
def test_the_study_run_is_updated_in_place_as_the_study_grows(tmp_path: Path) -> None:
    """One study run per experiment whatever the exports: its answers are logged at step = the replicas counted,
    once per change (an unchanged export adds no point), its counts follow the study, and it is FAILED while no
    replica completed; replica runs keep the times they ran."""
    from deviate_cb.store.run_directory import RunDirectory, iso_time, run_path

    root = tmp_path / "runs"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def add(k: int, status: str, experiment: str = "mlp") -> None:
        run = RunDirectory(run_path(root, experiment, "algo", k))
        start = 1_700_000_000 + 100 * k
        run.update_manifest(status=status, seed=k, variant="algo", replica=k, started_at=iso_time(start),
                            ended_at=iso_time(start + 42.5))  # fmt: skip
        run.metrics().append({"step": [3], "epoch": [0], "stage": ["val"], "scope": ["epoch"], "name": ["val_acc"],
                              "value": [0.8 + k / 100], "wall_time": [start + 40.0]})  # fmt: skip

    def export() -> tuple[Any, list[Any]]:
        proc = deviate("export", "mlflow", str(root), "--tracking-uri", uri, "--no-page", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return study_runs(uri, "mlp")

    for k in range(3):
        add(k, "completed")
    parent, children = export()
    history = client(uri).get_metric_history(parent.info.run_id, "val_acc/algo/n")
    assert [(m.step, m.value) for m in history] == [(3, 3.0)]
    assert parent.data.tags["deviate.replicas"] == "3" and "replicas" not in parent.data.params
    for child in children:  # the times the replica ran, not the export's
        k = int(child.info.run_name.rpartition("=")[2])
        assert child.info.start_time == (1_700_000_000 + 100 * k) * 1000
        assert child.info.end_time == child.info.start_time + 42_500

    again, _ = export()  # nothing changed: no new point
    assert again.info.run_id == parent.info.run_id
    assert len(client(uri).get_metric_history(parent.info.run_id, "val_acc/algo/n")) == 1

    for k in (3, 4):
        add(k, "completed")
    add(5, "failed")
    grown, children = export()
    assert grown.info.run_id == parent.info.run_id and len(children) == 6
    history = client(uri).get_metric_history(parent.info.run_id, "val_acc/algo/n")
    assert sorted((m.step, m.value) for m in history) == [(3, 3.0), (5, 5.0)]
    assert grown.data.tags["deviate.replicas"] == "6" and grown.data.tags["deviate.replicas_completed"] == "5"
    assert grown.info.status == "FINISHED"

    for k in range(2):  # another experiment whose replicas all failed: its study run is no success
        add(k, "failed", experiment="broken")
    export()
    broken, _ = study_runs(uri, "broken")
    assert broken.info.status == "FAILED" and broken.data.tags["deviate.replicas_completed"] == "0"
