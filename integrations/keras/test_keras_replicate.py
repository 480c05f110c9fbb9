"""deviate-replicate on real Keras 3 training, on each backend (TensorFlow, torch, JAX), CPU only.

Per backend, three replicate calls (two at a time) shared by the tests:
``control``: trainers/keras_tiny.py, 3 replicas that reach ``fit`` three ways (no callback: one is injected;
the user's own ``DeviateCallback``; a positional ``callbacks`` list without one), then ``evaluate()``; forked
from a warm-start template (the default);
``control --cold``: the same study, each replica a fresh interpreter: its metrics must be bit-identical;
``algo+impl``: examples/keras_mlp.py, 2 replicas (seeds 0 and 1).
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.helpers.keras_helpers import EXAMPLES, TRAINERS, Replicated, replicate

pytestmark = pytest.mark.slow

EPOCHS, STEPS_PER_EPOCH = 3, 4  # keras_tiny.py: 64 samples, batch 16
NAMES = {"loss", "accuracy"}


@pytest.fixture(scope="module")
def control(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Replicated:
    tmp = tmp_path_factory.mktemp(f"control-{backend}")
    args = ["-n", "3", "--parallel", "2", "--keras-backend", backend]
    return replicate(tmp, f"{TRAINERS / 'keras_tiny.py'}:main", args, variant="control")


@pytest.fixture(scope="module")
def control_cold(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Replicated:
    tmp = tmp_path_factory.mktemp(f"control-cold-{backend}")
    args = ["-n", "1", "--keras-backend", backend, "--cold"]
    return replicate(tmp, f"{TRAINERS / 'keras_tiny.py'}:main", args, variant="control")


@pytest.fixture(scope="module")
def noisy(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Replicated:
    tmp = tmp_path_factory.mktemp(f"algo-impl-{backend}")
    args = ["-n", "2", "--parallel", "2", "--keras-backend", backend]
    return replicate(tmp, f"{EXAMPLES / 'keras_mlp.py'}:main", args, variant="algo+impl")


def test_every_replica_completes(control: Replicated, noisy: Replicated) -> None:
    assert control.returncode == 0, (control.stdout, control.stderr)
    assert "3 completed, 0 failed, 0 skipped" in control.stdout
    assert noisy.returncode == 0, (noisy.stdout, noisy.stderr)
    assert "2 completed, 0 failed, 0 skipped" in noisy.stdout


def test_control_replicas_are_bit_identical(control: Replicated) -> None:
    first = control.logged(0)
    assert len(first) > 20
    assert control.logged(1) == first
    assert control.logged(2) == first


def test_warm_start_gives_the_numbers_of_a_cold_start(control: Replicated, control_cold: Replicated) -> None:
    assert control_cold.returncode == 0, (control_cold.stdout, control_cold.stderr)
    assert [control.manifest(k)["start_mode"] for k in range(3)] == ["warm"] * 3, control.stdout
    assert control_cold.manifest(0)["start_mode"] == "cold"
    assert "warm start (the template imports keras" in control.stdout
    assert len({control.manifest(k)["warm"]["template_pid"] for k in range(3)}) == 1  # one template forked all
    assert control_cold.logged(0) == control.logged(0)
    assert control.manifest(0)["hash_seed"] == control_cold.manifest(0)["hash_seed"] == 0


def test_stages_scopes_and_names(control: Replicated) -> None:
    rows = control.logged(0)
    counts = Counter((stage, scope, name) for stage, scope, name, *_ in rows)
    steps = EPOCHS * STEPS_PER_EPOCH
    expected = {("train", "step", name): steps for name in NAMES}
    expected |= {("train", "epoch", name): EPOCHS for name in NAMES}
    expected |= {("val", "epoch", name): EPOCHS for name in NAMES}  # val_loss -> loss at stage val
    expected |= {("test", "epoch", name): 1 for name in NAMES}  # model.evaluate() after fit
    assert dict(counts) == expected
    assert sorted({step for stage, scope, _, step, *_ in rows if scope == "step"}) == list(range(1, steps + 1))
    epoch_rows = {(stage, epoch, step) for stage, scope, _, step, epoch, _ in rows if scope == "epoch"}
    for epoch in range(EPOCHS):
        for stage in ("train", "val"):
            assert (stage, epoch, (epoch + 1) * STEPS_PER_EPOCH) in epoch_rows
    assert {step for stage, _, _, step, *_ in rows if stage == "test"} == {steps}


@pytest.mark.parametrize("replica", [0, 1, 2], ids=["injected", "users-own-kept", "positional-injected"])
def test_exactly_one_callback_per_replica(control: Replicated, replica: int) -> None:
    final = control.final(replica)
    assert final["deviate_callbacks"] == 1  # created in the replica: the user's, or the injected one
    assert final["probe_batches"] == (0 if replica == 0 else EPOCHS * STEPS_PER_EPOCH)  # the user's kept too
    train_steps = [row for row in control.logged(replica) if row[:2] == ("train", "step")]
    assert len(train_steps) == len(NAMES) * EPOCHS * STEPS_PER_EPOCH  # each recorded once


def test_manifest_and_fingerprint_record_the_backend(control: Replicated, backend: str) -> None:
    for replica in range(3):
        manifest = control.manifest(replica)
        assert manifest["status"] == "completed"
        assert manifest["framework"] == "keras"
        assert manifest["keras_backend"] == backend
        assert manifest["determinism"]["verified"] is True, manifest["determinism"]["problems"]
        assert manifest["determinism"]["in_effect"]["keras"]["backend"] == backend
        assert manifest["determinism"]["in_effect"]["env"]["KERAS_BACKEND"] == backend
        fingerprint = control.fingerprint(replica)
        assert fingerprint["keras"]["backend"] == backend
        assert fingerprint["keras"]["version"].startswith("3.")


def test_algo_impl_replicas_differ(noisy: Replicated) -> None:
    assert [noisy.manifest(r)["seed"] for r in (0, 1)] == [0, 1]
    first, second = noisy.logged(0), noisy.logged(1)
    assert [row[:5] for row in first] == [row[:5] for row in second]  # same rows: stage, scope, name, step, epoch
    assert [row[5] for row in first] != [row[5] for row in second]  # other values
    stages = {(stage, scope) for stage, scope, *_ in first}
    assert stages == {("train", "step"), ("train", "epoch"), ("val", "epoch"), ("test", "epoch")}
    assert noisy.final(0) == {}  # the example returns evaluate()'s results: already recorded as stage test
