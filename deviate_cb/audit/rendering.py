"""The text report of ``deviate audit``: the verdict, the first divergence and where it arose, the ones after it,
and the notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deviate_cb.audit.divergence import size_text, where_text
from deviate_cb.report.text.safe import printable, printable_message

__all__ = ["render_audit"]


def render_audit(
    result: Any, *, steps: int, where: str, not_covered: str = "", stopped: str = "", after: str = ""
) -> str:
    """The text report of an :class:`~deviate_cb.audit.divergence.AuditResult`.

    Args:
        result: The comparison.
        steps: The training steps asked.
        where: The directory of the records.
        not_covered: What the audit could not cover on this framework.
        stopped: Why the comparison does not cover every replica over the steps asked
            (:func:`~deviate_cb.audit.replicas.stopped_line`), which the verdict then says.
        after: The replicas that ended abnormally after every audited step
            (:func:`~deviate_cb.audit.replicas.after_steps_line`), a note.

    Example:
        >>> from deviate_cb.audit.divergence import AuditResult
        >>> print(render_audit(AuditResult(False, (0, 1), 20), steps=20, where="runs"), end="")
        deviate audit: replicas 0, 1 agree bit for bit over 20 audited training step(s).
        records: runs
        >>> crashed = "nothing to compare after step 1: replica 1 failed with RuntimeError: boom"
        >>> text = render_audit(AuditResult(False, (0, 1), 2), steps=20, where="runs", stopped=crashed)
        >>> print(text.replace(", then", ",\\nthen"), end="")
        deviate audit: incomplete: replicas 0, 1 agree bit for bit over the 2 training step(s) compared,
        then nothing to compare after step 1: replica 1 failed with RuntimeError: boom.
        records: runs
    """
    replicas = ", ".join(str(r) for r in result.replicas)
    lines = []
    if not result.diverged and stopped:
        lines.append(
            f"deviate audit: incomplete: replicas {replicas} agree bit for bit over the {result.steps_compared} "
            f"training step(s) compared, then {printable_message(stopped)}."
        )
    elif not result.diverged:
        lines.append(
            f"deviate audit: replicas {replicas} agree bit for bit over {result.steps_compared} audited "
            "training step(s)."
        )
    else:
        first = result.first
        lines.append(
            f"deviate audit: replicas {replicas} diverge at training step {first.step} (0-based), first in "
            f"{where_text(first)}."
        )
        lines.append(f"  {size_text(first)}")
        if first.note:
            lines.append(f"  {printable(first.note)}")
        lines.append(_sources_line(result.sources, first.step, printable))
        if result.next:
            lines.append("then:")
            width = max(len(printable(d.name)) for d in result.next)
            for d in result.next:
                lines.append(f"  step {d.step:<4d} {d.kind:<9s} {printable(d.name):<{width}s}  {size_text(d)}")
    for note in result.notes:
        lines.append(f"note: {printable(note)}")
    if not_covered:
        lines.append(f"note: not covered on this framework: {printable(not_covered)}")
    if result.diverged and stopped:
        lines.append(f"note: {printable_message(stopped)}")
    if after and not stopped:
        lines.append(f"note: {printable_message(after)} (the audit has every step it asked for)")
    elif result.steps_compared < steps and not stopped:
        lines.append(f"note: {result.steps_compared} of the {steps} step(s) asked were recorded (training was shorter)")
    lines.append(f"records: {printable(where)}")
    return "\n".join(lines) + "\n"


_SOURCE = {
    "input": "the input batch `{name}`",
    "forward": "module `{module}` (forward)",
    "loss": "the loss",
    "gradient": "the gradient of parameter `{name}` (backward)",
    "parameter": "parameter `{name}` (optimizer step)",
}
_SOURCES_SHOWN = 8


def _sources_line(sources: Sequence[Any], step: int, printable: Any) -> str:
    """Where the differences arose at the first step that differs (:attr:`AuditResult.sources`), in one line."""
    if not sources:
        return (f"sources at step {step}: none identified (nothing recorded there differs while what it is computed "
                "from agrees)")  # fmt: skip
    named = []
    for d in sources[:_SOURCES_SHOWN]:
        text = _SOURCE.get(d.kind, "{name}").format(name=printable(d.name), module=printable(d.module or d.name))
        named.append(text + (f", call {d.occurrence + 1}" if d.kind == "forward" and d.occurrence else ""))
    more = f", and {len(sources) - _SOURCES_SHOWN} more" if len(sources) > _SOURCES_SHOWN else ""
    return f"sources at step {sources[0].step} (inputs agree, output differs): {', '.join(named)}{more}"
