"""A study whose launcher died, read where the reader cannot write it (issue 45, item 7).

A real launcher is killed outright (``SIGKILL``) while two replicas run, beside one replica that completed
earlier; its replicas end with it. The study is then read by ``deviate status`` and ``deviate report``
subprocesses that cannot write it: through a read-only bind mount (as root), or as another user (``nobody``, on
the root-owned study with modes 0755/0644). Both show the two lost replicas ``killed (not written: read-only)``,
count them as not completed, say once that the study could not be updated, keep the completed replica, leave
every ``run.json`` as it was, and never end in a traceback. (Before: ``running`` forever.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import alive, child_env, manifest_or_empty, wait_for

HERE = Path(__file__).resolve().parent
SHOWN = "killed (not written: read-only)"
VARIANT = ("experiment=e", "variant=algo+impl")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bind mounts, setpriv and /proc are Linux's"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount and another user need root to set up"),
]


def _script(name: str) -> str:
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable} (pip install -e .)")
    return str(script)


def _replicate(out: Path, n: int, seconds: str) -> subprocess.Popen[str]:
    argv = [
        _script("deviate-replicate"),
        "-n",
        str(n),
        "--parallel",
        "2",
        "--trainer",
        f"{HERE / 'sleeper_fn.py'}:main",
    ]
    return subprocess.Popen(
        [*argv, "--out", str(out), "--experiment", "e"],
        cwd=out.parent,
        env=child_env({"SLEEPER_SECONDS": seconds}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def lost_study() -> Iterator[Path]:
    """A real study, world-readable and root-owned: replica 0 completed, replicas 1 and 2 lost with their
    launcher (SIGKILL), their manifests still ``running``."""
    top = Path(tempfile.mkdtemp(prefix="deviate-readonly-"))
    top.chmod(0o755)  # `nobody` must reach it
    out = top / "runs"
    first = _replicate(out, 1, "0")
    stdout, stderr = first.communicate(timeout=180)
    assert first.returncode == 0, stdout + stderr
    second = _replicate(out, 3, "120")
    runs = [out.joinpath(*VARIANT, f"replica={k}") for k in (1, 2)]
    try:
        wait_for(lambda: all(manifest_or_empty(r).get("bootstrap") for r in runs), timeout=120)
        pids = [entry["pid"] for r in runs for entry in manifest_or_empty(r)["bootstrap"]]
        second.send_signal(signal.SIGKILL)
        second.communicate(timeout=30)
        wait_for(lambda: not any(alive(pid) for pid in pids), timeout=60)  # they end with their launcher
    finally:
        if second.poll() is None:
            second.kill()
            second.communicate()
    assert [manifest_or_empty(r)["status"] for r in runs] == ["running", "running"]
    subprocess.run(["chmod", "-R", "u+rwX,go+rX,go-w", str(out)], check=True)
    yield out
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def read_only_view(lost_study: Path) -> Iterator[Path]:
    """``lost_study`` seen through a read-only bind mount (skipped where mounting is refused)."""
    view = lost_study.parent / "ro"
    view.mkdir(exist_ok=True)
    for argv in (["mount", "--bind", str(lost_study), str(view)], ["mount", "-o", "remount,ro,bind", str(view)]):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(view)], capture_output=True)
            pytest.skip(f"cannot make a read-only bind mount here: {' '.join(argv)}: {done.stderr.strip()}")
    try:
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=True)


def _deviate(args: Sequence[str], cwd: Path, prefix: Sequence[str] = ()) -> tuple[int, str, str]:
    done = subprocess.run(
        [*prefix, _script("deviate"), *args], cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def _as_nobody() -> list[str]:
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) to run the reader as another user")
    probe = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "true"])
    if probe.returncode != 0:
        pytest.skip("setpriv cannot run a command as nobody here")
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@pytest.mark.parametrize("reader", ["read-only mount", "another user"])
def test_a_lost_replica_reads_killed_not_written_where_the_study_cannot_be_written(
    lost_study: Path, reader: str, request: pytest.FixtureRequest
) -> None:
    if reader == "read-only mount":
        where, prefix, cause = request.getfixturevalue("read_only_view"), [], "read-only file system"
    else:
        where, prefix, cause = lost_study, _as_nobody(), "permission denied"
    before = {p: p.read_bytes() for p in lost_study.rglob("run.json")}

    code, out, err = _deviate(["status", str(where)], lost_study.parent, prefix)
    assert code == 0 and "Traceback" not in out + err, out + err
    shown = {line.split()[2]: line for line in out.splitlines() if line.startswith("e ")}
    assert "completed" in shown["0"] and SHOWN in shown["1"] and SHOWN in shown["2"], out
    assert f"3 replicas: 1 completed, 2 {SHOWN}" in out, out
    notes = [line for line in err.splitlines() if "cannot be updated here" in line]
    assert len(notes) == 1 and f"({cause})" in notes[0] and "2 replicas whose launcher is gone" in notes[0], err

    code, out, err = _deviate(["report", str(where)], lost_study.parent, prefix)
    assert code == 0 and "Traceback" not in out + err, out + err
    assert out.count(SHOWN) == 2 and "1 completed run" in out, out
    notes = [line for line in err.splitlines() if "cannot be updated here" in line]
    assert len(notes) == 1 and f"({cause})" in notes[0], err

    assert {p: p.read_bytes() for p in lost_study.rglob("run.json")} == before  # nothing written
    assert all(json.loads(b)["status"] in ("running", "completed") for b in before.values())
