"""A study on shared storage (issue 25, item 4): folders and files another user may not read, and symbolic links.

- A replica folder, a ``run.json`` or a completed run's ``metrics.parquet`` this user may not read: ``deviate
  report`` (every format), ``compare``, ``power`` and ``status`` name it in one warning and count the replica as
  ``unknown`` (``unreadable: permission denied``), never drop it silently or end in a traceback; an ``experiment=``
  or ``variant=`` folder that cannot be read is named too, and a ``DIR`` that cannot be read is a usage error.
- A partition folder (``replica=``, ``variant=``, ``experiment=``) that is a symbolic link is named and not
  followed: ``deviate status`` and ``deviate report`` never settle (rewrite) a manifest or compact parts behind it.

The reading commands run in subprocesses. As root, which reads everything, they run without the capabilities
that let root ignore file modes (``CAP_DAC_OVERRIDE``, ``CAP_DAC_READ_SEARCH``), so modes apply as they would to
another user; where those cannot be dropped, the permission tests are skipped.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deviate_cb.report.reading.runs import find_runs
from deviate_cb.store.run_directory import RunDirectory, iso_time
from tests.helpers.replicate_helpers import child_env, manifest, manifest_or_empty, start_cli, wait_for
from tests.helpers.report_study import write_run

HERE = Path(__file__).resolve().parent
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


def _as_another_user() -> None:  # pragma: no cover - runs in the child before exec
    """As root: give up reading what file modes forbid (the bounding set limits what the exec'd program gets)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _deviate(cwd: Path, *args: str, restricted: bool = True) -> tuple[int, str, str]:
    """Run ``deviate ARGS`` in a subprocess (as a user whom file modes bind); (exit status, stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_as_another_user if restricted else None,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def no_access(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """``no_access(path)``: mode 000 on ``path`` for the test (restored after it, so the folder can be removed);
    skips the test where the reading commands would read it anyway."""
    probe = tmp_path / "probe.txt"
    probe.write_text("secret")
    probe.chmod(0)
    try:
        check = subprocess.run(
            [sys.executable, "-c", f"open({str(probe)!r}).read()"], preexec_fn=_as_another_user, capture_output=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"running as root, and root's file capabilities cannot be dropped here ({exc})")
    if check.returncode == 0:
        pytest.skip("this user reads files of mode 000 (root with its capabilities): nothing is unreadable")
    probe.unlink()
    changed: list[tuple[Path, int]] = []

    def chmod(path: Path) -> None:
        changed.append((path, path.stat().st_mode & 0o7777))
        path.chmod(0)

    yield chmod
    for path, mode in reversed(changed):
        path.chmod(mode)


def _study(root: Path, runs: int = 4) -> dict[tuple[str, int], Path]:
    """``runs`` completed replicas of ``algo`` and of ``control`` (val_acc, val_loss), written by the store."""
    paths = {}
    for variant in ("algo", "control"):
        for k in range(runs):
            acc = 0.80 + k / 100 if variant == "algo" else 0.85  # control replicas agree, as they should
            rows = [("val", "val_acc", acc), ("val", "val_loss", 1.0 - acc)]
            paths[(variant, k)] = write_run(root, "mlp", variant, k, rows)
    return paths


def _warnings(err: str) -> list[str]:
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert all(line.startswith("deviate: warning: ") for line in lines), err
    return lines


def _naming(err: str, path: Path) -> str:
    """The one warning line that names ``path`` itself (not a file below it), absolute or from ``runs`` on."""
    shown = str(path)[str(path).index(f"{os.sep}runs{os.sep}") + 1 :]
    lines = [line for line in _warnings(err) if f"{shown}:" in line]
    assert len(lines) == 1, (path, err)
    return lines[0]


def _n(out: str) -> dict[str, int]:
    """``n`` per variant (the same for both metrics)."""
    found = {(row["variant"], row["metric"]): row["n"] for row in json.loads(out)}
    by_variant = {variant: n for (variant, _), n in found.items()}
    assert found == {(v, m): by_variant[v] for v in by_variant for m in ("val_acc", "val_loss")}, found
    return by_variant


def _status(out: str) -> dict[tuple[str, int], str]:
    rows = [line.split() for line in out.splitlines()[1:-1]]
    return {(row[1], int(row[2])): row[-1] if len(row) == 4 else row[4] for row in rows}


def _left_out(err: str, variant: str, replica: int) -> str:
    (line,) = [
        line for line in _warnings(err) if f"variant={variant} replica={replica} left out of the statistics" in line
    ]
    return line


# -- item 4a: what this user may not read is named and counted, never dropped --------------------------------------
@pytest.mark.slow
def test_unreadable_replicas_are_named_and_counted_unknown(tmp_path: Path, no_access) -> None:
    paths = _study(tmp_path / "runs")
    hidden = {
        ("algo", 1): paths[("algo", 1)],  # the replica's folder
        ("control", 2): paths[("control", 2)] / "run.json",  # its manifest
        ("algo", 3): paths[("algo", 3)] / "metrics.parquet",  # the values of a completed run
    }
    for path in hidden.values():
        no_access(path)

    code, out, err = _deviate(tmp_path, "report", "runs", "--format", "json")
    assert code == 0, err
    assert _n(out) == {"algo": 2, "control": 3}
    for (variant, k), path in hidden.items():
        assert "unreadable (permission denied); the run is listed as status 'unknown'" in _naming(err, path)
        assert _left_out(err, variant, k).endswith(": unknown: unreadable: permission denied")

    for fmt in ("table", "md", "csv"):
        code, out, err = _deviate(tmp_path, "report", "runs", "--format", fmt)
        assert code == 0 and out, (fmt, err)
        for path in hidden.values():
            _naming(err, path)
    code, out, err = _deviate(tmp_path, "report", "runs", "--format", "md")
    assert out.count("| unknown |  | unreadable: permission denied |") == 3, out
    pytest.importorskip("matplotlib")
    code, page, err = _deviate(tmp_path, "report", "runs", "--format", "html")
    assert code == 0 and page.lstrip().startswith("<!DOCTYPE html>"), err
    for path in hidden.values():
        _naming(err, path)
        assert f"{path}: unreadable (permission denied)" in page

    code, out, err = _deviate(tmp_path, "compare", "runs", "--a", "variant=algo", "--b", "variant=control")
    assert code == 0, err
    for path in hidden.values():
        _naming(err, path)
    code, out, err = _deviate(tmp_path, "power", "runs", "--effect", "0.01")
    assert code == 0, err
    for path in hidden.values():
        _naming(err, path)

    code, out, err = _deviate(tmp_path, "status", "runs", "--no-cluster")
    assert code == 0, err
    rows = _status(out)
    assert len(rows) == 8 and rows[("algo", 1)] == "unknown" and rows[("control", 2)] == "unknown", out
    assert "8 replicas: 6 completed, 2 unknown" in out
    assert "unreadable (permission denied); the replica is shown as 'unknown'" in _naming(err, hidden[("algo", 1)])
    assert "the replica is shown as 'unknown'" in _naming(err, hidden[("control", 2)])


@pytest.mark.slow
def test_an_unreadable_variant_folder_is_named(tmp_path: Path, no_access) -> None:
    _study(tmp_path / "runs")
    variant = tmp_path / "runs" / "experiment=mlp" / "variant=control"
    no_access(variant)

    for fmt in ("json", "html"):
        if fmt == "html":
            pytest.importorskip("matplotlib")
        code, out, err = _deviate(tmp_path, "report", "runs", "--format", fmt)
        assert code == 0, err
        assert "unreadable (permission denied); the runs in it, if any, are left out" in _naming(err, variant)
        if fmt == "json":
            assert _n(out) == {"algo": 4}
    code, out, err = _deviate(tmp_path, "power", "runs", "--effect", "0.01")
    assert code == 0 and "unreadable (permission denied)" in _naming(err, variant), err
    code, out, err = _deviate(tmp_path, "status", "runs", "--no-cluster")
    assert code == 0 and "4 replicas: 4 completed" in out, (out, err)
    assert "unreadable (permission denied); the replicas in it, if any, are not shown" in _naming(err, variant)


def test_a_study_whose_only_variant_folder_is_unreadable_says_so_in_its_error(tmp_path: Path, no_access) -> None:
    _study(tmp_path / "runs")
    for variant in ("algo", "control"):
        no_access(tmp_path / "runs" / "experiment=mlp" / f"variant={variant}")
    for command in (["report", "runs"], ["power", "runs", "--effect", "0.01"]):
        code, out, err = _deviate(tmp_path, *command)
        assert (code, out) == (2, ""), (command, err)
        assert err.count("\n") == 1 and "`DIR` contains no runs" in err, err
        assert "Found but not read: " in err and "unreadable (permission denied)" in err and "(and 1 more)" in err


def test_a_dir_that_cannot_be_read_is_a_usage_error(tmp_path: Path, no_access) -> None:
    _study(tmp_path / "runs", runs=2)
    no_access(tmp_path / "runs")
    for command in (["report", "runs"], ["status", "runs"], ["power", "runs", "--effect", "0.01"]):
        code, out, err = _deviate(tmp_path, *command)
        assert (code, out) == (2, ""), (command, err)
        assert (
            err.startswith("deviate: error: `DIR` cannot be read (permission denied). Received: ")
            and err.count("\n") == 1
        ), err


# -- item 4b: links are named, never followed, never written through ----------------------------------------------
def _snapshot(path: Path) -> dict[str, Any]:
    """Every file under ``path`` with its bytes and modification time."""
    return {
        str(p.relative_to(path)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(path.rglob("*")) if p.is_file()
    }


def _launch(out: Path, runs: int, seconds: str) -> subprocess.Popen[str]:
    return start_cli(
        ["--trainer", f"{HERE / 'sleeper_fn.py'}:main", "-n", str(runs), "--experiment", "e", "--out", str(out)],
        cwd=out.parent,
        env={"SLEEPER_SECONDS": seconds},
    )


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


@pytest.mark.slow
def test_a_linked_replica_of_a_killed_launcher_is_never_rewritten(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    first = _launch(out, 1, "0")
    assert first.wait(timeout=120) == 0, first.communicate()
    second = _launch(out, 2, "120")  # replica 0 is done; 1 sleeps until its launcher is killed
    variant = out / "experiment=e" / "variant=algo+impl"
    try:
        wait_for(lambda: manifest_or_empty(variant / "replica=1").get("bootstrap"))
        pids = [entry["pid"] for entry in manifest(variant / "replica=1")["bootstrap"]]
        second.send_signal(signal.SIGKILL)
        second.communicate(timeout=30)
        wait_for(lambda: not any(_running(pid) for pid in pids), timeout=30)
    finally:
        if second.poll() is None:
            second.kill()
            second.communicate()
    assert manifest(variant / "replica=1")["status"] == "running"  # what `deviate status` would settle as killed

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(variant / "replica=1", elsewhere / "replica=1")
    (variant / "replica=1").symlink_to(elsewhere / "replica=1")
    before = _snapshot(elsewhere)

    code, status, err = _deviate(tmp_path, "status", "runs", "--no-cluster", restricted=False)
    assert code == 0, err
    assert _status(status) == {("algo+impl", 0): "completed", ("algo+impl", 1): "unknown"}, status
    line = _naming(err, variant / "replica=1")
    assert f"a symbolic link (to {elsewhere / 'replica=1'}), not followed" in line
    assert line.endswith("the replica is shown as 'unknown'.")

    code, out_json, err = _deviate(tmp_path, "report", "runs", "--format", "json", restricted=False)
    assert code == 0, err
    assert "not followed" in _naming(err, variant / "replica=1")
    assert {row["n"] for row in json.loads(out_json)} == {1}
    assert _snapshot(elsewhere) == before  # never settled, never written
    assert manifest(elsewhere / "replica=1")["status"] == "running"


def _lost_replica(root: Path) -> Path:
    """A replica whose manifest says ``running`` but whose launcher is gone (a process that ended), as a launcher
    killed outright leaves it: ``deviate status`` and ``report`` settle such a replica as ``killed`` on disk."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    path = write_run(
        root,
        "linked",
        "algo",
        0,
        [("val", "val_acc", 0.5)],
        status="running",
        backend="local",
        host=socket.gethostname(),
        launcher_pid=gone.pid,
        started_at=iso_time(),
    )
    # what a live run flushed and never compacted: merged by whoever settles it, never through a link
    RunDirectory(path).metrics().append_part(
        {"step": [1], "epoch": [0], "stage": ["val"], "scope": ["epoch"], "name": ["val_acc"], "value": [0.6],
         "wall_time": [1.0]}
    )  # fmt: skip
    assert list((path / "metrics.parts").iterdir())
    return path


@pytest.mark.parametrize("level", ["experiment", "variant"])
def test_a_linked_experiment_or_variant_folder_is_named_and_not_followed(tmp_path: Path, level: str) -> None:
    study = tmp_path / "runs"
    _study(study, runs=2)
    elsewhere = tmp_path / "elsewhere"
    run_dir = _lost_replica(elsewhere)
    if level == "experiment":
        link, target = study / "experiment=linked", elsewhere / "experiment=linked"
    else:
        link, target = study / "experiment=mlp" / "variant=linked", elsewhere / "experiment=linked" / "variant=algo"
    link.symlink_to(target)
    before = _snapshot(elsewhere)

    code, status, err = _deviate(tmp_path, "status", "runs", "--no-cluster", restricted=False)
    assert code == 0 and "4 replicas: 4 completed" in status, (status, err)
    assert f"a symbolic link (to {target}), not followed" in _naming(err, link)
    code, out, err = _deviate(tmp_path, "report", "runs", "--format", "json", restricted=False)
    assert code == 0 and f"a symbolic link (to {target}), not followed" in _naming(err, link), err
    assert _n(out) == {"algo": 2, "control": 2}
    assert _snapshot(elsewhere) == before and manifest(run_dir)["status"] == "running"


def test_a_run_reached_through_a_linked_dir_is_never_settled(tmp_path: Path) -> None:
    """``DIR`` itself may be a link (as ``--out`` may), and is read; but a run reached through a partition folder
    that is a link is never written: not settled, not compacted."""
    elsewhere = tmp_path / "elsewhere"
    run_dir = _lost_replica(elsewhere)
    link = tmp_path / "experiment=linked"
    link.symlink_to(elsewhere / "experiment=linked")
    before = _snapshot(elsewhere)
    warnings: list[str] = []
    (run,) = find_runs(link, warnings)
    assert run.status == "running"
    (line,) = warnings
    assert f"reached through the symbolic link {link}" in line and "not checked for a launcher that is gone" in line
    assert _snapshot(elsewhere) == before

    (run,) = find_runs(elsewhere, warnings := [])  # the same run, reached directly: settled as killed
    assert run.status == "killed" and manifest(run_dir)["status"] == "killed", warnings
    assert not (run_dir / "metrics.parts").exists()  # and its part merged
