"""docs/architecture.md stays true: it names every module, file column, fingerprint field and manifest field.

The document is the project's reference for the run-directory contract. These checks fail when code adds a
module, a column or a manifest field without the document saying so, or when the document names a module
or attribute that no longer exists.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from deviate_cb.bench.results import bench_schema
from deviate_cb.capture.session import RunSession
from deviate_cb.fingerprint.collect import GPU_FIELDS, REQUIRED_FIELDS
from deviate_cb.launch.backends.base import Outcome, Placement
from deviate_cb.launch.planner import plan_replicas
from deviate_cb.launch.records import end_fields, start_fields
from deviate_cb.store.audit import audit_schema
from deviate_cb.store.metrics import metrics_schema
from deviate_cb.store.predictions import predictions_schema
from deviate_cb.store.run_directory import SCHEMA_VERSION
from deviate_cb.store.timings import timings_schema

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
# Dotted strings in the document that are names of other things, not importable paths.
NOT_IMPORTABLE = {"deviate_cb.backends", "deviate_cb.predictions"}


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text()


def section(doc: str, heading: str) -> str:
    """The text under a Markdown heading, up to the next heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", doc, re.M)
    assert match, f"docs/architecture.md has no heading {heading!r}"
    level = len(match.group(1))
    rest = doc[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def quoted(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", text))


def test_the_readme_links_the_document_and_nothing_outside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "(docs/architecture.md" in readme
    links = re.findall(r"\]\(([^)#]+)", readme)
    outside = [link for link in links if link.startswith("..") or link.startswith("/")]
    assert outside == []
    for link in (link for link in links if "://" not in link):
        assert (ROOT / link).exists(), f"README links {link}, which does not exist"


def test_every_module_of_the_package_is_named(doc: str) -> None:
    modules = section(doc, "The modules of each folder")
    missing = []
    for path in sorted((ROOT / "deviate_cb").rglob("*.py")):
        relative = path.relative_to(ROOT / "deviate_cb")
        if path.name == "__init__.py" or len(relative.parts) == 1:
            continue  # packages are named by folder; root modules in the table of folders
        if path.name not in modules:
            missing.append(str(relative))
    assert missing == [], f"docs/architecture.md does not describe these modules: {missing}"


def test_every_dotted_name_in_the_document_exists(doc: str) -> None:
    unknown = []
    for dotted in sorted(set(re.findall(r"\bdeviate_cb(?:\.[A-Za-z_]\w*)+", doc)) - NOT_IMPORTABLE):
        parts = dotted.split(".")
        for k in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:k]))
            except ImportError:
                continue
            try:
                for attribute in parts[k:]:
                    obj = getattr(obj, attribute)
            except AttributeError:
                unknown.append(dotted)
            break
        else:
            unknown.append(dotted)
    assert unknown == [], f"docs/architecture.md names what does not exist: {unknown}"


@pytest.mark.parametrize(
    ("heading", "schema"),
    [
        ("`metrics.parquet`", metrics_schema),
        ("`timings.parquet`", timings_schema),
        ("`predictions.parquet`", predictions_schema),
        ("`bench.parquet`", bench_schema),
        ("`audit.parquet`", audit_schema),
    ],
)
def test_every_column_of_every_file_is_documented(doc: str, heading: str, schema) -> None:
    documented = quoted(section(doc, heading))
    missing = [name for name in schema().names if name not in documented]
    assert missing == [], f"columns of {heading} missing from docs/architecture.md: {missing}"


def test_every_required_fingerprint_field_is_documented(doc: str) -> None:
    text = section(doc, "Fingerprint") + section(doc, "`fingerprint.json`")
    missing = [f for f in (*REQUIRED_FIELDS, *GPU_FIELDS) if f not in text and f.split(".")[-1] not in text]
    assert missing == [], f"fingerprint fields missing from docs/architecture.md: {missing}"


def test_every_manifest_field_is_documented(doc: str, tmp_path: Path) -> None:
    fields = section(doc, "`run.json`: the manifest")
    # what a standalone run writes (the capture session) ...
    session = RunSession(out_dir=tmp_path, experiment="doc", seed=3)
    run = session.open()
    session.recorder.update(step=1, epoch=0, stage="train", scope="step", name="loss", value=0.5, wall_time=0.0)
    session.flush()
    written = set(session.close().to_json())
    # ... and what the launcher writes before and after a replica (a failed one, which writes the most)
    plan = plan_replicas(tmp_path / "study", "doc", "algo", 1, trainer="t.py:main")[0]
    written |= set(
        start_fields(plan, Placement(slot=0), base_seed=0, argv=["-n", "1"], backend="local", timeout_s=None).fields()
    )
    ended = Outcome(returncode=1, pid=7, started_at=0.0, ended_at=1.0)
    written |= set(end_fields(ended, run.path / "stderr.log").fields())
    written |= {"keras_backend"}  # only when --keras-backend is given
    missing = sorted(name for name in written if f"`{name}`" not in fields)
    assert missing == [], f"manifest fields missing from docs/architecture.md: {missing}"
    assert json.loads((run.path / "run.json").read_text())["schema_version"] == SCHEMA_VERSION
    assert f"today {SCHEMA_VERSION}" in section(doc, "Schema version")
