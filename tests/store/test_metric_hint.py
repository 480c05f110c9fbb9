"""The line of a launch that recorded nothing, and its --metric-regex suggestions (issue 43, item 6)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from deviate_cb.store.metric_hint import TAIL_BYTES, nothing_recorded_text, suggest_metric_regexes, tail
from deviate_cb.store.output_metrics import compile_metric_patterns, metrics_in_lines
from deviate_cb.store.run_directory import RunDirectory

PRINTED = {
    "pytorch/examples MNIST": "Test set: Average loss: 0.0332, Accuracy: 9890/10000 (99%)",
    "minGPT": "iter 100: loss 2.31, time 12.3ms",
    "keras-io": "Test accuracy: 0.98",
    "key=value": "final: acc=0.8123 loss=4.5e-01",
}


@pytest.mark.parametrize("line", PRINTED.values(), ids=PRINTED.keys())
def test_every_suggestion_captures_the_number_its_line_printed(line: str) -> None:
    lines = ["Train Epoch: 1 [0/60000]\tLoss: 2.301", line]
    suggested = suggest_metric_regexes(lines)
    assert suggested and re.search(suggested[0][0], line) is not None  # the results' line first
    for regex, name, value in suggested:
        patterns = compile_metric_patterns([regex])  # what --metric-regex accepts
        assert metrics_in_lines(lines, patterns) == {name: value}  # its last match: the number it names


def test_counters_are_not_suggested_and_a_later_line_wins() -> None:
    lines = ["iter 100: loss 2.31, time 12.3ms", "iter 200: loss 1.75, time 12.1ms"]
    assert suggest_metric_regexes(lines) == [("loss +(?P<loss>[-+.0-9eE]+)", "loss", 1.75)]


def test_the_tail_is_bounded_and_only_regular_files_are_read(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_text("x" * (3 * TAIL_BYTES) + "\nTest accuracy: 0.98\n")
    assert tail(log)[-2:] == ["Test accuracy: 0.98", ""]
    assert sum(len(line) for line in tail(log)) <= TAIL_BYTES
    fifo = tmp_path / "fifo.log"
    if hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
        assert tail(fifo) == []  # never blocks on a FIFO a run store may hold
    assert tail(tmp_path / "missing.log") == []


def test_a_group_with_a_metric_has_no_line(tmp_path: Path) -> None:
    silent, recorded = tmp_path / "replica=0", tmp_path / "replica=1"
    for run_dir in (silent, recorded):
        run_dir.mkdir()
        (run_dir / "stdout.log").write_text("Test accuracy: 0.98\n")
    line = nothing_recorded_text([silent], trainer=False)
    assert line.startswith("nothing was recorded") and "--metric-regex 'Test accuracy: *(?P<test_accuracy>" in line
    RunDirectory(recorded).metrics().append(
        {
            "step": [0],
            "epoch": [None],
            "stage": ["final"],
            "scope": ["final"],
            "name": ["acc"],
            "value": [0.9],
            "wall_time": [0.0],
        }
    )
    assert nothing_recorded_text([silent, recorded], trainer=False) == ""
