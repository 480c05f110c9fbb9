"""``deviate bench --trainer examples/transformers_bench.py:trainer_step``: what full_determinism's switches cost a
transformers Trainer step (a 4-layer BERT built from its config), measured for real on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from deviate_cb.cli.main import main

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "transformers_bench.py"


def test_the_cost_of_full_determinism_on_a_trainer_step(capsys: pytest.CaptureFixture[str]) -> None:
    fast = ["--windows", "2", "--steps-per-window", "2", "--warmup", "1", "--batch-size", "2", "--profile-steps", "1"]
    argv = ["bench", "--trainer", f"{EXAMPLE}:trainer_step", "--device", "cpu", *fast, "--format", "json"]
    assert main(argv) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["framework"] == "torch" and result["ratio"]["n"] == 2
    assert result["steps_per_s_off"] > 0 and result["steps_per_s_on"] > 0
    assert "aten::embedding_dense_backward" in {o["op"] for o in result["ops"]}  # a BERT's backward was profiled
    assert not torch.are_deterministic_algorithms_enabled()  # the switches are restored
