"""Every page that says how often naive peeking is wrong states the one number naive_rate measures (issue 42).

The set-up the pages cite: a look after every run from 3 to 50 runs per group (``plan_looks(3, 3, 1, 50)``, 48
looks), normal runs, Welch's t at 0.05, 100,000 simulated studies, seed 101.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from deviate_cb.stats import naive_rate, plan_looks

ROOT = Path(__file__).resolve().parents[2]
STATED = re.compile(r"(\d+(?:\.\d+)?)% (?:of the time )?(?:at 0\.05 )?with 48 looks")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "deviate_cb").rglob("*.py"))]


def test_the_stated_rate_is_the_measured_one() -> None:
    looks = plan_looks(3, 3, 1, 50)
    assert len(looks) == 48
    rate = naive_rate(looks, alpha=0.05, on="mean", dist="normal", studies=100_000, seed=101)
    se = math.sqrt(rate * (1 - rate) / 100_000)
    stated = {
        (str(path.relative_to(ROOT)), float(number))
        for path in _pages()
        for number in STATED.findall(" ".join(path.read_text(encoding="utf-8").split()))
    }
    assert "docs/how-many-runs.md" in {page for page, _ in stated}  # sequential.py's narrative moved to the docs
    assert {number for _, number in stated} == {28.6}
    assert abs(rate * 100 - 28.6) < 3 * se * 100 + 0.05  # the stated number, to its one decimal
