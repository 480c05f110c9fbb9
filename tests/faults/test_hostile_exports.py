"""``deviate export mlflow`` of an untrusted store, to a server that may stall (issue 45, items 8 and 4's network).

A real study: ``deviate-replicate`` (the console script, from the project's folder) trains a tiny Lightning model
twice; the model logs names MLflow refuses (``val//acc``, ``/lead``, ``..``, ``acc (%)``, a 300-character name,
and ``a+b`` / ``a=b``, which the old character substitution made one series). It goes to a real MLflow server on
loopback (tests/trackers/conftest.py's fixture), directly or through a tiny proxy that stalls one API call.

- refused names are mapped one to one to accepted ones (MLflow's own validators agree), the mapping is a tag, one
  stderr note names them; an over-long param value is cut with a marker and said; no run is left RUNNING;
- a metrics file that is garbage, or a FIFO, costs its replica's metrics only: one warning naming the file, the
  other replica's histories exported, exit 0 (as ``deviate report``);
- a server that answers ``/health`` but stalls on its API: the export ends within ``--timeout`` with one line
  naming the server and what it waited for, exit 2, no traceback; a stall after a run was created ends that run
  FAILED and advises the rerun, which then finishes; SIGTERM during a stall ends the run KILLED.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.replicate_helpers import child_env

_spec = importlib.util.spec_from_file_location(
    "tracker_fixtures", Path(__file__).resolve().parents[1] / "trackers" / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
mlflow_server = _fixtures.mlflow_server  # the suite's real MLflow server on loopback
_quiet_trackers = _fixtures._quiet_trackers

pytestmark = pytest.mark.slow

LONG = "x" * 300
NAMES = ("val//acc", "/lead", "..", "acc (%)", "a+b", "a=b", LONG, "val_acc")
TRAINER = f"""
import lightning as L
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

NAMES = {NAMES!r}


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
        acc = (self.net(x).argmax(-1) == y).float().mean()
        for k, name in enumerate(NAMES):
            self.log(name, acc + k)  # each name its own values: a merged series would show

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader(shuffle):
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(32, 4, generator=gen)
    y = (x[:, 0] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=8, shuffle=shuffle)


def main(ctx):
    torch.set_num_threads(1)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu",
                        default_root_dir=ctx.run_dir)
    trainer.fit(Tiny(), loader(True), loader(False))
"""


def _deviate(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", *args], cwd=cwd, env=child_env(), capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two replicas of the tiny trainer, replicated for real; each run.json gets a refused param key and a long
    value (the store is untrusted)."""
    project = tmp_path_factory.mktemp("hostile-export")
    (project / "train.py").write_text(TRAINER)
    script = Path(sys.executable).parent / "deviate-replicate"
    if not script.exists():
        pytest.fail(f"deviate-replicate is not installed next to {sys.executable} (pip install -e .)")
    proc = subprocess.run(
        [str(script), "--trainer", "train.py:main", "-n", "2", "--experiment", "tiny", "--variant", "algo", "--out",
         "runs", "--parallel", "1"],
        cwd=project, env=child_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for manifest in (project / "runs").glob("experiment=*/variant=*/replica=*/run.json"):
        data = json.loads(manifest.read_text())
        data["configuration"] = {**data.get("configuration", {}), "opt//lr": 0.1, "notes": "n" * 7000}
        manifest.write_text(json.dumps(data))
    return project


@pytest.fixture()
def study(trained: Path, tmp_path: Path) -> Path:
    """A copy of the trained study that a test may damage."""
    shutil.copytree(trained / "runs", tmp_path / "runs")
    return tmp_path / "runs"


def _runs(uri: str, experiment: str) -> list[Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    return list(client.search_runs([found.experiment_id], max_results=1000))


def _children(uri: str, experiment: str) -> dict[str, Any]:
    return {r.info.run_name: r for r in _runs(uri, experiment) if r.data.tags.get("deviate.role") == "replica"}


def test_refused_names_are_mapped_one_to_one_and_recorded(study: Path, mlflow_server: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient
    from mlflow.utils.validation import _validate_metric_name, _validate_param_name

    done = _deviate("export", "mlflow", str(study), "--tracking-uri", mlflow_server, "--mlflow-experiment", "names",
                    "--no-page", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    notes = [line for line in done.stderr.splitlines() if "renamed" in line]
    assert len(notes) == 1 and "MLflow refuses were renamed: '..' -> '_..'" in notes[0], done.stderr
    cut = [line for line in done.stderr.splitlines() if "truncated" in line]
    assert len(cut) == 1 and "configuration.notes" in cut[0], done.stderr

    runs = _runs(mlflow_server, "names")
    assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    children = _children(mlflow_server, "names")
    assert len(children) == 2
    client = MlflowClient(tracking_uri=mlflow_server)
    for run in children.values():
        assert run.info.status == "FINISHED"
        renamed = json.loads(run.data.tags["deviate.metric_names"])  # tracker name -> original
        back = {old: new for new, old in renamed.items()}
        assert set(back) == set(NAMES) - {"val_acc"}, renamed
        names = {name: back.get(name, name) for name in NAMES}
        assert len(set(names.values())) == len(NAMES)  # no two names became one
        for k, name in enumerate(NAMES):
            _validate_metric_name(names[name])
            history = client.get_metric_history(run.info.run_id, names[name])
            assert len(history) == 2, (name, names[name])
            assert all(k <= m.value <= k + 1 for m in history), (name, [m.value for m in history])
        params = run.data.params
        param_names = json.loads(run.data.tags["deviate.param_names"])
        assert param_names == {next(p for p in params if p.startswith("configuration.opt")): "configuration.opt//lr"}
        for key in params:
            _validate_param_name(key)
        assert params["configuration.notes"].endswith("... [truncated: 7000 characters]")

    again = _deviate("export", "mlflow", str(study), "--tracking-uri", mlflow_server, "--mlflow-experiment", "names",
                     "--no-page", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0 and "2 unchanged" in again.stdout, again.stdout + again.stderr


def test_a_damaged_metrics_file_costs_its_replica_only(study: Path, mlflow_server: str, tmp_path: Path) -> None:
    fifo_study = tmp_path / "fifo"
    shutil.copytree(study, fifo_study)
    garbage = sorted(study.glob("experiment=*/variant=*/replica=*"))[0] / "metrics.parquet"
    garbage.write_bytes(b"PAR1 this is not parquet" * 10)
    fifo = sorted(fifo_study.glob("experiment=*/variant=*/replica=*"))[1] / "metrics.parquet"
    fifo.unlink()
    os.mkfifo(fifo)
    for folder, damaged, experiment in ((study, garbage, "damaged"), (fifo_study, fifo, "fifo")):
        done = _deviate("export", "mlflow", str(folder), "--tracking-uri", mlflow_server, "--mlflow-experiment",
                        experiment, "--no-page", cwd=tmp_path, timeout=120)  # fmt: skip
        report = _deviate("report", str(folder), cwd=tmp_path, timeout=120)
        assert done.returncode == report.returncode == 0, done.stderr + report.stderr
        assert "Traceback" not in done.stderr
        naming = [line for line in done.stderr.splitlines() if str(damaged) in line]
        assert len(naming) == 1 and "warning" in naming[0], done.stderr
        children = _children(mlflow_server, experiment)
        assert len(children) == 2, done.stdout + done.stderr
        assert not [r for r in _runs(mlflow_server, experiment) if r.info.status == "RUNNING"]
        for run in children.values():
            if Path(run.data.tags["deviate.run_dir"]) == damaged.parent:
                assert not run.data.metrics
            else:
                assert "train_loss" in run.data.metrics and "val_acc" in run.data.metrics


class _Stalling(BaseHTTPRequestHandler):
    """Answers /health; forwards other requests to ``upstream`` (none: answers nothing) except those whose path
    holds ``stall``, on which it sleeps until released, or ``refuse``, which it refuses as MLflow does (400)."""

    upstream: str | None = None
    stall = "/api/"
    refuse = ""
    release = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        if self.path.startswith("/health"):
            self._answer(200, b"OK", "text/plain")
            return
        if self.refuse and self.refuse in self.path:  # what an MLflow server says when it refuses a request
            body = json.dumps({"error_code": "INVALID_PARAMETER_VALUE", "message": "refused by this test"})
            self._answer(400, body.encode(), "application/json")
            return
        if self.stall in self.path or self.upstream is None:
            self.release.wait(120)
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        request = urllib.request.Request(self.upstream + self.path, data=body, method=self.command,
                                         headers={"Content-Type": self.headers.get("Content-Type", "")})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                self._answer(answer.status, answer.read(), answer.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as exc:
            self._answer(exc.code, exc.read(), exc.headers.get("Content-Type", ""))

    def _answer(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_DELETE = _handle


@pytest.fixture()
def stalling() -> Iterator[Any]:
    """``start(upstream, stall)`` -> the URI of a loopback server stalling on paths holding ``stall``."""
    servers: list[ThreadingHTTPServer] = []
    release = threading.Event()

    def start(upstream: str | None, stall: str = "/api/", refuse: str = "") -> str:
        handler = type(
            "Handler", (_Stalling,), {"upstream": upstream, "stall": stall, "refuse": refuse, "release": release}
        )
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    release.set()
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_server_that_stalls_on_its_api_stops_the_export_within_the_timeout(
    study: Path, stalling: Any, tmp_path: Path
) -> None:
    uri = stalling(None)
    started = time.monotonic()
    done = _deviate("export", "mlflow", str(study), "--tracking-uri", uri, "--timeout", "8", "--no-page",
                    cwd=tmp_path, timeout=200)  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert elapsed < 60, elapsed  # 8 s of timeout, plus reading the study; the old code waited 120 s x 8 tries
    assert "Traceback" not in done.stderr
    assert f"deviate: waiting for MLflow at {uri} (search experiments)..." in done.stderr.splitlines()
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert (
        len(errors) == 1
        and uri in errors[0]
        and "did not answer (search experiments) within 8 s (--timeout)" in errors[0]
    ), done.stderr


def test_a_stall_after_a_run_was_created_ends_it_and_the_rerun_finishes(
    study: Path, mlflow_server: str, stalling: Any, tmp_path: Path
) -> None:
    uri = stalling(mlflow_server, stall="/runs/log-batch")
    done = _deviate("export", "mlflow", str(study), "--tracking-uri", uri, "--timeout", "4", "--no-page",
                    "--mlflow-experiment", "stalled", cwd=tmp_path, timeout=200)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "error" in line]
    assert uri in line and "did not answer (log batch)" in line and "ended FAILED" in line, line
    assert "run the same command again to finish" in line, line
    runs = _runs(mlflow_server, "stalled")
    assert runs and not [r for r in runs if r.info.status == "RUNNING"], [
        (r.info.run_name, r.info.status) for r in runs
    ]

    rerun = _deviate("export", "mlflow", str(study), "--tracking-uri", mlflow_server, "--no-page",
                     "--mlflow-experiment", "stalled", cwd=tmp_path)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    children = _children(mlflow_server, "stalled")
    assert len(children) == 2 and all(r.info.status == "FINISHED" for r in children.values())


def test_a_refused_request_ends_the_run_and_does_not_advise_a_rerun(
    study: Path, mlflow_server: str, stalling: Any, tmp_path: Path
) -> None:
    uri = stalling(mlflow_server, stall="/never", refuse="/runs/log-batch")
    done = _deviate("export", "mlflow", str(study), "--tracking-uri", uri, "--no-page", "--mlflow-experiment",
                    "refused", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "error" in line]
    assert "refused by this test" in line and "ended FAILED" in line, line
    assert "would stop the same way" in line and "again to finish" not in line, line
    runs = _runs(mlflow_server, "refused")
    assert runs and not [r for r in runs if r.info.status == "RUNNING"], [r.info.status for r in runs]


def test_sigterm_during_a_stall_ends_the_run_killed(
    study: Path, mlflow_server: str, stalling: Any, tmp_path: Path
) -> None:
    uri = stalling(mlflow_server, stall="/runs/log-batch")
    process = subprocess.Popen(
        [sys.executable, "-m", "deviate_cb.cli.main", "export", "mlflow", str(study), "--tracking-uri", uri,
         "--timeout", "120", "--no-page", "--mlflow-experiment", "terminated"],
        cwd=tmp_path, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        waiting = ""
        deadline = time.monotonic() + 120
        while "waiting for MLflow" not in waiting and time.monotonic() < deadline:
            waiting = process.stderr.readline()
            assert waiting or process.poll() is None, "the export ended before it stalled"
        assert "(log batch)" in waiting, waiting
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    runs = _runs(mlflow_server, "terminated")
    statuses = {r.info.run_name: r.info.status for r in runs}
    assert "KILLED" in statuses.values() and "RUNNING" not in statuses.values(), statuses
