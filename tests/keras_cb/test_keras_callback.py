"""deviate_cb.keras.DeviateCallback on real Keras 3 training (torch backend, CPU)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

import keras
import numpy as np
import pyarrow.parquet as pq
import pytest

from deviate_cb.capture.session import script_experiment
from deviate_cb.keras import DeviateCallback
from keras_cb.models import data, model


def rows(run_dir: Path) -> list[dict]:
    return pq.read_table(Path(run_dir) / "metrics.parquet").to_pylist()


def manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "run.json").read_text())


def kinds(data_rows: list[dict]) -> Counter:
    return Counter((r["stage"], r["scope"], r["name"]) for r in data_rows)


def test_fit_and_evaluate_stages_names_and_steps(tmp_path: Path) -> None:
    x, y = data()
    cb = DeviateCallback(tmp_path / "runs", experiment="k")
    m = model()
    m.fit(x, y, batch_size=32, epochs=3, validation_split=0.2, callbacks=[cb], verbose=0)
    m.evaluate(x, y, callbacks=[cb], verbose=0)
    recorded = rows(cb.run_dir)
    assert kinds(recorded) == {
        ("train", "step", "loss"): 15,  # 160 training samples / 32 = 5 batches x 3 epochs
        ("train", "step", "accuracy"): 15,
        ("train", "epoch", "loss"): 3,
        ("train", "epoch", "accuracy"): 3,
        ("val", "epoch", "loss"): 3,  # val_loss under its base name
        ("val", "epoch", "accuracy"): 3,
        ("test", "epoch", "loss"): 1,  # evaluate() outside fit; fit's own validation is not "test"
        ("test", "epoch", "accuracy"): 1,
    }
    assert [r["step"] for r in recorded if r["name"] == "loss" and r["scope"] == "step"] == list(range(1, 16))
    assert [r["epoch"] for r in recorded if r["stage"] == "val" and r["name"] == "loss"] == [0, 1, 2]
    assert [r["seq"] for r in recorded] == list(range(len(recorded)))
    (test_loss,) = [r["value"] for r in recorded if r["stage"] == "test" and r["name"] == "loss"]
    assert test_loss == pytest.approx(m.evaluate(x, y, verbose=0)[0], rel=1e-5)
    m_json = manifest(cb.run_dir)
    assert m_json["framework"] == "keras" and m_json["status"] == "completed"
    fp = json.loads((Path(cb.run_dir) / "fingerprint.json").read_text())
    assert fp["keras"]["backend"] == "torch" and fp["keras"]["version"] == keras.__version__


def run_on_backend(backend: str, code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter whose Keras uses ``backend`` (one backend per process)."""
    pytest.importorskip({"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}[backend])
    script = tmp_path / f"on_{backend}.py"
    tests_dir = str(Path(__file__).resolve().parents[1])
    script.write_text(
        f"import os, sys\nos.environ['KERAS_BACKEND'] = {backend!r}\nsys.path.insert(0, {tests_dir!r})\n"
        + textwrap.dedent(code)
    )
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_steps_per_execution(tmp_path: Path) -> None:
    # the torch backend does not support steps_per_execution > 1: TensorFlow does
    done = run_on_backend(
        "tensorflow",
        f"""
        from deviate_cb.keras import DeviateCallback
        from keras_cb.models import data, model
        x, y = data(192)
        cb = DeviateCallback({str(tmp_path / "runs")!r})
        model(steps_per_execution=2).fit(x, y, batch_size=32, epochs=2, callbacks=[cb], verbose=0)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = rows(tmp_path / "runs/experiment=on_tensorflow/variant=standalone/replica=0")  # the script's name
    steps = [r["step"] for r in recorded if r["name"] == "loss" and r["scope"] == "step"]
    assert steps == [2, 4, 6, 8, 10, 12]  # Keras reports every 2 batches; steps count batches


def test_generator_and_tf_data_inputs(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    x, y = data(128)

    def batches():
        while True:
            for i in range(0, 128, 32):
                yield x[i : i + 32], y[i : i + 32]

    cb = DeviateCallback(tmp_path / "runs")
    m = model()
    m.fit(batches(), steps_per_epoch=4, epochs=1, callbacks=[cb], verbose=0)
    m.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(32), epochs=1, callbacks=[cb], verbose=0)
    steps = [r["step"] for r in rows(cb.run_dir) if r["name"] == "loss" and r["scope"] == "step"]
    assert steps == list(range(1, 9))  # the second fit continues the global step


def test_fine_tuning_with_a_new_callback_continues_the_run(tmp_path: Path) -> None:
    x, y = data()
    m = model()
    first = DeviateCallback(tmp_path / "runs")
    m.fit(x, y, batch_size=50, epochs=1, callbacks=[first], verbose=0)
    second = DeviateCallback(tmp_path / "runs")
    m.fit(x, y, batch_size=50, epochs=2, initial_epoch=1, callbacks=[second], verbose=0)
    assert second.run_dir == first.run_dir
    standalone = tmp_path / "runs" / f"experiment={script_experiment()}" / "variant=standalone"
    assert sorted(p.name for p in standalone.iterdir()) == ["replica=0"]
    recorded = rows(first.run_dir)
    assert [r["epoch"] for r in recorded if r["scope"] == "epoch" and r["name"] == "loss"] == [0, 1]
    assert [r["step"] for r in recorded if r["scope"] == "step" and r["name"] == "loss"] == list(range(1, 9))
    another_model = model()
    third = DeviateCallback(tmp_path / "runs")
    another_model.fit(x, y, epochs=1, callbacks=[third], verbose=0)
    assert Path(third.run_dir).name == "replica=1"  # another model is another run


def test_seeded_deterministic_runs_are_identical(tmp_path: Path) -> None:
    x, y = data()

    def run() -> tuple[list[float], dict]:
        # PYTHONHASHSEED cannot be set from inside a process: the honest warning when the run opens
        with pytest.warns(UserWarning, match="PYTHONHASHSEED"):
            cb = DeviateCallback(tmp_path / "runs", seed=11, deterministic=True)  # before the model
            model().fit(x, y, batch_size=32, epochs=2, validation_split=0.2, callbacks=[cb], verbose=0)
        return [r["value"] for r in rows(cb.run_dir)], manifest(cb.run_dir)

    first, m1 = run()
    second, _ = run()
    assert first == second
    det = m1["determinism"]
    assert det["requested"] == {"seed": 11, "deterministic": True}
    assert det["in_effect"]["keras"] == {"backend": "torch", "global_random_seed": 11}
    assert det["in_effect"]["torch"]["deterministic_algorithms"] is True
    assert det["in_effect"]["env"]["XLA_FLAGS"] == "--xla_gpu_deterministic_ops=true"
    import torch

    torch.use_deterministic_algorithms(False)


def test_unseeded_runs_differ(tmp_path: Path) -> None:
    x, y = data()
    values = []
    for _ in range(2):
        cb = DeviateCallback(tmp_path / "runs")
        model().fit(x, y, batch_size=32, epochs=1, callbacks=[cb], verbose=0)
        values.append([r["value"] for r in rows(cb.run_dir)])
    assert values[0] != values[1]


def test_nan_is_kept_and_a_vector_metric_is_skipped_with_one_warning(tmp_path: Path) -> None:
    def always_nan(y_true, y_pred):  # type: ignore[no-untyped-def]
        return keras.ops.log(keras.ops.zeros_like(y_pred[:, 0]) - 1.0)

    x, y = data()
    y_onehot = np.eye(2, dtype="float32")[y]
    m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2, activation="softmax")])
    m.compile(optimizer="sgd", loss="categorical_crossentropy", metrics=[always_nan, keras.metrics.F1Score()])
    cb = DeviateCallback(tmp_path / "runs")
    with pytest.warns(UserWarning, match=r"metric 'f1_score' is not a number") as caught:
        m.fit(x, y_onehot, batch_size=50, epochs=2, callbacks=[cb], verbose=0)
    assert sum("f1_score" in str(w.message) for w in caught) == 1
    recorded = rows(cb.run_dir)
    nan_rows = [r for r in recorded if r["name"] == "always_nan"]
    assert nan_rows and all(math.isnan(r["value"]) and r["finite"] is False for r in nan_rows)
    assert "f1_score" not in {r["name"] for r in recorded}


def test_metric_filter(tmp_path: Path) -> None:
    x, y = data()
    cb = DeviateCallback(tmp_path / "runs", metrics=["accuracy"])
    model().fit(x, y, epochs=1, validation_split=0.2, callbacks=[cb], verbose=0)
    assert {r["name"] for r in rows(cb.run_dir)} == {"accuracy"}


def test_metric_filter_matching_nothing_warns(tmp_path: Path) -> None:
    x, y = data()
    cb = DeviateCallback(tmp_path / "runs", metrics=["nope"])
    with pytest.warns(UserWarning, match=r"matched none of the logged metrics \['accuracy', 'loss'"):
        model().fit(x, y, epochs=1, callbacks=[cb], verbose=0)
    assert not (cb.run_dir / "metrics.parquet").exists() or rows(cb.run_dir) == []


def test_batch_ends_may_run_off_the_training_thread(tmp_path: Path) -> None:
    threads: set[str] = set()

    class Spy(DeviateCallback):
        def on_train_batch_end(self, batch, logs=None):  # type: ignore[no-untyped-def]
            threads.add(threading.current_thread().name)
            super().on_train_batch_end(batch, logs)

    x, y = data()
    cb = Spy(tmp_path / "runs")
    assert cb.async_safe is True
    model().fit(x, y, batch_size=20, epochs=2, callbacks=[cb], verbose=0)
    assert threads != {threading.main_thread().name}  # Keras dispatched them to its executor
    steps = [r["step"] for r in rows(cb.run_dir) if r["name"] == "loss" and r["scope"] == "step"]
    assert steps == list(range(1, 21))  # in order, none lost


def test_a_model_that_is_not_keras_3_is_refused() -> None:
    class LegacyModel:  # what tf_keras hands a callback: not a keras.Model
        pass

    with pytest.raises(TypeError, match=r"needs a Keras 3 model \(keras.Model\). Received: .*LegacyModel"):
        DeviateCallback().set_model(LegacyModel())


@pytest.mark.slow
def test_a_crash_mid_epoch_keeps_the_finished_epochs_and_the_buffered_batches(tmp_path: Path) -> None:
    done = run_on_backend(
        "torch",
        f"""
        import keras
        from deviate_cb.keras import DeviateCallback
        from keras_cb.models import data, model

        class Boom(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self._epoch = epoch

            def on_train_batch_begin(self, batch, logs=None):
                if self._epoch == 2 and batch == 3:
                    raise RuntimeError("boom")

        x, y = data()
        model().fit(x, y, batch_size=40, epochs=4, verbose=0,
                    callbacks=[DeviateCallback({str(tmp_path / "runs")!r}), Boom()])
        """,
        tmp_path,
    )
    assert done.returncode == 1 and "boom" in done.stderr
    run_dir = tmp_path / "runs/experiment=on_torch/variant=standalone/replica=0"  # the script's name
    recorded = rows(run_dir)
    assert [r["epoch"] for r in recorded if r["scope"] == "epoch" and r["name"] == "loss"] == [0, 1]
    # epoch 2's three finished batches were buffered when the exception hit: flushed at exit
    assert [r["step"] for r in recorded if r["scope"] == "step" and r["name"] == "loss"] == list(range(1, 14))
    assert manifest(run_dir)["status"] == "failed"
    # every step that started has its time, the one that raised too (it ends at exit), and nothing went wrong
    steps = [r for r in pq.read_table(run_dir / "timings.parquet").to_pylist() if r["kind"] == "step"]
    assert [(r["epoch"], r["step"]) for r in steps] == [(e, e * 5 + k) for e in range(3) for k in range(5)][:14]
    assert "problems" not in manifest(run_dir)
