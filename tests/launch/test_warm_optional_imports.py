"""A pre-import the warm-start template cannot make is skipped, never a reason to start the study cold (issue 26,
item 6): projects import optional packages only when available (``if _TORCHVISION_AVAILABLE:``, ``try: import``),
and the template reads those imports from the source without running the guards.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from deviate_cb.launch.target.preimport import FRAMEWORKS
from tests.helpers.replicate_helpers import start_cli


def _missing_frameworks() -> list[str]:
    return sorted(name for name in FRAMEWORKS if importlib.util.find_spec(name) is None)


def test_a_framework_imported_only_when_available_is_skipped_and_the_study_stays_warm(tmp_path: Path) -> None:
    missing = _missing_frameworks()[:2]
    if not missing:
        pytest.skip("every framework the template may import is installed here: none can fail")
    guarded = "".join(
        f"if importlib.util.find_spec({name!r}) is not None:\n    import {name}\n" for name in missing[:1]
    ) + "".join(f"try:\n    import {name}\nexcept ImportError:\n    pass\n" for name in missing[1:])
    trainer = tmp_path / "train.py"
    trainer.write_text(f"import importlib.util\n\nimport numpy\n{guarded}\n\ndef main():\n    return {{'x': 1.0}}\n")
    proc = start_cli(["-n", "2", "--trainer", f"{trainer}:main", "--out", str(tmp_path / "runs")], cwd=tmp_path)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stdout + stderr
    assert "cold start" not in stdout, stdout
    for k in range(2):
        run = json.loads(
            (tmp_path / "runs" / "experiment=train" / "variant=algo+impl" / f"replica={k}" / "run.json").read_text()
        )
        assert run["start_mode"] == "warm" and "cold_reason" not in run, run
        skipped = run["warm"]["template_skipped"]
        assert [item.split(" ")[0] for item in skipped] == missing, skipped
        assert all("ModuleNotFoundError" in item for item in skipped), skipped
