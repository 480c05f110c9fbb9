"""The runnable examples in the docstrings pass, for every module that imports no framework.

(Adapters' examples need a model and data, so they are marked ``+SKIP``; the injection examples that would
patch this test process are skipped too. The adapters are tested by tests/lightning_cb and tests/keras_cb.)
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import deviate_cb


def _source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    with open(spec.origin) as file:
        return file.read()


# Every module of the package is collected, so a new module's examples run without editing this file.
# Left out: the framework adapters (their examples need a model and data), modules that only wire
# argparse or hold private helpers, which have no examples, and packages whose __init__ only describes its
# modules (no __all__: it presents no names, so there is nothing to run).
_NO_EXAMPLES = {
    "deviate_cb.capture.lightning_tap",
    "deviate_cb.keras",
    "deviate_cb.lightning",
    "deviate_cb.cli",
    "deviate_cb.cli.compare_command",
    "deviate_cb.cli.report_command",
    "deviate_cb.stats._groups",
}
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(deviate_cb.__path__, "deviate_cb.")
    if info.name not in _NO_EXAMPLES and not (info.ispkg and "__all__" not in _source(info.name))
)


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
