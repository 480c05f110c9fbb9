"""``deviate replicate`` is ``deviate-replicate``: the same help, the same run, the same usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deviate_cb.cli import main as deviate
from deviate_cb.cli import replicate
from tests.helpers.replicate_helpers import trainer

ECHO = trainer("basic.py:echo")


def _help(run: object, args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        run(args)  # type: ignore[operator]
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_both_give_the_same_help(capsys: pytest.CaptureFixture[str]) -> None:
    alias = _help(replicate.main, ["--help"], capsys)
    sub = _help(deviate.main, ["replicate", "--help"], capsys)
    assert sub == alias and "--until-decided" in sub and "--partition" in sub


def test_deviate_lists_replicate(capsys: pytest.CaptureFixture[str]) -> None:
    assert deviate.main(["--help"]) == 0
    assert "replicate" in capsys.readouterr().out


def test_deviate_replicate_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "runs"
    assert deviate.main(["replicate", "--trainer", ECHO, "-n", "1", "--variant", "control", "--out", str(out)]) == 0
    (manifest,) = out.glob("experiment=*/variant=control/replica=0/**/run.json")
    recorded = json.loads(manifest.read_text())
    assert recorded["status"] == "completed" and recorded["argv"][0] == "deviate-replicate"


def test_usage_errors_are_the_same_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert replicate.main(["--trainer", ECHO, "-n", "0"]) == 2
    alias = capsys.readouterr().err
    assert deviate.main(["replicate", "--trainer", ECHO, "-n", "0"]) == 2
    assert capsys.readouterr().err == alias and "`--runs` must be a positive integer" in alias
