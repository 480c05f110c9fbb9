"""Bad input: one readable line on stderr, exit status 2, no traceback, no new run directories, nothing lost."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import TRAINERS, manifest, trainer, tree

ECHO = trainer("basic.py:echo")

# (case id, arguments, expected text in the message). `--out` is added by the fixture unless given.
CASES = [
    ("unknown-module", ["--trainer", "nosuchpkg_xyz.train:main", "-n", "2"], "no module 'nosuchpkg_xyz'"),
    ("module-without-function", ["--trainer", "basic:nosuch", "-n", "3", "--parallel", "2"], "does not define"),
    ("file-without-function", ["--trainer", trainer("basic.py:nosuch"), "-n", "2"], "does not define"),
    ("not-callable", ["--trainer", trainer("basic.py:not_callable"), "-n", "2"], "is a dict, not a function"),
    ("bad-signature", ["--trainer", trainer("basic.py:bad_signature"), "-n", "2"], "required parameter 'lr'"),
    (
        "file-raises-at-import",
        ["--trainer", trainer("raises_at_import.py:main"), "-n", "3", "--parallel", "2"],
        "raised at import: RuntimeError: boom at import",
    ),
    ("module-raises-at-import", ["--trainer", "raises_at_import:main", "-n", "2"], "RuntimeError: boom at import"),
    ("missing-file", ["--trainer", trainer("nofile.py:main"), "-n", "2"], "which does not exist"),
    ("malformed-spec", ["--trainer", "basic", "-n", "2"], "must look like `module:function`"),
    ("runs-zero", ["--trainer", ECHO, "-n", "0"], "`--runs` must be a positive integer. Received: --runs=0."),
    ("runs-text", ["--trainer", ECHO, "-n", "many"], "Received: --runs=many."),
    ("bad-variant", ["--trainer", ECHO, "-n", "2", "--variant", "alg"], "`--variant` must be one of algo+impl, algo"),
    ("negative-seed", ["--trainer", ECHO, "-n", "2", "--seed", "-1"], "`--seed` must be an integer in [0, 2**32)"),
    ("parallel-zero", ["--trainer", ECHO, "-n", "2", "--parallel", "0"], "`--parallel` must be a positive integer"),
    ("timeout-zero", ["--trainer", ECHO, "-n", "2", "--timeout", "0"], "`--timeout` must be a positive number"),
    ("bad-gpus", ["--trainer", ECHO, "-n", "2", "--gpus", "0,x"], "`--gpus` must be distinct GPU ids"),
    (
        "bad-experiment",
        ["--trainer", ECHO, "-n", "2", "--experiment", "a/b"],
        "`--experiment` must be a name of 1 to 100 printable",
    ),
    # a newline or an escape sequence would live on in folder names and every report; 300 characters: the OS refuses
    ("experiment-newline", ["--trainer", ECHO, "-n", "1", "--experiment", "a\nb"], "`--experiment` must be"),
    ("experiment-escape", ["--trainer", ECHO, "-n", "1", "--experiment", "a\x1b[2Jb"], "`--experiment` must be"),
    ("experiment-300-chars", ["--trainer", ECHO, "-n", "1", "--experiment", "x" * 300], "`--experiment` must be"),
    ("missing-trainer", ["-n", "2"], "`--trainer` or a command after `--` is required"),
    ("unknown-option", ["--trainer", ECHO, "-n", "2", "--nope"], "Unrecognized arguments: --nope"),
]


def _check_one_line(stderr: str, expected: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("deviate-replicate: error: ") and expected in lines[0]
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("args", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path: Path, args: list[str], expected: str) -> None:
    done = cli(*args, env={"PYTHONPATH": str(TRAINERS)})
    assert done.returncode == 2, (done.stdout, done.stderr)
    _check_one_line(done.stderr, expected)
    assert not done.out.exists(), tree(done.out)  # nothing created, or all of it removed again


def test_out_that_is_a_file(cli, tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text("keep me")
    done = cli("--trainer", ECHO, "-n", "2", out=path)
    assert done.returncode == 2
    _check_one_line(done.stderr, "`--out` must be a directory, but")
    assert path.read_text() == "keep me"


def test_out_that_is_not_writable(cli, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = cli("--trainer", ECHO, "-n", "2", out=tmp_path / "file" / "runs")  # cannot be created: under a file
    assert done.returncode == 2
    _check_one_line(done.stderr, "on that path is a file")
    if sys.platform.startswith("linux"):  # /proc refuses new entries, even to root
        done = cli("--trainer", ECHO, "-n", "2", out=Path("/proc/deviate-runs"))
        assert done.returncode == 2
        _check_one_line(done.stderr, "is not writable")


def test_trainer_error_keeps_earlier_runs_and_removes_only_new_directories(cli, tmp_path: Path) -> None:
    # the same --trainer (one configuration: another trainer would be refused before anything runs), whose module
    # breaks between the two launches
    module = tmp_path / "project" / "model.py"
    module.parent.mkdir()
    module.write_text("def main():\n    return {'acc': 1.0}\n")
    first = cli("--trainer", f"{module}:main", "-n", "1", "--experiment", "exp")
    assert first.returncode == 0
    before = tree(first.out)
    module.write_text("raise RuntimeError('boom at import')\n\n\ndef main():\n    return {}\n")
    done = cli("--trainer", f"{module}:main", "-n", "3", "--experiment", "exp")
    assert done.returncode == 2
    _check_one_line(done.stderr, "boom at import")
    assert "replica 0 (seed 0): skipped (already completed)" in done.stdout
    assert tree(first.out) == before


def test_manifest_with_a_newer_schema_version(cli, tmp_path: Path) -> None:
    first = cli("--trainer", ECHO, "-n", "1")
    run_json = first.run_dir("basic", "algo+impl", 0) / "run.json"
    record = manifest(run_json.parent)
    record["schema_version"] = 99
    run_json.write_text(json.dumps(record))
    before = tree(first.out)
    done = cli("--trainer", ECHO, "-n", "2")
    assert done.returncode == 2
    _check_one_line(done.stderr, "written with schema_version=99, but this deviate-cb reads up to")
    assert tree(first.out) == before


def test_resuming_with_another_seed_is_refused(cli) -> None:
    assert cli("--trainer", ECHO, "-n", "1", "--variant", "control").returncode == 0
    done = cli("--trainer", ECHO, "-n", "2", "--variant", "control", "--seed", "5")
    assert done.returncode == 2
    _check_one_line(done.stderr, "completed with seed 0; resuming would mix seeds")
    assert not (done.run_dir("basic", "control", 1)).exists()
