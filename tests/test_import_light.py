"""`import deviate_cb` must stay light: no framework, SciPy, matplotlib, Ray or submitit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "torch",
    "lightning",
    "pytorch_lightning",
    "tensorflow",
    "keras",
    "jax",
    "scipy",
    "matplotlib",
    "ray",
    "submitit",
)


def loaded_after(statement: str) -> list[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_import_deviate_cb_loads_nothing_heavy() -> None:
    assert loaded_after("import deviate_cb") == []


def test_core_modules_load_nothing_heavy() -> None:
    modules = ("store.run_directory", "capture.recorder", "capture.session", "capture.determinism")
    statement = "import " + ", ".join(f"deviate_cb.{name}" for name in modules)
    assert loaded_after(statement) == []


@pytest.mark.slow
def test_lightning_adapter_is_where_lightning_loads() -> None:
    assert {"torch", "lightning"} <= set(loaded_after("import deviate_cb.lightning"))
