"""The sources of a divergence (issue 28, item 4): every place where a difference arose at the first step where
replicas differ, not only the first, so one nondeterministic op does not hide another behind its cascade.

Hand-made records check each rule of :func:`deviate_cb.audit.divergence.compare_audits`; then ``deviate audit`` for real
on Lightning trainings (``trainers/two_sources.py``) with two independent nondeterministic modules (both named), one
feeding the other (only the first), a nondeterministic backward (its module's parameters), and Keras on torch.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from deviate_cb.audit.divergence import compare_audits
from deviate_cb.audit.recording.hooks import TorchAudit, named_modules, named_parameters
from deviate_cb.audit.rendering import render_audit

REPO = Path(__file__).resolve().parents[2]
TRAINERS = Path(__file__).resolve().parent / "trainers" / "two_sources.py"


def _record(entries: Sequence[tuple[str, str, Any]], step: int = 0) -> list[dict[str, Any]]:
    """Rows of one step from ``(kind, name, digest)`` in execution order; the module is the name up to ``[`` (or
    the parameter's owner), the value the digest's number."""
    rows, seen = [], {}
    for seq, (kind, name, digest) in enumerate(entries):
        module = None if kind in ("input", "loss") else name.split("[")[0]
        if kind in ("gradient", "parameter"):
            module = name.rpartition(".")[0]
        occurrence = seen.get((kind, name), 0)
        seen[(kind, name)] = occurrence + 1
        value = float(digest)
        rows.append({"step": step, "seq": seq, "kind": kind, "name": name, "module": module,
                     "occurrence": occurrence, "dtype": "float32", "shape": [1], "numel": 1,
                     "digest": str(digest), "sum": value, "abs_max": abs(value), "values": [value]})  # fmt: skip
    return rows


def _step(**digests: Any) -> list[tuple[str, str, Any]]:
    """A training step of ``x -> net(net.a, net.b in parallel) -> head``; ``digests`` overrides a row's digest
    (``forward_net_a=9``); the defaults are equal in every replica."""
    entries = [
        ("input", "batch[0]", 1),
        ("forward_input", "net.a", 1), ("forward", "net.a", 2),  # branch a: x -> a
        ("forward_input", "net.b", 1), ("forward", "net.b", 3),  # branch b: x -> b, beside a
        ("forward_input", "head", 4), ("forward", "head", 5),  # head(a + b)
        ("forward_input", "net", 1), ("forward", "net", 5),  # the container of the three
        ("loss", "loss", 6),
        ("grad_output", "net", 7), ("grad_output", "head", 7), ("gradient", "head.weight", 8),
        ("grad_output", "net.b", 9), ("gradient", "net.b.weight", 10),
        ("grad_output", "net.a", 9), ("gradient", "net.a.weight", 11),
        ("parameter", "head.weight", 12), ("parameter", "net.b.weight", 13), ("parameter", "net.a.weight", 14),
    ]  # fmt: skip
    return [(kind, name, digests.get(_keyword(kind, name), value)) for kind, name, value in entries]


def _keyword(kind: str, name: str) -> str:
    return f"{kind}_{name}".replace(".", "_").replace("[", "_").replace("]", "")


def _sources(**digests: Any) -> list[tuple[str, str]]:
    result = compare_audits({0: _record(_step()), 1: _record(_step(**digests))})
    return [(d.kind, d.name) for d in result.sources]


def _cascade(*names: str) -> dict[str, int]:
    """What a difference in the first of ``names`` changes downstream: each later row gets another digest."""
    return {name: 90 + k for k, name in enumerate(names)}


def test_two_independent_modules_are_both_sources() -> None:
    changed = _cascade("forward_net_a", "forward_net_b", "forward_input_head", "forward_head", "forward_net",
                       "loss_loss", "grad_output_net", "grad_output_head", "gradient_head_weight")  # fmt: skip
    assert _sources(**changed) == [("forward", "net.a"), ("forward", "net.b")]  # not net: it holds them


def test_a_module_downstream_of_a_source_is_not_one() -> None:
    changed = _cascade("forward_net_a", "forward_input_head", "forward_head", "forward_net", "loss_loss")
    assert _sources(**changed) == [("forward", "net.a")]  # head differs too, but its input does


def test_a_container_whose_own_code_differs_is_the_source() -> None:
    changed = _cascade("forward_input_head", "forward_head", "forward_net", "loss_loss")  # a + b computed by net
    assert _sources(**changed) == [("forward", "net")]


def test_the_data_the_loss_the_backward_and_the_optimizer() -> None:
    assert _sources(input_batch_0=9, forward_input_net_a=9, forward_net_a=9) == [("input", "batch[0]")]
    assert _sources(loss_loss=9, grad_output_net=9, grad_output_head=9, gradient_head_weight=9) == [("loss", "loss")]
    backward = _cascade("gradient_net_b_weight", "grad_output_net_a", "gradient_net_a_weight", "parameter_net_b_weight")
    assert _sources(**backward) == [("gradient", "net.b.weight")]  # net.a's gradient: its grad_output differs
    assert _sources(parameter_head_weight=9, parameter_net_a_weight=8) == [("parameter", "head.weight"),
                                                                          ("parameter", "net.a.weight")]  # fmt: skip


def test_evidence_rows_are_not_divergences_of_their_own() -> None:
    result = compare_audits({0: _record(_step()), 1: _record(_step(forward_input_head=9, forward_head=9))})
    assert (result.first.kind, result.first.name, [d.kind for d in result.next]) == ("forward", "head", [])
    assert result.sources == ()  # head's input differs and no module made it: net's own code did not (net agrees)
    alone = compare_audits({0: _record(_step()), 1: _record(_step(grad_output_net_a=99))})
    assert alone.diverged and (alone.first.kind, alone.first.name) == ("grad_output", "net.a")  # nothing else


def test_sources_are_those_of_the_first_step_that_differs() -> None:
    a = _record(_step()) + _record(_step(), step=1)
    b = _record(_step()) + _record(_step(forward_net_b=9, forward_net_a=8), step=1)
    result = compare_audits({0: a, 1: b})
    assert [(d.step, d.name) for d in result.sources] == [(1, "net.a"), (1, "net.b")]
    listed = result.to_dict()["sources"]
    assert (listed[0]["module"], listed[0]["max_abs_diff"], listed[1]["module"]) == ("net.a", 6, "net.b")
    text = render_audit(result, steps=2, where="runs")
    line = "sources at step 1 (inputs agree, output differs): module `net.a` (forward), module `net.b` (forward)"
    assert line in text.splitlines()


def test_the_sources_line_is_one_line_however_many_and_says_when_none() -> None:
    entries = [("forward", "fc", 1)] + [(kind, f"w{k}", 2) for k in range(10) for kind in ("gradient", "parameter")]
    changed = [(kind, name, 3 if kind == "parameter" else value) for kind, name, value in entries]  # an optimizer
    result = compare_audits({0: _record(entries), 1: _record(changed)})
    assert [d.name for d in result.sources] == [f"w{k}" for k in range(10)]
    line = next(x for x in render_audit(result, steps=1, where="r").splitlines() if x.startswith("sources"))
    assert line.startswith("sources at step 0 (inputs agree, output differs): parameter `w0` (optimizer step), ")
    assert line.endswith("parameter `w7` (optimizer step), and 2 more")
    hidden = compare_audits({0: _record(_step()), 1: _record(_step(forward_input_head=9, forward_head=9))})
    assert "sources at step 0: none identified" in render_audit(hidden, steps=1, where="r")


def test_torch_hooks_record_inputs_before_in_place_ops_and_output_gradients() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(inplace=True), torch.nn.Linear(4, 1))
    audit = TorchAudit(steps=1)
    audit.attach(named_modules(model), named_parameters(model))
    x = torch.tensor([[-1.0, 2.0, 0.5], [3.0, -4.0, 1.0]])
    audit.begin_step(0, x)
    hidden = model[0](x).detach()
    loss = model(x).sum()
    audit.record_loss(loss)
    loss.backward()
    rows = {(row["kind"], row["name"]): row for row in audit.end_step()}
    assert rows[("forward_input", "1")]["values"] == hidden.flatten().tolist()  # before ReLU changed it in place
    assert rows[("forward", "1")]["values"] == hidden.clamp(min=0).flatten().tolist()
    assert rows[("grad_output", "2")]["values"] == [1.0, 1.0]  # d loss / d output of the last layer
    assert rows[("forward_input", "0")]["values"] == x.flatten().tolist() and not audit.attached


class _Doubles(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        same = self.b(h)  # b's input: a's output as it was digested
        h.mul_(2)  # changed in place between two modules: b's next input must be digested again
        return same + self.b(h)


def test_a_digest_is_reused_only_for_the_same_unchanged_tensor() -> None:
    model = _Doubles()
    audit = TorchAudit(steps=1)
    audit.attach(named_modules(model), named_parameters(model))
    x = torch.tensor([[1.0, -2.0]])
    audit.begin_step(0, x)
    with torch.no_grad():  # (b keeps h for its backward: changing h in place is for a forward only)
        model(x)
    rows = audit.end_step()
    out_a = next(r for r in rows if (r["kind"], r["name"]) == ("forward", "a"))["values"]
    inputs_b = [r["values"] for r in rows if (r["kind"], r["name"]) == ("forward_input", "b")]
    assert inputs_b == [out_a, [2 * v for v in out_a]]


def test_a_global_forward_hook_feeds_the_same_rows_through_on_forward() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    names = {module: name for name, module in named_modules(model)}
    audit = TorchAudit(steps=1)
    audit.attach([], named_parameters(model))  # parameters only: modules come through torch's global hook
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda module, args, output: audit._on_forward(names[module], module, args, output)
    )
    try:
        x = torch.ones(2, 3)
        audit.begin_step(0, x)
        loss = model(x).sum()
        audit.record_loss(loss)
        loss.backward()
        rows = audit.end_step()
    finally:
        handle.remove()
    kinds = [(r["kind"], r["name"]) for r in rows if r["kind"] in ("forward_input", "forward", "grad_output")]
    assert kinds[:4] == [("forward_input", "0"), ("forward", "0"), ("forward_input", "1"), ("forward", "1")]
    assert ("grad_output", "0") in kinds and rows[1]["values"] == x.flatten().tolist()


def _audit(target: str, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    from tests.helpers.replicate_helpers import child_env

    trainer = target if ":" in target else f"{TRAINERS}:{target}"
    done = subprocess.run(
        [sys.executable, "-m", "deviate_cb.cli.main", "audit", "--trainer", trainer, "--steps", "2",
         "--parallel", "2", "--out", str(tmp_path / "runs"), "--format", "json", *extra],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    return done.returncode, json.loads(done.stdout), done.stderr


@pytest.mark.slow
def test_deviate_audit_names_both_noisy_branches_and_not_their_cascade(tmp_path: Path) -> None:
    _, found, _ = _audit("two_branches", tmp_path)
    assert (found["step"], found["kind"], found["module"]) == (0, "forward", "net.left.noise"), found
    assert [(d["step"], d["kind"], d["module"]) for d in found["sources"]] == [
        (0, "forward", "net.left.noise"), (0, "forward", "net.right.noise")]  # fmt: skip


@pytest.mark.slow
def test_deviate_audit_names_only_the_first_of_two_noisy_modules_in_a_row(tmp_path: Path) -> None:
    _, found, _ = _audit("in_a_row", tmp_path)
    assert [(d["step"], d["kind"], d["module"]) for d in found["sources"]] == [(0, "forward", "net.left.noise")]


@pytest.mark.slow
def test_deviate_audit_names_the_parameters_of_a_noisy_backward(tmp_path: Path) -> None:
    cases = Path(__file__).resolve().parent / "trainers" / "lightning_cases.py"
    _, found, _ = _audit(f"{cases}:noisy_backward", tmp_path)
    assert found["kind"] == "gradient" and found["module"] == "net.2", found
    assert sorted((d["kind"], d["name"]) for d in found["sources"]) == [("gradient", "net.2.bias"),
                                                                       ("gradient", "net.2.weight")]  # fmt: skip


@pytest.mark.slow
def test_deviate_audit_names_the_noisy_keras_layer_on_torch(tmp_path: Path) -> None:
    if importlib.util.find_spec("keras") is None:
        pytest.skip("Keras is not installed")
    cases = REPO / "integrations" / "keras" / "trainers" / "audit_cases.py"
    _, found, _ = _audit(f"{cases}:noisy_layer", tmp_path, "--keras-backend", "torch")
    assert [(d["step"], d["kind"], d["module"]) for d in found["sources"]] == [(0, "forward", "net/jitter")]
