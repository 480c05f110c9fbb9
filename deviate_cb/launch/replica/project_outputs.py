"""Isolated outputs: two replicas never write into the same output location of the project.

Example:
    >>> for item in hydra_overrides(["model=small"], Path("/runs/experiment=a/variant=algo/replica=0")):
    ...     print(item)
    model=small
    hydra.run.dir='/runs/experiment=a/variant=algo/replica=0/outputs'
    hydra.sweep.dir='/runs/experiment=a/variant=algo/replica=0/multirun'
    >>> hydra_overrides(["hydra.run.dir=out"], Path("/r"))
    ['hydra.run.dir=out', "hydra.sweep.dir='/r/multirun'"]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from deviate_cb.capture.import_hooks import when_imported

__all__ = ["HYDRA_RUN_SUBDIR", "HYDRA_SWEEP_SUBDIR", "hydra_overrides", "install_hydra_outputs"]

HYDRA_RUN_SUBDIR = "outputs"
HYDRA_SWEEP_SUBDIR = "multirun"
_MARKER = "__deviate_isolates_outputs__"


def hydra_overrides(overrides: Sequence[str], run_dir: Path) -> list[str]:
    """``overrides`` plus ``hydra.run.dir``/``hydra.sweep.dir`` inside ``run_dir``, unless already given."""
    result = list(overrides)
    for key, subdir in (("hydra.run.dir", HYDRA_RUN_SUBDIR), ("hydra.sweep.dir", HYDRA_SWEEP_SUBDIR)):
        if not any(_override_key(item) == key for item in overrides):
            result.append(f"{key}={_quoted(str(run_dir / subdir))}")
    return result


def install_hydra_outputs(run_dir: Path) -> None:
    """Point Hydra's run and sweep directories into ``run_dir`` as soon as ``hydra.main`` is imported."""
    when_imported("hydra.main", functools.partial(_patch_hydra_main, run_dir=Path(run_dir)))


def _patch_hydra_main(module: ModuleType, run_dir: Path) -> None:
    """Wrap the ``_run_hydra`` that ``@hydra.main`` calls so that its parsed overrides gain the two directories."""
    original = getattr(module, "_run_hydra", None)
    if original is None or getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def _run_hydra(*args: Any, **kwargs: Any) -> Any:
        parsed = kwargs.get("args", args[0] if args else None)
        overrides = getattr(parsed, "overrides", None)
        if parsed is not None and isinstance(overrides, list):
            parsed.overrides = hydra_overrides(overrides, run_dir)
        if "caller_stack_depth" in kwargs or len(args) < 6:  # this wrapper is one more frame to look past
            kwargs["caller_stack_depth"] = kwargs.get("caller_stack_depth", 2) + 1
        return original(*args, **kwargs)

    setattr(_run_hydra, _MARKER, True)
    module._run_hydra = _run_hydra  # type: ignore[attr-defined]


def _override_key(override: str) -> str:
    """``hydra.run.dir`` for ``hydra.run.dir=x``, ``+hydra.run.dir=x``, ``++hydra.run.dir=x`` or ``~hydra.run.dir``."""
    return override.split("=", 1)[0].lstrip("+~").strip()


def _quoted(value: str) -> str:
    """A Hydra override value in single quotes (run directories hold ``=`` and ``+``)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
