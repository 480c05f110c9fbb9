"""Shared set-up of the tracker tests (deviate import / deviate export): a real MLflow tracking server.

``mlflow_server`` (session-scoped) starts ``mlflow server`` on loopback with a SQLite backend in a temporary
folder, waits until it answers ``/health``, yields its URI (``http://127.0.0.1:PORT``) and stops the server's
whole process group after the session. Nothing is skipped: without mlflow the fixture fails with the install hint.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

#: What every tracker test runs with: no usage reports, no prompts, nothing sent anywhere.
QUIET_TRACKERS = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "WANDB_DISABLE_CODE": "true",
}
SERVER_START_TIMEOUT_S = 180.0


@pytest.fixture(autouse=True)
def _quiet_trackers(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in QUIET_TRACKERS.items():
        monkeypatch.setenv(name, value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _mlflow_executable() -> str:
    beside = Path(sys.executable).with_name("mlflow")
    if beside.exists():
        return str(beside)
    found = shutil.which("mlflow")
    if found is None:
        pytest.fail("mlflow is not installed: pip install 'deviate-cb[mlflow]' (make test installs it)", pytrace=False)
    return found


def _answers(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def mlflow_server() -> Iterator[str]:
    """URI of a real MLflow tracking server on loopback (SQLite backend, one worker), stopped after the session."""
    executable = _mlflow_executable()
    folder = Path(tempfile.mkdtemp(prefix="deviate-mlflow-server-"))
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    log = (folder / "server.log").open("wb")
    env = {**os.environ, **QUIET_TRACKERS}
    command = [
        executable,
        "server",
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--default-artifact-root",
        str(folder / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not _answers(uri):
            if process.poll() is not None:
                log.flush()
                tail = (folder / "server.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"mlflow server exited with {process.returncode}:\n{tail}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not answer {uri}/health in {SERVER_START_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        yield uri
    finally:
        _stop(process)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
