"""The audit's record and its comparison, in process: what the Lightning callback writes, that its hooks are gone
after the audited steps, ``audit.parquet`` read back (and refused when broken), and the comparison of replicas'
rows against hand-made cases."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from torch import nn

from deviate_cb.audit.divergence import compare_audits
from deviate_cb.audit.recording.settings import audit_steps
from deviate_cb.errors import UsageError
from deviate_cb.lightning import DeviateCallback
from deviate_cb.store.audit import AUDIT_FILE, read_audit, write_audit


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        self.hooks_seen: list[int] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in self.modules())
        hooks += sum(len(p._post_accumulate_grad_hooks or {}) for p in self.parameters())
        self.hooks_seen.append(hooks)
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(tmp_path: Path, audit: Any, batches: int = 5) -> tuple[Tiny, Path]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8 * batches, 4, generator=gen)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)
    callback = DeviateCallback(tmp_path / "runs", seed=0, audit=audit)
    model = Tiny()
    trainer = L.Trainer(max_epochs=1, callbacks=[callback], logger=False, enable_progress_bar=False,
                        enable_checkpointing=False, enable_model_summary=False)  # fmt: skip
    trainer.fit(model, data)
    assert callback.run_dir is not None
    return model, Path(callback.run_dir)


def test_the_callback_records_k_steps_then_removes_every_hook(tmp_path: Path) -> None:
    model, run_dir = _fit(tmp_path, audit=2, batches=5)
    rows = read_audit(run_dir)
    assert sorted({row["step"] for row in rows}) == [0, 1]
    kinds = [row["kind"] for row in rows if row["step"] == 0]
    phases = {"input": 0, "forward_input": 1, "forward": 1, "loss": 2, "grad_output": 3, "gradient": 3, "parameter": 4}
    assert kinds == sorted(kinds, key=phases.__getitem__)  # execution order
    modules = {"net.0", "net.1", "net.2", "net"}
    assert {row["name"] for row in rows if row["kind"] in ("forward", "forward_input", "grad_output")} == modules
    assert [r["kind"] for r in rows if r["step"] == 0 and r["module"] == "net.2"][:2] == ["forward_input", "forward"]
    assert model.hooks_seen[0] > 0 and model.hooks_seen[2:] == [0, 0, 0]  # steps after K run without hooks
    manifest = json.loads((run_dir / "run.json").read_text())
    covered = ["input", "forward_input", "forward", "loss", "grad_output", "gradient", "parameter"]
    assert manifest["audit"] == {"steps": 2, "recorded_steps": 2, "rows": len(rows), "framework": "lightning",
                                 "covered": covered}  # fmt: skip
    assert {row["kind"] for row in rows} == set(covered)  # `covered` says what the rows hold, no more, no less


def test_a_shorter_training_writes_the_steps_it_had(tmp_path: Path) -> None:
    _, run_dir = _fit(tmp_path, audit=True, batches=3)
    assert json.loads((run_dir / "run.json").read_text())["audit"]["recorded_steps"] == 3


def test_no_audit_no_file(tmp_path: Path) -> None:
    model, run_dir = _fit(tmp_path, audit=None, batches=2)
    assert not (run_dir / AUDIT_FILE).exists() and model.hooks_seen == [0, 0]


def test_bad_audit_arguments_are_refused_and_the_command_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match=r"`audit` must be True, False or a number of training steps >= 1\. "
                                         r"Received: audit=-1\."):  # fmt: skip
        DeviateCallback(audit=-1)
    with pytest.raises(UsageError, match="Received: audit='5'"):
        DeviateCallback(audit="5")  # type: ignore[arg-type]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert audit_steps(3, environ={"DEVIATE_AUDIT": "7"}) == 7
    assert "overridden by `deviate audit`" in str(caught[0].message)


def test_a_broken_audit_file_is_a_readable_error(tmp_path: Path) -> None:
    (tmp_path / AUDIT_FILE).write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="is not a readable Parquet file"):
        read_audit(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_audit(tmp_path / "nowhere")


def _row(step: int, seq: int, kind: str, name: str, digest: str, values: Any = (1.0,), **more: Any) -> dict:
    values = None if values is None else list(values)
    row = {"step": step, "seq": seq, "kind": kind, "name": name, "module": name, "occurrence": 0, "dtype": "float32",
           "shape": [len(values or [0])], "numel": len(values or [0]), "digest": digest,
           "sum": sum(values or [0.0]), "abs_max": max(map(abs, values or [0.0])), "values": values}  # fmt: skip
    row.update(more)
    return row


def test_rows_round_trip_through_parquet(tmp_path: Path) -> None:
    rows = [_row(1, 0, "loss", "loss", "b"), _row(0, 1, "forward", "fc", "a", values=None)]
    write_audit(tmp_path, rows)
    assert [(r["step"], r["seq"]) for r in read_audit(tmp_path)] == [(0, 1), (1, 0)]


def test_comparison_reports_the_first_difference_in_execution_order() -> None:
    same = [_row(0, 0, "input", "batch[0]", "i"), _row(0, 1, "forward", "fc", "f")]
    assert not compare_audits({0: same, 1: same}).diverged
    later = [*same, _row(1, 0, "forward", "fc", "x", values=[2.0]), _row(1, 1, "loss", "loss", "y", values=[3.0])]
    other = [*same, _row(1, 0, "forward", "fc", "x2", values=[2.5]), _row(1, 1, "loss", "loss", "y2", values=[3.5])]
    result = compare_audits({0: later, 1: later, 2: other})
    assert (result.first.step, result.first.kind, result.first.replicas) == (1, "forward", (0, 2))
    assert (result.first.max_abs_diff, result.first.differing, result.first.exact) == (0.5, 1, True)
    assert [d.kind for d in result.next] == ["loss"]
    assert result.to_dict()["module"] == "fc" and result.to_dict()["next"][0]["module"] is None  # a loss has none


def test_comparison_without_values_gives_a_lower_bound_and_notes_what_is_missing() -> None:
    a = [_row(0, 0, "parameter", "w", "d1", values=None, sum=10.0, abs_max=2.0, numel=4)]
    b = [_row(0, 0, "parameter", "w", "d2", values=None, sum=12.0, abs_max=2.5, numel=4)]
    first = compare_audits({0: a, 1: b}).first
    assert first.exact is False and first.max_abs_diff == 0.5 and first.differing is None
    missing = compare_audits({0: [*a, _row(0, 1, "loss", "loss", "l")], 1: a}).first
    assert missing.kind == "loss" and missing.note == "missing in replica 1"
    extra = compare_audits({0: a, 1: [*a, _row(0, 1, "loss", "loss", "l")]}).first
    assert extra.kind == "loss" and extra.note == "only in replica 1"


def test_comparison_compares_only_the_steps_every_replica_recorded() -> None:
    a = [_row(0, 0, "loss", "loss", "l"), _row(1, 0, "loss", "loss", "m")]
    result = compare_audits({0: a, 1: a[:1]})
    assert not result.diverged and result.steps_compared == 1 and "replica 0 recorded 2 step(s)" in result.notes[0]
    with pytest.raises(ValueError, match="at least two replicas"):
        compare_audits({0: a})
