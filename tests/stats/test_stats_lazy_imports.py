"""Importing the statistics, report and CLI modules must not import SciPy (it is loaded when needed)."""

from __future__ import annotations

import subprocess
import sys


def test_stats_report_and_cli_do_not_import_scipy() -> None:
    code = (
        "import sys, deviate_cb, deviate_cb.stats, deviate_cb.report.answers.summary, "
        "deviate_cb.report.rendering.formats, "
        "deviate_cb.cli.main\n"
        "heavy = sorted(m for m in ('scipy', 'torch', 'lightning', 'matplotlib') if m in sys.modules)\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
