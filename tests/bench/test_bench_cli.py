"""`deviate bench` on real torch models on CPU: a ratio with a CI, op differences, the run store, bad input."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from deviate_cb.cli.main import main

torch = pytest.importorskip("torch")

FAST = ["--windows", "3", "--steps-per-window", "3", "--warmup", "1", "--batch-size", "8", "--profile-steps", "2"]


def bench_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert main(["bench", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_small_cnn_on_cpu_gives_a_ratio_with_a_ci_and_the_ops_that_differ(capsys: pytest.CaptureFixture[str]) -> None:
    (result,) = bench_json(["--model", "small_cnn", "--device", "cpu", *FAST], capsys)
    assert result["model"] == "small_cnn" and result["framework"] == "torch" and result["device"] == "cpu"
    assert result["device_note"]  # says why it runs on CPU
    ratio = result["ratio"]
    assert ratio["n"] == 3 == len(result["ratios"]) and ratio["method"] == "order-statistic"
    assert 0 < ratio["low"] <= ratio["median"] <= ratio["high"] and 0 < ratio["level"] <= 1
    assert result["steps_per_s_off"] > 0 and result["steps_per_s_on"] > 0
    assert sorted((w["window"], w["mode"]) for w in result["windows"]) == [
        (w, m) for w in range(3) for m in ("off", "on")
    ]
    assert [w["mode"] for w in result["windows"]] == ["off", "on", "on", "off", "off", "on"]  # alternating order
    ops = {(o["mode"], o["op"]) for o in result["ops"]}
    assert {("off", "aten::convolution"), ("on", "aten::convolution")} <= ops
    assert result["top_op_differences"] and all("delta_us" in d for d in result["top_op_differences"])
    assert not torch.are_deterministic_algorithms_enabled()  # switches restored


def test_table_says_it_runs_on_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--device", "cpu", *FAST]) == 0
    out = capsys.readouterr().out
    assert "Running on CPU" in out and "small_cnn" in out and "ratio on/off" in out


@pytest.mark.slow
def test_results_go_to_the_run_store_one_replica_per_invocation(tmp_path: Path, capsys) -> None:
    for _ in range(2):
        assert main(["bench", "--device", "cpu", *FAST, "--out", str(tmp_path)]) == 0
    runs = sorted((tmp_path / "experiment=bench" / "variant=small_cnn").iterdir())
    assert [r.name for r in runs] == ["replica=0", "replica=1"]
    manifest = json.loads((runs[1] / "run.json").read_text())
    assert manifest["status"] == "completed" and manifest["bench"]["ratio"]["n"] == 3
    assert json.loads((runs[1] / "fingerprint.json").read_text())["bench"]["model"] == "small_cnn"
    table = pq.read_table(runs[0] / "bench.parquet").to_pylist()
    assert sum(r["kind"] == "window" for r in table) == 6 and any(r["kind"] == "op" for r in table)
    assert "stored 1 result(s)" in capsys.readouterr().err


TRAINER = """
import torch

def make(device, batch_size):
    model = torch.nn.Linear(16, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(batch_size, 16, device=device), torch.randint(0, 4, (batch_size,), device=device)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return model, step

def not_a_pair():
    return 3
"""


def test_a_user_trainer_is_benchmarked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mytrain.py"
    path.write_text(textwrap.dedent(TRAINER))
    (result,) = bench_json(["--trainer", f"{path}:make", "--device", "cpu", *FAST], capsys)
    assert result["model"] == f"{path}:make" and result["ratio"]["n"] == 3
    assert "aten::addmm" in {o["op"] for o in result["ops"]}


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["--model", "vgg"], "`--model` must be one of small_cnn"),
        (["--windows", "0"], "`--windows` must be an integer >= 1. Received: --windows=0."),
        (["--batch-size", "-1"], "`--batch-size` must be an integer >= 1"),
        (["--device", "tpu"], "`--device` must be auto, cpu or cuda. Received: --device=tpu."),
        (["--level", "1.5"], "`--level` must be between 0 and 1"),
        (["--windows", "x"], "argument --windows: invalid int value"),
        (["--trainer", "no_such_module_xyz:fn"], "`--trainer`"),
        (["--trainer", "TRAINER:not_a_pair"], "`--trainer` must name a function returning (model, step)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], start: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "mytrain.py"
    path.write_text(textwrap.dedent(TRAINER))
    argv = [a.replace("TRAINER", str(path)) for a in argv]
    assert main(["bench", *FAST[2:], *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"deviate: error: {start}"), err
