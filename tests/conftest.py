"""Shared test set-up: no test inherits a replica's run context from the environment."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_inherited_run_context(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DEVIATE_"):
            monkeypatch.delenv(name)
