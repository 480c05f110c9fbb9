"""The project's own determinism switches never cancel a variant (issue 26, item 1).

A project that switches determinism on itself (``torch.use_deterministic_algorithms(True)``,
``tf.config.experimental.enable_op_determinism()``, ``Trainer(deterministic=True)``, ``TF_DETERMINISTIC_OPS=1``)
would make ``impl`` replicas measure no implementation noise, and one that switches it off
(``cudnn.benchmark = True``) would make ``control`` replicas nondeterministic. Inside a replica the variant wins and
the project's call is recorded (``run.json`` ``determinism_calls``); ``--keep-project-determinism`` keeps the
project's switches, warns at launch and lists every such replica as a problem in the launcher's summary, ``deviate
status``, the report, its HTML page and ``compare``; the variance decomposition of an ``impl`` group that ran
deterministic says "not measurable: determinism was in effect" instead of a number.

Every test runs real ``deviate-replicate`` subprocesses on scripts written to ``tmp_path``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from deviate_cb.capture.switch_takeover import applied_setting
from tests.helpers.replicate_helpers import REPO, child_env, manifest, start_cli

TORCH_SCRIPT = """
import sys
import torch
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = True
print("in effect:", torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
      torch.backends.cudnn.benchmark)
x = torch.randn(64, 8)
print(f"final: acc={float(x.mean()) + 1:.6f}")
"""

SWITCHES_OFF = """
import torch
torch.use_deterministic_algorithms(False)
torch.backends.cudnn.benchmark = True
print("in effect:", torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
      torch.backends.cudnn.benchmark)
print("final: acc=0.5")
"""

TF_SCRIPT = """
import os
os.environ["TF_DETERMINISTIC_OPS"] = "1"
import keras
import tensorflow as tf
keras.utils.set_random_seed(42)
tf.config.experimental.enable_op_determinism()
from tensorflow.python.framework import config
print("in effect:", config.is_op_determinism_enabled())
print(f"final: acc={float(tf.random.uniform(())):.6f}")
"""

LIGHTNING_TRAINER = """
import lightning as L
import torch
from lightning_cb.models import TinyModule, loader


def main():
    trainer = L.Trainer(max_epochs=1, deterministic=True, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    trainer.fit(TinyModule(), loader(32), loader(32, shuffle=False))
    print("in effect:", torch.are_deterministic_algorithms_enabled())
"""

REGEX = ["--metric-regex", r"acc=(?P<acc>[0-9.]+)"]


def _replicate(tmp_path: Path, *args: str, out: str = "runs") -> tuple[int, str, str, Path]:
    root = tmp_path / out
    cut = args.index("--") if "--" in args else len(args)
    env = child_env({"PYTHONPATH": str(REPO / "tests")})
    proc = start_cli([*args[:cut], "--out", str(root), *args[cut:]], cwd=tmp_path, env=env)
    stdout, stderr = proc.communicate(timeout=300)
    return proc.returncode, stdout, stderr, root


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from deviate_cb.cli.main import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=child_env(), cwd=REPO, capture_output=True, text=True, timeout=300
    )


def _calls(record: dict[str, Any]) -> dict[str, Any]:
    return {call["call"]: call["applied"] for call in record["determinism_calls"]["calls"]}


def _log(root: Path, experiment: str, variant: str, replica: int = 0) -> str:
    return (root / f"experiment={experiment}" / f"variant={variant}" / f"replica={replica}" / "stdout.log").read_text()


@pytest.mark.parametrize(
    ("switch", "asked", "requested", "applied"),
    [
        ("torch.use_deterministic_algorithms", True, False, False),
        ("torch.use_deterministic_algorithms", False, True, True),
        ("torch.use_deterministic_algorithms", True, True, True),
        ("torch.use_deterministic_algorithms", False, False, False),
        ("torch.backends.cudnn.deterministic", True, False, False),
        ("torch.backends.cudnn.deterministic", False, True, True),
        ("torch.backends.cudnn.benchmark", True, True, False),
        ("torch.backends.cudnn.benchmark", True, False, True),  # autotuning is the project's choice under impl
        ("tf.config.experimental.enable_op_determinism", True, False, False),
        ("tf.config.experimental.enable_op_determinism", True, True, True),
        ("tf.config.experimental.enable_op_determinism", True, "warn", True),
        ("tf.config.experimental.disable_op_determinism", True, True, False),
    ],
)
def test_the_variant_decides_each_switch(switch: str, asked: Any, requested: Any, applied: Any) -> None:
    assert applied_setting(switch, asked, requested=requested) == applied


@pytest.mark.slow
def test_impl_replicas_of_a_script_that_switches_determinism_on_run_nondeterministic(tmp_path: Path) -> None:
    script = _script(tmp_path, "det.py", TORCH_SCRIPT)
    code, stdout, stderr, root = _replicate(tmp_path, "-n", "2", "--variant", "impl", *REGEX, "--", "python", script)
    assert code == 0, stdout + stderr
    for replica in range(2):
        assert "in effect: False False True" in _log(root, "det", "impl", replica)
        record = manifest(root / "experiment=det" / "variant=impl" / f"replica={replica}")
        assert record["determinism"]["problems"] == []
        assert record["determinism"]["in_effect"]["torch"]["deterministic_algorithms"] is False
        assert record["determinism_calls"]["take_over"] is True
        assert _calls(record) == {
            "torch.use_deterministic_algorithms": False,  # asked True: the variant wins
            "torch.backends.cudnn.deterministic = True": False,
            "torch.backends.cudnn.benchmark = True": True,  # autotuning stays the project's choice
        }
    assert "warning" not in stdout + stderr


@pytest.mark.slow
def test_control_replicas_stay_deterministic_when_the_project_switches_it_off(tmp_path: Path) -> None:
    script = _script(tmp_path, "off.py", SWITCHES_OFF)
    code, stdout, stderr, root = _replicate(tmp_path, "-n", "1", "--variant", "control", *REGEX, "--", "python", script)
    assert code == 0, stdout + stderr
    assert "in effect: True True False" in _log(root, "off", "control")
    record = manifest(root / "experiment=off" / "variant=control" / "replica=0")
    assert record["determinism"]["problems"] == []
    assert _calls(record) == {
        "torch.use_deterministic_algorithms": True,
        "torch.backends.cudnn.benchmark = True": False,
    }


@pytest.mark.slow
def test_keep_project_determinism_is_a_problem_everywhere_and_the_share_is_not_measurable(tmp_path: Path) -> None:
    script = _script(tmp_path, "det.py", TORCH_SCRIPT)
    code, stdout, stderr, root = _replicate(
        tmp_path, "-n", "2", "--variant", "impl", "--keep-project-determinism", *REGEX, "--", "python", script
    )
    assert code == 0, stdout + stderr
    assert "--keep-project-determinism: the project's own determinism switches stay in effect" in stdout + stderr
    assert "in effect: True True True" in _log(root, "det", "impl")
    expected = (
        "replicas 0, 1: the variant's determinism was not in effect: deterministic tooling was requested off, but "
        "torch deterministic algorithms are on: the project switched it itself "
        "(torch.use_deterministic_algorithms(True)) and --keep-project-determinism kept it"
    )
    assert expected in stdout + stderr  # the launcher's summary
    record = manifest(root / "experiment=det" / "variant=impl" / "replica=0")
    assert record["determinism_calls"]["take_over"] is False
    assert record["configuration"]["keep_project_determinism"] is True
    code, stdout, stderr, root = _replicate(
        tmp_path, "-n", "2", "--variant", "algo+impl", *REGEX, "--", "python", script
    )
    assert code == 0, stdout + stderr

    status = _cli("status", str(root))
    assert expected in status.stdout + status.stderr, status.stdout + status.stderr
    report = _cli("report", str(root))
    assert report.returncode == 0, report.stderr
    assert expected in report.stdout + report.stderr
    shown = " ".join(report.stdout.split())  # the terminal's table folds long notes
    assert "not measurable: determinism was in effect in impl (torch deterministic algorithms, cuDNN" in shown
    assert "implementation share (impl / algo+impl): not measurable here: determinism was in effect" in shown
    page = tmp_path / "report.html"
    html = _cli("report", str(root), "--format", "html", "-o", str(page))
    assert html.returncode == 0, html.stderr
    text = page.read_text(encoding="utf-8")
    assert "--keep-project-determinism kept it" in text
    assert "not measurable: determinism was in effect" in text
    compare = _cli("compare", str(root), "--a", "variant=impl", "--b", "variant=algo+impl")
    assert "--keep-project-determinism kept it" in compare.stdout + compare.stderr


@pytest.mark.slow
def test_a_rerun_that_keeps_the_project_determinism_is_another_configuration(tmp_path: Path) -> None:
    script = _script(tmp_path, "det.py", TORCH_SCRIPT)
    code, stdout, stderr, _ = _replicate(tmp_path, "-n", "1", "--variant", "impl", *REGEX, "--", "python", script)
    assert code == 0, stdout + stderr
    args = ("-n", "1", "--variant", "impl", "--keep-project-determinism", *REGEX, "--", "python", script)
    code, stdout, stderr, _ = _replicate(tmp_path, *args)
    assert code == 2
    assert "--keep-project-determinism False vs True" in stderr, stderr


@pytest.mark.slow
def test_tensorflow_op_determinism_and_its_environment_variable_are_taken_over(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    script = _script(tmp_path, "recipe.py", TF_SCRIPT)
    args = ("-n", "1", "--variant", "impl", "--keras-backend", "tensorflow", *REGEX, "--", "python", script)
    code, stdout, stderr, root = _replicate(tmp_path, *args)
    assert code == 0, stdout + stderr
    assert "in effect: False" in _log(root, "recipe", "impl")
    record = manifest(root / "experiment=recipe" / "variant=impl" / "replica=0")
    assert record["determinism"]["problems"] == []
    assert record["determinism"]["in_effect"]["tensorflow"]["op_determinism"] is False
    assert _calls(record) == {
        "os.environ['TF_DETERMINISTIC_OPS'] = '1'": False,
        "tf.config.experimental.enable_op_determinism()": False,
    }
    code, stdout, stderr, root = _replicate(tmp_path, "--keep-project-determinism", *args, out="kept")
    assert code == 0, stdout + stderr
    assert "in effect: True" in _log(root, "recipe", "impl")
    assert "TensorFlow's op determinism is on: the project switched it itself " in stdout + stderr
    assert "(tf.config.experimental.enable_op_determinism()) and --keep-project-determinism kept it" in stdout + stderr


@pytest.mark.slow
def test_a_lightning_trainer_asking_for_determinism_is_recorded_as_its_argument(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    trainer = _script(tmp_path, "fit.py", LIGHTNING_TRAINER)
    code, stdout, stderr, root = _replicate(
        tmp_path, "-n", "1", "--variant", "algo+impl", "--trainer", f"{trainer}:main"
    )
    assert code == 0, stdout + stderr
    record = manifest(root / "experiment=fit" / "variant=algo+impl" / "replica=0")
    assert "in effect: False" in _log(root, "fit", "algo+impl")
    calls = _calls(record)
    assert calls["Trainer(deterministic=True)"] is False, calls
    assert record["determinism"]["problems"] == []
