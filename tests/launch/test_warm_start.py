"""Warm start: replicas forked from a template that imported the frameworks give a cold start's numbers, fail
alone, die with their launcher, and start cold (with a note) wherever forking could not be exact."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deviate_cb.launch.backends.warm import Template, WarmStarter, WarmStartUnavailable, cold_reason
from deviate_cb.launch.target.preimport import preimports, project_files
from deviate_cb.launch.target.trainer_spec import TrainerSpec
from tests.helpers.replicate_helpers import (
    REPO,
    TRAINERS,
    alive,
    child_env,
    final_metrics,
    manifest,
    manifest_or_empty,
    metrics,
    start_cli,
    trainer,
    wait_for,
)

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _variant(out: Path, experiment: str, variant: str) -> Path:
    return out / f"experiment={experiment}" / f"variant={variant}"


def _rows(run_dir: Path) -> list[tuple[Any, ...]]:
    rows = [(r["stage"], r["scope"], r["name"], r["step"], r["epoch"], r["value"]) for r in metrics(run_dir)]
    return sorted(rows, key=repr)


@pytest.mark.parametrize("variant", ["control", "algo"])
def test_a_warm_lightning_replica_gives_the_metrics_of_a_cold_one(tmp_path: Path, variant: str) -> None:
    spec = trainer("lightning_tiny.py:main")
    common = ["--trainer", spec, "-n", "2", "--parallel", "2", "--variant", variant]
    warm = _run([*common, "--out", str(tmp_path / "warm")], tmp_path)
    cold = _run([*common, "--out", str(tmp_path / "cold"), "--cold"], tmp_path)
    assert warm.returncode == 0 and cold.returncode == 0, (warm.stdout, warm.stderr, cold.stdout, cold.stderr)
    assert "warm start (the template imports lightning, torch" in warm.stdout
    assert "cold start (--cold)" in cold.stdout
    for replica in range(2):
        hot = _variant(tmp_path / "warm", "lightning_tiny", variant) / f"replica={replica}"
        fresh = _variant(tmp_path / "cold", "lightning_tiny", variant) / f"replica={replica}"
        assert manifest(hot)["start_mode"] == "warm" and manifest(fresh)["start_mode"] == "cold"
        assert manifest(hot)["warm"]["ready_to_run_s"] >= 0
        assert len(_rows(hot)) > 10
        assert _rows(hot) == _rows(fresh), f"replica {replica} differs warm vs cold"
        assert manifest(hot)["determinism"]["verified"], manifest(hot)["determinism"]["problems"]


def test_warm_replicas_fail_alone_and_seed_and_hash_as_cold_ones(tmp_path: Path) -> None:
    spec = trainer("warm_cases.py:main")
    common = ["--trainer", spec, "-n", "5", "--parallel", "2", "--variant", "algo", "--seed", "7", "--timeout", "15"]
    warm = _run([*common, "--out", str(tmp_path / "warm")], tmp_path)
    assert warm.returncode == 1, (warm.stdout, warm.stderr)
    assert "2 completed, 2 failed, 0 skipped, 1 timed out" in warm.stdout, warm.stdout
    runs = _variant(tmp_path / "warm", "warm_cases", "algo")
    found = {k: manifest(runs / f"replica={k}") for k in range(5)}
    assert [found[k]["status"] for k in range(5)] == ["completed", "failed", "failed", "timeout", "completed"]
    assert "RuntimeError: replica 1 fails on purpose" in found[1]["exception"]
    assert found[2]["signal"] == "SIGSEGV"
    assert "Traceback" in (runs / "replica=1" / "stderr.log").read_text()
    assert {found[k]["start_mode"] for k in range(5)} == {"warm"}
    # one template forked every replica: crashes, a segfault and a timeout did not touch it
    assert len({found[k]["warm"]["template_pid"] for k in (0, 4)}) == 1
    assert found[4]["hash_seed"] == found[0]["hash_seed"] == 7
    cold = _run(
        [
            "--trainer",
            spec,
            "-n",
            "5",
            "--variant",
            "algo",
            "--seed",
            "7",
            "--cold",
            "--out",
            str(tmp_path / "c"),
            "--timeout",
            "15",
        ],
        tmp_path,
    )
    fresh = _variant(tmp_path / "c", "warm_cases", "algo")
    for replica in (0, 4):
        assert final_metrics(runs / f"replica={replica}") == final_metrics(fresh / f"replica={replica}")
    assert final_metrics(runs / "replica=0")["numpy_draw"] != final_metrics(runs / "replica=4")["numpy_draw"]
    assert final_metrics(runs / "replica=0")["str_hash"] == final_metrics(runs / "replica=4")["str_hash"]
    assert cold.returncode == 1


def test_a_template_that_dies_takes_its_replicas_and_is_restarted(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    launcher = start_cli(
        ["--trainer", trainer("warm_cases.py:sleepy"), "-n", "4", "--parallel", "2", "--out", str(out)], cwd=tmp_path
    )
    runs = _variant(out, "warm_cases", "algo+impl")
    try:
        wait_for(lambda: all("warm" in manifest_or_empty(runs / f"replica={k}") for k in (0, 1)))
        template = manifest(runs / "replica=0")["warm"]["template_pid"]
        os.kill(template, signal.SIGKILL)
        stdout, stderr = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 1, (stdout, stderr)
    assert "2 completed, 2 failed" in stdout, stdout
    for replica in (0, 1):
        record = manifest(runs / f"replica={replica}")
        assert record["status"] in ("killed", "failed"), record
        assert record["warm_lost"] == f"its warm-start template (pid {template}) died"
    for replica in (2, 3):
        record = manifest(runs / f"replica={replica}")
        assert record["status"] == "completed" and record["start_mode"] == "warm"
        assert record["warm"]["template_pid"] != template  # a new template


def test_a_killed_launcher_takes_the_template_and_every_warm_replica(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    launcher = start_cli(
        ["--trainer", trainer("warm_cases.py:sleepy"), "-n", "2", "--parallel", "2", "--out", str(out)], cwd=tmp_path
    )
    runs = _variant(out, "warm_cases", "algo+impl")
    try:
        wait_for(lambda: all("warm" in manifest_or_empty(runs / f"replica={k}") for k in (0, 1)))
        records = [manifest(runs / f"replica={k}") for k in (0, 1)]
        pids = [r["bootstrap"][0]["pid"] for r in records] + [records[0]["warm"]["template_pid"]]
        assert all(alive(pid) for pid in pids)
        launcher.send_signal(signal.SIGKILL)
        launcher.communicate(timeout=30)
        wait_for(lambda: not any(alive(pid) for pid in pids), timeout=20)
    finally:
        if launcher.poll() is None:
            launcher.kill()


def test_a_command_with_interpreter_options_starts_cold_and_says_why(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('trained', sys.flags.dev_mode)\n")
    done = _run(["-n", "2", "--out", str(tmp_path / "runs"), "--", "python", "-X", "dev", str(script)], tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    note = "deviate-replicate: cold start: the command passes options to the interpreter (-X dev)"
    assert done.stdout.count(note) == 1, done.stdout
    record = manifest(_variant(tmp_path / "runs", "train", "algo+impl") / "replica=1")
    assert record["start_mode"] == "cold" and record["cold_reason"] == note.split("cold start: ")[1]
    assert (
        "trained True" in (_variant(tmp_path / "runs", "train", "algo+impl") / "replica=1" / "stdout.log").read_text()
    )


def test_a_framework_that_cannot_be_imported_is_skipped_and_the_study_stays_warm(tmp_path: Path) -> None:
    if importlib.util.find_spec("optax") is not None:
        pytest.skip("optax is installed here: its import cannot fail")
    script = tmp_path / "optional.py"
    script.write_text(
        "try:\n    import optax\nexcept ImportError:\n    optax = None\n\n"
        "def main():\n    return {'has_optax': float(optax is not None)}\n"
    )
    done = _run(["--trainer", f"{script}:main", "-n", "2", "--out", str(tmp_path / "runs")], tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "cold start" not in done.stdout, done.stdout
    record = manifest(_variant(tmp_path / "runs", "optional", "algo+impl") / "replica=0")
    assert record["start_mode"] == "warm" and "cold_reason" not in record
    assert record["warm"]["template_skipped"] == ["optax (ModuleNotFoundError: No module named 'optax')"]


def test_a_template_whose_imports_start_a_thread_is_refused(tmp_path: Path) -> None:
    (tmp_path / "threaded_lib.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True, name='poller').start()\n"
    )
    env = {**child_env(), "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    with pytest.raises(WarmStartUnavailable, match=r"not safe to fork: a Python thread is running .*\(poller\)"):
        Template(["threaded_lib"], env, str(tmp_path), timeout_s=60)
    starter = WarmStarter(timeout_s=60)
    argv = [sys.executable, str(tmp_path / "threaded_lib.py")]
    log = str(tmp_path / "log")
    first = starter.start(["threaded_lib"], argv, env, str(tmp_path), log, log)
    again = starter.start(["threaded_lib"], argv, env, str(tmp_path), log, log)
    assert first[0] is None and again == first and "poller" in (first[1] or "")  # refused once, not retried
    starter.close()


def test_cold_reasons_and_what_a_template_imports(tmp_path: Path) -> None:
    assert cold_reason([sys.executable, "-m", "pkg.train", "fit"]) is None
    assert cold_reason([sys.executable, "train.py", "-X"]) is None  # options of the script, not the interpreter
    assert cold_reason(["/bin/bash", "run.sh"]) == f"the command runs /bin/bash, not this Python ({sys.executable})"
    assert cold_reason([sys.executable, "-c", "print(1)"]) == "the command runs no script or module file (-c or stdin)"
    (tmp_path / "model.py").write_text("import torch\nfrom torch import nn\nimport helpers\n")
    (tmp_path / "helpers.py").write_text("import keras\n")
    (tmp_path / "train.py").write_text("import json\nimport lightning.pytorch as pl\nfrom model import Net\n")
    spec = TrainerSpec.parse(f"{tmp_path / 'train.py'}:main")
    modules = preimports(project_files(spec, tmp_path), tmp_path)
    assert modules[:3] == ("lightning.pytorch", "torch", "keras")  # helpers.py is two levels down
    assert "deviate_cb.lightning" in modules and "deviate_cb.keras" in modules
    assert not any(name in modules for name in ("json", "model", "helpers"))
    assert json.loads(json.dumps(modules)) == list(modules)
    assert TRAINERS.is_dir()
