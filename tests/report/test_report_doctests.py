"""The runnable examples in the report and CLI modules' docstrings pass."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "deviate_cb.report",
    "deviate_cb.report.runs",
    "deviate_cb.report.reader",
    "deviate_cb.report.summary",
    "deviate_cb.report.render",
    "deviate_cb.cli.main",
]


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
