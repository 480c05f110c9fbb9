"""A measuring tool never costs the user their training (issue 14, item 8).

What can be checked is refused before the first training step; once training started, an error in any recording
step (a full disk, a bug) becomes a warning and a ``problems`` entry of ``run.json``, and ``fit`` completes.
Real tiny Lightning training in this process, real Keras training (TensorFlow and torch backends) in
subprocesses: Keras picks its backend once per process. ``DEVIATE_KERAS_BACKENDS`` (comma-separated; default
``tensorflow,torch``) selects the Keras backends.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning_cb.models import TinyModule, loader, trainer
from torch import nn
from torch.nn import functional as F

import deviate_cb.store.metrics as store_metrics
import deviate_cb.store.predictions as store_predictions
from deviate_cb.errors import UsageError
from deviate_cb.lightning import DeviateCallback, Predictions

TESTS = Path(__file__).resolve().parents[1]
KERAS_BACKENDS = [b.strip() for b in os.environ.get("DEVIATE_KERAS_BACKENDS", "tensorflow,torch").split(",") if b]


def manifest(run_dir: Any) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "run.json").read_text())


def recording_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if w.category.__name__ == "RecordingWarning"]


def disk_full() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class NoForward(L.LightningModule):
    """Calls its layers in ``training_step`` and defines no ``forward`` (LightningModule's raises), as many do."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        self.steps = 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.steps += 1
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class PredictStepOnly(NoForward):
    def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> torch.Tensor:
        return self.net(batch[0])


def test_lightning_module_without_forward_is_refused_at_setup(tmp_path: Path) -> None:
    module = NoForward()
    cb = DeviateCallback(tmp_path / "runs", predictions=Predictions(data=loader(32, shuffle=False)))
    with pytest.raises(UsageError) as info:
        trainer([cb], max_epochs=2).fit(module, loader())
    assert module.steps == 0  # refused before any training step
    message = str(info.value)
    assert "\n" not in message
    assert "predictions" in message and "NoForward" in message
    assert "`forward(x)`" in message and "`predict_step(batch, batch_idx)`" in message and "predict_fn" in message
    # a `predict_step` is enough: the callback predicts with it
    module = PredictStepOnly()
    cb = DeviateCallback(tmp_path / "runs", predictions=Predictions(data=loader(32, shuffle=False)))
    trainer([cb], max_epochs=1).fit(module, loader())
    assert module.steps == 6
    assert manifest(cb.run_dir)["predictions"]["snapshots"] == ["final"]
    assert "problems" not in manifest(cb.run_dir)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Predictions(data=loader(0, shuffle=False)), r"`data` holds no batches"),
        (
            lambda: Predictions(data=loader(32, shuffle=False), groups={"sex": ["F", "M"] * 8}),
            r"groups\['sex'\] has 16 entries but `data` holds 32 samples",
        ),
    ],
    ids=["empty", "groups-length"],
)
def test_lightning_bad_data_is_refused_when_the_callback_is_created(make: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        DeviateCallback(predictions=make())
    assert "\n" not in str(info.value)


def fail_from_second_call(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, error: Exception) -> list[int]:
    """Make ``owner.name`` raise ``error`` from its second call on; return the list of calls made."""
    original, calls = getattr(owner, name), []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) >= 2:
            raise error
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)
    return calls


@pytest.mark.parametrize(
    ("owner", "name", "error", "where"),
    [
        (store_metrics.MetricsFile, "append_part", disk_full(), "on_train_epoch_end: metrics flush"),
        (store_predictions, "write_predictions", disk_full(), "on_train_epoch_end: predictions snapshot"),
        (store_predictions, "write_predictions", ValueError("a bug"), "on_train_epoch_end: predictions snapshot"),
    ],
    ids=["metrics-disk-full", "predictions-disk-full", "predictions-bug"],
)
def test_lightning_recording_error_after_start_is_a_problem_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, error: Exception, where: str
) -> None:
    monkeypatch.setenv("DEVIATE_FLUSH_INTERVAL_S", "0")  # every epoch end writes, as epochs of 10 s or more do
    module = TinyModule()
    before = [p.detach().clone() for p in module.parameters()]
    calls = fail_from_second_call(monkeypatch, owner, name, error)
    config = Predictions(data=loader(32, shuffle=False), every_n_epochs=1)
    cb = DeviateCallback(tmp_path / "runs", predictions=config)
    fit = trainer([cb], max_epochs=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit.fit(module, loader(), loader(shuffle=False))
    assert len(calls) >= 2  # the injected error was met ...
    assert fit.state.finished and fit.global_step == 3 * 6  # ... and training ran to its end
    assert any(not torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True))
    m = manifest(cb.run_dir)
    assert m["status"] == "completed"
    text = f"{type(error).__name__}: {error}"
    problems = {p["where"]: p for p in m["problems"]}
    assert problems[where]["error"] == text
    assert all(p["error"] == text for p in m["problems"]), m["problems"]
    shown = recording_warnings(caught)
    assert len(shown) == 1, shown  # one warning per kind, however often it failed
    assert where in shown[0] and text in shown[0] and "run.json" in shown[0]


def test_lightning_disk_full_for_every_file_only_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even run.json cannot be written: the problems are only warned about, once per kind."""
    monkeypatch.setenv("DEVIATE_FLUSH_INTERVAL_S", "0")  # every epoch end writes, as epochs of 10 s or more do
    full = {"now": False}
    for module_name, function in [
        ("parts", "atomic_write_parquet"),
        ("metrics", "atomic_write_parquet"),
        ("timings", "atomic_write_parquet"),
        ("run_directory", "atomic_write_bytes"),
        ("predictions", "atomic_write_parquet"),
    ]:
        owner = sys.modules[f"deviate_cb.store.{module_name}"]
        original = getattr(owner, function)

        def write(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if full["now"]:
                raise disk_full()
            return _original(*args, **kwargs)

        monkeypatch.setattr(owner, function, write)

    class FillsTheDisk(TinyModule):
        def on_train_epoch_start(self) -> None:
            full["now"] = self.current_epoch >= 1

    module = FillsTheDisk()
    cb = DeviateCallback(tmp_path / "runs", predictions=Predictions(data=loader(32, shuffle=False), every_n_epochs=1))
    fit = trainer([cb], max_epochs=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit.fit(module, loader(), loader(shuffle=False))
    assert fit.state.finished and fit.global_step == 3 * 6
    shown = recording_warnings(caught)
    assert shown and all("could not be recorded in run.json either" in w for w in shown), shown
    assert any("on_train_epoch_end: metrics flush failed" in w for w in shown), shown
    kinds = [w.split(" failed ")[0].rpartition(": ")[2] for w in shown]
    assert len(kinds) == len(set(kinds)), shown  # each kind of step warned about once
    assert manifest(cb.run_dir)["status"] == "running"  # what the disk held when it filled up


# -- Keras ------------------------------------------------------------------------------------------------------

KERAS_SCRIPT = """
import errno, json, os, sys, warnings
import numpy as np
import keras

from deviate_cb.errors import UsageError
from deviate_cb.keras import DeviateCallback, Predictions
import deviate_cb.store.metrics as store_metrics
import deviate_cb.store.predictions as store_predictions

out, result = sys.argv[1], {}
rng = np.random.default_rng(0)
x = rng.normal(size=(160, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int64")

# refused when the callback is created, before any training
for name, make in [
    ("lengths", lambda: Predictions(data=(x[:50], y[:40]))),
    ("groups", lambda: Predictions(data=(x[:50], y[:50]), groups={"sex": np.array(["F", "M"] * 10)})),
    ("labels", lambda: Predictions(data=(x[:50], y[:50]), labels=5)),
    ("not data", lambda: Predictions(data=42)),
]:
    try:
        DeviateCallback(out, predictions=make())
        result[name] = None
    except (UsageError, TypeError) as exc:
        result[name] = f"{type(exc).__name__}: {exc}"

# errors injected once training started: a full disk for metrics (from the 2nd write), a bug in predictions
# (a part at an epoch end, MetricsFile.append_part; metrics.parquet straight at the run's end, MetricsFile.append)
calls = []
append_part, append = store_metrics.MetricsFile.append_part, store_metrics.MetricsFile.append
def failing(write):
    def failing_write(self, columns):
        calls.append("metrics")
        if calls.count("metrics") >= 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write(self, columns)
    return failing_write
def failing_predictions(*args, **kwargs):
    calls.append("predictions")
    raise ValueError("a bug in the predictions writer")
store_metrics.MetricsFile.append_part, store_metrics.MetricsFile.append = failing(append_part), failing(append)
store_predictions.write_predictions = failing_predictions

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
before = [np.array(w) for w in model.get_weights()]
cb = DeviateCallback(out, predictions=Predictions(data=(x[:40], y[:40]), every_n_epochs=1))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    history = model.fit(x, y, batch_size=32, epochs=3, callbacks=[cb], verbose=0)
    loss = model.evaluate(x, y, callbacks=[cb], verbose=0)
result["epochs"] = len(history.history["loss"])
result["evaluated"] = float(loss)
result["trained"] = any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
result["calls"] = sorted(set(calls))
result["warnings"] = [str(w.message) for w in caught if w.category.__name__ == "RecordingWarning"]
with open(os.path.join(str(cb.run_dir), "run.json")) as handle:
    result["manifest"] = json.load(handle)
print("RESULT " + json.dumps(result))
"""


@pytest.fixture(params=KERAS_BACKENDS)
def keras_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    backend = request.param
    needs = {"tensorflow": ["tensorflow"], "torch": ["torch"], "jax": ["jax", "jaxlib"]}.get(backend)
    if needs is None:
        raise pytest.UsageError(f"DEVIATE_KERAS_BACKENDS names an unknown backend: {backend!r}.")
    missing = [m for m in ["keras", *needs] if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"Keras on {backend} needs {', '.join(missing)}, not installed")
    yield backend


@pytest.mark.slow
def test_keras_fit_checks_early_and_never_raises_once_started(tmp_path: Path, keras_backend: str) -> None:
    script = tmp_path / "keras_faults.py"
    script.write_text(textwrap.dedent(KERAS_SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIATE_")}
    env.update(KERAS_BACKEND=keras_backend, PYTHONPATH=os.pathsep.join([str(TESTS.parent), str(TESTS)]))
    env["DEVIATE_FLUSH_INTERVAL_S"] = "0"  # every epoch end writes, as epochs of 10 s or more do
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs")], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    # refused at construction, one line naming `predictions` and what is expected
    assert result["lengths"] == (
        "UsageError: DeviateCallback(predictions=Predictions(data=(x, y))): x holds 50 samples but y holds 40; "
        "they must line up."
    )
    assert "groups['sex'] has 20 entries but `data` holds 50 samples" in result["groups"]
    assert result["labels"].startswith("UsageError: DeviateCallback(predictions=...): Predictions(labels=5)")
    assert result["not data"].startswith("TypeError: `Predictions.data` must be (x, y) arrays")
    # errors after training started: fit and evaluate complete, the model is trained, run.json says what failed
    assert result["epochs"] == 3 and result["trained"] and result["evaluated"] > 0
    assert result["calls"] == ["metrics", "predictions"]
    m = result["manifest"]
    assert m["status"] == "completed"
    problems = {p["where"]: p["error"] for p in m["problems"]}
    full = f"OSError: [Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}"
    assert problems["on_epoch_end: metrics flush"] == full
    assert problems["on_epoch_end: predictions snapshot"] == "ValueError: a bug in the predictions writer"
    assert problems["on_train_end: predictions snapshot"] == "ValueError: a bug in the predictions writer"
    assert problems["on_test_end: metrics flush"] == full
    shown = result["warnings"]
    assert len(shown) == 2, shown  # one per kind: metrics flush / OSError, predictions snapshot / ValueError
    assert any("on_epoch_end: metrics flush failed (OSError" in w for w in shown), shown
    assert any("on_epoch_end: predictions snapshot failed (ValueError" in w for w in shown), shown
