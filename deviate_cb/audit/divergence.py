"""Where identical runs stop being identical: the first difference between the audit records of replicas.

Example:
    >>> def row(step, seq, kind, name, digest, values):
    ...     return {"step": step, "seq": seq, "kind": kind, "name": name, "module": name, "occurrence": 0,
    ...             "dtype": "float32", "shape": [len(values)], "numel": len(values), "digest": digest,
    ...             "sum": sum(values), "abs_max": max(map(abs, values)), "values": values}
    >>> a = [row(0, 0, "forward", "fc", "a", [1.0, 2.0]), row(0, 1, "loss", "loss", "l", [0.5])]
    >>> b = [row(0, 0, "forward", "fc", "b", [1.0, 2.5]), row(0, 1, "loss", "loss", "m", [0.7])]
    >>> result = compare_audits({0: a, 1: b})
    >>> result.diverged, result.first.kind, result.first.name, result.first.max_abs_diff, result.first.differing
    (True, 'forward', 'fc', 0.5, 1)
    >>> [d.kind for d in result.next]
    ['loss']
    >>> [(d.kind, d.name) for d in result.sources]  # no input row of fc: its output is where the runs part
    [('forward', 'fc')]
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

__all__ = ["EVIDENCE_KINDS", "AuditResult", "Divergence", "compare_audits", "size_text", "where_text"]

_KEY = ("step", "kind", "name", "occurrence")
_WHAT = {
    "input": "the input batch `{name}`",
    "forward": "the forward output of module `{name}`",
    "loss": "the loss",
    "gradient": "the gradient of parameter `{name}`",
    "parameter": "parameter `{name}` after the optimizer step",
}
EVIDENCE_KINDS = ("forward_input", "grad_output")  # they locate the sources; not listed as divergences themselves
_ROOT = "(root)"
_FORWARD = ("input", "forward_input", "forward")


@dataclass(frozen=True)
class Divergence:
    """One place where a replica's record differs from the reference replica's.

    Attributes:
        step: Training step (0-based).
        kind: ``input``, ``forward``, ``loss``, ``gradient`` or ``parameter``.
        name: The batch path, module, parameter or ``loss``.
        module: The module that produced it or owns it (``None`` for the batch and the loss).
        occurrence: Earlier rows of the same ``(kind, name)`` in the step.
        replicas: The reference replica and the replicas that differ from it there.
        max_abs_diff: Largest absolute difference (a lower bound when not :attr:`exact`; ``None``: not numeric).
        max_rel_diff: Largest difference relative to the larger magnitude (``None`` when not exact).
        differing: Elements whose bits differ (``None`` when not exact).
        numel: Elements of the tensor.
        exact: Whether the sizes come from the values themselves.
        note: What else differs (``shape 16x8 vs 16x4``, ``missing in replica 1``).
    """

    step: int
    kind: str
    name: str
    module: Optional[str]
    occurrence: int
    replicas: tuple[int, ...]
    max_abs_diff: Optional[float]
    max_rel_diff: Optional[float]
    differing: Optional[int]
    numel: int
    exact: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "kind": self.kind,
            "name": self.name,
            "module": None if self.kind in ("input", "loss") else self.module,
            "occurrence": self.occurrence,
            "replicas": list(self.replicas),
            "max_abs_diff": _finite_or_none(self.max_abs_diff),
            "max_rel_diff": _finite_or_none(self.max_rel_diff),
            "differing": self.differing,
            "numel": self.numel,
            "exact": self.exact,
            "note": self.note,
        }


@dataclass(frozen=True)
class AuditResult:
    """The comparison of replicas' audit records.

    Attributes:
        diverged: Whether any row differs.
        replicas: The replicas compared (the first is the reference).
        steps_compared: Training steps compared (every replica recorded them, or was complete and should have).
        first: The first divergence in execution order (``None`` when the replicas agree).
        next: The divergences right after it.
        notes: What limited the comparison (a replica that recorded fewer steps).
        last_step: The last training step compared (``None``: none was).
        sources: At the first step where anything differs, every place where a difference arose rather than was
            passed on (see docs/design/audit.md), in execution order.
    """

    diverged: bool
    replicas: tuple[int, ...]
    steps_compared: int
    first: Optional[Divergence] = None
    next: tuple[Divergence, ...] = ()
    notes: tuple[str, ...] = field(default=())
    last_step: Optional[int] = None
    sources: tuple[Divergence, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``deviate audit --format json``."""
        first = self.first.to_dict() if self.first is not None else {}
        return {
            "diverged": self.diverged,
            "step": first.get("step"),
            "module": first.get("module"),
            "kind": first.get("kind"),
            "name": first.get("name"),
            "max_abs_diff": first.get("max_abs_diff"),
            "max_rel_diff": first.get("max_rel_diff"),
            "differing": first.get("differing"),
            "numel": first.get("numel"),
            "exact": first.get("exact"),
            "note": first.get("note"),
            "replicas": list(self.first.replicas) if self.first is not None else list(self.replicas),
            "steps_compared": self.steps_compared,
            "next": [d.to_dict() for d in self.next],
            "sources": [d.to_dict() for d in self.sources],
            "notes": list(self.notes),
        }


def compare_audits(
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    *,
    next_count: int = 5,
    complete: Collection[int] = (),
) -> AuditResult:
    """Compare the audit rows of each replica (replica index -> rows); see docs/design/audit.md.

    ``complete``: the replicas whose training ended normally (their record is not cut short); the steps compared
    are those every other replica recorded, and a complete replica that lacks one of them diverges there.

    Example:
        >>> row = {"step": 0, "seq": 0, "kind": "loss", "name": "loss", "module": None, "occurrence": 0,
        ...        "dtype": "float32", "shape": [], "numel": 1, "digest": "d", "sum": 0.5, "abs_max": 0.5,
        ...        "values": [0.5]}
        >>> longer, shorter = [row, {**row, "step": 1}], [row]
        >>> compare_audits({0: longer, 1: shorter}).diverged  # replica 1 may have stopped early: step 0 compared
        False
        >>> found = compare_audits({0: longer, 1: shorter}, complete=(0, 1))  # both ended: 1 trained less
        >>> found.diverged, found.first.step, found.first.note
        (True, 1, 'replica 1 recorded no step 1 (its training ended before)')

    Raises:
        ValueError: Fewer than two replicas, or a replica without any row.
    """
    if len(records) < 2:
        raise ValueError(f"comparing needs the audit records of at least two replicas, got {len(records)}")
    empty = [replica for replica, rows in records.items() if not rows]
    if empty:
        raise ValueError(f"replica {empty[0]} recorded no audited step")
    order = sorted(records)
    reference = order[0]
    steps = {replica: {row["step"] for row in records[replica]} for replica in order}
    compared: set[Any] = set.union(*steps.values())
    for replica in order:
        if replica not in complete:  # its record may stop early: nothing to compare after it
            compared &= steps[replica]
    notes = []
    for replica in order:
        if steps[replica] != compared:
            notes.append(f"replica {replica} recorded {len(steps[replica])} step(s); {len(compared)} are compared")
    indexed = {replica: {_key(row): row for row in records[replica] if row["step"] in compared} for replica in order}
    by_step: dict[Any, list[Mapping[str, Any]]] = {step: [] for step in compared}
    for row in sorted(indexed[reference].values(), key=lambda row: (row["step"], row["seq"])):
        by_step[row["step"]].append(row)
    found: list[Divergence] = []  # the kinds listed as divergences
    evidence: list[Divergence] = []
    sources: tuple[Divergence, ...] = ()
    differed = False
    for step in sorted(compared):
        if differed:  # past the first step that differs: only what next needs
            for row in by_step[step]:
                if len(found) > next_count:
                    break
                (evidence if row["kind"] in EVIDENCE_KINDS else found).extend(
                    _differences(row, indexed, reference, order, steps)
                )
            else:
                found.extend(d for d in _extra_rows(step, indexed, reference, order, steps)
                             if d.kind not in EVIDENCE_KINDS)  # fmt: skip
        else:  # every row of the step: its sources need them all
            step_found = [d for row in by_step[step] for d in _differences(row, indexed, reference, order, steps)]
            step_found += _extra_rows(step, indexed, reference, order, steps)
            if step_found:
                differed, sources = True, _sources(step_found, by_step[step])
            found.extend(d for d in step_found if d.kind not in EVIDENCE_KINDS)
            evidence.extend(d for d in step_found if d.kind in EVIDENCE_KINDS)
        if len(found) > next_count:
            break
    last = max(compared) if compared else None
    listed = found or evidence
    if not listed:
        return AuditResult(False, tuple(order), len(compared), notes=tuple(notes), last_step=last)
    return AuditResult(
        True,
        tuple(order),
        len(compared),
        listed[0],
        tuple(listed[1 : 1 + next_count]),
        tuple(notes),
        last_step=last,
        sources=sources,
    )


def _sources(divergences: Sequence[Divergence], rows: Sequence[Mapping[str, Any]]) -> tuple[Divergence, ...]:
    """Where the differences of one step arose (see docs/design/audit.md); ``rows``: the reference's rows of the
    step, in execution order."""
    differ = {(d.kind, d.name, d.occurrence): d for d in divergences}
    modules = {(row["kind"], row["name"], row["occurrence"]): row.get("module") for row in rows}
    present = set(modules)
    modules.update((key, d.module) for key, d in differ.items())
    by_call: dict[tuple[Any, int], list[tuple[str, str, int]]] = {}  # (module, call) -> its forward rows
    by_module: dict[Any, list[tuple[str, str, int]]] = {}  # module -> its forward and grad_output rows
    for (kind, name, occurrence), row_module in modules.items():
        if kind in ("forward_input", "forward"):
            by_call.setdefault((row_module, occurrence), []).append((kind, name, occurrence))
        if kind in ("forward_input", "forward", "grad_output"):
            by_module.setdefault(row_module, []).append((kind, name, occurrence))
    candidates = set()
    for call, keys in by_call.items():
        if any(key[0] == "forward" and key in differ for key in keys) and not any(
            key[0] == "forward_input" and key in differ for key in keys
        ):
            candidates.add(call)
    innermost = {call for call in candidates if not any(_under(other[0], call[0]) for other in candidates)}
    forward_agrees = any(key[0] == "forward" for key in present) and not any(d.kind in _FORWARD for d in divergences)
    found: list[Divergence] = []
    seen_calls: set[tuple[Any, int]] = set()
    for d in divergences:  # execution order
        if d.kind == "input":
            found.append(d)
        elif d.kind == "forward" and (d.module, d.occurrence) in innermost:
            if (d.module, d.occurrence) not in seen_calls:  # its first output that differs stands for the call
                seen_calls.add((d.module, d.occurrence))
                found.append(d)
        elif d.kind == "loss" and forward_agrees:
            found.append(d)
        elif d.kind == "gradient":
            keys = by_module.get(d.module, [])
            if any(key[0] == "grad_output" for key in keys) and not any(key in differ for key in keys):
                found.append(d)
        elif d.kind == "parameter":
            gradient = ("gradient", d.name, d.occurrence)
            if gradient in present and gradient not in differ:
                found.append(d)
    return tuple(found)


def _under(inner: Any, outer: Any) -> bool:
    """Whether module ``inner`` is nested in module ``outer``, by their names."""
    if not isinstance(inner, str) or not isinstance(outer, str) or inner == outer:
        return False
    return outer == _ROOT or inner.startswith(outer + ".") or inner.startswith(outer + "/")


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row[name] for name in _KEY)


def _differences(
    row: Mapping[str, Any],
    indexed: Mapping[int, Mapping[tuple[Any, ...], Mapping[str, Any]]],
    reference: int,
    order: Sequence[int],
    steps: Mapping[int, set[Any]],
) -> list[Divergence]:
    key = _key(row)
    differ: list[int] = []
    missing: list[int] = []
    notes: list[str] = []
    sizes: list[tuple[Optional[float], Optional[float], Optional[int], bool]] = []
    for replica in order[1:]:
        other = indexed[replica].get(key)
        if other is None:
            missing.append(replica)
            continue
        if (other["digest"], other["dtype"], list(other["shape"])) == (row["digest"], row["dtype"], list(row["shape"])):
            continue
        differ.append(replica)
        if (other["dtype"], list(other["shape"])) != (row["dtype"], list(row["shape"])):
            notes.append(
                f"replica {replica}: {other['dtype']} {_shape(other['shape'])} vs {row['dtype']} {_shape(row['shape'])}"
            )
        sizes.append(_size(row, other))
    absent = [replica for replica in missing if row["step"] not in steps[replica]]  # the whole step
    missing = [replica for replica in missing if replica not in absent]
    if missing:
        notes.append(f"missing in replica{'s' * (len(missing) > 1)} {', '.join(map(str, missing))}")
    for replica in absent:
        notes.append(f"replica {replica} recorded no step {row['step']} (its training ended before)")
    missing += absent
    if not differ and not missing:
        return []
    exact = bool(sizes) and all(size[3] for size in sizes)
    return [
        Divergence(
            step=int(row["step"]),
            kind=str(row["kind"]),
            name=str(row["name"]),
            module=row.get("module"),
            occurrence=int(row["occurrence"]),
            replicas=(reference, *sorted(differ + missing)),
            max_abs_diff=_largest(size[0] for size in sizes),
            max_rel_diff=_largest(size[1] for size in sizes) if exact else None,
            differing=sum(int(size[2] or 0) for size in sizes) if exact else None,
            numel=int(row["numel"]),
            exact=exact,
            note="; ".join(notes),
        )
    ]


def _extra_rows(
    step: int,
    indexed: Mapping[int, Mapping[tuple[Any, ...], Mapping[str, Any]]],
    reference: int,
    order: Sequence[int],
    steps: Mapping[int, set[Any]],
) -> list[Divergence]:
    """Rows of ``step`` that another replica has and the reference lacks."""
    found = []
    for replica in order[1:]:
        extra = [row for key, row in indexed[replica].items() if key[0] == step and key not in indexed[reference]]
        note = f"only in replica {replica}"
        if step not in steps[reference]:
            note += f"; replica {reference} recorded no step {step} (its training ended before)"
        for row in sorted(extra, key=lambda r: r["seq"]):
            found.append(
                Divergence(
                    int(row["step"]),
                    str(row["kind"]),
                    str(row["name"]),
                    row.get("module"),
                    int(row["occurrence"]),
                    (reference, replica),
                    None,
                    None,
                    None,
                    int(row["numel"]),
                    False,
                    note,
                )
            )
    return found


def _size(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Optional[float], Optional[float], Optional[int], bool]:
    """``(max abs diff, max rel diff, differing elements, exact)`` between two rows of the same key."""
    va, vb = a.get("values"), b.get("values")
    if va is not None and vb is not None and len(va) == len(vb):
        x, y = np.asarray(va, dtype=np.float64), np.asarray(vb, dtype=np.float64)
        differ = x.view(np.int64) != y.view(np.int64)
        if not differ.any():
            return 0.0, 0.0, 0, True
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(x[differ] - y[differ])
            scale = np.maximum(np.abs(x[differ]), np.abs(y[differ]))
            rel = np.where(scale > 0, gap / np.where(scale > 0, scale, 1.0), 0.0)
        return _nanmax(gap), _nanmax(rel), int(differ.sum()), True
    bounds = [abs(float(a["abs_max"]) - float(b["abs_max"]))]
    if a.get("numel"):
        bounds.append(abs(float(a["sum"]) - float(b["sum"])) / float(a["numel"]))
    return _largest(bounds), None, None, False


def _nanmax(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(finite.max()) if finite.size else math.nan


def _largest(values: Any) -> Optional[float]:
    numbers = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return max(numbers) if numbers else None


def _finite_or_none(value: Optional[float]) -> Optional[float]:
    return value if value is not None and math.isfinite(value) else None


def _shape(shape: Sequence[int]) -> str:
    return "x".join(str(s) for s in shape) or "scalar"


def where_text(divergence: Divergence, *, owner: bool = True) -> str:
    """Where a divergence is, in words, as every audit report says it (names made printable).

    ``owner``: name the module of a gradient or parameter too. A module called more than once in the step says
    which call.

    Example:
        >>> d = Divergence(3, "gradient", "net.2.bias", "net.2", 1, (0, 1), 0.5, 1.0, 1, 2, True)
        >>> where_text(d)
        'the gradient of parameter `net.2.bias` (module `net.2`), call 2 in the step'
        >>> size_text(d)
        'max abs diff 0.5, max rel diff 1, 1 of 2 element(s) differ'
    """
    from deviate_cb.report.text.safe import printable

    text = _WHAT.get(divergence.kind, divergence.kind + " `{name}`").format(name=printable(divergence.name))
    if owner and divergence.kind in ("gradient", "parameter") and divergence.module:
        text += f" (module `{printable(divergence.module)}`)"
    if divergence.occurrence:
        text += f", call {divergence.occurrence + 1} in the step"
    return text


def size_text(divergence: Divergence) -> str:
    """How large a divergence is, in words: exact from the values, else a lower bound from the sums."""
    if divergence.max_abs_diff is None:
        return "size of the difference unknown"
    if not divergence.exact:
        return f"max abs diff at least {divergence.max_abs_diff:.3g} (from sums; tensor of {divergence.numel} elements)"
    return (
        f"max abs diff {divergence.max_abs_diff:.3g}, max rel diff {divergence.max_rel_diff or 0.0:.3g}, "
        f"{divergence.differing} of {divergence.numel} element(s) differ"
    )
