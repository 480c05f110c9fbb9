"""Standalone runs (issue 26, item 5): a ``DeviateCallback()`` used without ``deviate-replicate`` records the seed
the script set before it (``run.json`` ``seed`` and ``seed_source``) and files the run under the script's name
instead of pooling every script under ``experiment=default``.

Each test runs a tiny real fit (CPU) in a fresh interpreter, from a script written to ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Optional

import pytest

pytest.importorskip("lightning")

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"

LIGHTNING_FIT = """
from lightning_cb.models import TinyModule, loader
trainer = L.Trainer(max_epochs=1, callbacks=[cb], logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
trainer.fit(TinyModule(), loader(32), loader(32, shuffle=False))
"""

KERAS_FIT = """
from keras_cb.models import data, model
x, y = data(64)
model().fit(x, y, batch_size=32, epochs=1, callbacks=[cb], verbose=0)
"""


def run_script(
    tmp_path: Path, name: str, body: str, *, args: Optional[list[str]] = None, backend: Optional[str] = None
) -> subprocess.CompletedProcess[str]:
    """Write ``body`` to ``tmp_path/name`` and run it as a script (``args`` replaces ``[script]``: ``-c``)."""
    script = tmp_path / name
    script.write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVIATE_", "PL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS)])
    if backend is not None:
        env["KERAS_BACKEND"] = backend
    done = subprocess.run(
        [sys.executable, *(args if args is not None else [str(script)])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def lightning_script(before: str, callback: str = "DeviateCallback('runs')") -> str:
    head = "import lightning as L\nimport torch\nfrom deviate_cb.lightning import DeviateCallback\n"
    return f"{head}{before}\ncb = {callback}\n{LIGHTNING_FIT}"


def runs(tmp_path: Path) -> dict[str, dict]:
    """``{experiment folder: run.json}`` of every standalone run under ``tmp_path/runs``."""
    found = {}
    for manifest in sorted((tmp_path / "runs").glob("experiment=*/variant=standalone/replica=*/run.json")):
        found[manifest.parents[2].name] = json.loads(manifest.read_text())
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    ("before", "source"),
    [
        ("L.seed_everything(42)", "PL_GLOBAL_SEED"),
        ("from lightning.pytorch import seed_everything\nseed_everything(42, workers=True)", "PL_GLOBAL_SEED"),
        ("torch.manual_seed(42)", "torch.initial_seed"),
    ],
)
def test_lightning_records_the_seed_the_script_set_before_the_callback(
    tmp_path: Path, before: str, source: str
) -> None:
    run_script(tmp_path, "train_mlp.py", lightning_script(before))
    manifest = runs(tmp_path)["experiment=train_mlp"]
    assert manifest["status"] == "completed"
    assert (manifest["seed"], manifest["seed_source"], manifest["seed_note"]) == (42, source, None)
    fingerprint = json.loads(
        (tmp_path / "runs/experiment=train_mlp/variant=standalone/replica=0/fingerprint.json").read_text()
    )
    assert fingerprint["seed"] == 42


@pytest.mark.slow
def test_lightning_seeded_after_the_callback_is_created_still_counts(tmp_path: Path) -> None:
    """The seed is read when the run opens (the fit starts), not when the callback is created."""
    body = lightning_script("", "DeviateCallback('runs')\nL.seed_everything(5)")
    run_script(tmp_path, "late.py", body)
    manifest = runs(tmp_path)["experiment=late"]
    assert (manifest["seed"], manifest["seed_source"]) == (5, "PL_GLOBAL_SEED")


@pytest.mark.slow
def test_an_unseeded_run_records_no_seed_and_says_why(tmp_path: Path) -> None:
    """Torch's own random initial seed (64 bits) is never taken for the user's, nor a stale PL_GLOBAL_SEED."""
    run_script(tmp_path, "unseeded.py", lightning_script("import os\nos.environ['PL_GLOBAL_SEED'] = '9'"))
    manifest = runs(tmp_path)["experiment=unseeded"]
    assert manifest["seed"] is None and manifest["seed_source"] is None
    assert "PL_GLOBAL_SEED is '9' but torch was not seeded with it" in manifest["seed_note"]
    assert "could be read back" in manifest["seed_note"]


@pytest.mark.slow
def test_the_callbacks_own_seed_wins(tmp_path: Path) -> None:
    run_script(tmp_path, "own.py", lightning_script("L.seed_everything(42)", "DeviateCallback('runs', seed=5)"))
    manifest = runs(tmp_path)["experiment=own"]
    assert (manifest["seed"], manifest["seed_source"], manifest["seed_note"]) == (5, "callback", None)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "tensorflow"])
def test_keras_records_the_seed_of_set_random_seed(tmp_path: Path, backend: str) -> None:
    pytest.importorskip(backend)
    pytest.importorskip("keras")
    body = "import keras\nfrom deviate_cb.keras import DeviateCallback\nkeras.utils.set_random_seed(7)\n"
    run_script(tmp_path, "fit_keras.py", body + "cb = DeviateCallback('runs')\n" + KERAS_FIT, backend=backend)
    manifest = runs(tmp_path)["experiment=fit_keras"]
    expected = (7, "keras.utils.set_random_seed", None)
    assert (manifest["seed"], manifest["seed_source"], manifest["seed_note"]) == expected


@pytest.mark.slow
def test_keras_on_tensorflow_records_tf_random_set_seed(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    body = "import tensorflow as tf\nfrom deviate_cb.keras import DeviateCallback\ntf.random.set_seed(11)\n"
    run_script(tmp_path, "tf_seeded.py", body + "cb = DeviateCallback('runs')\n" + KERAS_FIT, backend="tensorflow")
    manifest = runs(tmp_path)["experiment=tf_seeded"]
    assert (manifest["seed"], manifest["seed_source"]) == (11, "tf.random.set_seed")


@pytest.mark.slow
def test_two_scripts_go_to_two_experiments_and_the_argument_wins(tmp_path: Path) -> None:
    run_script(tmp_path, "first.py", lightning_script(""))
    run_script(tmp_path, "second.py", lightning_script(""))
    run_script(tmp_path, "third.py", lightning_script("", "DeviateCallback('runs', experiment='chosen')"))
    assert sorted(runs(tmp_path)) == ["experiment=chosen", "experiment=first", "experiment=second"]
    assert {m["experiment"] for m in runs(tmp_path).values()} == {"chosen", "first", "second"}


@pytest.mark.slow
def test_a_script_name_is_made_a_valid_experiment_and_no_script_is_default(tmp_path: Path) -> None:
    run_script(tmp_path, "lr=0.1.py", lightning_script(""))
    code = lightning_script("").replace("'runs'", repr(str(tmp_path / "runs")))
    run_script(tmp_path, "unused.py", "", args=["-c", code])
    assert sorted(runs(tmp_path)) == ["experiment=default", "experiment=lr_0.1"]
