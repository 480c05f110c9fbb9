"""`--metric-regex` values carry the precision they were printed with (issue 42, item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deviate_cb.store.output_metrics import (
    compile_metric_patterns,
    metrics_from_logs,
    parsed_metrics_from_logs,
    printed_decimals,
)


@pytest.mark.parametrize(
    ("text", "places"),
    [("0.8123", 4), ("0.80", 2), ("81.25%", 2), ("7", 0), ("-3.5", 1), (".5", 1), ("1.", 0), ("8.1e-01", 2),
     ("1.25E-3", 5), ("1.2e3", -2), ("0.9;", 1), ("inf", None), ("nan", None), ("0x1f", None), (None, None)],
)  # fmt: skip
def test_printed_decimals(text: object, places: int | None) -> None:
    assert printed_decimals(text) == places


def test_the_last_match_gives_value_and_decimals_and_stdout_wins(tmp_path: Path) -> None:
    stdout, stderr = tmp_path / "stdout.log", tmp_path / "stderr.log"
    stdout.write_text("acc=0.5\nacc=0.81234\racc=0.8123\nloss=inf\n")
    stderr.write_text("acc=0.9\nf1=0.77\n")
    patterns = compile_metric_patterns([r"acc=(?P<acc>\S+)", r"loss=(?P<loss>\S+)", r"f1=(?P<f1>\S+)"])
    values, decimals = parsed_metrics_from_logs([stdout, stderr], patterns)
    assert values == {"acc": 0.8123, "loss": float("inf"), "f1": 0.77}
    assert decimals == {"acc": 4, "f1": 2}  # inf has no decimals
    assert metrics_from_logs([stdout, stderr], patterns) == values
