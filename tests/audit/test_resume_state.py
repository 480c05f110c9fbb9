"""The pieces of ``deviate audit --resume-at`` that need no launch: the replica's plan from ``DEVIATE_RESUME``, the
state digests (exact: one optimizer step, one RNG draw changes them), and which states the report names."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from deviate_cb.audit.resume import not_restored
from deviate_cb.capture.resume_state import RESUME_ENV, ResumePlan, resume_plan, state_digest
from deviate_cb.errors import UsageError


def test_the_plan_is_read_from_the_environment_and_a_bad_one_is_one_readable_error() -> None:
    assert resume_plan({RESUME_ENV: '{"at": 2, "steps": 5, "role": "resumed"}'}) == ResumePlan(2, 5, "resumed")
    for text in ('{"at": 5, "steps": 5, "role": "resumed"}', '{"at": 1, "steps": 5, "role": "paused"}', "4"):
        with pytest.raises(UsageError, match=rf"`{RESUME_ENV}` must be .* Received: {RESUME_ENV}="):
            resume_plan({RESUME_ENV: text})


def test_digests_change_with_one_optimizer_step_and_one_draw_and_only_then() -> None:
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)
    model(torch.ones(2, 3)).sum().backward()
    before = [state_digest(optimizer.state_dict()), state_digest(scheduler.state_dict())]
    assert before == [state_digest(optimizer.state_dict()), state_digest(scheduler.state_dict())]
    optimizer.step()  # a momentum buffer appears
    scheduler.step()
    after = [state_digest(optimizer.state_dict()), state_digest(scheduler.state_dict())]
    assert after[0] != before[0] and after[1] != before[1]
    generator = torch.Generator().manual_seed(7)
    loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=2, shuffle=True, generator=generator)
    assert loader.sampler.generator is generator  # type: ignore[attr-defined]
    state = state_digest(generator.get_state())
    next(iter(loader))
    assert state_digest(generator.get_state()) != state  # a shuffle draws from the sampler's generator
    numpy_state, python_state = state_digest(np.random.get_state()), state_digest(random.getstate())
    np.random.random()
    random.random()
    assert state_digest(np.random.get_state()) != numpy_state and state_digest(random.getstate()) != python_state
    assert state_digest(torch.tensor([0.0])) != state_digest(torch.tensor([-0.0]))  # bits, not values


def test_a_state_is_named_only_when_the_checkpointed_run_had_it_and_the_resumed_run_did_not() -> None:
    uninterrupted = {
        "end": {"torch_rng": "a", "optimizers": "o", "numpy_rng": "n"},
        "start": {"torch_rng": "b", "optimizers": "p", "numpy_rng": "m"},
    }
    checkpointed = {"end": {"torch_rng": "a", "optimizers": "o", "numpy_rng": "x"}}  # NumPy's differed already
    resumed = {"start": {"torch_rng": "c", "optimizers": "p", "numpy_rng": "y"}}
    assert not_restored(uninterrupted, checkpointed, resumed) == (["torch_rng"], ["numpy_rng"])
    named, _ = not_restored(uninterrupted, checkpointed, resumed, data_restarted=True)
    assert named == ["data_position", "torch_rng"]


def test_the_plan_names_the_backup_directory_a_keras_fit_is_redirected_to() -> None:
    plan = resume_plan({RESUME_ENV: '{"at": 4, "steps": 8, "role": "resumed", "backup": "/runs/backups/resumed"}'})
    assert plan is not None and plan.backup == "/runs/backups/resumed" and plan.role == "resumed"


@pytest.mark.parametrize(
    ("at", "save_freq", "possible"),
    [(8, "epoch", None), (6, "epoch", "multiples of 4"), (6, 3, None), (4, 3, "multiples of 3"), (4, False, "none")],
)
def test_the_steps_where_a_backup_is_written(at: int, save_freq: object, possible: object) -> None:
    from deviate_cb.capture.backup_restore import possible_steps

    found = possible_steps(ResumePlan(at, 12, "checkpointed"), save_freq=save_freq, steps_per_epoch=4)  # type: ignore[arg-type]
    assert found is None if possible is None else str(found).startswith(str(possible))


def test_keras_digests_see_a_seeded_layer_draw_and_an_optimizer_step(tmp_path: Path) -> None:
    keras = pytest.importorskip("keras")
    from deviate_cb.capture.backup_restore import keras_state_digests

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dropout(0.5, seed=1), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    before = keras_state_digests(model)
    model(np.ones((2, 3), "float32"), training=True)  # a dropout draw advances the layer's SeedGenerator
    drawn = keras_state_digests(model)
    assert drawn["keras_seed_generators"] != before["keras_seed_generators"]
    assert drawn["optimizers"] == before["optimizers"]
    model.train_on_batch(np.ones((2, 3), "float32"), np.ones((2, 1), "float32"))
    assert keras_state_digests(model)["optimizers"] != drawn["optimizers"]
    # the weights a BackupAndRestore saves do not hold the SeedGenerator's state
    model.save_weights(tmp_path / "w.weights.h5")
    model(np.ones((2, 3), "float32"), training=True)
    advanced = keras_state_digests(model)["keras_seed_generators"]
    model.load_weights(tmp_path / "w.weights.h5")
    assert keras_state_digests(model)["keras_seed_generators"] == advanced
