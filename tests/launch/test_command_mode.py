"""Command mode (``deviate-replicate [options] -- COMMAND``), the seeding takeover in a replica, fast refusal,
``--trainer SPEC -- ARGS`` and entry points that read their own command line (click, Hydra-style)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from deviate_cb.errors import UsageError
from deviate_cb.launch.replica.project_outputs import hydra_overrides
from deviate_cb.launch.target.command import Command, PythonInvocation
from deviate_cb.launch.target.source_checks import defines_name, find_module_file
from deviate_cb.store.output_metrics import compile_metric_patterns, metrics_from_logs
from tests.helpers.replicate_helpers import final_metrics, manifest, metrics

PROJECTS = Path(__file__).parent / "projects"


# -- the command line, parsed and checked without running anything ------------------------------------------
def test_bare_python_is_the_launcher_interpreter_and_placeholders_fill_every_word() -> None:
    cmd = Command.parse(["python3", "-u", "train.py", "--seed={seed}", "out={run_dir}/{replica}", "x=${hydra:job}"])
    assert cmd.kind == "python" and cmd.program == sys.executable and cmd.python == PythonInvocation("train.py")
    run = cmd.fill(seed=7, replica=2, run_dir="/r", variant="algo", experiment="e")
    assert run == [sys.executable, "-u", "train.py", "--seed=7", "out=/r/2", "x=${hydra:job}"]
    assert cmd.uses("seed") and not cmd.uses("variant") and cmd.default_experiment() == "train"


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["-m", "pkg.train", "fit"], PythonInvocation(module="pkg.train")),
        (["-mpkg.train"], PythonInvocation(module="pkg.train")),
        (["-W", "ignore", "-X", "dev", "t.py", "-m", "x"], PythonInvocation(script="t.py")),
        (["-I", "t.py"], PythonInvocation(script="t.py", isolated=True)),
        (["-c", "print(1)"], PythonInvocation(code=True)),
    ],
)
def test_python_options_are_read_up_to_what_runs(words: list[str], expected: PythonInvocation) -> None:
    assert PythonInvocation.parse(words) == expected


def test_console_scripts_are_python_programs_and_others_are_not(tmp_path: Path) -> None:
    script = tmp_path / "mytool"
    script.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    script.chmod(0o755)
    assert Command.parse([str(script), "fit"]).kind == "python script"
    assert Command.parse(["bash", "-c", "true"]).kind == "program"
    assert Command.parse(["bash", "run.sh"]).default_experiment() == "run"
    assert Command.parse([sys.executable, "-m", "json.tool"]).default_experiment() == "json.tool"


def test_precheck_refuses_what_cannot_start_and_imports_nothing(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def main(:\n")
    (tmp_path / "ok.py").write_text("raise SystemExit('never run by the check')\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    (tmp_path / "pkg" / "train.py").write_text("print('x')\n")
    Command.parse(["python", "ok.py"]).precheck(tmp_path)
    Command.parse(["python", "-m", "pkg.train"]).precheck(tmp_path)
    assert "pkg" not in sys.modules
    refusals = {
        ("python", "missing.py"): "runs the script 'missing.py', which does not exist",
        ("python", "bad.py"): "which has a syntax error: invalid syntax (line 1)",
        ("python", "-m", "pkg.nothing"): "no module 'pkg.nothing' can be found",
        ("python", "-m", "pkg"): "no module 'pkg' can be found",  # a package without __main__
        ("no-such-program-xyz", "--x"): "names the program 'no-such-program-xyz', which is not on PATH",
    }
    for words, message in refusals.items():
        with pytest.raises(UsageError, match=r"^`COMMAND` ") as info:
            Command.parse(list(words)).precheck(tmp_path)
        assert message in str(info.value) and str(info.value).endswith(f"Received: -- {' '.join(words)}.")
    with pytest.raises(UsageError, match="must name a program"):
        Command.parse([])


def test_source_checks_read_top_level_names_and_find_modules_without_importing(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("try:\n    from x import fit\nexcept ImportError:\n    def fit(): pass\nclass K: pass\n")
    assert defines_name(source, "fit") and defines_name(source, "K") and defines_name(source, "other") is False
    source.write_text("from os.path import *\n")
    assert defines_name(source, "anything") is None  # a star import makes any name possible
    assert find_module_file("json.decoder", tmp_path) == Path(json.decoder.__file__)


def test_metric_regex_needs_a_named_group_and_takes_the_last_match(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"`--metric-regex` must name the metric with a named group"):
        compile_metric_patterns(["acc=([0-9.]+)"])
    with pytest.raises(UsageError, match=r"`--metric-regex` must be a regular expression"):
        compile_metric_patterns(["acc=(?P<acc>[0-9.]+"])
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    out.write_text("epoch 1 acc=0.5\rprogress acc=0.6\nfinal acc=0.75 loss=nan-ish\n")
    err.write_text("acc=0.1 loss=0.25\n")
    patterns = compile_metric_patterns(["acc=(?P<acc>[0-9.]+)", r"loss=(?P<loss>\S+)"])
    assert metrics_from_logs([out, err], patterns) == {"acc": 0.75, "loss": 0.25}  # stdout wins; "nan-ish" is no number


def test_hydra_directories_go_into_the_run_directory_unless_the_command_line_sets_them() -> None:
    run_dir = Path("/runs/experiment=a/variant=algo+impl/replica=0")
    added = hydra_overrides(["model=small"], run_dir)
    assert added[1:] == [f"hydra.run.dir='{run_dir}/outputs'", f"hydra.sweep.dir='{run_dir}/multirun'"]
    assert hydra_overrides(["++hydra.sweep.dir=x", "hydra.run.dir=y"], run_dir) == [
        "++hydra.sweep.dir=x",
        "hydra.run.dir=y",
    ]


# -- the launcher -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["python", "missing.py"], "`COMMAND` runs the script 'missing.py', which does not exist"),
        (["no-such-program-xyz"], "`COMMAND` names the program 'no-such-program-xyz', which is not on PATH"),
        ([], "`COMMAND` after `--` is empty"),
    ],
)
def test_a_command_that_cannot_start_is_refused_before_any_replica(cli, tmp_path: Path, command, message) -> None:
    started = time.monotonic()
    result = cli("-n", "3", "--", *command)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("deviate-replicate: error: ") and message in lines[0]
    assert not result.out.exists()
    assert time.monotonic() - started < 30  # generous: only says nothing was started (speed is not tested here)


def test_a_trainer_function_that_does_not_exist_is_refused_by_the_launcher(cli, tmp_path: Path) -> None:
    result = cli("-n", "2", "--trainer", f"{PROJECTS / 'tools.py'}:no_such_fn")
    assert result.returncode == 2 and not result.out.exists()
    assert "names 'no_such_fn', which the file" in result.stderr and "functions defined there: " in result.stderr


def test_bad_metric_regex_and_trainer_with_command_are_usage_errors(cli) -> None:
    bad = cli("-n", "1", "--metric-regex", "acc=(", "--", "python", "x.py")
    assert bad.returncode == 2 and "`--metric-regex` must be a regular expression" in bad.stderr
    assert not bad.out.exists()


@pytest.mark.slow
def test_seed_placeholder_reaches_the_script_and_printed_results_become_final_metrics(cli, tmp_path: Path) -> None:
    result = cli(
        "-n", "2", "--variant", "algo", "--seed", "10", "--experiment", "arg",
        "--metric-regex", r"score=(?P<score>-?[0-9.]+)",
        "--", "python", str(PROJECTS / "seed_arg.py"), "--seed", "{seed}", "--out", "{run_dir}/seen.txt",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    scores = []
    for replica in (0, 1):
        run_dir = result.run_dir("arg", "algo", replica)
        m = manifest(run_dir)
        assert m["mode"] == "command" and m["command"][-4:] == ["--seed", "{seed}", "--out", "{run_dir}/seen.txt"]
        assert m["command_run"][0] == sys.executable and m["command_run"][-3:] == [
            str(10 + replica),
            "--out",
            f"{run_dir}/seen.txt",
        ]
        assert (run_dir / "seen.txt").read_text() == str(10 + replica)
        # the project seeds torch with the replica's own seed: passed through, recorded, and in effect
        assert m["seeding"]["calls"] == [
            {"call": "torch.manual_seed", "asked": 10 + replica, "applied": 10 + replica, "count": 1}
        ]
        assert m["determinism"]["problems"] == [] and m["injection"] == "bootstrapped"
        assert m["output_metrics"] == ["score"] and "fingerprint" not in m
        assert (run_dir / "fingerprint.json").is_file()  # a plain script still gets the fingerprint
        scores.append(final_metrics(run_dir)["score"])
    assert scores[0] != scores[1]


@pytest.mark.slow
def test_a_project_that_seeds_itself_still_varies_under_algo_and_stays_identical_under_control(
    cli, tmp_path: Path
) -> None:
    script = str(PROJECTS / "self_seeding.py")
    values = {}
    for variant in ("algo", "control"):
        result = cli("-n", "2", "--variant", variant, "--experiment", "own", "--parallel", "2", "--", "python", script)
        assert result.returncode == 0, result.stderr
        assert "warning" not in result.stdout + result.stderr, result.stdout + result.stderr
        for replica in (0, 1):
            run_dir = result.run_dir("own", variant, replica)
            m = manifest(run_dir)
            (call,) = m["seeding"]["calls"]
            assert call["call"] == "lightning.seed_everything" and call["asked"] == 42 and m["seeding"]["take_over"]
            assert m["determinism"]["problems"] == []  # the derived seed is the one expected in effect
            assert (run_dir / "lightning_logs").is_dir()  # default_root_dir: the run directory
            losses = [row["value"] for row in metrics(run_dir) if row["name"].startswith("train_loss")]
            assert losses
            values[variant, replica] = losses
    assert values["control", 0] == values["control", 1]
    assert values["algo", 0] != values["algo", 1]
    assert not (tmp_path / "lightning_logs").exists()  # nothing in the working directory


@pytest.mark.slow
def test_keep_project_seeds_leaves_the_project_seed_and_says_seed_variance_is_suppressed(cli, tmp_path: Path) -> None:
    script = str(PROJECTS / "self_seeding.py")
    result = cli("-n", "2", "--variant", "algo", "--experiment", "own", "--keep-project-seeds", "--", "python", script)
    assert result.returncode == 0, result.stderr
    assert "--keep-project-seeds" in result.stdout and "seed variance is suppressed" in result.stdout
    runs = [result.run_dir("own", "algo", r) for r in (0, 1)]
    assert [row["value"] for row in metrics(runs[0])] == [row["value"] for row in metrics(runs[1])]
    m = manifest(runs[1])
    assert m["keep_project_seeds"] is True and m["seeding"]["take_over"] is False
    assert m["seeding"]["calls"][0]["applied"] == 42
    assert any("the project seeded itself" in p for p in m["determinism"]["problems"])
    assert "bit-identical" in result.stdout  # the launcher's end-of-study check names the identical replicas


@pytest.mark.slow
def test_ddp_workers_reexecuting_the_script_are_bootstrapped_and_only_rank_zero_records(cli, tmp_path: Path) -> None:
    script = str(PROJECTS / "self_seeding.py")
    result = cli("-n", "1", "--variant", "algo", "--seed", "5", "--experiment", "ddp", "--", "python", script, "--ddp")
    assert result.returncode == 0, result.stderr
    run_dir = result.run_dir("ddp", "algo", 0)
    m = manifest(run_dir)
    assert len(m["bootstrap"]) == 1 and len(m["seeding"]["calls"]) == 1
    applied = m["seeding"]["calls"][0]["applied"]
    seeds = {
        line.split()[0]: line.split()[1]
        for line in (run_dir / "stderr.log").read_text().splitlines()
        if line.startswith("rank=")
    }
    assert seeds == {"rank=0": f"initial_seed={applied}", "rank=1": f"initial_seed={applied}"}
    assert len({row["epoch"] for row in metrics(run_dir)}) == 1 and metrics(run_dir)  # one writer, one epoch


@pytest.mark.slow
def test_a_program_that_is_not_python_runs_and_says_nothing_could_be_injected(cli) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    result = cli(
        "-n", "2", "--variant", "control", "--experiment", "sh", "--metric-regex", "acc=(?P<acc>[0-9.]+)",
        "--", "bash", "-c", "echo replica {replica} acc=0.{replica}5",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("no DeviateCallback could be injected") == 2  # once live, once in the summary
    for replica in (0, 1):
        m = manifest(result.run_dir("sh", "control", replica))
        assert m["injection"] == "none" and "'bash' is not a Python program" in m["injection_note"]
        assert m["status"] == "completed" and final_metrics(result.run_dir("sh", "control", replica)) == {
            "acc": float(f"0.{replica}5")
        }


@pytest.mark.slow
def test_trainer_arguments_after_dashes_and_entry_points_that_read_the_command_line(cli) -> None:
    tools = PROJECTS / "tools.py"
    argv = cli("-n", "1", "--experiment", "argv", "--trainer", f"{tools}:echo_argv", "--", "--lr", "0.5", "--wd", "2")
    assert argv.returncode == 0, argv.stderr
    run_dir = argv.run_dir("argv", "algo+impl", 0)
    assert final_metrics(run_dir) == {"lr": 0.5, "wd": 2.0} and manifest(run_dir)["trainer_args"] == [
        "--lr",
        "0.5",
        "--wd",
        "2",
    ]
    clicked = cli("-n", "1", "--experiment", "click", "--trainer", f"{tools}:click_main", "--", "--lr", "0.25")
    assert clicked.returncode == 0, clicked.stderr  # click ends with sys.exit(0): a normal end
    assert "click lr=0.25" in (clicked.run_dir("click", "algo+impl", 0) / "stdout.log").read_text()
    wrapped = cli("-n", "1", "--experiment", "cfg", "--trainer", f"{tools}:configured", "--", "lr=0.125")
    assert wrapped.returncode == 0, wrapped.stderr  # the wrapped signature (cfg) is not held against it
    assert final_metrics(wrapped.run_dir("cfg", "algo+impl", 0)) == {"lr": 0.125}
