"""``deviate audit --against DIR`` for real: a recording kept with ``--out``, checked again on "another machine".

The other machine is stood for by another thread count: ``tests/audit/trainers/thread_chunks.py`` adds its sums in
chunks sized from ``torch.get_num_threads()``, as a library build picks its blocking, so a run with
``OMP_NUM_THREADS=1`` adds in another order than the reference recorded with ``OMP_NUM_THREADS=2``. Every run sets
the variable itself: nothing depends on this machine's cores. Exit status 0 agree, 1 diverged, 2 usage error, 3
nothing to compare or incomplete (a crash on either side is never agreement).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.replicate_helpers import child_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TRAINERS = Path(__file__).resolve().parent / "trainers"
CHUNKED = f"{TRAINERS / 'thread_chunks.py'}:chunked"


def audit(args: list[str], cwd: Path, threads: int = 2) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", *args],
        cwd=cwd,
        env=child_env({"OMP_NUM_THREADS": str(threads)}),
        capture_output=True,
        text=True,
        timeout=600,
    )


def as_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.startswith("{"), (done.returncode, done.stdout, done.stderr)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording of two replicas with 2 threads, 2 audited steps, kept in ``ref/``."""
    root = tmp_path_factory.mktemp("recorded")
    done = audit(["--trainer", CHUNKED, "--steps", "2", "--parallel", "2", "--out", "ref"], root)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert (root / "ref/experiment=thread_chunks/variant=control/replica=1/audit.parquet").is_file()
    return root / "ref"


def test_the_same_machine_and_build_agree_with_the_reference_exit_0(reference: Path, tmp_path: Path) -> None:
    done = audit(["--trainer", CHUNKED, "--against", str(reference), "--out", "here"], tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"deviate audit --against {reference} (experiment=thread_chunks, variant=control")
    assert lines[0].endswith("replica 0 is the reference's replica 0; replica 1 is replica 0 here.")
    assert "deviate audit: replicas 0, 1 agree bit for bit over 2 audited training step(s)." in lines
    assert any(line.startswith("fingerprints: no difference in the fields that decide results") for line in lines)
    assert "warning" not in done.stderr and "not a reference" not in done.stdout
    # -n 1 and the reference's steps and experiment by default: one replica here, under the reference's group
    here = tmp_path / "here/experiment=thread_chunks/variant=control"
    assert sorted(p.name for p in here.glob("replica=*")) == ["replica=0"]
    assert json.loads((here / "replica=0/run.json").read_text())["audit"]["steps"] == 2


def test_a_reduction_order_change_is_found_at_its_module_with_the_fingerprint_difference(
    reference: Path, tmp_path: Path
) -> None:
    done = audit(["--trainer", CHUNKED, "--against", str(reference), "--out", "here", "--format", "json"], tmp_path, 1)
    assert done.returncode == 1, (done.stdout, done.stderr)
    found = as_json(done)
    assert found["verdict"] == "diverged" and found["replicas"] == [0, 1]
    assert (found["step"], found["kind"], found["module"], found["name"]) == (0, "forward", "mix", "mix")
    assert found["exact"] is True and 0 < found["max_abs_diff"] < 1e-4 and found["differing"] > 0
    changed = {d["field"]: (d["reference"], d["here"]) for d in found["fingerprint_differences"]}
    assert changed["threads.torch_intra_op"] == (2, 1) and changed["threads.OMP_NUM_THREADS"] == ("2", "1")
    assert changed["determinism.env.OMP_NUM_THREADS"] == ("2", "1")
    assert not [f for f in changed if f.startswith(("cpu.", "packages.", "python.", "cuda."))]  # same machine
    against = found["against"]
    assert (against["experiment"], against["variant"], against["steps"]) == ("thread_chunks", "control", 2)
    assert against["reference_agrees"] is True and against["reference_replica"] == 0
    assert against["replicas"] == {"0": "the reference's replica 0", "1": "replica 0 here"}
    assert against["configuration_differences"] == []


def test_a_replica_here_that_crashes_is_not_agreement_exit_3(reference: Path, tmp_path: Path) -> None:
    crashing = f"{TRAINERS / 'thread_chunks.py'}:chunked_crashes"  # same model, raises at step 1
    done = audit(["--trainer", crashing, "--against", str(reference), "--out", "here", "--format", "json"], tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    found = as_json(done)
    assert found["verdict"] == "incomplete" and found["diverged"] is False and found["steps_compared"] == 1
    expected = "nothing to compare after step 0: replica 1 (replica 0 here) failed with RuntimeError: boom at step 1"
    assert found["stopped"] == expected
    assert found["not_completed"] == [
        {"replica": 1, "status": "failed", "how": "(replica 0 here) failed with RuntimeError: boom at step 1",
         "recorded_steps": 1}
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("against", "out", "extra", "expected"),
    [
        ("missing", "here", [], "Received: --against=missing (no such directory)."),
        ("empty", "here", [], "Received: --against=empty, which holds no run."),
        ("REF", "REF", [], "`--out` must be outside the `--against` recording"),
        ("REF", "REF/experiment=thread_chunks/new", [], "`--out` must be outside the `--against` recording"),
        ("REF", "here", ["--steps", "3"], "`--steps` must be at most the 2 step(s) the reference recorded"),
        ("REF", "here", ["--variant", "impl"], "`--variant` must be control, as the reference"),
        ("REF", "here", ["--seed", "1"], "`--seed` must be 0, as the reference"),
        ("REF", "here", ["--experiment", "other"], "`--experiment` must name an audited group of the recording"),
        (
            "two",
            "here",
            [],
            "must pick one of the recording's audited groups: experiment=copy variant=control, "
            "experiment=thread_chunks variant=control. Received: none.",
        ),
        ("REF/experiment=thread_chunks/variant=control", "here", ["--steps", "3"], "at most the 2 step(s)"),
    ],
)
def test_bad_input_is_one_line_exit_2_before_anything_runs(
    reference: Path, tmp_path: Path, against: str, out: str, extra: list[str], expected: str
) -> None:
    (tmp_path / "empty").mkdir()
    shutil.copytree(reference, tmp_path / "two")  # a recording of two audited groups
    shutil.copytree(reference / "experiment=thread_chunks", tmp_path / "two/experiment=copy")
    against, out = (against.replace("REF", str(reference)), out.replace("REF", str(reference)))
    done = audit(["--trainer", CHUNKED, "--against", against, "--out", out, *extra], tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "here").exists()
    assert sorted(p.name for p in reference.rglob("replica=*")) == ["replica=0", "replica=1"]  # left untouched


def test_a_study_without_audit_records_is_not_a_reference_exit_2(tmp_path: Path) -> None:
    study = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", "--trainer", f"{REPO}/tests/launch/trainers/basic.py:echo",
         "-n", "1", "--out", "study"],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert study.returncode == 0, study.stderr
    done = audit(["--trainer", CHUNKED, "--against", "study", "--out", "here"], tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Received: --against=study, which holds runs of experiment=basic variant=algo+impl but no audit record" in (
        done.stderr
    )


def test_a_reference_whose_replicas_crashed_is_not_agreement_exit_3(tmp_path: Path) -> None:
    crashing = f"{TRAINERS / 'thread_chunks.py'}:chunked_crashes"
    recorded = audit(["--trainer", crashing, "--steps", "3", "--parallel", "2", "--out", "ref"], tmp_path)
    assert recorded.returncode == 3, (recorded.stdout, recorded.stderr)  # both replicas fail at step 1
    done = audit(["--trainer", CHUNKED, "--against", "ref", "--out", "here", "--format", "json"], tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    found = as_json(done)
    assert found["verdict"] == "incomplete" and found["steps_compared"] == 1  # step 0: the reference's only one
    assert found["stopped"].startswith("nothing to compare after step 0: replica 0 (the reference's replica 0) failed")
    assert "RuntimeError: boom at step 1" in found["stopped"]
    assert found["against"]["configuration_differences"] == [
        "--trainer 'thread_chunks.py:chunked_crashes' (reference) vs 'thread_chunks.py:chunked' (here)"
    ]
    assert "warning: the configuration differs from the reference's: --trainer" in done.stderr
    # A reference none of whose replicas left a record: nothing is run, nothing compared.
    shutil.copytree(tmp_path / "ref", tmp_path / "bare")
    for record in (tmp_path / "bare").rglob("audit.parquet"):
        record.unlink()
    bare = audit(["--trainer", CHUNKED, "--against", "bare", "--out", "there"], tmp_path)
    assert bare.returncode == 3 and bare.stdout == "" and bare.stderr.count("\n") == 1, bare.stderr
    assert "holds no audit record (replica 0 failed: RuntimeError: boom at step 1" in bare.stderr
    assert not (tmp_path / "there").exists()


def test_a_reference_whose_own_replicas_diverge_is_said_not_to_be_one(tmp_path: Path) -> None:
    noisy = f"{TRAINERS / 'lightning_cases.py'}:noisy_layer"  # unseeded noise in net.2 from step 3 on
    recorded = audit(["--trainer", noisy, "--steps", "4", "--parallel", "2", "--out", "ref"], tmp_path)
    assert recorded.returncode == 1, (recorded.stdout, recorded.stderr)
    done = audit(["--trainer", noisy, "--against", "ref", "--out", "here", "--format", "json"], tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    found = as_json(done)
    assert (found["step"], found["kind"], found["module"]) == (3, "forward", "net.2")
    against = found["against"]
    assert against["reference_agrees"] is False and against["reference_divergence"]["step"] == 3
    assert "warning: the reference is not a reference: its own replicas diverge at training step 3" in done.stderr
