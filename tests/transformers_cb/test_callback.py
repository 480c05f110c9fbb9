"""DeviateCallback on a real transformers Trainer (a 1-layer BERT built from its config, CPU): what it records, under
which names, stages and steps; a resumed train(); a train() that fails; seeds and determinism."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import torch
from transformers import TrainerCallback

from deviate_cb.errors import UsageError
from deviate_cb.store.predictions import read_predictions
from deviate_cb.transformers import DeviateCallback, Predictions
from tests.transformers_cb.models import bert, sentiment, trainer

pytestmark = pytest.mark.slow


def only_run(root: Path) -> Path:
    runs = sorted((root / "runs").glob("experiment=*/variant=standalone/replica=*"))
    assert len(runs) == 1, runs
    return runs[0]


def rows(run: Path) -> list[dict[str, Any]]:
    return pq.read_table(run / "metrics.parquet").to_pylist()


def series(run: Path, name: str) -> list[tuple[str, str, int, int]]:
    return [(r["stage"], r["scope"], r["step"], r["epoch"]) for r in rows(run) if r["name"] == name]


def manifest(run: Path) -> dict[str, Any]:
    return json.loads((run / "run.json").read_text())


def test_records_every_log_under_the_names_the_trainer_shows(tmp_path: Path) -> None:
    hf = trainer(tmp_path, [DeviateCallback(tmp_path / "runs", experiment="bert")])
    hf.train()
    hf.evaluate(metric_key_prefix="test")
    run = only_run(tmp_path)
    # 64 samples in batches of 16 for 2 epochs: steps 1..8, logged every step, the epoch each falls in
    assert series(run, "loss") == [("train", "step", s, (s - 1) // 4) for s in range(1, 9)]
    assert [r[2] for r in series(run, "grad_norm")] == list(range(1, 9))
    assert series(run, "eval_loss") == [("val", "epoch", 4, 0), ("val", "epoch", 8, 1)]
    assert series(run, "train_loss") == [("train", "epoch", 8, 1)]  # the end-of-fit summary
    assert series(run, "test_loss") == [("test", "epoch", 8, 1)]
    names = {r["name"] for r in rows(run)}
    assert "epoch" not in names and {"learning_rate", "eval_runtime", "train_runtime"} <= names
    assert [r["seq"] for r in rows(run)] == list(range(len(rows(run))))
    record = manifest(run)
    assert (record["status"], record["framework"], record["fit"]) == ("completed", "transformers", "ended")
    assert record["fit_steps"] == {"done": 8, "planned": 8}
    assert record["seed"] == 3  # TrainingArguments(seed=3), read back from torch
    steps = pq.read_table(run / "timings.parquet").to_pylist()
    assert sorted(r["step"] for r in steps if r["stage"] == "train") == list(range(8))
    fingerprint = json.loads((run / "fingerprint.json").read_text())
    assert fingerprint["transformers"]["seed"] == 3 and fingerprint["transformers"]["planned_steps"] == 8


def test_a_resumed_train_continues_its_run(tmp_path: Path) -> None:
    first = trainer(tmp_path, [DeviateCallback(tmp_path / "runs")], save_strategy="steps", save_steps=4)
    first.train()
    checkpoint = Path(first.args.output_dir) / "checkpoint-4"
    saved = json.loads((checkpoint / "trainer_state.json").read_text())["stateful_callbacks"]["DeviateCallback"]
    assert saved["attributes"]["deviate_run"]["run_dir"] == str(only_run(tmp_path))

    again = trainer(tmp_path, [DeviateCallback(tmp_path / "runs")], save_strategy="no")
    again.train(resume_from_checkpoint=str(checkpoint))
    run = only_run(tmp_path)  # no second run directory
    # the values after the checkpoint were replaced by the resumed fit's: every step once
    assert [r[2] for r in series(run, "loss")] == list(range(1, 9))
    assert [r["seq"] for r in rows(run)] == list(range(len(rows(run))))
    assert (manifest(run)["status"], manifest(run)["fit"]) == ("completed", "ended")


def test_a_failing_train_is_recorded_with_what_it_logged(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from transformers import Trainer
        from deviate_cb.transformers import DeviateCallback
        from tests.transformers_cb import models

        class Failing(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                if self.state.global_step == 3:
                    raise RuntimeError("out of memory (a test)")
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

        out = __import__("pathlib").Path({str(tmp_path)!r})
        models.trainer(out, [DeviateCallback({str(tmp_path / "runs")!r})], cls=Failing).train()
    """)
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "out of memory (a test)" in done.stderr
    run = only_run(tmp_path)
    record = manifest(run)
    assert record["status"] == "failed" and "out of memory (a test)" in record["exception"]
    assert record["fit"] == "started"  # train() never ended
    assert [r[2] for r in series(run, "loss")] == [1, 2, 3]


class _Probe(TrainerCallback):
    def __init__(self) -> None:
        self.deterministic: list[bool] = []

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.deterministic.append(torch.are_deterministic_algorithms_enabled())


def test_the_callbacks_seed_and_determinism_win_over_the_training_arguments(tmp_path: Path) -> None:
    before = torch.are_deterministic_algorithms_enabled()
    losses = []
    try:
        for seed in (1, 2):  # two TrainingArguments seeds, one callback seed: the same run twice
            callback = DeviateCallback(tmp_path / "runs", seed=5, deterministic=True)  # before the model
            probe = _Probe()
            hf = trainer(tmp_path / str(seed), [callback, probe], model=bert(), seed=seed)
            assert hf.args.seed == 5
            hf.train()
            assert probe.deterministic and all(probe.deterministic)
            run = Path(callback.run_dir)
            losses.append([r["value"] for r in rows(run) if r["name"] == "loss"])
            assert manifest(run)["seed"] == 5 and manifest(run)["determinism"]["requested"]["deterministic"] is True
    finally:
        torch.use_deterministic_algorithms(before)
    assert losses[0] == losses[1]


def test_predictions_and_weights_are_recorded_for_the_stability_measures(tmp_path: Path) -> None:
    data = sentiment(16, seed=1)
    hf = trainer(tmp_path, [DeviateCallback(tmp_path / "runs", predictions=True, weights=True)])
    hf.train()
    run = only_run(tmp_path)
    table = read_predictions(run)
    assert set(table.column("snapshot").to_pylist()) == {"final"}
    assert table.num_rows == 16 and table.column("label").to_pylist() == data["label"]  # the eval set, in order
    assert (run / "weights_sketch.npz").is_file()

    other = tmp_path / "given"
    callback = DeviateCallback(other / "runs", predictions=Predictions(data=data, every_n_epochs=1))
    trainer(other, [callback], eval_strategy="no").train()
    table = read_predictions(only_run(other))
    assert sorted(set(table.column("snapshot").to_pylist())) == ["epoch=0", "epoch=1", "final"]


def test_predictions_without_an_evaluation_set_are_refused_before_training(tmp_path: Path) -> None:
    hf = trainer(tmp_path, [DeviateCallback(tmp_path / "runs", predictions=True)], eval_strategy="no")
    with pytest.raises(UsageError, match="needs an evaluation set"):
        hf.train()
    assert hf.state.global_step == 0 and not (tmp_path / "runs").exists()
