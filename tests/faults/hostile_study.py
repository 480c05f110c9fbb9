"""A real study to plant hostile files in: ``deviate-replicate`` (the console script, from the project's folder)
runs a tiny PyTorch model ``n`` times in command mode. Shared by the hostile-file tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import child_env

__all__ = ["DEEP", "TIMEOUT_S", "bin_path", "launch_args", "make_study"]

TRAIN = """\
import sys

import torch

seed = int(sys.argv[sys.argv.index("--seed") + 1])
torch.manual_seed(seed)
x = torch.randn(64, 4)
y = (x.sum(1) > 0).float()
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
for step in range(20):
    loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
acc = ((model(x).squeeze(1) > 0).float() == y).float().mean().item()
print(f"acc={acc + seed / 1000}")
"""
TIMEOUT_S = 60  # a command over a hostile file that takes longer is taken as hung
DEEP = "[" * 200_000 + "]" * 200_000  # JSON nested past any recursion limit


def launch_args(n: int) -> tuple[str, ...]:
    """The launch's arguments after ``--out DIR``: ``n`` replicas of experiment ``e``, variant ``algo``."""
    return ("-n", str(n), "--experiment", "e", "--variant", "algo", "--metric-regex", r"acc=(?P<acc>\S+)", "--",
            "python", "train.py", "--seed", "{seed}")  # fmt: skip


def bin_path(name: str) -> str:
    """The console script ``name`` installed next to this Python."""
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable} (pip install -e .)")
    return str(script)


def make_study(project: Path, n: int) -> Path:
    """``project`` with ``train.py`` and a study of ``n`` completed replicas in ``project/runs``; ``project``."""
    pytest.importorskip("torch")
    (project / "train.py").write_text(TRAIN)
    done = subprocess.run([bin_path("deviate-replicate"), "--out", "runs", *launch_args(n)], cwd=project,
                          env=child_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return project
