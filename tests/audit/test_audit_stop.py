"""``deviate audit --steps K`` stops every replica once its K audited steps are recorded (issue 43, item 7).

A Lightning fit of 6 steps and a Keras fit of 200, audited for 3: each replica's fit ends after step 3
(``trainer.should_stop``, ``model.stop_training``), the launcher records it ``audited`` (never ``completed``), and the
audit answers exit 0. ``--finish`` trains to the end: ``completed``. (The plain PyTorch loop's stop is in
``test_plain_torch.py`` and ``integrations/real_projects/test_silent_and_audit_projects.py``.)
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.replicate_helpers import child_env

REPO = Path(__file__).resolve().parents[2]
TRAINERS = Path(__file__).resolve().parent / "trainers"

AGREE = "replicas 0, 1 agree bit for bit over 3 audited training step(s)"


def _audit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--steps", "3", "--parallel", "2"]
    return subprocess.run(
        [*argv, "--out", str(tmp_path / "runs"), *args],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _manifests(tmp_path: Path, experiment: str) -> list[dict[str, Any]]:
    folder = tmp_path / "runs" / f"experiment={experiment}" / "variant=control"
    return [json.loads((folder / f"replica={k}" / "run.json").read_text()) for k in (0, 1)]


@pytest.mark.slow
def test_a_lightning_fit_stops_after_its_audited_steps_and_finish_trains_on(tmp_path: Path) -> None:
    done = _audit(tmp_path, "--trainer", f"{TRAINERS / 'lightning_cases.py'}:deterministic")
    assert done.returncode == 0 and AGREE in done.stdout, (done.stdout, done.stderr)
    for manifest in _manifests(tmp_path, "lightning_cases"):
        assert manifest["status"] == "audited" and manifest["audit_stopped"] == {"after_steps": 3, "by": "lightning"}
        assert manifest["fit_steps"]["done"] == 3 and manifest["fit_steps"]["planned"] == 6
    finished = _audit(tmp_path, "--finish", "--trainer", f"{TRAINERS / 'lightning_cases.py'}:deterministic")
    assert finished.returncode == 0 and AGREE in finished.stdout, (finished.stdout, finished.stderr)
    for manifest in _manifests(tmp_path, "lightning_cases"):
        assert manifest["status"] == "completed" and "audit_stopped" not in manifest
        assert manifest["fit_steps"]["done"] == 6


@pytest.mark.slow
def test_a_keras_fit_stops_after_its_audited_steps(tmp_path: Path) -> None:
    if importlib.util.find_spec("keras") is None:
        pytest.skip("keras is not installed: pip install 'deviate-cb[keras]'")
    done = _audit(tmp_path, "--keras-backend", "torch", "--trainer", f"{TRAINERS / 'resume_keras.py'}:no_backup")
    assert done.returncode == 0 and AGREE in done.stdout, (done.stdout, done.stderr)
    for manifest in _manifests(tmp_path, "resume_keras"):
        assert manifest["status"] == "audited" and manifest["audit_stopped"] == {"after_steps": 3, "by": "keras"}
        assert manifest["fit_steps"]["done"] == 3 and manifest["fit_steps"]["planned"] == 200
