"""Profiling windows on real tiny models: op rows name real ops; profiled steps are flagged and excluded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deviate_cb.capture.step_timer import StepTimer
from deviate_cb.profiling.drivers import profile_window
from deviate_cb.profiling.ops import top_ops
from deviate_cb.profiling.torch_profiler import TorchProfileWindow
from deviate_cb.profiling.window import ProfileWindow
from deviate_cb.store.timings import read_timings, write_timings

torch = pytest.importorskip("torch")


def train_torch(steps: int, window: ProfileWindow) -> tuple[StepTimer, TorchProfileWindow]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 3, (8,))
    timer, driver = StepTimer(), TorchProfileWindow(window, cuda=False)
    driver.start()
    for step in range(steps):
        timer.start_step()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        timer.end_step("train", 0, step, profiled=driver.profiling)
        driver.step()
    driver.stop()
    return timer, driver


def test_torch_window_records_aten_ops_and_flags_its_steps(tmp_path: Path) -> None:
    timer, driver = train_torch(10, ProfileWindow(wait=2, warmup=1, active=2, repeat=2))
    assert [r["profiled"] for r in timer.rows()] == [False, False, True, True, True] * 2
    assert timer.compute()["train"]["steps"] == 4
    rows = driver.rows()
    assert {r["window"] for r in rows} == {0, 1} and {r["source"] for r in rows} == {"torch"}
    ops = {r["op"] for r in rows}
    assert {"aten::convolution", "aten::addmm", "aten::convolution_backward"} <= ops, sorted(ops)
    assert not any(op.startswith("ProfilerStep") for op in ops)
    (conv,) = [r for r in rows if r["op"] == "aten::convolution" and r["window"] == 0]
    assert conv["calls"] == 2 and conv["device_type"] == "cpu" and conv["total_time_us"] >= conv["self_time_us"] >= 0
    write_timings(tmp_path, timer.rows(), rows)
    table = read_timings(tmp_path).to_pylist()
    assert sum(r["kind"] == "step" for r in table) == 10 and sum(r["kind"] == "op" for r in table) == len(rows)


def test_stopping_inside_the_active_phase_keeps_what_was_recorded() -> None:
    timer, driver = train_torch(3, ProfileWindow(wait=1, warmup=0, active=5))
    assert [r["profiled"] for r in timer.rows()] == [False, True, True]
    assert "aten::addmm" in {r["op"] for r in driver.rows()}
    assert {r["calls"] for r in driver.rows() if r["op"] == "aten::addmm"} == {2}


def test_no_profiler_outside_the_window() -> None:
    driver = TorchProfileWindow(ProfileWindow(wait=3, warmup=1, active=1), cuda=False)
    driver.start()
    assert driver._profiler is None and not driver.profiling
    for _ in range(3):
        driver.step()
    assert driver._profiler is not None and driver.profiling
    for _ in range(2):
        torch.ones(4, 4) @ torch.ones(4, 4)
        driver.step()
    assert driver._profiler is None and not driver.profiling and driver.rows()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"wait": -1}, "`wait` must be a non-negative integer. Received: wait=-1."),
        ({"active": 0}, "`active` must be a positive integer. Received: active=0."),
        ({"repeat": 1.5}, "`repeat` must be a positive integer. Received: repeat=1.5."),
        ({"warmup": True}, "`warmup` must be a non-negative integer. Received: warmup=True."),
    ],
)
def test_bad_window_is_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        ProfileWindow(**kwargs)
    assert str(info.value) == message


def test_coerce_and_factory_refuse_bad_values_in_one_line() -> None:
    assert ProfileWindow.coerce(True) == ProfileWindow()
    with pytest.raises(ValueError, match=r"^`profile` keys must be among"):
        ProfileWindow.coerce({"steps": 3})
    with pytest.raises(TypeError, match=r"^`profile` must be True"):
        ProfileWindow.coerce("yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^`framework` must be 'torch' or 'tensorflow'"):
        profile_window(ProfileWindow(), "jax")


KERAS_TF = """
import json, os, sys
os.environ["KERAS_BACKEND"] = "tensorflow"
import keras, numpy as np
from deviate_cb.profiling.drivers import ProfileWindow, TensorFlowProfileWindow
from deviate_cb.capture.step_timer import StepTimer

class Timed(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.timer, self.window = StepTimer(), TensorFlowProfileWindow(ProfileWindow(wait=2, warmup=1, active=2))
        self.window.start()
    def on_train_batch_begin(self, batch, logs=None):
        self.timer.start_step()
    def on_train_batch_end(self, batch, logs=None):
        self.timer.end_step("train", 0, batch, profiled=self.window.profiling)
        self.window.step()

keras.utils.set_random_seed(0)
layers = [keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3), keras.layers.Flatten(), keras.layers.Dense(2)]
model = keras.Sequential(layers)
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x, y = np.random.rand(128, 8, 8, 1).astype("float32"), np.random.randint(0, 2, 128)
cb = Timed()
model.fit(x, y, epochs=1, batch_size=16, verbose=0, callbacks=[cb])
cb.window.stop()
print("RESULT" + json.dumps({"steps": cb.timer.rows(), "ops": cb.window.rows()}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("onednn", ["0", "1"], ids=["onednn-off", "onednn-on"])
def test_keras_on_tensorflow_window_records_tensorflow_ops(onednn: str) -> None:
    # TensorFlow names its kernels by CPU and settings (with oneDNN, MatMul runs as _MklMatMul, a fused
    # Conv2DBackpropFilter + BiasAddGrad as _MklNativeConv2DBackpropFilterWithBias): both settings run here, on any
    # CPU (where oneDNN is missing, "1" changes nothing), and the ops are checked under their portable names.
    # CPU only: on a GPU, Keras would compile the step with XLA and the ops would be on the GPU.
    pytest.importorskip("tensorflow")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": onednn, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(KERAS_TF)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    result = json.loads(line[len("RESULT") :])
    assert [r["profiled"] for r in result["steps"]] == [False, False, True, True, True, False, False, False]
    assert {r["source"] for r in result["ops"]} == {"tensorflow"} and {r["window"] for r in result["ops"]} == {0}
    raw = sorted({r["op"] for r in result["ops"]})
    assert not any(op.startswith("aten::") for op in raw), raw
    ops = {r["op"]: r for r in top_ops(result["ops"], n=len(result["ops"]), device_type="cpu")}
    assert {"Conv2D", "Conv2DBackpropFilter", "MatMul"} <= set(ops), raw
    # per active step: the convolution forward and its filter gradient once; the Dense layer's forward, kernel
    # gradient and input gradient are three matmuls (one fused with the bias add, under either name)
    assert ops["Conv2D"]["calls"] == 2 and ops["Conv2DBackpropFilter"]["calls"] == 2, raw
    assert ops["MatMul"]["calls"] == 6, ops["MatMul"]
    assert all(r["total_time_us"] >= r["self_time_us"] >= 0 and r["device_type"] == "cpu" for r in result["ops"])
