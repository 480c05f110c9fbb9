"""In-process tests of the launcher's parts: spec parsing, signatures, final metrics, planning, injection."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
import torch

from deviate_cb.context import RunContext
from deviate_cb.errors import SchemaVersionError, UsageError
from deviate_cb.launch.backends.base import Outcome, Placement, get_backend
from deviate_cb.launch.backends.local import LocalBackend, detect_gpus, parse_gpus
from deviate_cb.launch.outdir import LOCK_FILE, OutputDirectory
from deviate_cb.launch.planner import clear_previous_attempt, plan_replicas
from deviate_cb.launch.progress import LiveProgress, make_progress
from deviate_cb.launch.records import end_fields, status_of, tail_lines
from deviate_cb.launch.replica.final_metrics import extract_metrics, record_final_metrics, to_number
from deviate_cb.launch.replica.inject import patch_trainer_class, with_callback
from deviate_cb.launch.target.trainer_spec import TrainerSpec, TrainerSpecError, call_trainer
from deviate_cb.store.run_directory import RunDirectory
from tests.helpers.replicate_helpers import TRAINERS

CTX = RunContext(Path("runs/x"), "exp", "algo", 2, 12, True, trainer="m:f")


# -- trainer spec -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "target", "function", "is_path"),
    [
        ("pkg.train:main", "pkg.train", "main", False),
        ("train.py:main", "train.py", "main", True),
        ("a/b/train.py:Runner.main", "a/b/train.py", "Runner.main", True),
    ],
)
def test_parse_trainer_spec(text: str, target: str, function: str, is_path: bool) -> None:
    spec = TrainerSpec.parse(text)
    assert (spec.target, spec.function, spec.is_path) == (target, function, is_path)


@pytest.mark.parametrize("text", ["main", "a:b:c", ":main", "pkg:", "pkg:1x", "pkg-x:main", "pkg:main()"])
def test_malformed_trainer_spec_is_a_one_line_usage_error(text: str) -> None:
    with pytest.raises(TrainerSpecError, match=r"^`--trainer` .*Received: --trainer=") as info:
        TrainerSpec.parse(text)
    assert "\n" not in str(info.value)


def test_default_experiment_is_the_file_stem_or_the_module() -> None:
    assert TrainerSpec.parse("x/y/lightning_mlp.py:main").default_experiment() == "lightning_mlp"
    assert TrainerSpec.parse("mypkg.train:main").default_experiment() == "mypkg.train"


def test_precheck_finds_top_level_packages_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_imports
) -> None:
    TrainerSpec.parse("json.decoder:JSONObject").precheck()  # found by reading the file, not importing it
    with pytest.raises(TrainerSpecError, match=r"'anything', which module 'json.decoder' .* does not define"):
        TrainerSpec.parse("json.decoder:anything").precheck()
    with pytest.raises(TrainerSpecError, match="no module 'nosuchpkg_xyz'"):
        TrainerSpec.parse("nosuchpkg_xyz.train:main").precheck()
    (tmp_path / "localmod.py").write_text("raise RuntimeError('never imported by the launcher')\ndef main(): pass\n")
    monkeypatch.chdir(tmp_path)  # like `python -m`, the current directory counts
    TrainerSpec.parse("localmod:main").precheck()
    assert "localmod" not in sys.modules
    with pytest.raises(TrainerSpecError, match="which does not exist"):
        TrainerSpec.parse("missing.py:main").precheck()
    (tmp_path / "d.py").mkdir()
    with pytest.raises(TrainerSpecError, match="which is a directory"):
        TrainerSpec.parse("d.py:main").precheck()


@pytest.fixture
def isolated_imports(monkeypatch: pytest.MonkeyPatch):
    """Undo what resolving a spec does to this process: sys.path entries and imported trainer modules."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_resolve_errors_name_the_problem(isolated_imports) -> None:
    with pytest.raises(TrainerSpecError, match=r"functions defined there: .*echo"):
        TrainerSpec.parse(f"{TRAINERS / 'basic.py'}:nosuch").resolve()
    with pytest.raises(TrainerSpecError, match="is a dict, not a function"):
        TrainerSpec.parse(f"{TRAINERS / 'basic.py'}:not_callable").resolve()
    with pytest.raises(TrainerSpecError, match=r"raised at import: RuntimeError: boom at import \(.*line \d+\)"):
        TrainerSpec.parse(f"{TRAINERS / 'raises_at_import.py'}:main").resolve()
    with pytest.raises(TrainerSpecError, match="cannot be imported: No module named 'nosuchpkg_xyz'"):
        TrainerSpec.parse("nosuchpkg_xyz:main").resolve()


# -- signatures -----------------------------------------------------------------------------------------------
def test_call_trainer_fills_seed_and_context() -> None:
    assert call_trainer(lambda: "none", CTX) == "none"
    assert call_trainer(lambda seed: seed, CTX) == 12
    assert call_trainer(lambda ctx: ctx, CTX) is CTX
    assert call_trainer(lambda context, seed: (context.replica, seed), CTX) == (2, 12)
    assert call_trainer(lambda *, run_context, lr=0.1: (run_context.seed, lr), CTX) == (12, 0.1)
    assert call_trainer(lambda seed, /, *args, **kwargs: (seed, args, kwargs), CTX) == (12, (), {})

    def annotated(c: RunContext) -> int:
        return c.replica

    def annotated_str(c: Optional[RunContext]) -> int:  # a string under `from __future__ import annotations`
        return c.replica

    assert call_trainer(annotated, CTX) == 2
    assert call_trainer(annotated_str, CTX) == 2


def test_call_trainer_runs_coroutines() -> None:
    async def main(seed: int) -> int:
        return seed + 1

    assert call_trainer(main, CTX) == 13


def test_unfillable_parameter_is_a_trainer_spec_error() -> None:
    def main(lr, seed):
        return lr

    with pytest.raises(TrainerSpecError, match=r"required parameter 'lr'.*Received: --trainer=m:f\.$"):
        call_trainer(main, CTX)


# -- final metrics ------------------------------------------------------------------------------------------
def test_to_number_accepts_scalars_only() -> None:
    assert to_number(np.int64(3)) == 3.0 and to_number(np.bool_(True)) == 1.0
    assert to_number(torch.tensor(0.25)) == 0.25 and to_number(np.array(2.0)) == 2.0
    assert to_number(torch.tensor([1.0, 2.0])) is None and to_number(np.array([1.0])) is None
    assert to_number("3") is None and to_number(None) is None and to_number(1 + 2j) is None
    assert to_number(np.array("x")) is None and np.isnan(to_number(float("nan")))


def test_non_numbers_are_skipped_with_one_warning_each(tmp_path: Path) -> None:
    log = io.StringIO()
    result = {"acc": np.float32(0.5), "tag": "x", "hist": torch.ones(3), "inf": float("inf")}
    names = record_final_metrics(result, tmp_path, warn=log)
    assert names == ["acc", "inf"]
    lines = log.getvalue().splitlines()
    assert len(lines) == 2
    assert "'tag'" in lines[0] and "str" in lines[0]
    assert "'hist'" in lines[1] and "torch.Tensor of shape (3,)" in lines[1]
    rows = RunDirectory(tmp_path).metrics().read().to_pylist()
    assert [(r["name"], r["stage"], r["scope"], r["epoch"], r["step"], r["finite"]) for r in rows] == [
        ("acc", "final", "final", None, 0, True),
        ("inf", "final", "final", None, 0, False),
    ]


def test_final_metrics_step_follows_the_recorded_steps(tmp_path: Path) -> None:
    metrics = RunDirectory(tmp_path).metrics()
    metrics.append(
        {"step": [40], "epoch": [1], "stage": ["train"], "scope": ["epoch"], "name": ["loss"], "value": [0.1],
         "wall_time": [0.0]}
    )  # fmt: skip
    record_final_metrics([{"test_acc": 0.9}], tmp_path)
    rows = RunDirectory(tmp_path).metrics().read().to_pylist()
    assert rows[-1]["step"] == 40 and rows[-1]["seq"] == 1


def test_non_mapping_results_record_nothing() -> None:
    log = io.StringIO()
    assert extract_metrics(None, warn=log) == [] and log.getvalue() == ""
    assert extract_metrics(object(), warn=log) == []
    assert log.getvalue().count("\n") == 1


# -- Trainer injection ------------------------------------------------------------------------------------------
class _Callback:
    pass


class _Sub(_Callback):
    pass


class _Other:
    pass


def test_with_callback_adds_exactly_one() -> None:
    other, mine = _Other(), _Sub()
    assert [type(c) for c in with_callback(None, _Callback)] == [_Callback]
    assert [type(c) for c in with_callback(other, _Callback)] == [_Other, _Callback]
    assert [type(c) for c in with_callback([other], _Callback)] == [_Other, _Callback]
    assert with_callback(mine, _Callback) is mine
    assert with_callback([other, mine], _Callback) == [other, mine]


def test_patch_trainer_class_is_idempotent_and_keeps_the_signature() -> None:
    import inspect

    class Trainer:
        def __init__(self, *, callbacks=None, max_epochs: int = 1) -> None:
            self.callbacks = callbacks

    patch_trainer_class(Trainer, _Callback)
    patch_trainer_class(Trainer, _Callback)
    assert [type(c) for c in Trainer(max_epochs=2).callbacks] == [_Callback]
    assert "max_epochs" in inspect.signature(Trainer).parameters


# -- planning -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("variant", "seeds", "deterministic"),
    [
        ("algo+impl", [5, 6, 7], False),
        ("algo", [5, 6, 7], True),
        ("impl", [5, 5, 5], False),
        ("control", [5, 5, 5], True),
    ],
)
def test_seeds_follow_the_variant_table(tmp_path: Path, variant: str, seeds: list[int], deterministic: bool) -> None:
    plans = plan_replicas(tmp_path, "e", variant, 3, 5, trainer="m:f")
    assert [p.seed for p in plans] == seeds
    assert {p.context.deterministic for p in plans} == {deterministic}
    assert [p.run_dir.name for p in plans] == ["replica=0", "replica=1", "replica=2"]
    assert not any(tmp_path.iterdir())  # planning creates nothing


def test_plan_resumes(tmp_path: Path) -> None:
    for replica, status in enumerate(["completed", "failed", "running", "timeout", "killed"]):
        run = RunDirectory(tmp_path / "experiment=e" / "variant=algo" / f"replica={replica}")
        run.update_manifest(status=status, seed=replica, attempt=2)
    broken = tmp_path / "experiment=e" / "variant=algo" / "replica=5"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    plans = plan_replicas(tmp_path, "e", "algo", 7, 0)
    assert [p.run for p in plans] == [False, True, True, True, True, True, True]
    assert [p.previous_status for p in plans] == [
        "completed", "failed", "running", "timeout", "killed", "unreadable", None
    ]  # fmt: skip
    assert [p.attempt for p in plans] == [2, 3, 3, 3, 3, 2, 1]
    assert all(p.run for p in plan_replicas(tmp_path, "e", "algo", 7, 0, force=True))


def test_plan_refuses_to_mix_seeds_or_schemas(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path / "experiment=e" / "variant=control" / "replica=0")
    run.update_manifest(status="completed", seed=0)
    with pytest.raises(UsageError, match="completed with seed 0; resuming would mix seeds"):
        plan_replicas(tmp_path, "e", "control", 2, 5)
    assert plan_replicas(tmp_path, "e", "control", 2, 5, force=True)[0].run
    run.manifest_path.write_text(json.dumps({"schema_version": 99, "status": "completed"}))
    with pytest.raises(SchemaVersionError, match="schema_version=99"):
        plan_replicas(tmp_path, "e", "control", 2, 0)


def test_seed_range_is_checked(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"Received: --seed=4294967295, --runs=2\."):
        plan_replicas(tmp_path, "e", "algo", 2, 2**32 - 1)
    assert plan_replicas(tmp_path, "e", "control", 2, 2**32 - 1)[1].seed == 2**32 - 1


def test_clear_previous_attempt_moves_everything_aside(tmp_path: Path) -> None:
    names = ("run.json", "metrics.parquet", "stdout.log", "stderr.log", ".metrics.parquet.x.tmp", "model.ckpt")
    for name in names:
        (tmp_path / name).write_text("x")
    clear_previous_attempt(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [".attempts"]
    assert sorted(p.name for p in (tmp_path / ".attempts" / "1").iterdir()) == sorted(names)


# -- output directory ---------------------------------------------------------------------------------------
def test_output_directory_creates_locks_and_undoes(tmp_path: Path) -> None:
    out = OutputDirectory(tmp_path / "a" / "runs", "e", "algo")
    variant_dir = out.open()
    assert (variant_dir / LOCK_FILE).exists()
    with pytest.raises(UsageError, match=r"`--out` is in use: another deviate-replicate \(pid \d+"):
        OutputDirectory(tmp_path / "a" / "runs", "e", "algo").open()
    out.close(remove_created=True)
    assert list(tmp_path.iterdir()) == []


def test_output_directory_rejects_files(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="is a file"):
        OutputDirectory(tmp_path / "f", "e", "algo").open()
    with pytest.raises(UsageError, match="on that path is a file"):
        OutputDirectory(tmp_path / "f" / "sub", "e", "algo").open()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_output_directory_rejects_read_only_dirs(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(UsageError, match="not writable"):
            OutputDirectory(tmp_path / "runs", "e", "algo").open()
    finally:
        tmp_path.chmod(0o700)


# -- backend, records, progress -------------------------------------------------------------------------
def test_gpu_ids() -> None:
    assert parse_gpus("0,1") == ("0", "1") and parse_gpus("none") == () and parse_gpus("GPU-ab12") == ("GPU-ab12",)
    for bad in ("a", "0,0", "0,,1", "-1"):
        with pytest.raises(UsageError, match="--gpus"):
            parse_gpus(bad)
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "3, 5"}) == ("3", "5")
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": ""}) == ()
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "0,-1,1"}) == ("0",)
    backend = LocalBackend(parallel=3, gpus=("0", "1"))
    assert [backend.placement(i).env() for i in range(3)] == [
        {"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}, {"CUDA_VISIBLE_DEVICES": "0"}
    ]  # fmt: skip
    assert LocalBackend(parallel=2).placement(1) == Placement(slot=1)
    with pytest.raises(UsageError, match="`--backend` must be one of"):
        get_backend("nope")


def test_outcome_statuses_and_error_tail(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)) + "Epoch 1: 10%\rEpoch 1: 50%\r\n")
    assert tail_lines(log).splitlines()[0] == "line 11" and tail_lines(log).endswith("Epoch 1: 50%")
    assert status_of(Outcome(returncode=0)) == "completed"
    assert status_of(Outcome(returncode=1)) == "failed"
    assert status_of(Outcome(returncode=-9, signal="SIGKILL")) == "failed"
    assert status_of(Outcome(returncode=143, timed_out=True)) == "timeout"
    assert status_of(Outcome(returncode=0, interrupted=True)) == "killed"
    end = end_fields(Outcome(returncode=-9, signal="SIGKILL", started_at=1.0, ended_at=3.5), tmp_path / "none")
    assert end.error == "killed by SIGKILL" and end.duration_s == 2.5 and end.signal == "SIGKILL"
    assert "error" not in end_fields(Outcome(returncode=0), log).fields()


def test_plain_progress_prints_one_line_per_change() -> None:
    stream = io.StringIO()
    progress = make_progress(stream)
    progress.add(0, 3, skipped="already completed")
    progress.add(1, 4)
    progress.started(1, "slot 0 (GPU 1)")
    progress.finished(1, "failed", exit_code=1, duration_s=0.5)
    assert stream.getvalue().splitlines() == [
        "replica 0 (seed 3): skipped (already completed)",
        "replica 1 (seed 4): running on slot 0 (GPU 1)",
        stream.getvalue().splitlines()[2],
    ]
    assert stream.getvalue().splitlines()[2].startswith("replica 1 (seed 4): failed after ")
    assert stream.getvalue().splitlines()[2].endswith(" s (exit 1)")


def test_live_progress_renders_a_table() -> None:
    from rich.console import Console

    stream = io.StringIO()
    assert isinstance(make_progress(stream, live=True), LiveProgress)
    progress = LiveProgress(Console(file=stream, force_terminal=True, width=100, height=12))
    for replica in range(12):
        progress.add(replica, replica)
    progress.started(3, "slot 0 (GPU 0)")
    progress.finished(3, "timeout", exit_code=-15, duration_s=1.0)
    progress.close()
    rendered = stream.getvalue()
    assert "slot/GPU" in rendered and "timeout" in rendered and "more not shown; in all: 11 queued" in rendered


def test_final_metrics_skip_values_the_callback_already_recorded(tmp_path: Path) -> None:
    from deviate_cb.launch.replica.final_metrics import record_final_metrics
    from deviate_cb.store.run_directory import RunDirectory

    RunDirectory(tmp_path).metrics().append(
        {
            "step": [5, 9],
            "epoch": [0, 1],
            "stage": ["val", "val"],
            "scope": ["epoch", "epoch"],
            "name": ["val_acc", "val_acc"],
            "value": [0.25, 0.5],
            "wall_time": [0.0, 1.0],
        }
    )
    # `return trainer.callback_metrics`-style: the latest val_acc is already there; new_metric is not
    assert record_final_metrics({"val_acc": 0.5, "new_metric": 1.0}, tmp_path) == ["new_metric"]
    # a value that differs from the latest recorded one is a real final value
    assert record_final_metrics({"val_acc": 0.25}, tmp_path) == ["val_acc"]
    rows = RunDirectory(tmp_path).metrics().read().to_pylist()
    assert [(r["stage"], r["name"], r["value"]) for r in rows if r["stage"] == "final"] == [
        ("final", "new_metric", 1.0),
        ("final", "val_acc", 0.25),
    ]


def test_the_package_import_hooks_are_import_machinery_in_error_traces(tmp_path: Path) -> None:
    import deviate_cb.capture.import_hooks
    import deviate_cb.launch.replica.keras_backend
    from deviate_cb.launch.target import trainer_spec

    # each listed hook module exists where the list says (a move of the module must update the list)
    for module in (deviate_cb.capture.import_hooks, deviate_cb.launch.replica.keras_backend):
        assert trainer_spec._is_import_machinery(str(module.__file__))
    assert trainer_spec._is_import_machinery("<frozen importlib._bootstrap>")
    user_file = tmp_path / "import_hooks.py"
    user_file.write_text("")
    assert not trainer_spec._is_import_machinery(str(user_file))
    assert not trainer_spec._is_import_machinery(trainer_spec.__file__)
