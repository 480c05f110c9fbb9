"""Never pool what differs (issue 25, items 1 and 6), with real ``deviate-replicate`` and ``deviate report`` runs.

- a rerun into a group whose completed replicas ran another configuration (arguments, command, Keras backend,
  ``--metric-regex``, seed takeover) is refused in one line that names the difference and the two ways on;
- ``--force`` reruns the group with the new configuration; completed replicas past ``-n`` that keep the old one
  are named by the launcher, and the report refuses to pool the group (it names each configuration's replicas);
- ``-n`` above the cap is refused at once; lifted with ``--max-replicas``, a million-replica study starts its
  first replica without planning the million first (bounded memory).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import pytest

from deviate_cb.errors import UsageError
from deviate_cb.launch.planner import plan_replicas
from deviate_cb.store.configuration import configuration_fields
from deviate_cb.store.run_directory import RunDirectory, run_path
from tests.helpers.replicate_helpers import REPO, Completed, child_env, manifest, start_cli

LR = f"{Path(__file__).parent / 'lr_fn.py'}:main"
PRINT_ARG = [sys.executable, "-c", "import sys; print('acc=' + sys.argv[1])"]


@pytest.fixture
def cli(tmp_path: Path) -> Callable[..., Completed]:
    """Run ``deviate-replicate ARGS --out <tmp>/runs`` in a subprocess (cwd: the test's tmp dir)."""

    def run(*args: str, timeout: float = 180) -> Completed:
        out = tmp_path / "runs"
        cut = args.index("--") if "--" in args else len(args)
        proc = start_cli([*args[:cut], "--out", str(out), *args[cut:]], cwd=tmp_path)
        stdout, stderr = proc.communicate(timeout=timeout)
        return Completed(proc.returncode, stdout, stderr, out)

    return run


def _report(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from deviate_cb.cli.main import main; sys.exit(main())",
            "report",
            str(directory),
            *args,
        ],
        env=child_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("deviate-replicate: error: "), stderr
    return lines[0]


@pytest.mark.slow
def test_rerun_with_other_arguments_is_refused_and_nothing_runs(cli: Callable[..., Completed]) -> None:
    first = cli("-n", "2", "--variant", "algo", "--trainer", LR, "--", "0.1")
    assert first.returncode == 0, first.stderr
    again = cli("-n", "3", "--variant", "algo", "--trainer", LR, "--", "0.01")
    assert again.returncode == 2
    line = _error_line(again.stderr)
    assert "trainer arguments ['0.1'] vs ['0.01']" in line
    assert "--experiment" in line and "--force" in line
    variant_dir = first.out / "experiment=lr_fn" / "variant=algo"
    assert sorted(p.name for p in variant_dir.iterdir() if not p.name.startswith(".")) == ["replica=0", "replica=1"]
    # the same configuration resumes: the completed replicas are skipped, the new one runs
    resumed = cli("-n", "3", "--variant", "algo", "--trainer", LR, "--", "0.1")
    assert resumed.returncode == 0, resumed.stderr
    assert "2 skipped" in resumed.stdout
    recorded = manifest(variant_dir / "replica=2")["configuration"]
    assert recorded["trainer_args"] == ["0.1"] and recorded["variant"] == "algo" and recorded["mode"] == "trainer"


def test_command_mode_rerun_with_another_command_is_refused(cli: Callable[..., Completed]) -> None:
    regex = ["--metric-regex", r"acc=(?P<acc>[0-9.]+)"]
    first = cli("-n", "1", "--experiment", "cmd", *regex, "--", *PRINT_ARG, "0.1")
    assert first.returncode == 0, first.stderr
    again = cli("-n", "2", "--experiment", "cmd", *regex, "--", *PRINT_ARG, "0.01")
    assert again.returncode == 2
    assert "command [" in _error_line(again.stderr)
    other_regex = cli("-n", "2", "--experiment", "cmd", "--metric-regex", r"acc=(?P<a>\S+)", "--", *PRINT_ARG, "0.1")
    assert other_regex.returncode == 2
    assert "--metric-regex" in _error_line(other_regex.stderr)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"keras_backend": "torch"}, "Keras backend 'tensorflow' vs 'torch'"),
        ({"keep_project_seeds": True}, "--keep-project-seeds False vs True"),
        ({"trainer": "other.py:main"}, "--trainer 't.py:main' vs 'other.py:main'"),
        ({"audit_steps": 3}, "audited steps none vs 3"),
    ],
)
def test_every_part_of_the_configuration_is_compared(tmp_path: Path, change: dict, named: str) -> None:
    base = dict(mode="trainer", variant="algo", trainer="t.py:main", base_seed=0, keras_backend="tensorflow")
    recorded = configuration_fields(**base)  # type: ignore[arg-type]
    RunDirectory(run_path(tmp_path, "e", "algo", 0)).update_manifest(status="completed", seed=0, configuration=recorded)
    with pytest.raises(UsageError, match="completed with another configuration") as raised:
        plan_replicas(tmp_path, "e", "algo", 2, configuration=configuration_fields(**{**base, **change}))  # type: ignore[arg-type]
    assert named in str(raised.value)
    same = plan_replicas(tmp_path, "e", "algo", 2, configuration=recorded)
    assert [p.run for p in same] == [False, True]
    assert all(p.run for p in plan_replicas(tmp_path, "e", "algo", 2, force=True, configuration=recorded))


def test_legacy_manifest_without_configuration_is_compared_on_what_it_records(tmp_path: Path) -> None:
    RunDirectory(run_path(tmp_path, "e", "algo", 0)).update_manifest(
        status="completed", seed=0, mode="trainer", trainer="t.py:main", trainer_args=["0.1"]
    )
    new = configuration_fields(mode="trainer", variant="algo", trainer="t.py:main", trainer_args=["0.01"])
    with pytest.raises(UsageError, match=r"trainer arguments \['0.1'\] vs \['0.01'\]"):
        plan_replicas(tmp_path, "e", "algo", 1, configuration=new)


@pytest.mark.slow
def test_force_reruns_and_the_report_refuses_to_pool_leftovers(cli: Callable[..., Completed]) -> None:
    first = cli("-n", "3", "--variant", "algo", "--trainer", LR, "--", "0.1")
    assert first.returncode == 0, first.stderr
    forced = cli("-n", "2", "--variant", "algo", "--force", "--trainer", LR, "--", "0.01")
    assert forced.returncode == 0, forced.stderr
    assert "replica 2 of this group completed with another configuration" in forced.stdout
    variant_dir = first.out / "experiment=lr_fn" / "variant=algo"
    assert [manifest(variant_dir / f"replica={k}")["configuration"]["trainer_args"] for k in range(3)] == [
        ["0.01"],
        ["0.01"],
        ["0.1"],
    ]
    report = _report(first.out, "--format", "csv")
    text = report.stdout + report.stderr
    assert "experiment=lr_fn variant=algo is not reported" in text, text
    assert "replicas 0, 1: trainer arguments ['0.01']" in text and "replica 2: trainer arguments ['0.1']" in text
    assert "Traceback" not in text
    rows = [line for line in report.stdout.splitlines() if line.startswith("lr_fn,")]
    assert rows == [], report.stdout  # nothing of the mixed group is in the statistics
    table = _report(first.out)
    assert "(3 completed runs of different configurations, aggregate=last): not reported" in table.stdout, table.stdout


def test_absurd_runs_is_refused_at_once(cli: Callable[..., Completed], tmp_path: Path) -> None:
    started = time.monotonic()
    refused = cli("-n", "1000000", "--trainer", LR, "--", "0.1")
    assert refused.returncode == 2
    line = _error_line(refused.stderr)
    assert "--runs=1000000" in line and "--max-replicas 1000000" in line
    assert time.monotonic() - started < 60
    assert not (tmp_path / "runs").exists()


def _peak_rss_kib(pid: int) -> Optional[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the launcher's peak memory from /proc")
def test_a_million_replicas_start_without_planning_them_all(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    proc = start_cli(
        ["-n", "1000000", "--max-replicas", "1000000", "--experiment", "big", "--out", str(out), "--", *sleeper],
        cwd=tmp_path,
    )
    first = out / "experiment=big" / "variant=algo+impl" / "replica=0" / "run.json"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if first.exists() and json.loads(first.read_text() or "{}").get("status") == "running":
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        assert first.exists(), "the first replica did not start"
        peak = _peak_rss_kib(proc.pid)
        assert peak is not None and peak < 500 * 1024, f"launcher peak memory {peak} KiB"  # 2.9 GB when planned eagerly
        assert len(list(first.parent.parent.iterdir())) <= 2  # one replica started, no directory made ahead
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert os.path.isdir(first.parent)
