"""ReplicationSpec: checked once when made, built the same from flags and keywords, relaunched from run.json."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from deviate_cb.cli.replicate import build_parser
from deviate_cb.errors import UsageError
from deviate_cb.launch.runner import replicate
from deviate_cb.launch.spec import ReplicationSpec


def _from(words: list[str], after: list[str] | None = None) -> ReplicationSpec:
    return ReplicationSpec.from_args(build_parser().parse_args(words), after, ["deviate-replicate", *words])


def test_the_spec_holds_what_replicate_takes_besides_its_progress() -> None:
    keywords = set(inspect.signature(replicate).parameters) - {"stream", "live", "said_problems"}
    assert {f.name for f in dataclasses.fields(ReplicationSpec)} == keywords
    for f in dataclasses.fields(ReplicationSpec):  # the same defaults as the Python API's
        default = inspect.signature(replicate).parameters[f.name].default
        if f.name != "backend_options":
            assert f.default == default, f.name


def test_flags_become_the_spec() -> None:
    spec = _from(["--trainer", "t.py:main", "-n", "4", "--parallel", "2", "--backend", "slurm", "--time", "90"])
    assert (spec.trainer, spec.runs, spec.parallel, spec.backend) == ("t.py:main", 4, 2, "slurm")
    assert spec.backend_options["time"] == "90" and spec.gpus is None and spec.round_size == 2
    command = _from(["-n", "2", "--gpus", "0,1"], after=["python", "train.py"])
    assert command.command == ["python", "train.py"] and command.trainer_args == () and command.gpus == "0,1"
    assert "gpus" not in command.backend_options


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["-n", "0"], "`--runs` must be a positive integer. Received: --runs=0."),
        (["-n", "x"], "Received: --runs=x."),
        (["-n", "2", "--variant", "nope"], "`--variant` must be one of"),
        (["-n", "2", "--parallel", "0"], "`--parallel` must be a positive integer"),
        (["-n", "20001"], "pass --max-replicas 20001"),
    ],
)
def test_a_bad_value_is_refused_when_the_spec_is_made(words: list[str], expected: str) -> None:
    with pytest.raises(UsageError, match=expected.replace("(", r"\(").replace(".", r"\.")):
        _from(["--trainer", "t.py:main", *words])


def test_the_spec_is_frozen_and_changes_are_checked() -> None:
    spec = ReplicationSpec(trainer="t.py:main", runs=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.runs = 4  # type: ignore[misc]
    with pytest.raises(UsageError):
        spec.with_changes(runs=-1)


def test_a_recorded_configuration_relaunches_the_group_as_it_ran() -> None:
    base = ReplicationSpec(
        trainer="new.py:main", runs=5, parallel=3, timeout=60, force=True, backend="local", cold=True
    )
    b = ReplicationSpec(
        command=["python", "old.py", "--seed", "{seed}"],
        variant="algo",
        seed=11,
        metric_regex=("acc=(?P<acc>[0-9.]+)",),
        keep_project_seeds=True,
        isolate=True,
    )
    recorded = b.configuration(trainer=None, command=b.command, keras_backend="jax")
    again = ReplicationSpec.from_manifest(recorded, experiment="old", variant="algo", base=base)
    assert again.command == list(b.command or ()) and again.trainer is None
    assert (again.variant, again.seed, again.keras_backend, again.experiment) == ("algo", 11, "jax", "old")
    assert again.metric_regex == b.metric_regex and again.keep_project_seeds and again.isolate
    assert (again.parallel, again.timeout, again.cold, again.force, again.runs) == (3, 60, True, False, 1)
    assert again.configuration(trainer=None, command=again.command, keras_backend="jax") == recorded
