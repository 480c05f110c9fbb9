"""``deviate audit`` on real Keras 3 training, on each backend (TensorFlow, torch, JAX), CPU only.

``trainers/audit_cases.py``: ``deterministic`` must agree bit for bit (exit 0); ``noisy_layer``'s ``jitter`` layer
adds unseeded noise while training, so the replicas diverge at step 0 (exit 1). On torch the audit sees every
layer's output and names ``net/jitter`` (forward); on TensorFlow and JAX, whose compiled train step a callback
cannot look into, the first thing it sees differ is the loss, and it says what it does not cover.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.keras_helpers import TRAINERS

pytestmark = pytest.mark.slow

CASES = TRAINERS / "audit_cases.py"
REPO = Path(__file__).resolve().parents[2]


def _audit(case: str, backend: str, tmp_path: Path) -> tuple[int, dict[str, Any]]:
    from tests.helpers.replicate_helpers import child_env

    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--trainer", f"{CASES}:{case}", "--keras-backend",
         backend, "--parallel", "2", "--steps", "3", "--out", str(tmp_path / "runs"), "--format", "json"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode in (0, 1), (done.returncode, done.stdout, done.stderr)
    return done.returncode, json.loads(done.stdout)


def test_a_deterministic_keras_training_agrees(backend: str, tmp_path: Path) -> None:
    code, found = _audit("deterministic", backend, tmp_path)
    assert code == 0 and found["diverged"] is False and found["steps_compared"] == 3
    if backend == "torch":
        assert found["not_covered"] is None
    else:
        assert "compiled train step" in found["not_covered"]


def test_a_nondeterministic_keras_layer_is_found(backend: str, tmp_path: Path) -> None:
    code, found = _audit("noisy_layer", backend, tmp_path)
    assert code == 1 and found["step"] == 0
    if backend == "torch":  # every layer's output is seen: the jitter layer itself
        assert (found["kind"], found["module"], found["name"]) == ("forward", "net/jitter", "net/jitter")
        assert [d["name"] for d in found["next"][:1]] == ["net/dense_out"]
    else:  # only the loss and the variables: the loss is the first thing that differs
        assert (found["kind"], found["name"]) == ("loss", "loss")
        assert found["next"][0]["kind"] == "parameter"
