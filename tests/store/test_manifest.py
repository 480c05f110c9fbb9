"""The typed manifest: RunManifest reads run.json as written, the sections write only what they were given."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path
from typing import Any

import pytest

from deviate_cb.store.manifest import (
    SECTIONS,
    UNSET,
    CaptureRecord,
    LaunchEnd,
    LaunchStart,
    ManifestSection,
    ReplicaRecord,
    RunManifest,
)
from deviate_cb.store.manifest import read as manifest_module
from deviate_cb.store.manifest import sections as manifest_sections
from deviate_cb.store.run_directory import SCHEMA_VERSION, RunDirectory, read_run_manifest

ROOT = Path(__file__).resolve().parents[2]
_OWN = ("schema_version", "extra", "malformed", "_json")


def _hints(kind: type) -> dict[str, Any]:
    return typing.get_type_hints(kind, {**vars(manifest_sections), **vars(manifest_module)})


def _manifest_fields() -> list[str]:
    return [f.name for f in dataclasses.fields(RunManifest) if f.name not in _OWN]


def test_every_section_field_is_a_manifest_field_of_the_same_type() -> None:
    read = _hints(RunManifest)
    written = set()
    for section in SECTIONS:
        for name, hint in _hints(section).items():
            assert name in read, f"{section.__name__}.{name} is not a RunManifest field"
            assert hint == read[name], f"{section.__name__}.{name}: {hint} but RunManifest.{name}: {read[name]}"
            written.add(name)
    assert written == set(_manifest_fields()), "a RunManifest field no writer records"


def test_each_section_is_documented_in_its_part_of_the_architecture_doc() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    contract = doc[doc.index("### `run.json`: the manifest") : doc.index("### Statuses")]
    starts = {section: contract.index(f"Section `{section.__name__}`") for section in SECTIONS}
    ends = sorted([*starts.values(), contract.index("Who reads the manifest")])
    for section, start in starts.items():
        part = contract[start : ends[ends.index(start) + 1]]
        missing = [name for name in _hints(section) if f"`{name}`" not in part]
        assert not missing, f"docs/architecture.md: section {section.__name__} does not name {missing}"


def test_a_manifest_reads_each_field_as_its_type_and_gives_back_what_was_read() -> None:
    data = {
        "status": "completed",
        "seed": 7,
        "exit_code": None,
        "timeout_s": 30,
        "deterministic": "warn",
        "configuration": {"variant": "algo"},
        "argv": ["train.py"],
        "pid": True,  # a bool is not a process id
        "replica": 1.0,  # nor is a float an index
        "attempt": "2",
        "mine": {"a": 1},
        "schema_version": SCHEMA_VERSION,
    }
    manifest = RunManifest.from_json(data)
    assert (manifest.status, manifest.seed, manifest.exit_code, manifest.timeout_s) == ("completed", 7, None, 30)
    assert (manifest.deterministic, manifest.configuration, manifest.argv) == (
        "warn",
        {"variant": "algo"},
        ["train.py"],
    )
    assert (manifest.pid, manifest.replica, manifest.attempt) == (None, None, None)
    assert manifest.malformed == ("replica", "pid", "attempt")
    assert manifest.extra == {"mine": {"a": 1}}
    assert manifest.to_json() == data
    assert manifest.recorded("exit_code") and not manifest.recorded("signal")
    assert not manifest.is_empty and RunManifest.from_json({}).is_empty
    with pytest.raises(ValueError, match=r"`name` must be a field of RunManifest\. Received: name='mine'\."):
        manifest.recorded("mine")


def test_a_section_of_a_manifest_holds_that_writers_fields_as_read() -> None:
    manifest = RunManifest.from_json({"status": "failed", "exit_code": 1, "seed": 3})
    end = manifest.section(LaunchEnd)
    assert (end.status, end.exit_code, end.signal) == ("failed", 1, None)
    assert manifest.section(LaunchStart).seed == 3


def test_a_section_writes_only_the_fields_it_was_given_and_null_as_null() -> None:
    assert LaunchEnd().fields() == {} and not LaunchEnd()
    assert LaunchEnd(status="failed", signal=None).fields() == {"status": "failed", "signal": None}
    assert LaunchEnd(status="failed").with_changes(exit_code=2).fields() == {"status": "failed", "exit_code": 2}
    with pytest.raises(TypeError):
        LaunchEnd(status="failed").with_changes(seed=1)  # not the end's field
    assert repr(UNSET) == "UNSET"


def test_record_merges_the_sections_in_order_in_one_write(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path / "replica=0")
    run.record(LaunchStart(status="running", seed=1), ReplicaRecord(seeding={"take_over": True}))
    written = run.record(ReplicaRecord(seeding={"calls": []}), LaunchEnd(status="completed", exit_code=0))
    on_disk = json.loads(run.manifest_path.read_text())
    assert on_disk == {
        "status": "completed",
        "seed": 1,
        "seeding": {"take_over": True, "calls": []},  # nested objects merged one level deep
        "exit_code": 0,
        "schema_version": SCHEMA_VERSION,
    }
    assert written == run.manifest() == read_run_manifest(str(run.manifest_path))
    assert written.to_json() == on_disk
    assert sorted(p.name for p in run.path.iterdir()) == ["run.json"]  # no temporary file left


def test_the_last_section_given_wins_a_shared_field(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path)
    assert run.record(CaptureRecord(status="running"), LaunchEnd(status="killed")).status == "killed"


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_sections_are_frozen_and_default_to_nothing(section: type[ManifestSection]) -> None:
    made = section()
    assert made.fields() == {}
    first = dataclasses.fields(section)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, first, None)


def test_every_documented_field_of_the_contract_is_modelled() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    contract = doc[doc.index("### `run.json`: the manifest") : doc.index("### Statuses")]
    rows = set(re.findall(r"^\| `(\w+)`", contract, flags=re.MULTILINE))
    rows |= {name for pair in re.findall(r"^\| `(\w+)`, `(\w+)`", contract, flags=re.MULTILINE) for name in pair}
    assert rows - set(_manifest_fields()) == set()
