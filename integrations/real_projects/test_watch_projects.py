"""A project inside the temporary directory is watched, and a shared output is one problem (issue 43, items 3, 8).

``watch_in_temp`` is a plain PyTorch loop that saves ``out/ckpt.pt`` (``torch.save``, a fixed relative path) and
keeps scratch copies through ``tempfile`` (``mkstemp`` beside the checkpoint, a ``TemporaryDirectory``). Copied
into the temporary directory, as a clone in ``/tmp`` or a Slurm job's node-local ``$TMPDIR`` is, and replicated
from there as a user would (``deviate-replicate -n 2 --parallel 2 --variant algo``, then one ``control`` replica
into the same study): every replica writes the one ``out/ckpt.pt``, which the launcher names once at the end of
each launch, with every group and replica that wrote it, and ``deviate report`` names once on stderr and once in
its table; the ``tempfile`` copies are nobody's shared output.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from real_projects_helpers import PROJECTS, Replicated, child_env, deviate_replicate, file_tree
from test_real_projects import METRIC_REGEXES, assert_completed

pytestmark = pytest.mark.slow

SHARED = "wrote the same paths outside their run directories"


def _launch(project: Path, out: Path, variant: str, *args: str) -> Replicated:
    """``deviate-replicate ... -- python train.py`` from the project's folder, with the environment's own
    temporary directory (no ``TMPDIR`` of the test's)."""
    argv = [
        str(deviate_replicate()),
        *("--variant", variant, "--out", str(out), "--experiment", "watch_in_temp", *args, *METRIC_REGEXES),
        *("--", "python", "train.py"),
    ]
    before = file_tree(project)
    proc = subprocess.run(argv, cwd=project, env=child_env(), capture_output=True, text=True, timeout=300)
    return Replicated(
        proc.returncode,
        proc.stdout,
        proc.stderr,
        out,
        "watch_in_temp",
        variant,
        argv=argv,
        project=project,
        project_before=before,
        project_after=file_tree(project),
    )


def _shared_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if SHARED in line]


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Replicated, Replicated, Path]:
    root = tmp_path_factory.mktemp("watch-in-temp")
    temp = Path(tempfile.gettempdir()).resolve()
    assert root.resolve().is_relative_to(temp), f"{root} is not inside the temporary directory {temp}"
    project = Path(shutil.copytree(PROJECTS / "watch_in_temp", root / "project"))
    algo = _launch(project, root / "runs", "algo", "-n", "2", "--parallel", "2")
    control = _launch(project, root / "runs", "control", "-n", "1")
    return algo, control, project


def test_replicas_of_a_project_inside_the_temporary_directory_complete(watched) -> None:
    algo, control, _ = watched
    assert_completed(algo, 2)
    assert_completed(control, 1)
    assert set(algo.project_after) - set(algo.project_before) == {"out/ckpt.pt"}  # the scratch copies are gone


def test_the_shared_checkpoint_is_recorded_and_the_tempfile_copies_are_not(watched) -> None:
    algo, control, project = watched
    ckpt = str(project.resolve() / "out" / "ckpt.pt")
    for done, replica in ((algo, 0), (algo, 1), (control, 0)):
        assert done.manifest(replica).get("outside_writes") == {"paths": [ckpt], "more": 0}, done.output


def test_the_launcher_names_the_shared_checkpoint_once_with_every_replica(watched) -> None:
    algo, control, _ = watched
    (line,) = _shared_lines(algo.stdout + algo.stderr)
    assert "experiment=watch_in_temp variant=algo: replicas 0, 1 wrote" in line and "out/ckpt.pt" in line, line
    (line,) = _shared_lines(control.stdout + control.stderr)  # the second group: one line naming both
    assert (
        "experiment=watch_in_temp variant=algo (replicas 0, 1) and experiment=watch_in_temp variant=control "
        "(replica 0) wrote the same paths"
    ) in line, line


def test_the_report_names_the_shared_checkpoint_once(watched) -> None:
    algo, _, project = watched
    deviate = Path(sys.executable).parent / "deviate"
    report = subprocess.run(
        [str(deviate), "report", str(algo.out)], cwd=project, env=child_env(), capture_output=True, text=True
    )
    assert report.returncode == 0, report.stderr
    assert len(_shared_lines(report.stderr)) == 1, report.stderr
    # the table: one problem line (wrapped at the width), under the first group's table
    assert report.stdout.count("problem: ") == 1 and " ".join(report.stdout.split()).count(SHARED) == 1, report.stdout
