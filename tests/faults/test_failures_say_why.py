"""A replica that failed says what it raised, everywhere a failure is listed (issue 26, item 4).

The launcher's progress line, ``run.json`` (``exception``, also in command mode, read from the traceback on
stderr) and the report show the exception's line (type and message) instead of "exited with code 1", and no
``--metric-regex found no value`` warning comes before a failure line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.replicate_helpers import REPO, child_env, manifest, start_cli

RAISES = "import sys; print('epoch 0'); raise ValueError('learning rate ' + sys.argv[1] + ' diverged')"


def _replicate(tmp_path: Path, *args: str) -> tuple[int, str, str, Path]:
    out = tmp_path / "runs"
    cut = args.index("--")
    proc = start_cli([*args[:cut], "--out", str(out), *args[cut:]], cwd=tmp_path)
    stdout, stderr = proc.communicate(timeout=180)
    return proc.returncode, stdout, stderr, out


def test_a_failed_command_says_what_it_raised(tmp_path: Path) -> None:
    code, stdout, stderr, out = _replicate(
        tmp_path,
        "-n", "1", "--experiment", "e", "--metric-regex", r"acc=(?P<acc>\S+)", "--",
        sys.executable, "-c", RAISES, "0.5",
    )  # fmt: skip
    assert code == 1, stderr
    assert "replica 0 (seed 0): failed after" in stdout
    assert "(exit 1, ValueError: learning rate 0.5 diverged)" in stdout, stdout
    assert "found no value" not in stdout + stderr  # no noise before the failure line
    run = manifest(out / "experiment=e" / "variant=algo+impl" / "replica=0")
    assert run["exception"] == "ValueError: learning rate 0.5 diverged"
    assert run["output_metrics_missing"] == ["acc"]  # still recorded
    cli = "import sys; from deviate_cb.cli.main import main; sys.exit(main())"
    report = subprocess.run(
        [sys.executable, "-c", cli, "report", str(out)],
        env=child_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "ValueError: learning rate 0.5 diverged" in report.stdout + report.stderr, report.stdout + report.stderr


def test_a_failed_trainer_says_what_it_raised(tmp_path: Path) -> None:
    trainer = tmp_path / "t.py"
    trainer.write_text("def main():\n    raise KeyError('val_acc')\n")
    code, stdout, stderr, _ = _replicate(tmp_path, "-n", "1", "--trainer", f"{trainer}:main", "--")
    assert code == 1, stderr
    assert "(exit 1, KeyError: 'val_acc')" in stdout, stdout


def test_a_signal_is_not_taken_for_an_exception(tmp_path: Path) -> None:
    script = "import os, signal; print('Traceback (most recent call last):'); os.kill(os.getpid(), signal.SIGKILL)"
    code, stdout, _, out = _replicate(tmp_path, "-n", "1", "--experiment", "k", "--", sys.executable, "-c", script)
    assert code == 1
    assert "SIGKILL" in stdout
    assert "exception" not in manifest(out / "experiment=k" / "variant=algo+impl" / "replica=0")
