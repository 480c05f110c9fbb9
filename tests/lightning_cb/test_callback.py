"""DeviateCallback on real Lightning training (CPU, tiny models)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import lightning as L
import pyarrow.parquet as pq
import pytest
import torch

from deviate_cb.capture.session import script_experiment
from deviate_cb.lightning import DeviateCallback
from deviate_cb.store.run_directory import RunDirectory
from lightning_cb.models import TinyModule, loader, trainer


def rows(run_dir: Path) -> list[dict]:
    return pq.read_table(Path(run_dir) / "metrics.parquet").to_pylist()


def manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "run.json").read_text())


def fit(tmp_path: Path, module: L.LightningModule | None = None, epochs: int = 2, **cb_kwargs) -> Path:
    cb = DeviateCallback(tmp_path / "runs", experiment="t", **cb_kwargs)
    trainer([cb], max_epochs=epochs).fit(module or TinyModule(), loader(), loader(shuffle=False))
    assert cb.run_dir is not None
    return Path(cb.run_dir)


def test_captures_step_epoch_val_and_skips_sanity_check(tmp_path: Path) -> None:
    run_dir = fit(tmp_path, epochs=3)
    data = rows(run_dir)
    train_steps = [r for r in data if r["name"] == "train_loss_step"]
    assert [r["step"] for r in train_steps] == list(range(1, 3 * 6 + 1))  # 96 samples / 16 = 6 batches x 3
    assert {r["stage"] for r in train_steps} == {"train"} and {r["scope"] for r in train_steps} == {"step"}
    for name, stage in (("train_loss_epoch", "train"), ("val_loss", "val"), ("val_acc", "val")):
        series = [r for r in data if r["name"] == name]
        assert [r["epoch"] for r in series] == [0, 1, 2], name  # the sanity check left no val row
        assert {(r["stage"], r["scope"]) for r in series} == {(stage, "epoch")}
    assert all(isinstance(r["value"], float) and r["finite"] for r in data)
    assert [r["seq"] for r in data] == list(range(len(data)))
    assert all(r["wall_time"] > 1.6e9 for r in data)
    # the epoch mean equals the mean of the step values (equal batch sizes)
    epoch0 = [r["value"] for r in train_steps if r["epoch"] == 0]
    (mean0,) = [r["value"] for r in data if r["name"] == "train_loss_epoch" and r["epoch"] == 0]
    assert mean0 == pytest.approx(sum(epoch0) / len(epoch0), rel=1e-6)


def test_captures_metrics_logged_in_module_epoch_end_hooks_and_val_steps(tmp_path: Path) -> None:
    run_dir = fit(tmp_path, TinyModule(epoch_end_metric=True, val_step_metric=True), epochs=3)
    data = rows(run_dir)
    hook = [(r["epoch"], r["value"], r["stage"]) for r in data if r["name"] == "train_epoch_hook"]
    assert hook == [(0, 0.5, "train"), (1, 1.5, "train"), (2, 2.5, "train")]
    val_hook = [(r["epoch"], r["value"], r["stage"]) for r in data if r["name"] == "val_epoch_hook"]
    assert val_hook == [(0, 0.25, "val"), (1, 1.25, "val"), (2, 2.25, "val")]
    val_steps = [r for r in data if r["name"] == "val_batch_loss"]
    assert len(val_steps) == 3 * 6 and {(r["stage"], r["scope"]) for r in val_steps} == {("val", "step")}


def test_test_stage_and_standalone_replicas(tmp_path: Path) -> None:
    module = TinyModule()
    cb = DeviateCallback(tmp_path / "runs", experiment="t")
    t = trainer([cb], max_epochs=1)
    t.fit(module, loader())
    t.test(module, loader(shuffle=False))
    first = Path(cb.run_dir)
    assert first == tmp_path / "runs" / "experiment=t" / "variant=standalone" / "replica=0"
    test_rows = [r for r in rows(first) if r["stage"] == "test"]
    assert [r["name"] for r in test_rows] == ["test_acc"]
    assert manifest(first)["status"] == "completed"
    second = fit(tmp_path, epochs=1)
    assert second.name == "replica=1"


def test_default_out_dir_is_deviate_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cb = DeviateCallback()
    trainer([cb], max_epochs=1).fit(TinyModule(), loader())
    experiment = f"experiment={script_experiment()}"  # the running script's name (pytest's, here)
    assert Path(cb.run_dir).resolve() == (tmp_path / "deviate_runs" / experiment / "variant=standalone/replica=0")


def test_nan_and_inf_are_kept_and_flagged(tmp_path: Path) -> None:
    data = rows(fit(tmp_path, TinyModule(nan_at_step=2), epochs=1))
    weird = [r for r in data if r["name"] == "weird"]
    assert len(weird) == 2
    assert math.isnan(weird[0]["value"]) and weird[1]["value"] == math.inf
    assert [r["finite"] for r in weird] == [False, False]


def test_metric_filter(tmp_path: Path) -> None:
    data = rows(fit(tmp_path, epochs=1, metrics=["val_*"]))
    assert {r["name"] for r in data} == {"val_loss", "val_acc"}


def test_metric_filter_matching_nothing_warns(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="matched none of the logged metrics"):
        fit(tmp_path, epochs=1, metrics=["nope"])


def test_seeded_deterministic_runs_are_identical_and_verified(tmp_path: Path) -> None:
    def run() -> list[tuple[str, float]]:
        cb = DeviateCallback(tmp_path / "runs", seed=123, deterministic=True)  # before the model: seeds init
        module = TinyModule()
        # the Trainer's own flag turns deterministic algorithms off; the callback's request must win
        trainer([cb], max_epochs=2, deterministic=False).fit(module, loader(), loader(shuffle=False))
        return [(r["name"], r["value"]) for r in rows(cb.run_dir)], manifest(cb.run_dir)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first, m1 = run()
        second, _ = run()
    assert first == second
    det = m1["determinism"]
    assert det["requested"] == {"seed": 123, "deterministic": True}
    assert det["in_effect"]["torch"]["deterministic_algorithms"] is True
    assert det["in_effect"]["torch"]["cudnn_deterministic"] is True
    assert det["in_effect"]["torch"]["initial_seed"] == 123
    assert det["in_effect"]["env"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert m1["seed"] == 123 and m1["deterministic"] is True
    # PYTHONHASHSEED cannot be set from inside the process: recorded, honestly, as not in effect
    assert any("PYTHONHASHSEED" in p for p in det["problems"]) and det["verified"] is False
    torch.use_deterministic_algorithms(False)


def test_unseeded_runs_differ(tmp_path: Path) -> None:
    a = [r["value"] for r in rows(fit(tmp_path, epochs=1))]
    b = [r["value"] for r in rows(fit(tmp_path, epochs=1))]
    assert a != b


def test_crash_keeps_finished_epochs_and_records_failure(tmp_path: Path) -> None:
    cb = DeviateCallback(tmp_path / "runs")
    with pytest.raises(RuntimeError, match="failing on purpose"):
        trainer([cb], max_epochs=4).fit(TinyModule(fail_at_epoch=2), loader(), loader(shuffle=False))
    data = rows(cb.run_dir)
    assert sorted({r["epoch"] for r in data if r["name"] == "val_acc"}) == [0, 1]
    assert len([r for r in data if r["name"] == "train_loss_step"]) == 12
    m = manifest(cb.run_dir)
    assert m["status"] == "failed" and "failing on purpose" in m["exception"]


def test_fingerprint_is_recorded(tmp_path: Path) -> None:
    fp = json.loads((fit(tmp_path, epochs=1) / "fingerprint.json").read_text())
    assert fp["torch"]["version"] == torch.__version__
    assert fp["lightning"]["accelerator"] == "CPUAccelerator" and fp["dataloader_workers"] == 0
    assert fp["packages"]["lightning"] == L.__version__
    assert fp["flat"]["torch.version"] == torch.__version__
    assert "model" in fp["cpu"] and fp["threads"]["os_cpu_count"] >= 1


def test_resume_from_checkpoint_continues_the_same_run(tmp_path: Path) -> None:
    ckpt_dir = tmp_path / "ckpt"
    checkpoint = L.pytorch.callbacks.ModelCheckpoint(dirpath=ckpt_dir, save_last=True, every_n_epochs=1)
    cb = DeviateCallback(tmp_path / "runs")
    trainer([cb, checkpoint], max_epochs=2, enable_checkpointing=True).fit(
        TinyModule(), loader(), loader(shuffle=False)
    )
    run_dir = Path(cb.run_dir)
    # Pretend the first process went on to flush an epoch beyond the checkpoint before it died.
    RunDirectory(run_dir).metrics().append(
        {
            "step": [99],
            "epoch": [2],
            "stage": ["val"],
            "scope": ["epoch"],
            "name": ["val_acc"],
            "value": [0.0],
            "wall_time": [0.0],
        }
    )
    resumed = DeviateCallback(tmp_path / "runs")
    trainer(
        [resumed, L.pytorch.callbacks.ModelCheckpoint(dirpath=ckpt_dir)], max_epochs=4, enable_checkpointing=True
    ).fit(TinyModule(), loader(), loader(shuffle=False), ckpt_path=ckpt_dir / "last.ckpt")
    assert Path(resumed.run_dir) == run_dir
    assert not (run_dir.parent / "replica=1").exists()
    data = rows(run_dir)
    assert [r["epoch"] for r in data if r["name"] == "val_acc"] == [0, 1, 2, 3]
    assert 99 not in [r["step"] for r in data]  # the row written after the checkpoint was superseded
    assert [r["step"] for r in data if r["name"] == "train_loss_step"] == list(range(1, 25))
    assert [r["seq"] for r in data] == sorted(r["seq"] for r in data)


def test_state_dict_round_trip(tmp_path: Path) -> None:
    cb = DeviateCallback(tmp_path / "runs")
    trainer([cb], max_epochs=1).fit(TinyModule(), loader())
    state = cb.state_dict()
    assert state["run_dir"] == str(cb.run_dir) and state["next_seq"] == len(rows(cb.run_dir))
    other = DeviateCallback(tmp_path / "runs")
    other.load_state_dict(state)
    trainer([other], max_epochs=1).fit(TinyModule(), loader())
    assert other.run_dir == cb.run_dir


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": -1}, r"`seed` must be an integer in \[0, 2\*\*32\) or None. Received: seed=-1."),
        ({"seed": 1.5}, r"Received: seed=1.5"),
        ({"deterministic": "maybe"}, r"`deterministic` must be True, False or 'warn'. Received: deterministic='maybe'"),
        ({"metrics": "val_acc"}, r"`metrics` must be a list of metric names"),
        ({"experiment": "a/b"}, r"`experiment` must be a name of 1 to 100 printable characters"),
    ],
)
def test_invalid_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        DeviateCallback(**kwargs)


def test_under_a_run_context_two_trainers_append_to_the_replica_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deviate_cb.context import RunContext

    run_dir = tmp_path / "runs" / "experiment=e" / "variant=algo" / "replica=3"
    ctx = RunContext(run_dir, "e", "algo", 3, 103, True)
    for name, value in ctx.to_env().items():
        monkeypatch.setenv(name, value)
    module = TinyModule()
    with pytest.warns(UserWarning, match=r"DeviateCallback\(seed=7\) is ignored: deviate-replicate controls it"):
        fit_cb = DeviateCallback(seed=7)
    trainer([fit_cb], max_epochs=1).fit(module, loader(), loader(shuffle=False))
    test_cb = DeviateCallback()
    trainer([test_cb], max_epochs=1).test(module, loader(shuffle=False))
    assert Path(fit_cb.run_dir) == Path(test_cb.run_dir) == run_dir
    data = rows(run_dir)
    assert [r["seq"] for r in data] == list(range(len(data)))
    assert data[-1]["stage"] == "test" and data[-1]["name"] == "test_acc"
    m = manifest(run_dir)
    assert "status" not in m  # the launcher owns a replica's status
    assert m["determinism"]["requested"] == {"seed": 103, "deterministic": True}
    assert m["determinism"]["in_effect"]["torch"]["deterministic_algorithms"] is True
    torch.use_deterministic_algorithms(False)


def test_a_run_failing_before_training_starts_still_has_a_fingerprint(tmp_path: Path) -> None:
    class BrokenData(TinyModule):
        def train_dataloader(self):  # type: ignore[no-untyped-def]
            raise OSError("data not found")

    cb = DeviateCallback(tmp_path / "runs")
    with pytest.raises(OSError, match="data not found"):
        trainer([cb], max_epochs=1).fit(BrokenData())
    assert manifest(cb.run_dir)["status"] == "failed"
    assert json.loads((Path(cb.run_dir) / "fingerprint.json").read_text())["torch"]["version"] == torch.__version__
    assert len(list((tmp_path / "runs").rglob("fingerprint.json"))) == 1
