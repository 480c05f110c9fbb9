"""The headline's std sentence says when the runs cannot tell the std, instead of an interval (issue 42)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.report_study import run_cli, write_run


def _headline(capsys: pytest.CaptureFixture[str], root: Path) -> dict:
    code, out, err = run_cli(capsys, "report", str(root), "--headline", "--format", "json")
    assert code == 0, err
    (h,) = json.loads(out)
    return h


def test_runs_with_two_apart_say_they_cannot_tell_the_std(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Implementation noise that shows in a few runs: 5 equal, 2 apart. The chi-square gave a tight interval."""
    for k, acc in enumerate([0.901] * 5 + [0.903, 0.899]):
        write_run(tmp_path, "mlp", "impl", k, [("val", "val_acc", acc)])
    h = _headline(capsys, tmp_path)
    sentence = next(s for s in h["sentences"] if s.startswith("implementation noise (impl)"))
    assert "(no interval: cannot tell it from 7 runs: only 2 differ from the other 5) over 7 runs" in sentence
    assert "[" not in sentence
    (noise,) = h["noise"]
    assert noise["std"] > 0 and noise["std_ci_low"] is None


def test_control_runs_that_differ_a_little_say_so_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for k, acc in enumerate([0.9, 0.9, 0.9, 0.9001]):
        write_run(tmp_path, "mlp", "control", k, [("val", "val_acc", acc)])
    h = _headline(capsys, tmp_path)
    assert h["sentences"][0].startswith(
        "control: the 4 runs differ: std 5e-05 (no interval: cannot tell it from 4 runs with only 2 distinct values)"
    )
