"""``deviate audit`` on plain PyTorch programs (issue 28, item 1): no Lightning, no Keras, audited as they are through
torch's global hooks (:mod:`deviate_cb.audit.recording.plain_loop`), one optimizer step being one training step.

In process: what a step is (evaluation under ``no_grad`` is none), the names, every global hook gone and
``Tensor.backward`` restored after the K steps, a crash's record, and the hooks stepping aside for a Lightning fit.
Through ``deviate audit`` with real replicas: a seeded script agrees (exit 0), an unseeded layer is found at its step
and module, a replica that crashes makes the audit exit 3, and a nanoGPT-style ``train.py`` is audited end to end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn.modules import module as nn_module
from torch.optim import optimizer as optim_module

from deviate_cb.audit.recording.log import AuditLog
from deviate_cb.audit.recording.plain_loop import PlainLoopAudit
from deviate_cb.audit.recording.stopping import AuditStepsDone
from tests.helpers.replicate_helpers import child_env

REPO = Path(__file__).resolve().parents[2]
TRAINERS = Path(__file__).resolve().parent / "trainers"
PLAIN = TRAINERS / "plain_loops.py"
GPT = TRAINERS / "tiny_gpt.py"
sys.path.insert(0, str(TRAINERS))

import plain_loops  # noqa: E402

_CREATED: list[PlainLoopAudit] = []


def make_audit(steps: int, on_done: Any) -> PlainLoopAudit:
    """A :class:`PlainLoopAudit`, finished after the test whatever happens (its hooks are process-wide)."""
    audit = PlainLoopAudit(steps, on_done)
    _CREATED.append(audit)
    return audit


@pytest.fixture(autouse=True)
def _finish_audits() -> Iterator[None]:
    yield
    while _CREATED:
        _CREATED.pop().finish()


def global_hooks() -> tuple[int, ...]:
    return (
        len(nn_module._global_forward_pre_hooks),
        len(nn_module._global_forward_hooks),
        len(optim_module._global_optimizer_pre_hooks),
        len(optim_module._global_optimizer_post_hooks),
    )


def train(steps: int, audit_steps: int) -> tuple[PlainLoopAudit, list[AuditLog]]:
    """A plain loop: a model, a loss module, a parameter outside every module; evaluation before each step."""
    written: list[AuditLog] = []
    audit = make_audit(audit_steps, written.append)
    audit.install(torch)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    criterion = torch.nn.CrossEntropyLoss()
    scale = torch.nn.Parameter(torch.ones(()))
    optimizer = torch.optim.SGD([{"params": model.parameters()}, {"params": [scale]}], lr=0.1)
    for _ in range(steps):
        with torch.no_grad():
            model(torch.ones(7, 3))  # evaluation, 7 samples: not a training step
        loss = criterion(model(torch.randn(5, 3)) * scale, torch.tensor([0, 1, 0, 1, 1]))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return audit, written


def test_a_step_is_an_optimizer_step_and_evaluation_under_no_grad_is_none() -> None:
    before, backward = global_hooks(), torch.Tensor.backward
    audit, written = train(steps=5, audit_steps=3)
    assert len(written) == 1 and written[0].recorded_steps == 3
    rows = written[0].rows
    assert sorted({row["step"] for row in rows}) == [0, 1, 2]
    inputs = [row for row in rows if row["kind"] == "input"]
    assert [(row["step"], row["name"], row["shape"]) for row in inputs] == [(k, "batch[0]", [5, 3]) for k in range(3)]
    assert not any(7 in row["shape"] for row in rows)  # nothing of the evaluation passes
    assert [row["kind"] for row in rows if row["step"] == 0 and row["kind"] in ("input", "loss")] == ["input", "loss"]
    # after the K steps: no global hook left, Tensor.backward as it was
    assert not audit.installed and global_hooks() == before and torch.Tensor.backward is backward


def test_modules_and_parameters_are_named_within_their_model() -> None:
    _, written = train(steps=2, audit_steps=2)
    rows = written[0].rows
    forwards = {(row["name"], row["module"]) for row in rows if row["kind"] == "forward"}
    assert {("0", "0"), ("1", "1"), ("2", "2"), ("(root)", "(root)"), ("CrossEntropyLoss", "CrossEntropyLoss")} == {
        (name, module) for name, module in forwards
    }
    parameters = [(row["name"], row["module"]) for row in rows if row["kind"] == "parameter" and row["step"] == 1]
    assert parameters == [("0.weight", "0"), ("0.bias", "0"), ("2.weight", "2"), ("2.bias", "2"),
                          ("SGD.param_groups[1][0]", None)]  # fmt: skip
    # the free parameter's gradient: read at the step the first time, hooked (in backward order) from then on
    gradients = [[row["name"] for row in rows if row["kind"] == "gradient" and row["step"] == k] for k in (0, 1)]
    assert gradients[0][-1] == "SGD.param_groups[1][0]" and len(gradients[0]) == len(gradients[1]) == 5
    assert gradients[1][0] == "SGD.param_groups[1][0]"  # the scale multiplies the output: backward reaches it first


def test_keyword_arguments_are_part_of_the_batch_and_of_the_inputs() -> None:
    """``model(input_ids=..., labels=...)``, as Hugging Face models are called: the batch is the keyword arguments."""

    class Scorer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(3, 1)

        def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return (self.fc(input_ids).squeeze(-1) - labels).pow(2).mean()

    written: list[AuditLog] = []
    audit = make_audit(1, written.append)
    audit.install(torch)
    model = Scorer()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(2, 3), labels=torch.zeros(2)).backward()  # one positional, one keyword argument
    optimizer.step()
    model.zero_grad()
    model(input_ids=torch.ones(2, 3), labels=torch.zeros(2)).backward()  # after the audit: nothing recorded
    rows = written[0].rows
    assert [(row["kind"], row["name"], row["shape"]) for row in rows if row["kind"] == "input"] == [
        ("input", "batch[0]", [2, 3]), ("input", "batch[1]['labels']", [2])]  # fmt: skip
    inputs = [row["name"] for row in rows if row["kind"] == "forward_input" and row["module"] == "(root)"]
    assert inputs == ["(root)[0]", "(root)['labels']"]  # the model's own inputs, keywords included


def test_a_replica_asked_to_stop_ends_its_training_after_the_audited_steps(capsys: pytest.CaptureFixture[str]) -> None:
    """``deviate audit`` without ``--finish``: after step K's record, a ``SystemExit(0)`` that ``except Exception``
    does not catch and ``finally`` sees."""
    written: list[AuditLog] = []
    stops: list[int] = []
    audit = PlainLoopAudit(3, written.append, on_stop=stops.append)
    _CREATED.append(audit)
    audit.install(torch)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ran, cleaned = [], []
    with pytest.raises(AuditStepsDone) as stopped:
        try:
            for step in range(50):
                try:
                    optimizer.zero_grad()
                    model(torch.ones(2, 3)).pow(2).mean().backward()
                    optimizer.step()
                except Exception:  # the project's own error handling does not swallow the stop
                    pytest.fail("the stop was caught as an Exception")
                ran.append(step)
        finally:
            cleaned.append(True)
    assert stopped.value.code == 0 and stops == [3] and cleaned == [True]
    assert ran == [0, 1] and written[0].recorded_steps == 3  # step 2 ended inside its optimizer.step()
    assert "the 3 audited step(s) are recorded; stopping the training" in capsys.readouterr().err


def test_a_training_that_stops_early_still_hands_its_record_over() -> None:
    audit, written = train(steps=2, audit_steps=5)
    assert written == [] and audit.installed  # 2 of 5 steps: still auditing
    audit.finish()  # what the process's exit does
    assert len(written) == 1 and written[0].recorded_steps == 2 and not audit.installed


def test_two_networks_and_two_optimizers_make_two_steps_per_iteration() -> None:
    """A GAN-like loop: a parameter-free transform before the model opens no step; the generator, called first, keeps
    the plain names, the discriminator is named by its class; each optimizer step is a step."""

    class Discriminator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x)

    before = global_hooks()
    written: list[AuditLog] = []
    audit = make_audit(4, written.append)
    audit.install(torch)
    torch.manual_seed(0)
    jitter, generator, critic = torch.nn.Dropout(0.5), torch.nn.Linear(3, 2), Discriminator()
    g_opt = torch.optim.SGD(generator.parameters(), lr=0.1)
    d_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
    for _ in range(2):
        z = jitter(torch.randn(4, 3))  # a module without parameters, called from no module: not the model
        fake = generator(z)
        d_opt.zero_grad()
        critic(fake.detach()).mean().backward()
        d_opt.step()
        g_opt.zero_grad()
        (-critic(fake).mean()).backward()
        g_opt.step()
    critic(torch.ones(1, 2))  # the optimizer hook torch was calling when the audit ended goes at the next module call
    rows = written[0].rows
    assert written[0].recorded_steps == 4 and global_hooks() == before
    assert [row["name"] for row in rows if row["kind"] == "input"] == ["batch[0]", "batch[0]", "batch[0]", "batch[0]"]
    first = {(row["kind"], row["name"]) for row in rows if row["step"] == 0}
    assert ("forward", "(root)") in first and ("forward", "Discriminator.fc") in first
    assert ("forward", "Dropout") not in first  # called before the step opened
    assert ("parameter", "weight") in first and ("parameter", "Discriminator.fc.weight") in first


@pytest.mark.slow
def test_a_compiled_model_is_audited_under_the_name_torch_compile_gives_it() -> None:
    written: list[AuditLog] = []
    audit = make_audit(2, written.append)
    audit.install(torch)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    compiled = torch.compile(model, backend="eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="global hooks"):  # torch says the hooks fire for the wrapper too
        for _ in range(3):
            compiled(torch.ones(2, 3)).pow(2).mean().backward()
            optimizer.step()
    assert written[0].recorded_steps == 2 and not audit.installed
    names = {(row["kind"], row["name"]) for row in written[0].rows if row["step"] == 1}
    assert {("forward", "(root)"), ("forward", "_orig_mod.0"), ("gradient", "_orig_mod.2.weight"),
            ("parameter", "_orig_mod.0.bias"), ("loss", "loss")} <= names  # fmt: skip


def test_a_lightning_fabric_loop_is_a_plain_loop() -> None:
    """Fabric has no fit and no callback: its loop is audited here (the hooks step aside for ``lightning.pytorch``
    only), under the names its wrapper gives the modules."""
    fabric_module = pytest.importorskip("lightning.fabric")
    written: list[AuditLog] = []
    audit = make_audit(2, written.append)
    audit.install(torch)
    fabric = fabric_module.Fabric(accelerator="cpu", devices=1)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1))
    model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(3):
        loss = model(torch.ones(2, 3)).pow(2).mean()
        optimizer.zero_grad()
        fabric.backward(loss)
        optimizer.step()
    assert not audit.stepped_aside and written[0].recorded_steps == 2
    names = {(row["kind"], row["name"]) for row in written[0].rows if row["step"] == 1}
    assert {("forward", "_forward_module.0"), ("loss", "loss"), ("parameter", "_forward_module.0.weight")} <= names


def test_an_error_in_the_hooks_stops_the_audit_not_the_training(capsys: pytest.CaptureFixture[str]) -> None:
    written: list[AuditLog] = []
    audit = make_audit(5, written.append)
    audit.install(torch)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        if step == 2:
            assert audit.log is not None
            audit._audit.record = None  # type: ignore[union-attr,assignment]  # a hook that now fails
        model(torch.ones(2, 3)).sum().backward()
        optimizer.step()
    assert audit.failed.startswith("the audit stopped at training step 2 on an error in its hooks: TypeError")
    assert written == [] and not audit.installed  # cut short by its own failure: no record that could pass
    assert "deviate audit: error: the audit stopped at training step 2" in capsys.readouterr().err
    audit.finish()
    assert written == []


def test_the_global_hooks_step_aside_for_a_lightning_fit() -> None:
    L = pytest.importorskip("lightning")

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(3, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    before = global_hooks()
    written: list[AuditLog] = []
    audit = make_audit(3, written.append)
    audit.install(torch)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 3)), batch_size=4)
    trainer = L.Trainer(max_steps=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu")  # fmt: skip
    trainer.fit(Module(), data)
    audit.finish()
    assert audit.stepped_aside and written == []  # the callback audits a fit: never two records
    assert global_hooks() == before and not audit.installed


def audit_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--parallel", "2", "--out", str(cwd / "runs"), *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def manifest(tmp_path: Path, experiment: str, replica: int) -> dict[str, Any]:
    path = tmp_path / "runs" / f"experiment={experiment}" / "variant=control" / f"replica={replica}" / "run.json"
    return json.loads(path.read_text())


@pytest.mark.slow
def test_a_seeded_plain_script_agrees_and_its_evaluation_is_not_a_step(tmp_path: Path) -> None:
    done = audit_cli(["--", "python", str(PLAIN), "seeded"], tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    steps = plain_loops.EPOCHS * plain_loops.BATCHES
    assert f"replicas 0, 1 agree bit for bit over {steps} audited training step(s)" in done.stdout, done.stdout
    for replica in (0, 1):
        record = manifest(tmp_path, "plain_loops", replica)["audit"]
        assert (record["framework"], record["recorded_steps"]) == ("torch", steps)  # 3 evaluations not counted


@pytest.mark.slow
def test_an_unseeded_layer_is_found_at_its_step_and_module(tmp_path: Path) -> None:
    done = audit_cli(["--trainer", f"{PLAIN}:unseeded_layer", "--format", "json"], tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    found = json.loads(done.stdout)
    assert found["diverged"] is True and found["replicas"] == [0, 1]
    assert (found["step"], found["kind"], found["module"], found["name"]) == (plain_loops.NOISY_FROM_STEP, "forward",
                                                                              "2", "2")  # fmt: skip
    assert 0 < found["max_abs_diff"] < 0.1 and found["exact"] is True


@pytest.mark.slow
def test_a_replica_that_crashes_makes_the_audit_exit_3(tmp_path: Path) -> None:
    done = audit_cli(["--steps", "5", "--", "python", str(PLAIN), "replica_1_crashes"], tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert (
        "nothing to compare after step 1: replica 1 failed with RuntimeError: replica 1 crashed at training step 2"
        in done.stderr
    ), done.stderr
    assert "deviate audit: incomplete: replicas 0, 1 agree bit for bit over the 2 training step(s) compared" in (
        done.stdout
    )
    crashed = manifest(tmp_path, "plain_loops", 1)
    assert crashed["audit"]["recorded_steps"] == 2 and crashed["status"] != "completed"  # its record, written at exit


@pytest.mark.slow
def test_a_nanogpt_style_script_is_audited_as_it_is(tmp_path: Path) -> None:
    """Top-level code, weight tying, dropout, AdamW groups, accumulation, clipping: steps 0 and 1 agree bit for bit
    (dropout draws from the seeded generator), and the attention's unseeded noise from iteration 2 is found there."""
    done = audit_cli(["--steps", "4", "--format", "json", "--", "python", str(GPT), "--noisy_attention=1"], tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    found = json.loads(done.stdout)
    assert found["step"] == 2 and found["kind"] == "forward", found
    assert found["module"].startswith("transformer.h.0.attn"), found
    rows = pq_rows(tmp_path / "runs/experiment=tiny_gpt/variant=control/replica=0")
    assert sorted({row["step"] for row in rows}) == [0, 1, 2, 3]
    step0 = [row for row in rows if row["step"] == 0]
    assert sum(row["kind"] == "loss" for row in step0) == 2  # two micro-batches: two backward calls, one step
    names = {row["name"] for row in step0 if row["kind"] == "parameter"}
    assert {"transformer.wte.weight", "transformer.h.1.attn.c_attn.weight", "transformer.ln_f.bias"} <= names
    assert "lm_head.weight" not in names  # tied to transformer.wte.weight: one parameter, its first name
    assert [row["name"] for row in step0 if row["kind"] == "input"] == ["batch[0]", "batch[1]"]  # model(X, Y)


def pq_rows(run_dir: Path) -> list[dict[str, Any]]:
    from deviate_cb.store.audit import read_audit

    return read_audit(run_dir)
