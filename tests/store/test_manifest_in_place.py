"""``run.json`` rewritten within its own space on a full disk: what is kept, and what is never written through."""

from __future__ import annotations

import json
import os
from pathlib import Path

from deviate_cb.store.manifest import LaunchEnd, LaunchStart
from deviate_cb.store.manifest.in_place import ESSENTIAL_FIELDS, write_in_place
from deviate_cb.store.run_directory import MANIFEST_FILE, RunDirectory


def test_the_whole_manifest_is_kept_where_it_fits(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path)
    run.record(LaunchStart(status="running", seed=3, experiment="mlp"))
    run.update_manifest(custom_field={"kept": True})  # a field this version does not model survives too
    assert run.record_in_place(LaunchEnd(status="failed", reason="the disk is full", exit_code=None))
    manifest = run.manifest()
    assert (manifest.status, manifest.seed, manifest.reason, manifest.experiment) == (
        "failed",
        3,
        "the disk is full",
        "mlp",
    )
    assert manifest.extra["custom_field"] == {"kept": True}


def test_only_the_essential_fields_are_kept_where_the_whole_does_not_fit(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_FILE).write_text(json.dumps({"status": "running", "seed": 3}))
    size = (tmp_path / MANIFEST_FILE).stat().st_size
    blocks = getattr(os.stat(tmp_path / MANIFEST_FILE), "st_blocks", 0) * 512
    room = max(size, blocks)
    big = {"status": "failed", "seed": 3, "reason": "full", "fingerprint_note": "x" * (room + 1)}
    assert write_in_place(tmp_path, MANIFEST_FILE, big)
    written = json.loads((tmp_path / MANIFEST_FILE).read_text())
    assert written == {"status": "failed", "seed": 3, "reason": "full"}
    assert set(written) <= set(ESSENTIAL_FIELDS)
    assert (tmp_path / MANIFEST_FILE).stat().st_size <= room


def test_nothing_is_created_and_no_link_is_followed(tmp_path: Path) -> None:
    assert not write_in_place(tmp_path, MANIFEST_FILE, {"status": "failed"})
    assert not (tmp_path / MANIFEST_FILE).exists()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"status": "running", "note": "x" * 100}))
    run_dir = tmp_path / "replica=0"
    run_dir.mkdir()
    (run_dir / MANIFEST_FILE).symlink_to(target)
    assert not RunDirectory(run_dir).record_in_place(LaunchEnd(status="failed"))
    assert json.loads(target.read_text())["status"] == "running"
