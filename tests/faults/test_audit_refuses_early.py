"""``deviate audit`` refuses, before training, a program it cannot audit (issue 26, item 8), with real subprocesses.

The audit hooks into a Lightning ``Trainer``'s fit or a Keras ``Model.fit``; a plain PyTorch loop has nothing to
hook. Before, such a program trained to its end (here 60 s) and the audit then exited 3 pointing at a stderr.log
that said nothing. Now:

- a plain torch script (``-- python loop.py``) or a ``--trainer loop.py:main`` whose files import neither Lightning
  nor Keras is refused at once: exit 3 in well under the training's time, one error line saying why, nothing run;
- a project that reaches Lightning through a package of its own (``from mypkg.model import train``, ``mypkg``
  importing lightning) is not refused: it runs, and when it trains without a ``Trainer.fit`` after all, the one
  error line says so and how long each replica ran, instead of pointing at an empty stderr.log; a replica that
  takes an optimizer step outside any fit is stopped there (``deviate_cb.launch.fit_guard``), not at its end.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "launch"))

from replicate_helpers import child_env  # noqa: E402

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


def write_loop(folder: Path, steps: int = 60, pause: float = 1.0) -> Path:
    path = folder / "loop.py"
    path.write_text(LOOP.replace("STEPS", str(steps)).replace("PAUSE", str(pause)))
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


def test_a_plain_torch_script_is_refused_before_it_trains(tmp_path: Path) -> None:
    write_loop(tmp_path)  # 60 s of training
    done, took = audit(tmp_path, "--", "python", "loop.py")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert took < 30, (took, done.stderr)
    assert error_lines(done.stderr) == [
        "deviate: error: cannot audit `python loop.py`: it imports neither Lightning nor Keras (loop.py read), and "
        "the audit hooks into a Lightning Trainer's fit or a Keras Model.fit; a plain training loop has nothing to "
        "hook, so nothing was run"
    ], done.stderr
    assert done.stdout == "" and not (tmp_path / "runs").exists()


def test_a_trainer_function_with_a_plain_loop_is_refused_before_it_trains(tmp_path: Path) -> None:
    write_loop(tmp_path)
    (tmp_path / "helpers.py").write_text("import math\nimport torch.nn as nn\n")  # its own module: read too
    (tmp_path / "loop.py").write_text("import helpers\n" + (tmp_path / "loop.py").read_text())
    done, took = audit(tmp_path, "--trainer", "loop.py:main", "-n", "3")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert took < 30, (took, done.stderr)
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "deviate: error: cannot audit loop.py:main: it imports neither Lightning nor Keras (loop.py and 1 module(s) "
        "of its own read), and the audit hooks into a Lightning Trainer's fit or a Keras Model.fit"
    ), lines
    assert not (tmp_path / "runs").exists()


def test_lightning_reached_through_the_projects_own_package_is_not_refused(tmp_path: Path) -> None:
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(
        "import lightning  # noqa: F401  (the project's Lightning, deeper than the script)\n"
        + LOOP.replace("STEPS", "3").replace("PAUSE", "0.5").replace("def main", "def train").split("\n\nif")[0]
    )
    (tmp_path / "train.py").write_text("from mypkg.model import train\n\nif __name__ == '__main__':\n    train()\n")
    done, _ = audit(tmp_path, "--parallel", "2", "--", "python", "train.py")
    assert "cannot audit" not in done.stderr, done.stderr
    assert (tmp_path / "runs").is_dir()  # it ran
    # ... and trained without a Trainer.fit after all: the one line says that, not "see stderr.log"
    assert done.returncode == 3, (done.stdout, done.stderr)
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "deviate: error: nothing to audit: replica 0 trained without a Lightning Trainer.fit or Keras Model.fit: "
        "stopped at its first optimizer step, after "
    ), lines
    assert "; replica 1 trained without a Lightning Trainer.fit" in lines[0] and "stderr.log" not in lines[0]


def test_a_loop_outside_any_fit_is_stopped_at_its_first_optimizer_step(tmp_path: Path) -> None:
    """The scan cannot tell (the project imports Lightning), so the replica starts; its first optimizer step outside
    any fit stops it, instead of its 60 s of training."""
    (tmp_path / "train.py").write_text(
        "import lightning  # noqa: F401\n" + LOOP.replace("STEPS", "60").replace("PAUSE", "1.0")
    )
    done, took = audit(tmp_path, "--", "python", "train.py")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert took < 50, (took, done.stderr)  # 2 replicas x 60 s had they trained to the end
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "deviate: error: nothing to audit: replica 0 trained without a Lightning Trainer.fit or Keras Model.fit: "
        "stopped at its first optimizer step, after "
    ), lines
    assert "stderr.log" not in lines[0]
