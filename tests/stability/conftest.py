"""Fixtures of the stability tests: tiny real torch models, and the in-process CLI runner of tests/report."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "report"))
