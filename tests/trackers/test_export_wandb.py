"""`deviate export wandb`: a study as W&B runs in W&B's offline mode, read back from the runs' own `.wandb` files.

The study is written through the run store (real manifests and Parquet): control x2, algo+impl x3 and one failed
algo+impl replica. Each replica becomes a run grouped by experiment with the variant as job type, its history
equal to our Parquet at the same steps, its config holding seed and determinism; the failed one exits with code 1;
the study run holds the answers and the HTML page. Exporting again writes nothing new.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from deviate_cb.store.run_directory import RunDirectory, run_path

REPO = Path(__file__).resolve().parents[2]
_BLOCK = 32768  # the .wandb file is a LevelDB-style log: 32 KiB blocks of records with 7-byte headers


def wandb_records(path: Path) -> list[Any]:
    """Every protobuf ``Record`` of a ``.wandb`` file (W&B's Python package no longer ships a reader)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, pending, out = 7, b"", []
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:  # the rest of the block is padding
            pos += left
            continue
        pending = data[pos + 7 : pos + 7 + length] if kind in (1, 2) else pending + data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def read_run(folder: Path) -> dict[str, Any]:
    """What one offline run folder holds: its run record, config, history rows, summary and exit code."""
    (path,) = folder.glob("run-*.wandb")
    run: dict[str, Any] = {"config": {}, "history": [], "summary": {}, "exit_code": None}
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.update(id=r.run_id, group=r.run_group, job_type=r.job_type, name=r.display_name, notes=r.notes)
            run["config"].update({u.key: json.loads(u.value_json) for u in r.config.update})
        elif kind == "config":
            run["config"].update({u.key: json.loads(u.value_json) for u in record.config.update})
        elif kind == "history":
            run["history"].append(
                {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
            )
        elif kind == "summary":
            for u in record.summary.update:
                run["summary"][u.key or "/".join(u.nested_key)] = json.loads(u.value_json)
        elif kind == "exit":
            run["exit_code"] = record.exit.exit_code
    return run


def write_study(root: Path) -> Path:
    values = {"control": [0.9, 0.9], "algo+impl": [0.8, 0.86, 0.83]}
    for variant, accs in values.items():
        for k, acc in enumerate(accs):
            run = RunDirectory(run_path(root, "mlp", variant, k))
            requested = {"seed": k, "deterministic": variant == "control"}
            run.update_manifest(
                status="completed", seed=k if variant != "control" else 0, variant=variant, replica=k,
                started_at="2026-01-01T00:00:00+00:00", ended_at="2026-01-01T00:01:00+00:00",
                determinism={"requested": requested},
            )  # fmt: skip
            run.metrics().append({
                "step": [1, 2, 2], "epoch": [0, 0, 0], "stage": ["train", "train", "val"],
                "scope": ["step", "step", "epoch"], "name": ["loss", "loss", "val_acc"],
                "value": [1.0 - acc / 2, 1.0 - acc, acc], "wall_time": [100.0, 101.0, 101.5],
            })  # fmt: skip
    failed = RunDirectory(run_path(root, "mlp", "algo+impl", 3))
    failed.update_manifest(status="failed", seed=3, variant="algo+impl", replica=3, error="RuntimeError: boom")
    failed.metrics().append({"step": [1], "epoch": [0], "stage": ["train"], "scope": ["step"], "name": ["loss"],
                             "value": [0.7], "wall_time": [100.0]})  # fmt: skip
    return root


def deviate(*args: str, cwd: Path, hide: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    code = f"import sys; {hide}from deviate_cb.cli.main import main; raise SystemExit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


@pytest.mark.slow
def test_offline_export_groups_replicas_and_is_idempotent(tmp_path: Path) -> None:
    study = write_study(tmp_path / "runs")
    target = tmp_path / "wb"
    first = deviate("export", "wandb", str(study), "--wandb-dir", str(target), "--project", "p", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "6 exported" in first.stdout and "wandb sync" in first.stdout, first.stdout
    folders = sorted((target / "wandb").glob("offline-run-*"))
    assert len(folders) == 7  # six replicas and the study run
    runs = [read_run(f) for f in folders]
    study_runs = [r for r in runs if r["job_type"] == "study"]
    assert len(study_runs) == 1
    answers = study_runs[0]
    assert answers["group"] == "mlp" and "bit-identical" in answers["notes"]
    assert answers["summary"]["val_acc/control/std"] == 0.0
    assert answers["summary"]["val_acc/algo+impl/n"] == 3
    (html,) = [row for row in answers["history"] if row.get("deviate_report/_type") == "html-file"]
    (page,) = (target / "wandb").glob(f"offline-run-*-{answers['id']}/files/{html['deviate_report/path']}")
    assert "val_acc" in page.read_text()

    replicas = {r["name"]: r for r in runs if r["job_type"] != "study"}
    assert set(replicas) == {"control/replica=0", "control/replica=1", *(f"algo+impl/replica={k}" for k in range(4))}
    for name, run in replicas.items():
        variant, replica = name.split("/replica=")
        assert run["group"] == "mlp" and run["job_type"] == variant
        assert run["config"]["deviate.variant"] == variant and run["config"]["deviate.replica"] == replica
        completed = name != "algo+impl/replica=3"
        assert run["exit_code"] == (0 if completed else 1)
        assert run["config"]["deviate.status"] == ("completed" if completed else "failed")
        rows = pq.read_table(study / "experiment=mlp" / f"variant={variant}" / f"replica={replica}" /
                             "metrics.parquet").to_pylist()  # fmt: skip
        logged = sorted((row["_step"], key, value) for row in run["history"] for key, value in row.items()
                        if key in ("loss", "val_acc"))  # fmt: skip
        # Two values of `loss` at steps 1 and 2 and `val_acc` at step 2: every value at its step.
        assert logged == sorted((r["step"], r["name"], r["value"]) for r in rows)
    assert replicas["control/replica=1"]["config"]["deviate.determinism"] == "true"
    assert replicas["algo+impl/replica=1"]["config"]["deviate.seed"] == "1"

    again = deviate("export", "wandb", str(study), "--wandb-dir", str(target), "--project", "p", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 exported" in again.stdout and "6 unchanged" in again.stdout, again.stdout
    assert sorted((target / "wandb").glob("offline-run-*")) == folders

    # The study grows: the study run is the same W&B run (one id: a session of it that `wandb sync` resumes), its
    # answers logged at step = replicas counted; only the new replica is a new run
    grown = RunDirectory(run_path(study, "mlp", "algo+impl", 4))
    grown.update_manifest(status="completed", seed=4, variant="algo+impl", replica=4,
                          started_at="2026-01-01T00:00:00+00:00", ended_at="2026-01-01T00:01:00+00:00")  # fmt: skip
    grown.metrics().append({"step": [2], "epoch": [0], "stage": ["val"], "scope": ["epoch"], "name": ["val_acc"],
                            "value": [0.84], "wall_time": [101.5]})  # fmt: skip
    third = deviate("export", "wandb", str(study), "--wandb-dir", str(target), "--project", "p", cwd=tmp_path)
    assert third.returncode == 0, third.stderr
    assert "1 exported" in third.stdout and "6 unchanged" in third.stdout, third.stdout
    runs = [read_run(f) for f in sorted((target / "wandb").glob("offline-run-*"))]
    sessions = [r for r in runs if r["job_type"] == "study"]
    assert len(sessions) == 2 and len({r["id"] for r in sessions}) == 1
    assert sessions[-1]["summary"]["val_acc/algo+impl/n"] == 4 and sessions[-1]["config"]["deviate.replicas"] == 7


@pytest.mark.parametrize("case", ["missing extra", "folder is a file", "no runs"])
def test_bad_input_is_one_line(tmp_path: Path, case: str) -> None:
    study = write_study(tmp_path / "runs") if case != "no runs" else tmp_path
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    target = blocker if case == "folder is a file" else tmp_path / "wb"
    hide = "sys.modules['wandb'] = None; " if case == "missing extra" else ""
    proc = deviate("export", "wandb", str(study), "--wandb-dir", str(target), "--no-page", cwd=tmp_path, hide=hide)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("deviate: error:"), proc.stderr
    if case == "missing extra":
        assert "pip install 'deviate-cb[wandb]'" in proc.stderr
    if case == "folder is a file":
        assert "--wandb-dir" in proc.stderr
    assert not (tmp_path / "wb").exists()


@pytest.mark.slow
def test_offline_runs_import_back_as_the_study_they_came_from(tmp_path: Path) -> None:
    """``deviate import wandb`` of an offline export: each run goes back to its experiment and variant (its
    deviate.* config), with every value at its step, the failed replica apart, and the report's numbers equal."""
    study = write_study(tmp_path / "runs")
    target = tmp_path / "wb"
    sent = deviate("export", "wandb", str(study), "--wandb-dir", str(target), "--project", "p", "--no-page",
                   cwd=tmp_path)  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    back = tmp_path / "back"
    imported = deviate("import", "wandb", str(target), "--out", str(back), cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "experiment=mlp variant=control: 2 new" in imported.stdout, imported.stdout
    assert "experiment=mlp variant=algo+impl: 4 new" in imported.stdout, imported.stdout
    assert "failed (wandb exit code 1" in imported.stdout, imported.stdout

    def rows(store: Path) -> dict[tuple[str, str], tuple[str, str]]:
        done = deviate("report", str(store), "--format", "csv", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return {(r["variant"], r["metric"]): (r["n"], r["mean"]) for r in csv.DictReader(io.StringIO(done.stdout))}

    assert rows(back) == rows(study)
    for path in back.glob("experiment=mlp/variant=*/replica=*/metrics.parquet"):
        manifest = json.loads((path.parent / "run.json").read_text())
        name = manifest["source"]["run_name"]
        variant, replica = name.split("/replica=")
        original = pq.read_table(study / "experiment=mlp" / f"variant={variant}" / f"replica={replica}" /
                                 "metrics.parquet").to_pylist()  # fmt: skip
        assert sorted((r["step"], r["name"], r["value"]) for r in pq.read_table(path).to_pylist()) == sorted(
            (r["step"], r["name"], r["value"]) for r in original
        )
        assert manifest["seed"] == (int(replica) if variant != "control" else 0)

    stopped = tmp_path / "stopped" / "wandb" / "offline-run-1-x"  # a log cut short: named, skipped, the rest read
    stopped.mkdir(parents=True)
    (stopped / "run-x.wandb").write_bytes(b"not a log")
    shutil.copytree(target / "wandb", tmp_path / "stopped" / "wandb", dirs_exist_ok=True)
    again = deviate("import", "wandb", str(tmp_path / "stopped"), "--out", str(tmp_path / "again"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "run-x.wandb: not a W&B run log" in again.stderr and "6 new" in again.stderr, again.stderr
    assert "latest-run" not in again.stderr  # W&B's own link (copied here as a folder: the same log, read once)
