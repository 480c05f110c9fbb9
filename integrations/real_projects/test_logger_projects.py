"""Lightning loggers' own folders under ``--parallel`` (issue 43, item 5): each replica its own version folder.

``projects/lightning_loggers/train.py`` builds ``TensorBoardLogger("tb_logs")`` and ``CSVLogger("csv_logs")`` as
the Lightning docs show. Replicated four times two at a time, Lightning's own numbering gave two replicas the same
``version_N`` (their events in one folder, one ``hparams.yaml`` lost, ``deviate import`` counting 2 runs of 4);
inside a replica each logger created without ``version`` gets ``<experiment>.<variant>.replica_<k>``, recorded in
``run.json``. A ``version`` the project fixes is kept, and the folder two replicas then share is named.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from real_projects_helpers import child_env, replicate, require

pytestmark = pytest.mark.slow

COMMAND = ["python", "train.py", "--epochs", "1"]


def test_parallel_replicas_each_log_into_their_own_version_folder(tmp_path: Path) -> None:
    require("lightning", "lightning")
    done = replicate("lightning_loggers", tmp_path, COMMAND, variant="algo", n=4, args=["--parallel", "2"], copy=True)
    assert done.returncode == 0, done.output
    for logs in ("tb_logs", "csv_logs"):
        folders = sorted(p.name for p in (done.project / logs / "lightning_logs").iterdir())
        assert folders == [f"lightning_loggers.algo.replica_{k}" for k in range(4)], (logs, folders)
        for name in folders:
            files = [p.name for p in (done.project / logs / "lightning_logs" / name).iterdir()]
            assert "hparams.yaml" in files, (logs, name, files)
            if logs == "tb_logs":
                assert sum(f.startswith("events.out.tfevents") for f in files) == 1, (name, files)
    for k in range(4):
        record = done.manifest(k)["logger_versions"]
        dirs = sorted(Path(entry["log_dir"]).relative_to(done.project).as_posix() for entry in record["loggers"])
        assert dirs == [f"{logs}/lightning_logs/lightning_loggers.algo.replica_{k}" for logs in ("csv_logs", "tb_logs")]
        assert {entry["asked"] for entry in record["loggers"]} == {None}
    assert "wrote the same paths" not in done.output, done.output
    imported = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "import", "csv-logs", str(done.project / "csv_logs"),
         "--out", str(tmp_path / "imported")],
        env=child_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stdout + imported.stderr
    manifests = list((tmp_path / "imported").rglob("run.json"))
    assert len(manifests) == 4, [str(m) for m in manifests]


def test_a_version_the_project_fixes_is_kept_and_the_shared_folder_named(tmp_path: Path) -> None:
    require("lightning", "lightning")
    done = replicate(
        "lightning_loggers", tmp_path, [*COMMAND, "--version", "0"], variant="algo", n=2, args=["--parallel", "2"],
        copy=True,
    )  # fmt: skip
    # the shared CSV file may fail a replica (CSVLogger appends rows whose columns the other replica chose): named
    assert sorted(p.name for p in (done.project / "tb_logs" / "lightning_logs").iterdir()) == ["version_0"]
    record = done.manifest(0)["logger_versions"]["loggers"]
    assert {(entry["asked"], entry["applied"]) for entry in record} == {(0, 0)}, json.dumps(record)
    shared = [line for line in done.output.splitlines() if "wrote the same paths" in line]
    assert len(shared) == 1 and "tb_logs/lightning_logs/version_0" in shared[0], done.output
