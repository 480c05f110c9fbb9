"""Backend options of deviate-replicate: parsed and checked without importing submitit or Ray.

A malformed value or an option the chosen backend does not take is one line on stderr and exit status 2,
before any engine is imported and before any directory is created.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deviate_cb.cli.replicate import main
from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.options import parse_backend_options
from deviate_cb.launch.backends.slurm.options import parse_slurm_time
from tests.helpers.replicate_helpers import child_env, trainer

ECHO = trainer("basic.py:echo")

# (case id, extra arguments, expected text in the one-line message)
CASES = [
    ("partition-on-local", ["--partition", "gpu"], "`--partition` applies to other backends, not to --backend local"),
    ("address-on-slurm", ["--backend", "slurm", "--address", "auto"], "`--address` applies to other backends"),
    ("num-gpus-on-slurm", ["--backend", "slurm", "--num-gpus", "1"], "Received: --num-gpus=1 with --backend slurm"),
    ("gpus-on-ray", ["--backend", "ray", "--gpus", "0"], "`--gpus` applies to other backends, not to --backend ray"),
    ("no-wait-on-ray", ["--backend", "ray", "--no-wait"], "Received: --no-wait with --backend ray"),
    ("slurm-opt-on-local", ["--slurm-opt", "constraint=a100"], "`--slurm-opt` applies to other backends"),
    ("bad-time", ["--backend", "slurm", "--time", "1:2:3:4"], "`--time` must be a Slurm time limit"),
    ("zero-time", ["--backend", "slurm", "--time", "0"], "Received: --time=0."),
    ("bad-mem", ["--backend", "slurm", "--mem", "lots"], "`--mem` must be a positive size"),
    ("negative-gpus", ["--backend", "slurm", "--gpus-per-replica", "-1"], "`--gpus-per-replica` must be an integer"),
    ("zero-cpus", ["--backend", "slurm", "--cpus-per-replica", "0"], "Received: --cpus-per-replica=0."),
    ("bad-slurm-opt", ["--backend", "slurm", "--slurm-opt", "constraint"], "`--slurm-opt` must be KEY=VALUE"),
    ("reserved-slurm-opt", ["--backend", "slurm", "--slurm-opt", "array=0-3"], "cannot set array"),
    ("bad-partition", ["--backend", "slurm", "--partition", "a b"], "`--partition` must be a name"),
    ("bad-num-gpus", ["--backend", "ray", "--num-gpus", "x"], "`--num-gpus` must be a number >= 0"),
    ("zero-num-cpus", ["--backend", "ray", "--num-cpus", "0"], "`--num-cpus` must be a number > 0"),
    ("bad-address", ["--backend", "ray", "--address", "a b"], "`--address` must be a Ray cluster address"),
    ("unknown-backend", ["--backend", "kubernetes"], "must be one of local, ray, slurm"),
    ("replicas-per-task-on-local", ["--replicas-per-task", "2"], "`--replicas-per-task` applies to other backends"),
    ("zero-replicas-per-task", ["--backend", "ray", "--replicas-per-task", "0"], "Received: --replicas-per-task=0."),
    ("bad-replicas-per-task", ["--backend", "slurm", "--replicas-per-task", "2.5"], "must be an integer >= 1"),
]


@pytest.mark.parametrize(("extra", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_backend_option_is_one_line_exit_2(
    extra: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    assert main(["--trainer", ECHO, "-n", "2", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("deviate-replicate: error: ") and expected in err, err
    assert not out.exists()


def test_validation_imports_no_engine(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from deviate_cb.cli.replicate import main\n"
        f"assert main(['--trainer', {ECHO!r}, '-n', '2', '--backend', 'slurm', '--time', 'x']) == 2\n"
        f"assert main(['--trainer', {ECHO!r}, '-n', '2', '--backend', 'ray', '--num-cpus', '-1']) == 2\n"
        "loaded = [m for m in ('submitit', 'ray') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(), cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("45", 45), ("30:00", 30), ("30:01", 31), ("2:00:00", 120), ("1-0", 1440), ("1-2:30", 1590), ("0-0:0:59", 1)],
)
def test_slurm_time_formats(text: str, minutes: int) -> None:
    assert parse_slurm_time(text) == minutes


def test_parsed_values() -> None:
    opts = parse_backend_options(
        "slurm",
        {"gpus_per_replica": "2", "cpus_per_replica": "8", "mem": "16g",
         "slurm_opt": ["constraint=a100", "--exclusive=user"], "no_wait": True,
         "account": "proj_1", "qos": "high", "partition": None},
    )  # fmt: skip
    assert opts == {
        "gpus_per_replica": 2, "cpus_per_replica": 8, "mem": "16G", "no_wait": True, "account": "proj_1",
        "qos": "high", "slurm_opt": {"constraint": "a100", "exclusive": "user"},
    }  # fmt: skip
    assert parse_backend_options("ray", {"num_gpus": "0.25", "num_cpus": "2", "address": "ray://h:10001"}) == {
        "num_gpus": 0.25, "num_cpus": 2.0, "address": "ray://h:10001",
    }  # fmt: skip
    with pytest.raises(UsageError, match="applies to other backends"):
        parse_backend_options("local", {"no_wait": True})


@pytest.mark.parametrize(("backend", "extra"), [("slurm", "slurm"), ("ray", "ray")])
def test_missing_engine_is_one_line_exit_2(backend: str, extra: str, tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for module in ("submitit", "ray"):  # as if not installed, even where they are
        (hidden / f"{module}.py").write_text(
            f"raise ModuleNotFoundError('No module named {module}', name='{module}')\n"
        )
    env = child_env({"PYTHONPATH": f"{hidden}:{child_env()['PYTHONPATH']}"})
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.replicate", "--trainer", ECHO, "-n", "2", "--backend", backend,
         "--out", str(out)],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"pip install 'deviate-cb[{extra}]'" in proc.stderr
    assert not out.exists()


def test_every_backend_option_is_a_flag_of_the_help_declared_once() -> None:
    from deviate_cb.cli.replicate import build_parser
    from deviate_cb.launch.backends.base import BUILTIN_BACKENDS, backend_class
    from deviate_cb.launch.backends.options import builtin_options

    help_text = build_parser().format_help()
    declared = {name: backend_class(name).declared for name in BUILTIN_BACKENDS}
    for name, options in declared.items():
        assert backend_class(name).options == tuple(option.name for option in options), name
        for option in options:
            assert f"{option.flag} " in help_text or f"{option.flag}\n" in help_text, option.flag
    # one declaration per option name: a shared option (--replicas-per-task) is one object the backends list
    by_name: dict[str, set[int]] = {}
    for options in declared.values():
        for option in options:
            by_name.setdefault(option.name, set()).add(id(option))
    assert all(len(ids) == 1 for ids in by_name.values()), by_name
    parser = build_parser()
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert {option.flag for option in builtin_options()} <= flags
    assert parser.get_default("backend_option_names") == tuple(option.name for option in builtin_options())
    assert not (Path(__file__).parents[2] / "deviate_cb" / "cli" / "replicate.py").read_text().count('--partition"')
