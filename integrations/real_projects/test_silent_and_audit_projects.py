"""A silent script is told how to record its results, and an audit stops after its audited steps (issue 43, 6, 7).

``silent_results`` is pytorch/examples' MNIST script in miniature: it only prints ``Test set: Average loss: ...,
Accuracy: 41/60 (68%)``. Replicated without ``--metric-regex`` it records nothing; the launcher says so once, with
``--metric-regex`` options built from that line, which, passed back, record the values. ``long_plain_loop`` is a
plain PyTorch loop of 400 tiny steps that prints each one: ``deviate audit --steps 3`` stops every replica once its
3 audited steps are recorded (status ``audited``, exit 0, "agree bit for bit over 3"), and with ``--finish`` and a
``--timeout`` that ends the replicas after their audited steps agreed, the audit still answers (exit 0), naming the
timeout in a note.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from real_projects_helpers import PROJECTS, child_env, deviate_replicate, replicate

pytestmark = pytest.mark.slow

NOTHING = "nothing was recorded"


def _deviate() -> Path:
    return deviate_replicate().with_name("deviate")


def _audit(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(_deviate()), "audit", "--steps", "3", "--out", str(tmp / "audit"), "--parallel", "2", *args]
    return subprocess.run(
        argv, cwd=PROJECTS / "long_plain_loop", env=child_env(), capture_output=True, text=True, timeout=300
    )


def test_a_silent_script_is_told_once_how_to_record_its_printed_results(tmp_path: Path) -> None:
    silent = replicate("silent_results", tmp_path / "first", ["python", "main.py"], variant="algo", n=2)
    assert silent.returncode == 0, silent.output
    lines = [line for line in silent.stderr.splitlines() + silent.stdout.splitlines() if NOTHING in line]
    assert len(lines) == 1, silent.output
    suggested = lines[0].partition("rerun: ")[2].partition("; or pass ")[0]  # the whole command line, --force in
    words = shlex.split(suggested)
    regexes = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "--metric-regex"]
    assert words[0] == "deviate-replicate" and "--force" in words and regexes, lines[0]
    assert words[words.index("--") :] == ["--", "python", "main.py"], lines[0]
    for command in ("status", "report"):  # where they say "no metrics": the same line, once for the group
        said = subprocess.run(
            [str(_deviate()), command, str(silent.out)], env=child_env(), capture_output=True, text=True, timeout=120
        )
        assert said.stderr.count(NOTHING) == 1 and suggested in said.stderr, (command, said.stderr)
    again = replicate(
        "silent_results",
        tmp_path / "second",
        ["python", "main.py"],
        variant="algo",
        n=1,
        args=[arg for regex in regexes for arg in ("--metric-regex", regex)],
    )
    assert again.returncode == 0, again.output
    assert NOTHING not in again.stdout + again.stderr, again.output
    final = again.final(0)
    printed = re.findall(r"Average loss: ([0-9.]+)", again.log(0))[-1]
    assert final["average_loss"] == float(printed), (final, again.output)


def _last_iteration(run_dir: Path) -> int:
    steps = re.findall(r"^iter (\d+):", (run_dir / "stdout.log").read_text(), flags=re.M)
    return int(steps[-1]) if steps else -1


def test_an_audited_plain_loop_stops_after_its_audited_steps(tmp_path: Path) -> None:
    done = _audit(tmp_path, "--", "python", "train.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "agree bit for bit over 3 audited training step(s)" in done.stdout, done.stdout
    for replica in (0, 1):
        run_dir = tmp_path / "audit" / "experiment=train" / "variant=control" / f"replica={replica}"
        manifest = json.loads((run_dir / "run.json").read_text())
        assert manifest["status"] == "audited", manifest
        # the third optimizer step (index 2) is the last one: it stops before printing, the print of step 1 is last
        assert _last_iteration(run_dir) == 1, (run_dir / "stdout.log").read_text()
        assert "done:" not in (run_dir / "stdout.log").read_text()
    assert "2 stopped after the audited steps" in done.stderr, done.stderr


def test_an_audit_whose_replicas_time_out_after_agreeing_answers(tmp_path: Path) -> None:
    done = _audit(tmp_path, "--finish", "--timeout", "20", "--", "python", "train.py", "--pause", "600")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "agree bit for bit over 3 audited training step(s)" in done.stdout, done.stdout
    assert "timed out" in done.stdout and "after its 3 audited step(s)" in done.stdout, done.stdout
    for replica in (0, 1):
        run_dir = tmp_path / "audit" / "experiment=train" / "variant=control" / f"replica={replica}"
        assert _last_iteration(run_dir) == 399  # --finish: the whole loop ran
