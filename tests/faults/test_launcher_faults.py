"""Fault cases of the launcher and the store (issue 14, items 2, 3, 6, 9), with real ``deviate-replicate`` runs.

- a rerun starts from an empty replica directory: the earlier attempt is moved into ``.attempts/<n>/``;
- a replica stopped by ``--timeout`` while its module imports is a timeout, never a bad ``--trainer``;
- a symbolic link (or a file) where the store expects its own directory is refused; its target is untouched;
- the files of a run follow the umask (0644 under 022), not the 0600 of a temporary file;
- a replica killed by a signal says so first in ``error``, not with the last warning it printed.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Optional

import pyarrow.dataset as ds
import pytest

from deviate_cb.launch.backends.base import Outcome
from deviate_cb.launch.planner import ATTEMPTS_DIR, clear_previous_attempt
from deviate_cb.launch.records import end_fields
from deviate_cb.launch.replica.bootstrap import SignalExit
from deviate_cb.launch.replication import _ended_on_spec_error
from deviate_cb.launch.target.trainer_spec import TrainerSpec
from deviate_cb.report.reading.runs import run_directories
from tests.helpers.replicate_helpers import Completed, manifest, start_cli, trainer, tree

ECHO = trainer("basic.py:echo")


@pytest.fixture
def cli(tmp_path: Path) -> Callable[..., Completed]:
    """Run ``deviate-replicate ARGS --out <tmp>/runs`` in a subprocess (cwd: the test's tmp dir)."""

    def run(*args: str, env: Optional[Mapping[str, str]] = None, timeout: float = 180) -> Completed:
        out = tmp_path / "runs"
        cut = args.index("--") if "--" in args else len(args)
        proc = start_cli([*args[:cut], "--out", str(out), *args[cut:]], cwd=tmp_path, env=env)
        stdout, stderr = proc.communicate(timeout=timeout)
        return Completed(proc.returncode, stdout, stderr, out)

    return run


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Set the umask the launcher (and so every replica) inherits; restored afterwards."""
    previous = os.umask(0o022)
    os.umask(previous)

    def set_umask(value: int) -> None:
        os.umask(value)

    yield set_umask
    os.umask(previous)


def _files(run_dir: Path, *, attempts: bool = False) -> dict[str, int]:
    """Every regular file under ``run_dir`` (relative path -> permission bits), ``.attempts`` left out unless asked."""
    found = {}
    for path in run_dir.rglob("*"):
        relative = path.relative_to(run_dir)
        if path.is_file() and not path.is_symlink() and (attempts or relative.parts[0] != ATTEMPTS_DIR):
            found[relative.as_posix()] = path.stat().st_mode & 0o777
    return found


def _one_line(stderr: str, *expected: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("deviate-replicate: error: ") and "Traceback" not in stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


# -- item 2: a fresh attempt starts from an empty replica directory ----------------------------------------------
@pytest.mark.slow
def test_rerun_moves_the_earlier_attempt_aside_and_starts_empty(cli, tmp_path: Path) -> None:
    failed = cli("--trainer", trainer("basic.py:fail_on_replica"), "-n", "1", env={"FAIL_REPLICA": "0"})
    assert failed.returncode == 1, failed.stderr
    run_dir = failed.run_dir("basic", "algo+impl", 0)
    # what else an attempt leaves: weights (written by the callback), the project's checkpoints and logs
    for name in ("weights_sketch.npz", "weights.npz", "last.ckpt", "lightning_logs/version_0/hparams.yaml"):
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_text("from attempt 1")
    (run_dir / ".metrics.parquet.abc.tmp").write_text("interrupted write")

    resumed = cli("--trainer", ECHO, "-n", "1")
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        [ATTEMPTS_DIR, "run.json", "metrics.parquet", "fingerprint.json", "stdout.log", "stderr.log", "env.json"]
    )
    record = manifest(run_dir)
    assert record["status"] == "completed" and record["attempt"] == 2 and "error" not in record
    first = run_dir / ATTEMPTS_DIR / "1"
    assert manifest(first)["status"] == "failed" and manifest(first)["attempt"] == 1
    assert "fails on purpose" in (first / "stderr.log").read_text()
    assert (first / "lightning_logs/version_0/hparams.yaml").read_text() == "from attempt 1"
    assert {"weights_sketch.npz", "weights.npz", "last.ckpt", ".metrics.parquet.abc.tmp"} <= {
        p.name for p in first.iterdir()
    }

    forced = cli("--trainer", ECHO, "-n", "1", "--force")  # --force: the completed attempt 2 goes aside too
    assert forced.returncode == 0, forced.stderr
    assert manifest(run_dir)["attempt"] == 3
    assert sorted(p.name for p in (run_dir / ATTEMPTS_DIR).iterdir()) == ["1", "2"]
    assert manifest(run_dir / ATTEMPTS_DIR / "2")["attempt"] == 2
    assert not (run_dir / "weights_sketch.npz").exists()

    # readers see the current attempt only: the run finder and a Hive-partitioned pyarrow dataset
    assert [path for path, _ in run_directories(forced.out)] == [run_dir]
    files = ds.dataset(forced.out, format="parquet", partitioning="hive", exclude_invalid_files=True).files
    assert files == [str(run_dir / "metrics.parquet")]


def test_clear_previous_attempt_numbers_and_refuses_links(tmp_path: Path) -> None:
    run_dir = tmp_path / "replica=0"
    run_dir.mkdir()
    assert clear_previous_attempt(run_dir) is None and list(run_dir.iterdir()) == []  # nothing to move
    (run_dir / "run.json").write_text("{not json")  # unreadable manifest: the next free number
    (run_dir / "model.ckpt").symlink_to(tmp_path / "elsewhere.ckpt")  # a link is moved as a link
    (tmp_path / "elsewhere.ckpt").write_text("keep")
    assert clear_previous_attempt(run_dir) == run_dir / ATTEMPTS_DIR / "1"
    assert (run_dir / ATTEMPTS_DIR / "1" / "model.ckpt").is_symlink()
    assert (tmp_path / "elsewhere.ckpt").read_text() == "keep"
    (run_dir / "run.json").write_text(json.dumps({"attempt": 1}))  # number 1 is taken: the next free one
    assert clear_previous_attempt(run_dir) == run_dir / ATTEMPTS_DIR / "2"

    linked = tmp_path / "replica=1"
    linked.symlink_to(run_dir)
    from deviate_cb.errors import UsageError

    with pytest.raises(UsageError, match="is a symbolic link"):
        clear_previous_attempt(linked)


# -- item 3: timeouts and signals are never a bad --trainer --------------------------------------------------------
@pytest.mark.slow
def test_timeout_while_the_module_imports_is_a_timeout_not_a_trainer_error(cli, tmp_path: Path) -> None:
    slow = tmp_path / "slow_import.py"
    slow.write_text("import time\n\ntime.sleep(30)\n\n\ndef main():\n    return {}\n")
    started = time.monotonic()
    done = cli("--trainer", f"{slow}:main", "-n", "2", "--timeout", "2")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert time.monotonic() - started < 25
    assert "2 timed out" in done.stdout and "error" not in done.stderr
    for replica in (0, 1):
        run_dir = done.run_dir("slow_import", "algo+impl", replica)
        record = manifest(run_dir)  # the directories are kept
        assert record["status"] == "timeout" and "trainer_error" not in record, record
        assert record["exit_code"] == 128 + signal.SIGTERM and record["reason"].startswith("timed out after")


def test_signal_exit_at_import_propagates_as_that_exit(tmp_path: Path) -> None:
    module = tmp_path / "stopped_at_import.py"
    module.write_text("from deviate_cb.launch.replica.bootstrap import SignalExit\n\nraise SignalExit(15)\n")
    with pytest.raises(SignalExit) as raised:
        TrainerSpec.parse(f"{module}:main").load_module()
    assert raised.value.code == 143


def test_only_an_unstopped_exit_3_can_be_a_spec_error() -> None:
    assert _ended_on_spec_error(Outcome(returncode=3))
    assert _ended_on_spec_error(Outcome(returncode=3, scheduler_state="COMPLETED"))
    for outcome in (
        Outcome(returncode=3, timed_out=True),
        Outcome(returncode=3, interrupted=True),
        Outcome(returncode=3, cancelled=True),
        Outcome(returncode=3, signal="SIGTERM"),
        Outcome(returncode=3, scheduler_state="TIMEOUT"),
        Outcome(returncode=143, timed_out=True),
        Outcome(returncode=1),
    ):
        assert not _ended_on_spec_error(outcome), outcome


def test_a_trainer_error_raised_by_the_function_itself_is_a_failure(cli, tmp_path: Path) -> None:
    module = tmp_path / "raises_spec_error.py"
    module.write_text(
        "from deviate_cb.launch.target.trainer_spec import TrainerSpecError\n\n\n"
        "def main():\n    raise TrainerSpecError('raised by the training, not by the spec')\n"
    )
    done = cli("--trainer", f"{module}:main", "-n", "2")
    assert done.returncode == 1, (done.stdout, done.stderr)
    for replica in (0, 1):
        record = manifest(done.run_dir("raises_spec_error", "algo+impl", replica))
        assert record["status"] == "failed" and "trainer_error" not in record
        assert "raised by the training" in record["exception"]


def test_a_syntax_error_in_the_trainer_file_names_that_file_not_deviates_own(cli, tmp_path: Path) -> None:
    module = tmp_path / "broken_syntax.py"
    module.write_text("def main(:\n    pass\n")
    done = cli("--trainer", f"{module}:main", "-n", "2")
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "broken_syntax.py" in lines[0] and "syntax error" in lines[0] and "line 1" in lines[0]
    assert "trainer_spec.py" not in done.stderr and not done.variant_dir("broken_syntax", "algo+impl").exists()


# -- item 6: never follow links out of the store ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("where", "kind", "expected"),
    [
        ("experiment=basic/variant=algo+impl/replica=1", "link", "a replica directory"),
        ("experiment=basic/variant=algo+impl/replica=1", "file", "a replica directory"),
        ("experiment=basic/variant=algo+impl/replica=0/.attempts", "link", "the folder of earlier attempts"),
        ("experiment=basic/variant=algo+impl", "link", "a variant directory"),
        ("experiment=basic", "link", "an experiment directory"),
        ("experiment=basic/variant=algo+impl/.deviate-replicate.lock", "link", "the launcher's lock file"),
    ],
)
def test_a_link_or_a_file_in_the_store_is_refused(cli, tmp_path: Path, where: str, kind: str, expected: str) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "sentinel.txt").write_text("keep me")
    (target / "run.json").write_text(json.dumps({"status": "failed", "attempt": 1}))
    path = tmp_path / "runs" / where
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        path.write_text("a file")
    elif where.endswith(".lock"):
        path.symlink_to(target / "sentinel.txt")
    else:
        path.symlink_to(target)
    before_store, before_target = tree(tmp_path / "runs"), tree(target)

    done = cli("--trainer", ECHO, "-n", "2")
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = _one_line(done.stderr, str(path), expected, "symbolic link" if kind == "link" else "a file")
    assert "Received: --out=" in line
    assert (target / "sentinel.txt").read_text() == "keep me"  # not moved aside, not overwritten
    assert json.loads((target / "run.json").read_text()) == {"status": "failed", "attempt": 1}
    assert tree(target) == before_target and tree(tmp_path / "runs") == before_store
    if kind == "file":
        assert path.read_text() == "a file"


# -- item 9: file modes follow the umask -------------------------------------------------------------------------
@pytest.mark.slow
def test_files_of_a_replica_follow_the_umask(cli, umask) -> None:
    for mask, mode, variant in ((0o022, 0o644, "algo"), (0o077, 0o600, "control")):
        umask(mask)
        done = cli("--trainer", ECHO, "-n", "1", "--variant", variant)
        assert done.returncode == 0, done.stderr
        files = _files(done.run_dir("basic", variant, 0))
        assert {"run.json", "metrics.parquet", "fingerprint.json", "stdout.log", "stderr.log"} <= set(files)
        assert files == dict.fromkeys(files, mode), oct(mask)


@pytest.mark.slow
def test_a_lightning_replica_follows_the_umask_and_a_rerun_leaves_no_stale_weights(cli, umask) -> None:
    args = ("-n", "1", "--experiment", "stability")
    umask(0o022)
    first = cli("--trainer", trainer("lightning_stability.py:main"), *args)
    assert first.returncode == 0, first.stderr
    run_dir = first.run_dir("stability", "algo+impl", 0)
    files = _files(run_dir)
    written = {"run.json", "metrics.parquet", "fingerprint.json", "timings.parquet", "predictions.parquet"}
    assert written | {"weights_sketch.npz", "weights.npz"} <= set(files)
    assert files == dict.fromkeys(files, 0o644)

    umask(0o077)  # a rerun that records no weights: the earlier attempt's weights must not be read as its own
    rerun = cli("--trainer", ECHO, *args, "--force")
    assert rerun.returncode == 0, rerun.stderr
    files = _files(run_dir)
    assert "weights_sketch.npz" not in files and "weights" not in manifest(run_dir)
    assert files == dict.fromkeys(files, 0o600)
    kept = _files(run_dir / ATTEMPTS_DIR / "1")
    assert {"weights_sketch.npz", "weights.npz"} <= set(kept) and kept == dict.fromkeys(kept, 0o644)


# -- the smaller case: a killed replica's error says what happened ------------------------------------------------
def test_a_replica_killed_by_a_signal_says_so_before_its_last_warning(cli, tmp_path: Path) -> None:
    module = tmp_path / "warn_then_die.py"
    module.write_text(
        "import os, signal, sys\n\n\n"
        "def main():\n"
        "    print('UserWarning: The dataloader does not have many workers', file=sys.stderr, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = cli("--trainer", f"{module}:main", "-n", "1")
    assert done.returncode == 1, done.stderr
    record = manifest(done.run_dir("warn_then_die", "algo+impl", 0))
    assert record["signal"] == "SIGKILL" and record["reason"] == "killed by SIGKILL"
    assert record["error"].startswith("killed by SIGKILL; last stderr lines:\n")
    assert record["error"].endswith("UserWarning: The dataloader does not have many workers")


def test_error_keeps_a_traceback_as_it_is_and_puts_the_stop_first(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_text("Traceback (most recent call last):\n  File 'x', line 1\nValueError: bad\n")
    assert end_fields(Outcome(returncode=1), log).error == log.read_text().strip()
    log.write_text("Epoch 3: 50%\n")
    timed_out = end_fields(Outcome(returncode=143, timed_out=True, started_at=0.0, ended_at=2.0), log)
    assert timed_out.error == "timed out after 2.0 s; exited with code 143; last stderr lines:\nEpoch 3: 50%"
    assert end_fields(Outcome(returncode=-9, signal="SIGKILL"), tmp_path / "none").error == "killed by SIGKILL"


def test_atomic_writes_leave_the_users_random_state_alone_and_no_temporary_file(tmp_path: Path, umask) -> None:
    import random

    from deviate_cb.store.atomic import atomic_write_bytes

    umask(0o027)
    random.seed(7)
    state = random.getstate()
    for k in range(3):
        atomic_write_bytes(tmp_path / "run.json", f'{{"k": {k}}}\n'.encode())
    assert random.getstate() == state  # temporary names come from os.urandom, never from the user's stream
    assert json.loads((tmp_path / "run.json").read_text()) == {"k": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert (tmp_path / "run.json").stat().st_mode & 0o777 == 0o640
