"""``--isolate`` on pytorch/examples' shape (issue 43, items 1 and 2), replicated as a user would (CPU only).

``isolation_examples/`` is an examples folder: ``classifier/main.py`` is run from its own folder, reads
``../data/points.csv`` and writes beside itself: the model of the best validation loss to ``best.pt``
(``torch.save``, loaded back for the test metrics) and one line per epoch appended to ``history.txt``. The
test copies the folder and leaves in ``classifier/`` what an earlier run without ``--isolate`` left there (a
``best.pt`` and a ``history.txt``), then runs ``deviate-replicate -n 2 --parallel 2 --isolate --variant algo``
from ``classifier/``: from each replica's working directory ``..`` holds the examples folder's ``data``, each
replica's ``best.pt`` and ``history.txt`` are its own (the earlier run's files are left byte for byte, the
history is copied before it is appended to), the two replicas' models and metrics differ, and no shared output
is reported.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from real_projects_helpers import PROJECTS, Replicated, child_env, deviate_replicate, file_tree, require
from test_real_projects import METRIC_REGEXES, assert_completed

from deviate_cb.report.answers.problems import study_problems

pytestmark = pytest.mark.slow

EARLIER_HISTORY = "1 0.700000\n2 0.650000\n"


def _earlier_checkpoint(path: Path) -> None:
    """A ``best.pt`` as a run without ``--isolate`` left it: the same model's state, another training's values."""
    import torch
    from torch import nn

    torch.manual_seed(12345)
    torch.save(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).state_dict(), path)


def test_isolated_replicas_reach_dotdot_data_and_keep_their_own_checkpoints(tmp_path: Path) -> None:
    require("torch", "torch")
    import torch

    examples = Path(shutil.copytree(PROJECTS / "isolation_examples", tmp_path / "examples"))
    project = examples / "classifier"
    _earlier_checkpoint(project / "best.pt")
    (project / "history.txt").write_text(EARLIER_HISTORY)
    earlier = (project / "best.pt").read_bytes()
    (tmp_path / "tmpdir").mkdir()
    out = tmp_path / "runs"
    argv = [
        str(deviate_replicate()),
        *("-n", "2", "--parallel", "2", "--isolate", "--variant", "algo", "--out", str(out)),
        *("--experiment", "classifier", *METRIC_REGEXES, "--", "python", "main.py"),
    ]
    before = file_tree(examples)
    proc = subprocess.run(
        argv,
        cwd=project,
        env=child_env({"TMPDIR": str(tmp_path / "tmpdir")}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    done = Replicated(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        out,
        "classifier",
        "algo",
        argv=argv,
        project=examples,
        project_before=before,
        project_after=file_tree(examples),
    )
    assert_completed(done, 2)
    # the earlier run's files, the data and the script are left exactly as they were
    assert done.project_after == done.project_before, done.output
    assert (project / "best.pt").read_bytes() == earlier and (project / "history.txt").read_text() == EARLIER_HISTORY
    models = []
    for replica in range(2):
        manifest = done.manifest(replica)
        workdir = Path(manifest["workdir"])
        assert workdir.name == "classifier" and workdir.parent == done.run_dir(replica) / ".workdir"
        assert (workdir / ".." / "data").resolve() == (examples / "data").resolve()  # what `..` reaches
        assert not (workdir / "best.pt").is_symlink() and not (workdir / "history.txt").is_symlink()
        assert (workdir / "main.py").is_symlink()  # what is only read stays a link
        history = (workdir / "history.txt").read_text()
        assert history.startswith(EARLIER_HISTORY) and len(history.splitlines()) == 2 + 6, history
        models.append(torch.load(workdir / "best.pt"))
        assert not manifest.get("outside_writes", {}).get("paths"), manifest.get("outside_writes")
        assert "outside_reads" not in manifest
    assert any(not torch.equal(models[0][k], models[1][k]) for k in models[0]), "the replicas saved the same model"
    assert done.final(0) != done.final(1), (done.final(0), done.final(1))
    assert "wrote the same paths" not in done.stdout + done.stderr, done.output
    kinds = {problem.kind for problem in study_problems(out)}
    assert not kinds & {"shared_outputs", "read_other_replica"}, kinds
    assert json.loads((done.run_dir(0) / "run.json").read_text())["configuration"]["isolate"] is True
