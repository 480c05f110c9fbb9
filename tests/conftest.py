"""Shared test set-up: no test inherits a replica's run context from the environment."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _no_inherited_run_context(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DEVIATE_"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _no_inherited_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables are as wide as COLUMNS says (deviate_cb.report.text.terminal): a test that wants a width sets it."""
    monkeypatch.delenv("COLUMNS", raising=False)


ARTIFACT_DIR = Path(os.environ.get("DEVIATE_ARTIFACT_DIR", Path(__file__).resolve().parents[1] / "test-artifacts"))
_ARTIFACTS: list[Path] = []


@pytest.fixture
def artifact() -> Callable[[str], Path]:
    """``artifact(name)``: a path under ``test-artifacts/`` (or ``$DEVIATE_ARTIFACT_DIR``) for a file worth keeping
    after the run (a screenshot); the session's summary lists every one made, so CI output names them."""

    def make(name: str) -> Path:
        ARTIFACT_DIR.mkdir(parents=True, exist_ok=True)
        path = ARTIFACT_DIR / name
        _ARTIFACTS.append(path)
        return path

    return make


def pytest_terminal_summary(terminalreporter: Any) -> None:
    kept = [path for path in _ARTIFACTS if path.exists()]
    if kept:
        terminalreporter.section("artifacts")
        for path in kept:
            terminalreporter.write_line(f"artifact: {path}")
