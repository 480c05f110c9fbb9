"""What the import tests read back from an imported store: the report's rows (``deviate report --format csv``) and
every replica's ``run.json``."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any


def report_rows(
    out: Path, deviate: Callable[..., subprocess.CompletedProcess[str]]
) -> dict[tuple[str, str], dict[str, str]]:
    """``(experiment, metric) -> row`` of ``deviate report OUT --format csv``, run through the test's ``deviate``."""
    result = deviate("report", str(out), "--format", "csv")
    assert result.returncode == 0, result.stderr
    return {(row["experiment"], row["metric"]): row for row in csv.DictReader(io.StringIO(result.stdout))}


def manifests(out: Path) -> list[dict[str, Any]]:
    """Every replica's ``run.json`` in the store, in path order."""
    return [json.loads(p.read_text()) for p in sorted(out.glob("experiment=*/variant=*/replica=*/run.json"))]
