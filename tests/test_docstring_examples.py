"""The runnable examples in the docstrings pass, for every module that imports no framework.

(Adapters' examples need a model and data, so they are marked ``+SKIP``; the injection examples that would
patch this test process are skipped too. The adapters are tested by tests/lightning_cb and tests/keras_cb.)
"""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "deviate_cb._import_hooks",
    "deviate_cb.context",
    "deviate_cb.determinism",
    "deviate_cb.errors",
    "deviate_cb.fingerprint",
    "deviate_cb.recorder",
    "deviate_cb.session",
    "deviate_cb.store",
    "deviate_cb.variants",
    "deviate_cb.stats",
    "deviate_cb.stats.aggregate",
    "deviate_cb.stats.describe",
    "deviate_cb.stats._checks",
    "deviate_cb.stats._results",
    "deviate_cb.stats.aso",
    "deviate_cb.stats.compare",
    "deviate_cb.stats.correction",
    "deviate_cb.stats.decompose",
    "deviate_cb.stats.effect_size",
    "deviate_cb.stats.power",
    "deviate_cb.report",
    "deviate_cb.report.runs",
    "deviate_cb.report.reader",
    "deviate_cb.report.summary",
    "deviate_cb.report.render",
    "deviate_cb.cli._common",
    "deviate_cb.cli.main",
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
