"""``deviate audit``'s verdict from what became of its replicas, in process: the launcher is replaced by one that
returns hand-made run directories (manifest and ``audit.parquet``), so that every way a replica can end is checked
quickly. Exit status 0 only when every replica ended its training normally and has a record; 1 for a divergence in
the steps compared (whatever stopped a replica later); 3 otherwise, with one line naming the replica and its end.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any, Optional

import pytest

from deviate_cb.audit.divergence import compare_audits
from deviate_cb.audit.replicas import how_it_ended
from deviate_cb.cli.audit_command import add_audit
from deviate_cb.launch.replication import ReplicaResult, ReplicationResult
from deviate_cb.store.audit import AUDIT_FILE, write_audit
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import RunDirectory

STEPS = 4


def _row(step: int, seq: int = 0, kind: str = "loss", digest: str = "d") -> dict[str, Any]:
    return {"step": step, "seq": seq, "kind": kind, "name": kind, "module": None, "occurrence": 0,
            "dtype": "float32", "shape": [], "numel": 1, "digest": digest, "sum": 0.5, "abs_max": 0.5,
            "values": [0.5]}  # fmt: skip


def _replica(
    root: Path, replica: int, status: str, steps: Optional[int], digest: str = "d", **manifest: Any
) -> ReplicaResult:
    """A run directory whose record holds ``steps`` steps (``None``: no ``audit.parquet``)."""
    run_dir = root / f"replica={replica}"
    run_dir.mkdir(parents=True)
    RunDirectory(run_dir).update_manifest(status=status, replica=replica, **manifest)
    if steps is not None:
        write_audit(run_dir, [_row(step, digest=digest) for step in range(steps)])
    return ReplicaResult(replica, 0, run_dir, status)


def _audit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, replicas: list[ReplicaResult], *extra: str) -> tuple:
    result = ReplicationResult(str(tmp_path), "e", "control", replicas, 1.0)
    monkeypatch.setattr("deviate_cb.launch.runner.replicate", lambda *args, **kwargs: result)
    parser = argparse.ArgumentParser()
    add_audit(parser.add_subparsers())
    args = parser.parse_args(["audit", "--trainer", "train.py:main", "--steps", str(STEPS), *extra])
    out, err = io.StringIO(), io.StringIO()
    code = args.handler(args, out, err)
    return code, out.getvalue(), [line for line in err.getvalue().splitlines() if line]


def test_replicas_that_ended_normally_agree_exit_0(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    replicas = [_replica(tmp_path, r, "completed", STEPS) for r in (0, 1)]
    code, out, err = _audit(monkeypatch, tmp_path, replicas)
    assert (code, err) == (0, []) and out.startswith("deviate audit: replicas 0, 1 agree bit for bit over 4 ")


def test_a_shorter_training_that_ended_normally_is_still_a_full_audit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replicas = [_replica(tmp_path, r, "completed", 2, fit="ended") for r in (0, 1)]
    code, out, err = _audit(monkeypatch, tmp_path, replicas)
    assert (code, err) == (0, []) and "2 of the 4 step(s) asked were recorded (training was shorter)" in out


def test_trainings_of_different_lengths_diverge_where_the_shorter_one_ended(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replicas = [_replica(tmp_path, 0, "completed", 3), _replica(tmp_path, 1, "completed", 2)]
    code, out, _ = _audit(monkeypatch, tmp_path, replicas, "--format", "json")
    found = json.loads(out)
    assert code == 1 and (found["verdict"], found["step"]) == ("diverged", 2)
    assert found["note"] == "replica 1 recorded no step 2 (its training ended before)"


@pytest.mark.parametrize(
    ("status", "manifest", "how"),
    [
        ("failed", {"exception": "ValueError: bad batch", "reason": "exited with code 1"},
         "failed with ValueError: bad batch"),
        ("failed", {"reason": "exited with code 1", "error": "Traceback (most recent call last):\n...\nOSError: gone"},
         "failed with OSError: gone"),
        ("timeout", {"reason": "timed out after 9.0 s; killed by SIGTERM", "exception": "SignalExit: 143"},
         "timed out after 9.0 s; killed by SIGTERM"),
        ("killed", {"reason": "killed by SIGKILL", "error": "killed by SIGKILL; last stderr lines:\nwarning"},
         "was killed by SIGKILL"),
        ("incomplete", {"fit": "started", "reason": "exited with code 0 while fit was running"},
         "stopped before its training ended: exited with code 0 while fit was running"),
        ("completed", {"fit": "started"}, "stopped before its training ended: status completed"),
        ("completed", {"exception": "SystemExit: 0"}, "stopped before its training ended: SystemExit: 0"),
    ],
)  # fmt: skip
def test_a_replica_cut_short_is_named_with_how_it_ended_exit_3(
    status: str, manifest: dict[str, Any], how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replicas = [_replica(tmp_path, 0, "completed", STEPS), _replica(tmp_path, 1, status, 2, **manifest)]
    code, out, err = _audit(monkeypatch, tmp_path, replicas)
    assert code == 3 and err == [f"deviate: error: nothing to compare after step 1: replica 1 {how}"], err
    assert out.startswith("deviate audit: incomplete: replicas 0, 1 agree bit for bit over the 2 training step(s)")
    assert "training was shorter" not in out


def test_a_replica_that_failed_after_its_audited_steps_is_not_a_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    replicas = [_replica(tmp_path, 0, "completed", STEPS),
                _replica(tmp_path, 1, "failed", STEPS, exception="MemoryError: evaluation")]  # fmt: skip
    code, out, err = _audit(monkeypatch, tmp_path, replicas)
    assert code == 3 and err == ["deviate: error: replica 1 failed with MemoryError: evaluation after its 4 audited "
                                 "step(s)"]  # fmt: skip
    assert "agree bit for bit over the 4 training step(s) compared, then replica 1 failed" in out


def test_replicas_that_timed_out_after_agreeing_on_every_audited_step_pass_with_a_note(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 43, item 7: a --timeout after the audited steps (a --finish audit) cuts nothing the audit compares."""
    timed_out = {"reason": "timed out after 9.0 s; killed by SIGTERM", "exception": "SignalExit: 143"}
    replicas = [
        _replica(tmp_path, 0, "timeout", STEPS, **timed_out),
        _replica(tmp_path, 1, "timeout", STEPS, **timed_out),
    ]
    code, out, err = _audit(monkeypatch, tmp_path, replicas, "--finish")
    assert (code, err) == (0, []), (out, err)
    assert out.startswith("deviate audit: replicas 0, 1 agree bit for bit over 4 audited training step(s).")
    assert "note: replica 0 timed out after 9.0 s; killed by SIGTERM after its 4 audited step(s); replica 1" in out
    code, out, _ = _audit(monkeypatch, tmp_path, replicas, "--format", "json")
    payload = json.loads(out)
    assert code == 0 and payload["verdict"] == "agree" and "replica 1 timed out" in payload["after_audited_steps"]


def test_replicas_stopped_after_their_audited_steps_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stopped = {"audit_stopped": {"after_steps": STEPS, "by": "torch"}}
    replicas = [_replica(tmp_path, r, "audited", STEPS, **stopped) for r in (0, 1)]
    code, out, err = _audit(monkeypatch, tmp_path, replicas)
    assert (code, err) == (0, []) and out.startswith("deviate audit: replicas 0, 1 agree bit for bit over 4 ")


def test_no_replica_completed_names_each(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    replicas = [_replica(tmp_path, 0, "failed", 2, exception="RuntimeError: a"),
                _replica(tmp_path, 1, "killed", None, reason="killed by SIGKILL")]  # fmt: skip
    code, out, err = _audit(monkeypatch, tmp_path, replicas)
    assert code == 3 and out == ""
    assert err == [f"deviate: error: no replica completed: replica 0 failed with RuntimeError: a; replica 1 was killed "
                   f"by SIGKILL; see their stderr.log in {tmp_path / 'experiment=e' / 'variant=control'}"]  # fmt: skip


def test_a_replica_without_a_record_among_others_is_not_a_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    replicas = [_replica(tmp_path, 0, "completed", STEPS), _replica(tmp_path, 1, "completed", STEPS),
                _replica(tmp_path, 2, "failed", None, exception="ImportError: no module named x")]  # fmt: skip
    code, _, err = _audit(monkeypatch, tmp_path, replicas)
    assert code == 3 and err == [
        "deviate: error: replica 2 failed with ImportError: no module named x before recording any training step"
    ]
    (tmp_path / "replica=2" / AUDIT_FILE).write_bytes(b"broken")
    RunDirectory(tmp_path / "replica=2").update_manifest(status="completed", exception=None)
    replicas[2] = ReplicaResult(2, 0, tmp_path / "replica=2", "completed")
    code, _, err = _audit(monkeypatch, tmp_path, replicas)
    assert code == 3 and len(err) == 1 and "replica 2 has an unreadable audit record" in err[0]


def test_a_divergence_before_a_crash_is_a_divergence_exit_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    replicas = [_replica(tmp_path, 0, "completed", STEPS),
                _replica(tmp_path, 1, "failed", 2, digest="x", exception="FloatingPointError: nan")]  # fmt: skip
    code, out, err = _audit(monkeypatch, tmp_path, replicas)
    assert code == 1 and out.startswith("deviate audit: replicas 0, 1 diverge at training step 0")
    line = "nothing to compare after step 1: replica 1 failed with FloatingPointError: nan"
    assert err == [f"deviate: warning: {line}"] and f"note: {line}" in out


def test_how_it_ended_prefers_the_exception_to_the_exit_code() -> None:
    failed = how_it_ended("failed", RunManifest.from_json({"reason": "exited with code 1", "error": ""}))
    assert failed == (False, "failed: exited with code 1")  # no exception, no stderr: the exit code is all there is
    assert how_it_ended("completed", RunManifest.from_json({"status": "completed", "fit": "ended"})) == (True, "")


def test_comparison_of_complete_records_walks_steps_the_reference_lacks() -> None:
    result = compare_audits({0: [_row(0)], 1: [_row(0), _row(1)]}, complete=(0, 1))
    assert result.diverged and result.first.step == 1 and result.last_step == 1
    assert result.first.note == "only in replica 1; replica 0 recorded no step 1 (its training ended before)"
    partial = compare_audits({0: [_row(0)], 1: [_row(0), _row(1)]}, complete=(1,))  # replica 0 stopped early
    assert not partial.diverged and partial.steps_compared == 1 and partial.last_step == 0
