"""Disk full (issue 14, item 4), on a real small tmpfs with real ``deviate-replicate`` runs.

When the run directory's file system fills up, the launcher records the replica's end as failed with an error
that says the disk is full and names the file (in place, when there is no room for a second copy of the
manifest), terminates the replicas still running (recorded ``killed``, saying why), starts no further one, prints
one line (no traceback) and exits 1. No manifest is left saying ``running``. Once there is space again, a rerun
of the same command resumes: the failed replicas run again and complete.

Mounting needs root (or a user namespace); where it is refused the tests are skipped with the mount's error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.helpers.replicate_helpers import Completed, final_metrics, manifest, start_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs mounts are a Linux feature"),
]

FILLER = f"{Path(__file__).resolve().with_name('filler_fn.py')}:main"
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
SMALL = 32 * PAGE  # the launcher's and the replicas' own files fit; the checkpoint does not
CHECKPOINT = 2 * SMALL
LARGE = SMALL + 3 * CHECKPOINT + 256 * PAGE  # the first attempt's leftovers, a whole checkpoint, and the rest
VARIANT = "experiment=filler_fn/variant=algo+impl"


@dataclass
class Disk:
    """A tmpfs mounted for one test."""

    path: Path

    def resize(self, size: int) -> None:
        _mount_command(["mount", "-o", f"remount,size={size}", str(self.path)])


def _mount_command(argv: list[str]) -> Optional[str]:
    """Run a mount command; the reason it failed, or ``None``."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{argv[0]}: {exc}"
    if done.returncode != 0:
        return f"{' '.join(argv)} failed ({done.returncode}): {' '.join(done.stderr.split()) or 'no message'}"
    return None


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    """A tmpfs of ``SMALL`` bytes at ``<tmp>/disk``, unmounted afterwards; skips where mounting is refused."""
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("no mount/umount command here")
    path = tmp_path / "disk"
    path.mkdir()
    refused = _mount_command(["mount", "-t", "tmpfs", "-o", f"size={SMALL},mode=0755", "tmpfs", str(path)])
    if refused:
        pytest.skip(f"cannot mount a tmpfs here: {refused}")
    try:
        yield Disk(path)
    finally:
        if _mount_command(["umount", str(path)]):
            _mount_command(["umount", "-l", str(path)])


def _replicate(disk: Disk, cwd: Path, *args: str, **env: str) -> Completed:
    out = disk.path / "runs"
    proc = start_cli(
        ["--trainer", FILLER, "--out", str(out), *args], cwd=cwd, env={"FILLER_BYTES": str(CHECKPOINT), **env}
    )
    stdout, stderr = proc.communicate(timeout=180)
    return Completed(proc.returncode, stdout, stderr, out)


def _manifests(out: Path) -> dict[str, dict[str, Any]]:
    """Every manifest under ``out``, earlier attempts included (relative path -> manifest)."""
    return {str(p.relative_to(out)): json.loads(p.read_text()) for p in sorted(out.rglob("run.json"))}


def _one_disk_full_line(done: Completed) -> str:
    """The launcher's stderr: exactly one line, saying the disk is full and naming a file of the study."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("deviate-replicate: error: the disk is full: cannot write "), line
    assert str(done.out / VARIANT) in line and "rerun the same command" in line, line
    return line


def _says_disk_full(record: dict[str, Any], run_dir: Path) -> None:
    assert record["status"] == "failed", record
    assert record["error"].startswith("the disk is full: cannot write "), record["error"]
    assert str(run_dir) in record["error"] and "the disk is full" in record["reason"], record


@pytest.mark.slow
def test_disk_full_stops_the_study_in_one_line_and_a_rerun_with_space_resumes(disk: Disk, tmp_path: Path) -> None:
    # (a) replica 0's checkpoint fills the disk part-way: its end is recorded, the study stops
    full = _replicate(disk, tmp_path, "-n", "3")
    assert full.returncode == 1, (full.stdout, full.stderr)
    assert "(1 failed, 2 not started)" in _one_disk_full_line(full)
    assert "1 failed" in full.stdout and "2 not started" in full.stdout
    run_dir = full.run_dir("filler_fn", "algo+impl", 0)
    _says_disk_full(manifest(run_dir), run_dir)
    assert manifest(run_dir)["exit_code"] == 1  # the trainer's own write failed
    assert (run_dir / "run.json").read_text().count("\n") == 1  # no room for a copy: rewritten in place, compact
    assert 0 < (run_dir / "checkpoint.bin").stat().st_size < CHECKPOINT
    assert not full.run_dir("filler_fn", "algo+impl", 1).exists()  # never started
    assert all(record["status"] != "running" for record in _manifests(full.out).values())

    # still full: the rerun stops before replica 0 starts and leaves its record as it was
    again = _replicate(disk, tmp_path, "-n", "3")
    assert again.returncode == 1, (again.stdout, again.stderr)
    _one_disk_full_line(again)
    assert list(_manifests(again.out)) == [f"{VARIANT}/replica=0/run.json"]
    _says_disk_full(manifest(run_dir), run_dir)
    assert manifest(run_dir)["attempt"] == 1 and not (run_dir / ".attempts").exists()

    # (b) space again: the same command resumes, replica 0 reruns and every replica completes
    disk.resize(LARGE)
    resumed = _replicate(disk, tmp_path, "-n", "3")
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert resumed.stderr == "" and "3 completed" in resumed.stdout
    for replica in range(3):
        replica_dir = resumed.run_dir("filler_fn", "algo+impl", replica)
        record = manifest(replica_dir)
        assert record["status"] == "completed" and "error" not in record, record
        assert final_metrics(replica_dir) == {"checkpoint_bytes": float(CHECKPOINT), "seed": float(replica)}
    assert manifest(run_dir)["attempt"] == 2
    _says_disk_full(manifest(run_dir / ".attempts" / "1"), run_dir)
    assert (run_dir / "checkpoint.bin").stat().st_size == CHECKPOINT


@pytest.mark.slow
def test_disk_full_terminates_the_running_replicas_and_records_why(disk: Disk, tmp_path: Path) -> None:
    marker = tmp_path / "checkpoint-written"
    env = {"FILLER_AFTER": "1", "FILLER_MARKER": str(marker)}  # replica 1 runs (waiting) when replica 0 fills
    full = _replicate(disk, tmp_path, "-n", "3", "--parallel", "2", **env)
    assert full.returncode == 1, (full.stdout, full.stderr)
    assert "(1 failed, 1 killed, 1 not started)" in _one_disk_full_line(full)
    run_dir = full.run_dir("filler_fn", "algo+impl", 0)
    _says_disk_full(manifest(run_dir), run_dir)
    running = manifest(full.run_dir("filler_fn", "algo+impl", 1))
    assert running["status"] == "killed", running
    assert running["reason"].startswith("terminated because the study stopped: the disk is full"), running
    assert all(record["status"] != "running" for record in _manifests(full.out).values())

    disk.resize(LARGE)
    resumed = _replicate(disk, tmp_path, "-n", "3", "--parallel", "2", **env)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    statuses = {path: record["status"] for path, record in _manifests(resumed.out).items()}
    assert statuses == {
        f"{VARIANT}/replica=0/.attempts/1/run.json": "failed",
        f"{VARIANT}/replica=0/run.json": "completed",
        f"{VARIANT}/replica=1/.attempts/1/run.json": "killed",
        f"{VARIANT}/replica=1/run.json": "completed",
        f"{VARIANT}/replica=2/run.json": "completed",
    }
