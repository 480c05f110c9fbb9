"""Whether a run resumed from a checkpoint continues bit for bit, and what the checkpoint did not restore.

Example:
    >>> end, start = {"torch_rng": "a", "optimizers": "o"}, {"torch_rng": "b", "optimizers": "p"}
    >>> uninterrupted, checkpointed = {"end": end, "start": start}, {"end": end}
    >>> resumed = {"start": {"torch_rng": "c", "optimizers": "p"}}  # the optimizer restored, torch's RNG not
    >>> not_restored(uninterrupted, checkpointed, resumed)
    (['torch_rng'], [])
    >>> labels(["torch_rng", "sampler_generator"])
    "torch's global RNG (dropout draws from it), the sampler's generator"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from deviate_cb.audit.divergence import AuditResult, compare_audits, size_text, where_text
from deviate_cb.audit.replicas import AuditedReplica
from deviate_cb.capture.backup_restore import NO_BACKUP
from deviate_cb.store.manifest import RunManifest

__all__ = [
    "PLAIN_PYTORCH",
    "STATE_LABELS",
    "ResumeResult",
    "compare_resume",
    "labels",
    "not_restored",
    "render_resume",
    "written_checkpoint",
]

PLAIN_PYTORCH = (
    "plain PyTorch has no standard checkpoint: --resume-at needs Lightning, Keras or the Hugging Face Trainer"
)

#: The states' names in the report (the keys are those of :data:`deviate_cb.capture.resume_state.STATE_LABELS`).
STATE_LABELS = {
    "torch_rng": "torch's global RNG (dropout draws from it)",
    "cuda_rng": "torch's CUDA RNG",
    "numpy_rng": "NumPy's global RNG",
    "python_rng": "Python's random",
    "sampler_generator": "the sampler's generator",
    "lr_schedulers": "the LR scheduler",
    "optimizers": "the optimizer state",
    "keras_global_seed": "Keras's global SeedGenerator (unseeded keras.random calls draw from it)",
    "keras_seed_generators": "the model's SeedGenerator states (Dropout(seed=...) and other seeded layers: "
    "BackupAndRestore does not save them)",
    "data_position": "the DataLoader's place in its epoch (Lightning restarts a DataLoader without "
    "state_dict/load_state_dict from its first batch; Keras's BackupAndRestore restarts the epoch it backed up in; "
    "the Hugging Face Trainer with ignore_data_skip=True restarts the epoch)",
}


def labels(names: Sequence[str]) -> str:
    """The states ``names`` in words, joined by commas."""
    return ", ".join(STATE_LABELS.get(name, name) for name in names)


def not_restored(
    uninterrupted: Mapping[str, Mapping[str, str]],
    checkpointed: Mapping[str, Mapping[str, str]],
    resumed: Mapping[str, Mapping[str, str]],
    *,
    data_restarted: bool = False,
) -> tuple[list[str], list[str]]:
    """``(not restored, differed before)``: the states the checkpoint did not restore, and those that already
    differed between the uninterrupted and the checkpointed run at the end of step K-1 (nothing can be told of them).
    Each argument is a run's ``resume.states`` (``end``: end of step K-1, ``start``: start of step K);
    ``data_restarted``: the resumed run's DataLoader started its epoch again (``data_position``)."""
    before_a, before_b = uninterrupted.get("end", {}), checkpointed.get("end", {})
    after_a, after_c = uninterrupted.get("start", {}), resumed.get("start", {})
    missing, before = ["data_position"] if data_restarted else [], []
    for name in [*STATE_LABELS, *sorted(set(before_a) - set(STATE_LABELS))]:
        if name == "data_position" or (name not in before_a and name not in after_a):
            continue
        if before_a.get(name) != before_b.get(name):
            before.append(name)
        elif after_a.get(name) != after_c.get(name):
            missing.append(name)
    return missing, before


@dataclass(frozen=True)
class ResumeResult:
    """The comparisons of ``--resume-at``.

    Attributes:
        at: K, the step the resumed run starts at.
        steps: N.
        before: The uninterrupted run against the checkpointed one over steps 0..K-1.
        after: The uninterrupted run against the resumed one over steps K..N-1 (``None`` when ``before`` diverged).
        not_restored: The states the checkpoint did not restore (keys of :data:`STATE_LABELS`).
        differed_before: The states that differed already at the end of step K-1.
    """

    at: int
    steps: int
    before: AuditResult
    after: Optional[AuditResult]
    not_restored: tuple[str, ...] = ()
    differed_before: tuple[str, ...] = ()

    @property
    def diverged(self) -> bool:
        return self.before.diverged or (self.after is not None and self.after.diverged)

    def to_dict(self) -> dict[str, Any]:
        """The fields of ``deviate audit --resume-at --format json`` (the first divergence as ``deviate audit``'s)."""
        compared = self.after if self.after is not None and not self.before.diverged else self.before
        return {
            **compared.to_dict(),
            "resume_at": self.at,
            "steps": self.steps,
            "diverged_before_checkpoint": self.before.diverged,
            "steps_compared_before": self.before.steps_compared,
            "not_restored": list(self.not_restored),
            "not_restored_text": labels(self.not_restored),
            "differed_before": list(self.differed_before),
        }


def compare_resume(
    uninterrupted: Sequence[Mapping[str, Any]],
    checkpointed: Sequence[Mapping[str, Any]],
    resumed: Sequence[Mapping[str, Any]],
    *,
    at: int,
    steps: int,
    states: Sequence[Mapping[str, Mapping[str, str]]] = ({}, {}, {}),
    data_restarted: bool = False,
    ended: Sequence[bool] = (True, True, True),
    next_count: int = 5,
) -> ResumeResult:
    """Compare the three runs' audit rows (see docs/design/audit.md); ``states``: their ``resume.states``;
    ``data_restarted``: the resumed run's ``resume.data_restarted``; ``ended``: whether each run ended its training
    normally (a record cut short by a crash is compared up to where it stops,
    :func:`~deviate_cb.audit.divergence.compare_audits`).

    Raises:
        ValueError: A run without any row.
    """
    early = [row for row in uninterrupted if row["step"] < at]
    a_ended, b_ended, c_ended = ended
    complete = [key for key, done in ((0, a_ended), (1, b_ended)) if done]
    before = compare_audits({0: early, 1: checkpointed}, next_count=next_count, complete=complete)
    missing, differed = not_restored(*states, data_restarted=data_restarted)
    if before.diverged:
        return ResumeResult(at, steps, before, None, tuple(missing), tuple(differed))
    late = [row for row in uninterrupted if row["step"] >= at]
    if not late:
        raise ValueError(f"the uninterrupted run recorded no step from {at} on")
    complete = [key for key, done in ((0, a_ended), (1, c_ended)) if done]
    after = compare_audits({0: late, 1: resumed}, next_count=next_count, complete=complete)
    return ResumeResult(at, steps, before, after, tuple(missing), tuple(differed))


def render_resume(result: ResumeResult, *, where: str, stopped: str = "") -> str:
    """The text report of a :class:`ResumeResult`; ``stopped``: why a run did not end normally (the verdict is then
    ``incomplete:`` unless the runs diverged within the steps compared).

    Example:
        >>> agree = AuditResult(False, (0, 1), 4, last_step=7)
        >>> text = render_resume(ResumeResult(4, 8, AuditResult(False, (0, 1), 4), agree), where="runs")
        >>> print(text.replace(": steps", ":\\nsteps"), end="")
        deviate audit --resume-at 4: the run resumed from the checkpoint of step 4 continues bit for bit:
        steps 4..7 agree with the uninterrupted run.
        records: runs
    """
    from deviate_cb.report.text.safe import printable

    lines = []
    head = f"deviate audit --resume-at {result.at}:"
    after = result.after
    if result.before.diverged:
        first = result.before.first
        assert first is not None
        lines.append(
            f"{head} the uninterrupted and the checkpointed runs already differ at training step {first.step} "
            f"(0-based), before the checkpoint, first in {where_text(first)}: the training is not "
            "reproducible, so nothing can be told of the resume (`deviate audit` finds where replicas differ)."
        )
        lines.append(f"  {size_text(first)}")
    elif after is not None and after.diverged:
        first = after.first
        assert first is not None
        lines.append(
            f"{head} the resumed run diverges from the uninterrupted one at training step {first.step} (0-based), "
            f"first in {where_text(first)}."
        )
        lines.append(f"  {size_text(first)}")
        if first.note:
            lines.append(f"  {printable(first.note)}")
        if after.next:
            lines.append("then:")
            width = max(len(printable(d.name)) for d in after.next)
            for d in after.next:
                lines.append(f"  step {d.step:<4d} {d.kind:<9s} {printable(d.name):<{width}s}  {size_text(d)}")
    elif after is not None:
        last = after.last_step if after.last_step is not None else result.at
        span = f"steps {result.at}..{last} agree" if last > result.at else f"step {result.at} agrees"
        if stopped:
            lines.append(f"{head} incomplete: {span} with the uninterrupted run, then {printable(stopped)}.")
        else:
            lines.append(
                f"{head} the run resumed from the checkpoint of step {result.at} continues bit for bit: {span} with "
                "the uninterrupted run."
            )
    if result.not_restored:
        effect = "" if result.diverged else ", without effect on the steps compared"
        lines.append(f"not restored by the checkpoint{effect}: {labels(result.not_restored)}")
    if result.differed_before:
        lines.append(f"note: already different before the checkpoint: {labels(result.differed_before)}")
    if stopped and result.diverged:
        lines.append(f"note: {printable(stopped)}")
    elif after is not None and not result.diverged and after.steps_compared < result.steps - result.at:
        lines.append(
            f"note: {after.steps_compared} of the {result.steps - result.at} step(s) after the checkpoint were "
            "recorded (training was shorter)"
        )
    lines.append(f"records: {printable(where)}")
    return "\n".join(lines) + "\n"


def written_checkpoint(manifest: RunManifest, audited: AuditedReplica, at: int) -> tuple[str, str]:
    """``(checkpoint path, "")`` when the checkpointed run of ``deviate audit --resume-at`` wrote one, else
    ``("", why not)``, from its manifest's ``resume`` record and what became of it (``audited``)."""
    record = manifest.resume
    path = record.get("checkpoint") if isinstance(record, dict) else None
    if isinstance(path, str) and Path(path).exists():  # Lightning's file, Keras's backup directory
        return path, ""
    if isinstance(record, dict) and record.get("refused") == "no_backup":
        return "", NO_BACKUP
    if not audited.ended:
        return "", f"the checkpointed run {audited.how} before its checkpoint at step {at}: nothing was resumed"
    if not isinstance(record, dict):  # no Lightning callback saw the step: a plain loop (or no training at all)
        return "", f"{PLAIN_PYTORCH} (the checkpointed run trained without a Lightning Trainer.fit: nothing to resume)"
    steps = audited.recorded_steps
    return "", f"the checkpointed run's training ended after {steps} step(s), before step {at}: no checkpoint"
