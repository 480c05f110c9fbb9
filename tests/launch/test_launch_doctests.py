"""The runnable examples in the launcher's docstrings pass (those that would patch this process are skipped)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "deviate_cb.launch.base",
    "deviate_cb.launch.final_metrics",
    "deviate_cb.launch.inject",
    "deviate_cb.launch.keras_backend",
    "deviate_cb.launch.local",
    "deviate_cb.launch.outdir",
    "deviate_cb.launch.planner",
    "deviate_cb.launch.progress",
    "deviate_cb.launch.records",
    "deviate_cb.launch.runner",
    "deviate_cb.launch.trainer_spec",
    "deviate_cb.cli.replicate",
]


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
