"""Fixtures for the launcher tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Optional

import pytest

from tests.helpers.replicate_helpers import Completed, start_cli


@pytest.fixture
def cli(tmp_path: Path) -> Callable[..., Completed]:
    """Run ``deviate-replicate ARGS --out <tmp>/runs`` in a subprocess (cwd: the test's tmp dir); ``--out`` goes
    before a ``--`` in ARGS (after it, the words are the command's)."""

    def run(
        *args: str,
        out: Optional[Path] = None,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Path] = None,
        timeout: float = 120,
    ) -> Completed:
        out = tmp_path / "runs" if out is None else out
        cut = args.index("--") if "--" in args else len(args)
        proc = start_cli([*args[:cut], "--out", str(out), *args[cut:]], cwd=cwd or tmp_path, env=env)
        stdout, stderr = proc.communicate(timeout=timeout)
        return Completed(proc.returncode, stdout, stderr, out)

    return run
