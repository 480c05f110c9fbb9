"""Which rank of a distributed training stopped being identical first: the audit records compared rank by rank.

Example:
    >>> def row(step, seq, kind, name, digest):
    ...     return {"step": step, "seq": seq, "kind": kind, "name": name, "module": name, "occurrence": 0,
    ...             "dtype": "float32", "shape": [1], "numel": 1, "digest": digest, "sum": 0.0, "abs_max": 0.0,
    ...             "values": None}
    >>> same = [row(0, 0, "forward", "fc", "a"), row(0, 1, "parameter", "fc.weight", "p")]
    >>> noisy = [row(0, 0, "forward", "fc", "b"), row(0, 1, "parameter", "fc.weight", "q")]
    >>> mixed = [row(0, 0, "forward", "fc", "a"), row(0, 1, "parameter", "fc.weight", "q")]
    >>> ranked = compare_ranks({0: {0: same, 1: same}, 1: {0: mixed, 1: noisy}})
    >>> ranked.diverged, ranked.first, [(r.rank, r.result.first.kind) for r in ranked.ranks]
    (True, (1,), [(0, 'parameter'), (1, 'forward')])
    >>> print(ranked.summary().replace("; ", ";\\n").replace(" (", "\\n("))
    rank 1 diverges first, at training step 0, in the forward output of module `fc`;
    rank 0 diverges at step 0, in parameter `fc.weight` after the optimizer step
    (its own gradients agree: the difference came through the gradient all-reduce)
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.audit.divergence import AuditResult, Divergence, compare_audits, where_text

__all__ = ["RankAudit", "RankedAudit", "compare_ranks", "rank_comparison", "read_rank_records", "with_rank_line"]

Records = Mapping[int, Mapping[int, Sequence[Mapping[str, Any]]]]  # replica -> global rank -> audit rows


@dataclass(frozen=True)
class RankAudit:
    """The comparison of one global rank's records across replicas.

    Attributes:
        rank: The global rank.
        result: The comparison of the replicas that recorded it (``None``: fewer than two did).
        position: ``(step, seq)`` of its first divergence (``None``: it did not diverge).
        missing: Replicas that have no record of this rank.
        failed: ``(replica, exception)`` for each replica where this rank's fit stopped on an exception.
    """

    rank: int
    result: Optional[AuditResult]
    position: Optional[tuple[int, int]] = None
    missing: tuple[int, ...] = ()
    failed: tuple[tuple[int, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """This rank's part of ``deviate audit --format json``'s ``ranks``."""
        found: dict[str, Any] = {"rank": self.rank}
        if self.result is not None:
            found.update(self.result.to_dict())
        else:
            found["diverged"] = None
        found["seq"] = self.position[1] if self.position is not None else None
        found["missing_in"] = list(self.missing)
        found["failed"] = [{"replica": replica, "exception": error} for replica, error in self.failed]
        return found


@dataclass(frozen=True)
class RankedAudit:
    """The rank-by-rank comparison of a distributed training's audit.

    Attributes:
        ranks: Every rank's comparison, by rank.
        first: The ranks that diverged first (several when tied at the same step and position); ``()``: none did.
    """

    ranks: tuple[RankAudit, ...]
    first: tuple[int, ...] = ()

    @property
    def diverged(self) -> bool:
        return bool(self.first)

    @property
    def lead(self) -> Optional[AuditResult]:
        """The comparison to report as the audit's: the first rank to diverge, else rank 0's (else any rank's)."""
        if self.first:
            return self.ranks_by_number[self.first[0]].result
        return next((r.result for r in self.ranks if r.result is not None), None)

    @property
    def ranks_by_number(self) -> dict[int, RankAudit]:
        return {r.rank: r for r in self.ranks}

    @property
    def incomplete(self) -> str:
        """The ranks without a record in some replica, and those whose fit stopped on an exception, in one line
        (``""``: every rank recorded in every replica and none failed)."""
        gaps = [f"rank {r.rank} has no record in replica{'s' * (len(r.missing) > 1)} {', '.join(map(str, r.missing))}"
                for r in self.ranks if r.missing]  # fmt: skip
        gaps += [
            f"rank {r.rank} of replica {replica} failed with {error}" for r in self.ranks for replica, error in r.failed
        ]
        return "; ".join(gaps)

    def summary(self) -> str:
        """Which rank diverged first and where, then where every other rank diverged (or that it agrees)."""
        return "; ".join(self.parts())

    def parts(self) -> list[str]:
        """:meth:`summary`, one clause per rank."""
        ranks = self.ranks_by_number
        if not self.first:
            agree = [str(r.rank) for r in self.ranks if r.result is not None]
            if not agree:
                return ["no rank was compared"]
            return [f"rank{'s' * (len(agree) > 1)} {', '.join(agree)} agree{'s' * (len(agree) == 1)} bit for bit"]
        lead = ranks[self.first[0]].result
        assert lead is not None and lead.first is not None
        names = " and ".join(f"rank {rank}" for rank in self.first)
        verb = "diverge" if len(self.first) > 1 else "diverges"
        parts = [f"{names} {verb} first, at training step {lead.first.step}, in {where_text(lead.first, owner=False)}"]
        for rank in self.ranks:
            if rank.rank in self.first or rank.result is None:
                continue
            first = rank.result.first
            if first is None:
                parts.append(f"rank {rank.rank} agrees over the {rank.result.steps_compared} step(s) compared")
                continue
            text = f"rank {rank.rank} diverges at step {first.step}, in {where_text(first, owner=False)}"
            if first.kind == "parameter":
                text += " (its own gradients agree: the difference came through the gradient all-reduce)"
            parts.append(text)
        return parts

    def to_dict(self) -> list[dict[str, Any]]:
        """``deviate audit --format json``'s ``ranks``: one object per rank."""
        return [rank.to_dict() for rank in self.ranks]


def compare_ranks(
    records: Records,
    *,
    ranks: int = 0,
    next_count: int = 5,
    complete: Collection[int] = (),
    failed: Optional[Mapping[tuple[int, int], str]] = None,
) -> RankedAudit:
    """Compare each rank's records across replicas (replica -> rank -> rows); see docs/design/audit.md.

    ``ranks``: how many ranks the training had (rank 0's manifest ``audit.ranks``); every rank below it, and every
    rank some replica recorded, is compared. ``complete``: the replicas whose training ended normally
    (:func:`~deviate_cb.audit.divergence.compare_audits`). ``failed``: ``(replica, rank) -> exception`` for the
    ranks whose fit stopped on one.
    """
    failed = failed or {}
    seen = {rank for by_rank in records.values() for rank, rows in by_rank.items() if rows}
    expected = sorted(seen | set(range(ranks)))
    found = []
    for rank in expected:
        present = {replica: list(by_rank[rank]) for replica, by_rank in records.items() if by_rank.get(rank)}
        missing = tuple(sorted(replica for replica in records if replica not in present))
        errors = tuple(sorted((replica, error) for (replica, k), error in failed.items() if k == rank))
        if len(present) < 2:
            found.append(RankAudit(rank, None, None, missing, errors))
            continue
        result = compare_audits(present, next_count=next_count, complete=[r for r in complete if r in present])
        found.append(RankAudit(rank, result, _position(result.first, present), missing, errors))
    positions = [r.position for r in found if r.position is not None]
    earliest = min(positions) if positions else None
    first = tuple(r.rank for r in found if earliest is not None and r.position == earliest)
    return RankedAudit(tuple(found), first)


def rank_comparison(
    replicas: Sequence[Any], *, next_count: int = 5, complete: Collection[int] = ()
) -> Optional[RankedAudit]:
    """:func:`compare_ranks` over the launcher's replicas (each with ``replica`` and ``run_dir``); ``None`` when the
    training was not distributed (no manifest declares ranks and no replica holds a record of a rank other than 0)."""
    from deviate_cb.store.audit import audit_metadata

    run_dirs = {replica.replica: replica.run_dir for replica in replicas}
    records, declared = read_rank_records(run_dirs)
    if declared <= 1 and all(set(by_rank) <= {0} for by_rank in records.values()):
        return None
    failed = {}
    for replica, by_rank in records.items():
        for rank in by_rank:
            error = audit_metadata(run_dirs[replica], rank).get("exception") if rank else None
            if error:
                failed[(replica, rank)] = error
    return compare_ranks(records, ranks=declared, next_count=next_count, complete=complete, failed=failed)


def with_rank_line(text: str, ranked: RankedAudit) -> str:
    """``deviate audit``'s text report with the ranks' :meth:`~RankedAudit.summary` after its first line, one
    line per rank.

    Example:
        >>> print(with_rank_line("deviate audit: replicas 0, 1 agree.\\nrecords: runs\\n", RankedAudit(())), end="")
        deviate audit: replicas 0, 1 agree.
          no rank was compared
        records: runs
    """
    head, _, rest = text.partition("\n")
    lines = [f"  {part};" for part in ranked.parts()]
    lines[-1] = lines[-1][:-1]
    return "\n".join([head, *lines, rest])


def read_rank_records(
    run_dirs: Mapping[int, Union[str, os.PathLike[str]]],
) -> tuple[dict[int, dict[int, list[dict[str, Any]]]], int]:
    """Every rank's audit rows in each replica's run directory (replica -> rank -> rows; an unreadable record
    counts as absent), and the largest number of ranks a manifest declares (``audit.ranks``; 0 when none does)."""
    from deviate_cb.errors import UsageError
    from deviate_cb.store.audit import audit_ranks, read_audit
    from deviate_cb.store.run_directory import RunDirectory

    records: dict[int, dict[int, list[dict[str, Any]]]] = {}
    declared = 0
    for replica, run_dir in run_dirs.items():
        try:
            audit = RunDirectory(Path(run_dir)).manifest().audit
        except (UsageError, OSError):
            audit = None
        if isinstance(audit, dict) and isinstance(audit.get("ranks"), int):
            declared = max(declared, audit["ranks"])
        records[replica] = {}
        for rank in audit_ranks(run_dir):
            try:
                records[replica][rank] = read_audit(run_dir, rank)
            except (FileNotFoundError, ValueError):
                continue
    return records, declared


def _position(
    divergence: Optional[Divergence], records: Mapping[int, Sequence[Mapping[str, Any]]]
) -> Optional[tuple[int, int]]:
    """``(step, seq)`` of ``divergence``: its position in the first replica that has its row."""
    if divergence is None:
        return None
    key = (divergence.step, divergence.kind, divergence.name, divergence.occurrence)
    for replica in divergence.replicas:
        for row in records.get(replica, ()):
            if (row["step"], row["kind"], row["name"], row["occurrence"]) == key:
                return int(row["step"]), int(row["seq"])
    return divergence.step, 0
