"""``deviate audit`` on a 2-rank CPU DDP (gloo) Lightning run, for real: ``deviate audit -- python ddp_train.py``
(command mode) and ``deviate audit --trainer ddp_train.py:deterministic``.

Lightning's ``ddp`` strategy re-runs the script (or the ``--trainer`` bootstrap) for rank 1; every rank records its
own audit (rank 0 ``audit.parquet``, rank 1 ``audit.rank1.parquet``) and the audit compares each rank across the
replicas, naming the rank that diverged first. The trainer (``trainers/ddp_train.py``) adds unseeded noise on rank
1 only, or crashes rank 1 in replica 1 only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from deviate_cb.audit.ranks import compare_ranks, read_rank_records, with_rank_line
from deviate_cb.store.audit import audit_metadata, audit_ranks, read_audit
from deviate_cb.store.run_directory import RunDirectory
from tests.helpers.replicate_helpers import child_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="this torch build has no gloo backend"),
]

REPO = Path(__file__).resolve().parents[2]
TRAINER = Path(__file__).resolve().parent / "trainers" / "ddp_train.py"

STEPS = 4  # ddp_train.STEPS: every step is audited
NOISE_STEP = 2  # ddp_train.NOISE_STEP


def audit(case: str, out: Path, *extra: str, trainer_mode: bool = False) -> subprocess.CompletedProcess[str]:
    args = ["audit", "--steps", str(STEPS), "-n", "2", "--parallel", "1", "--out", str(out), *extra]
    target = ["--trainer", f"{TRAINER}:{case}"] if trainer_mode else ["--", sys.executable, str(TRAINER), case]
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", *args, *target],
        cwd=out.parent,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def replica_dir(out: Path, replica: int) -> Path:
    return out / "experiment=ddp_train" / "variant=control" / f"replica={replica}"


@pytest.fixture(scope="module")
def deterministic(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("ddp") / "runs"
    return audit("deterministic", out, "--format", "json", trainer_mode=True), out


@pytest.mark.slow
def test_a_deterministic_ddp_run_records_both_ranks_in_both_replicas_and_agrees(
    deterministic: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, out = deterministic
    assert done.returncode == 0, (done.stdout, done.stderr)
    found = json.loads(done.stdout)
    assert found["verdict"] == "agree" and found["first_ranks"] == []
    assert [(r["rank"], r["diverged"], r["steps_compared"]) for r in found["ranks"]] == [(0, False, 4), (1, False, 4)]
    for replica in (0, 1):
        run = replica_dir(out, replica)
        assert audit_ranks(run) == [0, 1]
        assert RunDirectory(run).read_manifest()["audit"]["ranks"] == 2
        assert audit_metadata(run, 1)["rank"] == "1" and audit_metadata(run, 1)["world_size"] == "2"
        assert "exception" not in audit_metadata(run, 1)
        rank0, rank1 = read_audit(run), read_audit(run, rank=1)
        assert {row["step"] for row in rank1} == set(range(STEPS))
        # each rank trains on its own shard of every batch, and both end each step with the same parameters
        first_input = [[row["digest"] for row in rows if (row["step"], row["kind"]) == (0, "input")] for rows in
                       (rank0, rank1)]  # fmt: skip
        assert first_input[0] and first_input[0] != first_input[1]
        last = [{row["name"]: row["digest"] for row in rows if (row["step"], row["kind"]) == (STEPS - 1, "parameter")}
                for rows in (rank0, rank1)]  # fmt: skip
        assert last[0] and last[0] == last[1]


def test_a_rank_without_a_record_in_one_replica_makes_the_comparison_incomplete(
    deterministic: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = deterministic
    records, declared = read_rank_records({replica: replica_dir(out, replica) for replica in (0, 1)})
    assert declared == 2
    del records[1][1]
    ranked = compare_ranks(records, ranks=declared)
    assert not ranked.diverged and ranked.incomplete == "rank 1 has no record in replica 1"
    assert ranked.ranks_by_number[1].result is None


@pytest.mark.slow
def test_noise_on_rank_1_only_is_found_on_rank_1_first_and_reaches_rank_0_through_the_all_reduce(
    tmp_path: Path,
) -> None:
    out = tmp_path / "runs"
    done = audit("rank1_noise", out, "--format", "json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    found = json.loads(done.stdout)
    assert found["verdict"] == "diverged" and found["first_ranks"] == [1]
    assert (found["step"], found["kind"], found["module"]) == (NOISE_STEP, "forward", "net.2"), found
    ranks = {r["rank"]: r for r in found["ranks"]}
    assert (ranks[1]["step"], ranks[1]["kind"], ranks[1]["name"]) == (NOISE_STEP, "forward", "net.2")
    # rank 0's own forward, loss and gradients agree at that step; the averaged gradients change its parameters
    assert (ranks[0]["step"], ranks[0]["kind"]) == (NOISE_STEP, "parameter"), ranks[0]
    assert ranks[0]["seq"] > ranks[1]["seq"]
    records, declared = read_rank_records({replica: replica_dir(out, replica) for replica in (0, 1)})
    text = with_rank_line("deviate audit: ...\nrecords: runs\n", compare_ranks(records, ranks=declared))
    lines = text.splitlines()
    assert (
        lines[1] == f"  rank 1 diverges first, at training step {NOISE_STEP}, in the forward output of module `net.2`;"
    )
    assert lines[2].startswith(f"  rank 0 diverges at step {NOISE_STEP}, in parameter `net.")
    assert lines[2].endswith("after the optimizer step (its own gradients agree: the difference came through the "
                             "gradient all-reduce)")  # fmt: skip


@pytest.mark.slow
def test_a_rank_that_crashes_in_one_replica_makes_the_audit_incomplete_exit_3(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    done = audit("rank1_crashes", out)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "incomplete" in done.stdout
    assert "rank 1 of replica 1 failed with RuntimeError: rank 1 crashed on purpose" in done.stderr
    assert audit_metadata(replica_dir(out, 1), 1)["exception"] == "RuntimeError: rank 1 crashed on purpose"


@pytest.mark.slow
def test_a_standalone_ddp_run_records_every_rank_in_the_run_directory_rank_0_chose(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(TRAINER), "deterministic", str(tmp_path / "runs")],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "experiment=ddp" / "variant=standalone" / "replica=0"
    assert audit_ranks(run) == [0, 1]
    assert RunDirectory(run).read_manifest()["audit"]["ranks"] == 2
    assert {row["step"] for row in read_audit(run, rank=1)} == set(range(STEPS))
    assert not (tmp_path / "runs" / "experiment=ddp" / "variant=standalone" / "replica=1").exists()
