"""The runnable examples in the statistics modules' docstrings pass."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["deviate_cb.stats", "deviate_cb.stats.aggregate", "deviate_cb.stats.describe"])
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
