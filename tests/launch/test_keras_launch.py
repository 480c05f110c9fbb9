"""The replicator's Keras parts: fit/evaluate injection, ``--keras-backend`` and a backend that is not installed.

A missing backend is simulated with ``blocked/sitecustomize.py``-style import blocking (``BLOCK_MODULES``), so
these tests need no second environment; the launcher and the replicas inherit it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from deviate_cb.errors import UsageError
from deviate_cb.launch.replica import keras_backend
from deviate_cb.launch.replica.inject import keras_callbacks_with
from deviate_cb.launch.replica.keras_backend import check_keras_backend, configured_keras_backend
from tests.helpers.replicate_helpers import TRAINERS, child_env, final_metrics, manifest, trainer, tree

HAS_KERAS = importlib.util.find_spec("keras") is not None
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_keras = pytest.mark.skipif(not HAS_KERAS, reason="Keras 3 is not installed (pip install 'deviate-cb[keras]')")

BLOCKER = """\
import importlib.abc, os, sys

class _Block(importlib.abc.MetaPathFinder):
    blocked = set(filter(None, os.environ.get("BLOCK_MODULES", "").split(",")))

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Block())
"""


@pytest.fixture
def blocked(tmp_path: Path):
    """Environment additions that make the given top-level modules look not installed, in every process."""
    site = tmp_path / "blocked"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)

    def env(*modules: str) -> dict[str, str]:
        base = child_env()
        return {"BLOCK_MODULES": ",".join(modules), "PYTHONPATH": f"{site}:{base['PYTHONPATH']}"}

    return env


# -- fit/evaluate injection -----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not (HAS_KERAS and HAS_TORCH), reason="needs Keras 3 and torch (KERAS_BACKEND=torch)")
def test_real_keras_fit_and_evaluate_get_exactly_one_callback(tmp_path: Path) -> None:
    env = child_env({"KERAS_BACKEND": "torch"})
    proc = subprocess.run(
        [sys.executable, str(TRAINERS / "keras_fit_probe.py")], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["keras_imported_by_install"] is False and report["tensorflow_imported"] is False
    assert report["wrapped"] == [True, True]
    # fit without callbacks: one injected; fit's own validation (2 epochs) reuses it, adds none
    assert report["after_fit"] == [1, {"train_begin": 1, "train_batch": 4, "test_begin": 2}]
    # a second fit (History given) and evaluate() after fit: the model's callback again
    assert report["after_evaluate"] == [1, {"train_begin": 2, "train_batch": 6, "test_begin": 3}]
    assert report["users_own"] == [2, 1, 2]  # the user's own was used; the injected one was not called
    assert report["positional"] == [3, 2, True]  # positional list: injected, the user's History kept
    assert report["single_and_evaluate"] == [4, 1]  # a single callback; evaluate's positional list with one


class _CB:
    pass


class _Model:
    pass


def test_keras_callbacks_with_keeps_one_per_model() -> None:
    model, other = _Model(), object()
    added = keras_callbacks_with(model, (other,), _CB)
    assert added[0] is other and type(added[1]) is _CB
    assert keras_callbacks_with(model, None, _CB) == [added[1]]  # reused, not a new one
    assert keras_callbacks_with(model, other, _CB) == [other, added[1]]  # one callback, not a list
    mine = _CB()
    assert keras_callbacks_with(model, [mine], _CB) == [mine]
    assert keras_callbacks_with(model, [], _CB) == [mine]  # the user's is the model's now
    assert keras_callbacks_with(_Model(), [], _CB)[0] is not mine  # another model, another callback


def test_keras_callbacks_with_a_callback_list() -> None:
    class CallbackList:
        def __init__(self, callbacks: list) -> None:
            self.callbacks, self.model = callbacks, None

    given = CallbackList([object()])
    assert keras_callbacks_with(_Model(), given, _CB) is given
    assert len(given.callbacks) == 2 and isinstance(given.callbacks[1], _CB)


# -- --keras-backend ---------------------------------------------------------------------------------------------
def _installed_except(*missing: str):
    return lambda name: name not in missing


@pytest.mark.parametrize(
    ("backend", "missing", "message"),
    [
        ("mxnet", (), "`--keras-backend` must be one of tensorflow, torch, jax. Received: --keras-backend=mxnet."),
        (
            "torch",
            ("keras",),
            "`--keras-backend` needs Keras 3, which is not installed. Install it with: pip install "
            "'deviate-cb[keras]'. Received: --keras-backend=torch.",
        ),
        (
            "jax",
            ("jax", "jaxlib"),
            "`--keras-backend` jax needs JAX, which is not installed. Install it with: pip install 'jax[cpu]' "
            "(or jax[cuda12] for GPUs). Received: --keras-backend=jax.",
        ),
        (
            "jax",
            ("jaxlib",),
            "`--keras-backend` jax needs JAX, which is not installed (jaxlib is missing). Install it with: pip "
            "install 'jax[cpu]' (or jax[cuda12] for GPUs). Received: --keras-backend=jax.",
        ),
        (
            "tensorflow",
            ("tensorflow",),
            "`--keras-backend` tensorflow needs TensorFlow, which is not installed. Install it with: pip install "
            "tensorflow (or tensorflow-cpu on machines without a GPU). Received: --keras-backend=tensorflow.",
        ),
        (
            "torch",
            ("torch",),
            "`--keras-backend` torch needs PyTorch, which is not installed. Install it with: pip install torch. "
            "Received: --keras-backend=torch.",
        ),
    ],
)
def test_check_keras_backend_messages(
    monkeypatch: pytest.MonkeyPatch, backend: str, missing: tuple[str, ...], message: str
) -> None:
    monkeypatch.setattr(keras_backend, "_keras_version", lambda: "3.15.1")
    with pytest.raises(UsageError) as info:
        check_keras_backend(backend, _installed_except(*missing))
    assert str(info.value) == message


def test_keras_2_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keras_backend, "_keras_version", lambda: "2.15.0")
    with pytest.raises(UsageError, match=r"needs Keras 3, but Keras 2\.15\.0 is installed\. .*'keras>=3'"):
        check_keras_backend("tensorflow", lambda name: True)
    monkeypatch.setattr(keras_backend, "_keras_version", lambda: "3.0.0")
    assert check_keras_backend("tensorflow", lambda name: True) == "tensorflow"
    assert check_keras_backend(None) is None


def test_configured_keras_backend_reads_env_then_keras_json(tmp_path: Path) -> None:
    assert configured_keras_backend({"KERAS_BACKEND": "jax", "KERAS_HOME": str(tmp_path)})[0] == "jax"
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "torch"}))
    backend, source = configured_keras_backend({"KERAS_HOME": str(tmp_path)})
    assert backend == "torch" and "keras.json" in source
    assert configured_keras_backend({"KERAS_HOME": str(tmp_path / "none")})[0] == "tensorflow"


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("deviate-replicate: error: ")
    return lines[0].removeprefix("deviate-replicate: error: ")


def test_unknown_keras_backend_is_exit_2(cli) -> None:
    done = cli("--trainer", trainer("keras_import.py:plain"), "-n", "2", "--keras-backend", "mxnet")
    assert done.returncode == 2
    assert _one_error_line(done.stderr) == (
        "`--keras-backend` must be one of tensorflow, torch, jax. Received: --keras-backend=mxnet."
    )
    assert not done.out.exists(), tree(done.out)


@needs_keras
def test_keras_backend_not_installed_is_exit_2(cli, blocked) -> None:
    done = cli("--trainer", trainer("keras_import.py:plain"), "-n", "2", "--keras-backend", "jax", env=blocked("jax"))
    assert done.returncode == 2
    assert _one_error_line(done.stderr) == (
        "`--keras-backend` jax needs JAX, which is not installed. Install it with: pip install 'jax[cpu]' "
        "(or jax[cuda12] for GPUs). Received: --keras-backend=jax."
    )
    assert not done.out.exists(), tree(done.out)


@pytest.mark.skipif(not (HAS_KERAS and HAS_TORCH), reason="needs Keras 3 and torch")
def test_keras_backend_reaches_every_replica_without_importing_keras(cli) -> None:
    done = cli("--trainer", trainer("keras_import.py:plain"), "-n", "2", "--parallel", "2", "--keras-backend", "torch")
    assert done.returncode == 0, done.stderr
    assert "Keras backend torch" in done.stdout.splitlines()[0]
    for replica in (0, 1):
        run_dir = done.run_dir("keras_import", "algo+impl", replica)
        assert (run_dir / "keras_backend.txt").read_text() == "torch"
        assert manifest(run_dir)["keras_backend"] == "torch"
        loaded = final_metrics(run_dir)
        assert loaded == {"keras": 0.0, "tensorflow": 0.0, "jax": 0.0, "torch": 0.0}  # the bootstrap is light


@needs_keras
def test_replica_importing_keras_with_a_missing_backend_fails_with_one_line(cli, blocked) -> None:
    env = {**blocked("jax", "jaxlib"), "KERAS_BACKEND": "jax"}  # from the user's environment, not --keras-backend
    done = cli("--trainer", trainer("keras_import.py:at_call"), "-n", "1", env=env)
    assert done.returncode == 1
    run_dir = done.run_dir("keras_import", "algo+impl", 0)
    record = manifest(run_dir)
    expected = (
        "Keras is set to the jax backend (KERAS_BACKEND=jax), but JAX is not installed (no module named 'jax'). "
        "Install it with: pip install 'jax[cpu]' (or jax[cuda12] for GPUs); or choose another backend with "
        "`deviate-replicate --keras-backend tensorflow|torch`."
    )
    assert record["status"] == "failed" and record["error"] == f"deviate-replicate: error: {expected}"
    assert record["exception"] == f"KerasBackendNotInstalled: {expected}"
    assert "Traceback" not in (run_dir / "stderr.log").read_text()


@needs_keras
def test_trainer_importing_keras_with_a_missing_backend_is_exit_2(cli, blocked) -> None:
    env = {**blocked("tensorflow"), "KERAS_BACKEND": "tensorflow"}
    done = cli("--trainer", trainer("keras_at_import.py:main"), "-n", "2", env=env)
    assert done.returncode == 2
    line = _one_error_line(done.stderr)
    assert "which raised at import: KerasBackendNotInstalled: Keras is set to the tensorflow backend" in line
    assert "keras_at_import.py, line 5)" in line  # the user's import, not the import machinery
    assert not done.out.exists(), tree(done.out)
