"""What a user types reaches the replica as typed (issue 25, item 7), with real ``deviate-replicate`` runs.

- ``{run_dir}`` (and every placeholder) in the script of ``sh -c``/``bash -c`` is quoted for the shell where it
  stands: an ``--out`` holding ``$(...)``, a backquote, a quote or a space is a path there, never shell code;
- an experiment name that is blank or starts or ends with whitespace is refused in one line naming
  ``--experiment``, before anything is created.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.replicate_helpers import manifest, start_cli, trainer

# Unquoted, inside "..." and inside '...': each line writes the run directory, and into it.
SCRIPT = "echo {run_dir} > {run_dir}/x; echo \"{run_dir}\" > \"{run_dir}/y\"; echo '{run_dir}' > '{run_dir}/z'"


def _replicate(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    proc = start_cli(list(args), cwd=tmp_path)
    stdout, stderr = proc.communicate(timeout=180)
    return proc.returncode, stdout, stderr


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_run_dir_in_a_shell_script_is_a_path_not_code(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell} on PATH")
    out = tmp_path / 'runs $(touch pwned) `touch pwned2` it\'s "here"'
    code, stdout, stderr = _replicate(
        tmp_path, "-n", "2", "--experiment", "e", "--out", str(out), "--", shell, "-c", SCRIPT
    )
    assert code == 0, (stdout, stderr)
    for replica in (0, 1):
        run_dir = out / "experiment=e" / "variant=algo+impl" / f"replica={replica}"
        for name in ("x", "y", "z"):
            assert (run_dir / name).read_text() == f"{run_dir}\n", name
        record = manifest(run_dir)
        assert record["status"] == "completed" and record["command"][-1] == SCRIPT  # as given, unfilled
    assert not [p for p in tmp_path.rglob("pwned*")], "the --out name ran as shell code"


def test_placeholders_outside_the_script_stay_one_word_each(tmp_path: Path) -> None:
    if shutil.which("sh") is None:
        pytest.skip("no sh on PATH")
    out = tmp_path / "runs $(touch pwned)"
    script = 'printf "%s|" "$0" "$1" > "$1/args"'  # the words after the script are $0, $1: passed as they are
    code, stdout, stderr = _replicate(
        tmp_path, "-n", "1", "--experiment", "e", "--out", str(out), "--", "sh", "-c", script, "{seed}", "{run_dir}"
    )
    assert code == 0, (stdout, stderr)
    run_dir = out / "experiment=e" / "variant=algo+impl" / "replica=0"
    assert (run_dir / "args").read_text() == f"{manifest(run_dir)['seed']}|{run_dir}|"
    assert not list(tmp_path.rglob("pwned*"))


@pytest.mark.parametrize("name", [" ", "   ", "mlp ", " mlp", "\u00a0mlp"])
def test_an_experiment_name_that_is_blank_or_padded_is_refused(tmp_path: Path, name: str) -> None:
    code, stdout, stderr = _replicate(
        tmp_path, "--experiment", name, "--trainer", trainer("basic.py:echo"), "-n", "1", "--out", "runs"
    )
    assert code == 2, (stdout, stderr)
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("deviate-replicate: error: `--experiment` "), stderr
    shown = " ".join(repr(name).split())  # the error line is printed with runs of whitespace folded
    assert f"Received: --experiment={shown}" in lines[0] and "Traceback" not in stderr
    if not name.strip():
        assert f"({len(name)} space" in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing created
