"""``deviate audit`` refuses, before training, a program it cannot audit (issue 26, item 8; issue 28, item 1), with
real subprocesses.

The audit hooks a Lightning ``Trainer``'s fit, a Keras ``Model.fit`` or, for a plain PyTorch loop, torch's global
module and optimizer hooks (``deviate_cb.audit.recording.plain_loop``). Before, a program with nothing to hook trained
to its end (here 60 s) and the audit then exited 3 pointing at a stderr.log that said nothing. Now:

- a script (``-- python loop.py``) or a ``--trainer loop.py:main`` whose files import none of torch, Lightning and
  Keras is refused at once: exit 3 in well under the training's time, one error line saying why, nothing run;
- a plain PyTorch loop is no longer refused: it is audited (here reached through a package of the project's own
  that also imports Lightning but never calls a ``Trainer.fit``), exit 0, a record of framework ``torch``;
- a torch program that never takes a ``torch.optim`` optimizer step (it updates its parameters by hand) has no
  step to audit: the one error line says so and how long each replica ran, instead of pointing at stderr.log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

NUMPY_LOOP = """\
import time

import numpy


def main():
    weights = numpy.zeros(4)
    for _ in range(STEPS):
        weights -= 0.1 * (weights - 1.0)
        time.sleep(PAUSE)


if __name__ == "__main__":
    main()
"""

LOOP = """\
import time

import torch


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(PAUSE)


if __name__ == "__main__":
    main()
"""


def write_loop(folder: Path, steps: int = 60, pause: float = 1.0, source: str = NUMPY_LOOP) -> Path:
    path = folder / "loop.py"
    path.write_text(source.replace("STEPS", str(steps)).replace("PAUSE", str(pause)))
    return path


def audit(tmp_path: Path, *words: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--out", str(tmp_path / "runs"), *words],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, time.monotonic() - started


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("deviate: error:")]


def test_a_program_with_nothing_to_hook_is_refused_before_it_trains(tmp_path: Path) -> None:
    write_loop(tmp_path)  # 60 s of training, NumPy only
    done, took = audit(tmp_path, "--", "python", "loop.py")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert took < 30, (took, done.stderr)
    assert error_lines(done.stderr) == [
        "deviate: error: cannot audit `python loop.py`: it imports neither Lightning nor Keras nor torch (loop.py "
        "read), and the audit hooks into a Lightning Trainer's fit, a Keras Model.fit or torch's modules and "
        "optimizers (a plain PyTorch loop); with none of them there is nothing to hook, so nothing was run"
    ], done.stderr
    assert done.stdout == "" and not (tmp_path / "runs").exists()


def test_a_trainer_function_with_nothing_to_hook_is_refused_before_it_trains(tmp_path: Path) -> None:
    write_loop(tmp_path)
    (tmp_path / "helpers.py").write_text("import math\nimport numpy\n")  # its own module: read too
    (tmp_path / "loop.py").write_text("import helpers\n" + (tmp_path / "loop.py").read_text())
    done, took = audit(tmp_path, "--trainer", "loop.py:main", "-n", "3")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert took < 30, (took, done.stderr)
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "deviate: error: cannot audit loop.py:main: it imports neither Lightning nor Keras nor torch (loop.py and 1 "
        "module(s) of its own read), and the audit hooks into a Lightning Trainer's fit, a Keras Model.fit or "
        "torch's modules"
    ), lines
    assert not (tmp_path / "runs").exists()


def test_a_plain_torch_loop_is_audited_not_refused(tmp_path: Path) -> None:
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(
        "import lightning  # noqa: F401  (the project's Lightning, deeper than the script; no fit is ever called)\n"
        + LOOP.replace("STEPS", "3").replace("PAUSE", "0.0").replace("def main", "def train").split("\n\nif")[0]
    )
    (tmp_path / "train.py").write_text("from mypkg.model import train\n\nif __name__ == '__main__':\n    train()\n")
    done, _ = audit(tmp_path, "--parallel", "2", "--", "python", "train.py")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "replicas 0, 1 agree bit for bit over 3 audited training step(s)" in done.stdout, done.stdout
    for replica in (0, 1):
        run = tmp_path / "runs" / "experiment=train" / "variant=control" / f"replica={replica}"
        record = json.loads((run / "run.json").read_text())["audit"]
        assert (record["framework"], record["recorded_steps"]) == ("torch", 3)


def test_a_torch_program_without_an_optimizer_step_has_nothing_to_audit(tmp_path: Path) -> None:
    by_hand = LOOP.replace("        optimizer.step()\n", "        with torch.no_grad():\n"
                           "            for p in model.parameters():\n                p -= 0.1 * p.grad\n")  # fmt: skip
    assert "optimizer.step()" not in by_hand
    write_loop(tmp_path, steps=3, pause=0.0, source=by_hand)
    done, _ = audit(tmp_path, "--parallel", "2", "--", "python", "loop.py")
    assert done.returncode == 3, (done.stdout, done.stderr)
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "deviate: error: nothing to audit: replica 0 trained without a Lightning Trainer.fit, a Keras Model.fit or a "
        "torch.optim optimizer step, so nothing was hooked (it ran "
    ), lines
    assert "; replica 1 trained without a Lightning Trainer.fit" in lines[0] and "stderr.log" not in lines[0]
