"""Problems of paths replicas shared outside their run directories: outputs overwritten, files read of another's.

Example:
    >>> outside_problems({})
    []
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import DeviateError
from deviate_cb.report.answers.findings import (
    MAX_NAMED,
    GroupKey,
    Problem,
    groups_of,
    groups_text,
    make_problem,
    one_line,
)
from deviate_cb.report.reading.runs import RunRecord
from deviate_cb.store.ledger import read_ledger
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import MANIFEST_FILE, read_run_manifest

__all__ = ["outside_problems"]

_Writer = tuple[str, str, str]  # experiment, variant, replica


def outside_problems(
    groups: Mapping[GroupKey, Sequence[tuple[int, RunRecord, RunManifest]]],
) -> list[Problem]:
    """``shared_outputs`` and ``read_other_replica``: what the groups' replicas and every other replica of the
    study (any group, any status, its current attempt) recorded in the ledger and the manifests."""
    writes: dict[str, set[_Writer]] = {}
    reads: dict[_Writer, dict[str, str]] = {}  # reader -> path -> writer
    attempts: dict[tuple[Path, _Writer], Optional[int]] = {}
    roots = {
        Path(run.path).parents[2]
        for members in groups.values()
        for _, run, _ in members
        if len(Path(run.path).parents) > 2
    }
    for root in sorted(roots):
        for path, entries in read_ledger(root).items():
            for entry in entries:
                who = (str(entry.get("experiment")), str(entry.get("variant")), str(entry.get("replica")))
                if not _current(root, who, entry.get("attempt"), attempts):
                    continue
                if entry.get("op", "write") == "write":
                    writes.setdefault(path, set()).add(who)
                elif isinstance(entry.get("written_by"), str):
                    reads.setdefault(who, {})[path] = one_line(entry["written_by"])
    for (experiment, variant), members in groups.items():
        for replica, _, manifest in members:
            who = (experiment, variant, str(replica))
            listed = manifest.outside_writes
            paths = listed.get("paths") if listed is not None else None
            for path in paths if isinstance(paths, list) else []:
                if isinstance(path, str):
                    writes.setdefault(path, set()).add(who)
            for entry in manifest.outside_reads or []:
                if (
                    isinstance(entry, Mapping)
                    and isinstance(entry.get("path"), str)
                    and isinstance(entry.get("written_by"), str)
                ):
                    reads.setdefault(who, {}).setdefault(entry["path"], one_line(entry["written_by"]))
    isolated = {key for key, members in groups.items() if members and all(m.isolate is True for *_, m in members)}
    return _shared_problems(writes, set(groups), isolated) + _read_problems(reads, set(groups), isolated)


def _advice(touched: Iterable[GroupKey], isolated: set[GroupKey]) -> str:
    """What to do about a shared path: ``--isolate``, unless every group it touches already ran with it (then the
    path is one isolation cannot make private: an absolute path, or a file written without Python's ``open``)."""
    if set(touched) <= isolated:
        return (
            "they ran with --isolate, which cannot make these paths private (an absolute path, or a file written "
            "by compiled code); point the paths into {run_dir}"
        )
    return "rerun with --isolate, or point the paths into {run_dir}"


def _shared_problems(writes: Mapping[str, set[_Writer]], read: set[GroupKey], isolated: set[GroupKey]) -> list[Problem]:
    """One ``shared_outputs`` problem per set of groups whose replicas wrote the same paths (one group's own
    replicas, or replicas of several), when one of the groups read is among them."""
    causes: dict[tuple[GroupKey, ...], dict[str, set[tuple[GroupKey, int]]]] = {}
    for path, writers in writes.items():
        members = {((e, v), int(k)) for e, v, k in writers if k.isdigit()}
        if len(members) > 1:
            touched = tuple(sorted({group for group, _ in members}))
            causes.setdefault(touched, {})[path] = members
    problems = []
    for touched, paths in sorted(causes.items()):
        if not read & set(touched):
            continue
        groups = groups_of(m for members in paths.values() for m in members)
        where = _paths_text(sorted(paths))
        message = (
            f"{groups_text(groups)} wrote the same paths outside their run directories ({where}): "
            f"they overwrote each other's files; {_advice(touched, isolated)}"
        )
        problems.append(make_problem("shared_outputs", groups, message))
    return problems


def _read_problems(
    reads: Mapping[_Writer, Mapping[str, str]], read: set[GroupKey], isolated: set[GroupKey]
) -> list[Problem]:
    """One ``read_other_replica`` problem per set of paths read, with every group's replicas that read them, when
    one of those groups is among the groups read."""
    causes: dict[tuple[str, ...], dict[tuple[GroupKey, int], Mapping[str, str]]] = {}
    for (experiment, variant, replica), got in reads.items():
        if replica.isdigit() and (experiment, variant) in read and got:
            causes.setdefault(tuple(sorted(got)), {})[((experiment, variant), int(replica))] = got
    problems = []
    for _, readers in sorted(causes.items()):
        groups = groups_of(readers)
        pairs = sorted({(path, writer) for got in readers.values() for path, writer in got.items()})
        named = "; ".join(f"{path} written by {writer}" for path, writer in pairs[:MAX_NAMED])
        named += f"; {len(pairs) - MAX_NAMED} more" if len(pairs) > MAX_NAMED else ""
        message = (
            f"{groups_text(groups)} read files that another replica wrote outside the run directories ({named}): a "
            "result may depend on another replica's run (a checkpoint it resumed from); "
            f"{_advice({group for group, _ in readers}, isolated)}"
        )
        problems.append(make_problem("read_other_replica", groups, message))
    return problems


def _current(root: Path, who: _Writer, attempt: Any, attempts: dict[tuple[Path, _Writer], Optional[int]]) -> bool:
    """Whether a ledger entry of replica ``who`` belongs to its current attempt (its run directory is there and its
    manifest records that attempt; an entry without one counts)."""
    if (root, who) not in attempts:
        try:
            manifest = read_run_manifest(
                os.path.join(root, f"experiment={who[0]}", f"variant={who[1]}", f"replica={who[2]}", MANIFEST_FILE)
            )
        except (DeviateError, OSError, ValueError):
            manifest = RunManifest.from_json({})
        attempts[(root, who)] = None if manifest.is_empty else (manifest.attempt if manifest.attempt is not None else 1)
    current = attempts[(root, who)]
    return current is not None and (not isinstance(attempt, int) or attempt == current)


def _paths_text(paths: Sequence[str]) -> str:
    text = ", ".join(paths[:MAX_NAMED])
    return text + (f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else "")
