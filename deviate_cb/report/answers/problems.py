"""Problems with a study that its statistics alone would hide, each as one line naming where it is.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.manifest import LaunchEnd
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for k in range(3):
    ...     run = RunDirectory(run_path(root, "mlp", "algo", k))
    ...     _ = run.record(LaunchEnd(status="completed"))
    ...     _ = run.metrics().append({"step": [9], "epoch": [0], "stage": ["val"], "scope": ["epoch"],
    ...                               "name": ["val_acc"], "value": [0.8], "wall_time": [float(k)]})
    >>> (problem,) = study_problems(root)
    >>> problem.kind, problem.replicas
    ('identical_replicas', (0, 1, 2))
    >>> print(problem.line())  # doctest: +ELLIPSIS
    experiment=mlp variant=algo: replicas 0, 1, 2 came out bit-identical on every metric: the seeds did not ...
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.errors import DeviateError
from deviate_cb.report.answers.bit_identity import metric_problems
from deviate_cb.report.answers.findings import (
    KINDS,
    GroupKey,
    Problem,
    groups_of,
    groups_text,
    make_problem,
    one_line,
    seeds_differ,
)
from deviate_cb.report.answers.shared_paths import outside_problems
from deviate_cb.report.reading.runs import RunRecord, read_runs, run_directories
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import MANIFEST_FILE, read_run_manifest

__all__ = ["find_problems", "study_problems"]

_NO_INJECTION_NOTE = (
    "the command started no Python process deviate-cb could bootstrap, so no seed, determinism switch or "
    "callback reached the training"
)
_MAX_CALLS = 3  # seeding calls named in a project_seeds_kept line


def study_problems(
    path: Union[str, os.PathLike[str]], *, values: Optional[Mapping[tuple[str, str, str], Mapping[str, float]]] = None
) -> list[Problem]:
    """The problems of every completed run under ``path`` (a study, experiment or variant directory).

    Reads the manifests only (and a metrics file's footer where its manifest holds no current summary). A
    directory that does not exist or holds no runs has no problems; a manifest written by a newer deviate-cb
    is left out.

    Args:
        path: The directory.
        values: As for :func:`find_problems`.
    """
    try:
        directories = run_directories(Path(path)) if os.path.isdir(path) else []
    except OSError:
        return []
    runs: list[RunRecord] = []
    for directory in directories:
        try:
            runs += read_runs([directory])
        except (DeviateError, OSError, ValueError):
            continue  # a newer manifest: this reader cannot tell what it means
    return find_problems(runs, values=values)


def find_problems(
    runs: Iterable[RunRecord],
    *,
    values: Optional[Mapping[tuple[str, str, str], Mapping[str, float]]] = None,
    rows: Iterable[Any] = (),
) -> list[Problem]:
    """The problems of the completed runs among ``runs``, one per cause (a cause found in several groups is one
    problem naming them all: :attr:`Problem.groups`), sorted by the experiment and variant of their first group,
    kind and replicas.

    Args:
        runs: The runs as the report read them (:func:`~deviate_cb.report.reading.runs.find_runs`,
            ``Report.completed``). Runs that did not complete, or whose ``replica`` is not a number, are left out.
        values: ``(experiment, variant, replica) -> {metric: value}``: the values the caller read, compared for
            runs whose manifest and metrics file hold no series summary.
        rows: The report's rows (objects with ``experiment``, ``variant``, ``metric``, ``n`` and ``std``): for a
            group where fewer than two replicas could be compared run by run, a std of exactly 0 on every
            metric of a seeded variant (or above 0 on some metric of ``control``) is a problem too.
    """
    groups: dict[GroupKey, list[tuple[int, RunRecord]]] = {}
    for run in runs:
        if not isinstance(run, RunRecord) or not run.completed or not run.replica.isdigit():
            continue
        groups.setdefault((run.experiment, run.variant), []).append((int(run.replica), run))
    by_group: dict[GroupKey, list[Any]] = {}
    for row in rows:
        by_group.setdefault((str(getattr(row, "experiment", "")), str(getattr(row, "variant", ""))), []).append(row)
    read = {
        key: [(replica, run, _manifest(run)) for replica, run in sorted(m, key=lambda m: m[0])]
        for key, m in groups.items()
    }
    problems = _manifest_problems(read) + outside_problems(read)
    for (experiment, variant), manifests in read.items():
        problems += metric_problems(
            experiment, variant, manifests, values or {}, by_group.get((experiment, variant), [])
        )
    return sorted(problems, key=lambda p: (p.experiment, p.variant, KINDS.index(p.kind), p.replicas, p.message))


# -- what the manifests say ----------------------------------------------------------------------------------


def _manifest(run: RunRecord) -> RunManifest:
    try:
        return read_run_manifest(os.path.join(run.path, MANIFEST_FILE))
    except (DeviateError, OSError, ValueError):
        return RunManifest.from_json({})


def _manifest_problems(groups: Mapping[GroupKey, Sequence[tuple[int, RunRecord, RunManifest]]]) -> list[Problem]:
    """What the manifests recorded, one problem per kind and text (texts alike but for their numbers are one),
    across the groups that recorded it."""
    # (kind, key) -> [(group, replica, text)]: texts alike but for their numbers share a key
    found: dict[tuple[str, str], list[tuple[GroupKey, int, str]]] = {}
    for group, manifests in sorted(groups.items()):
        seeded = seeds_differ(group[1])
        for replica, _, manifest in manifests:
            for text in _determinism_problems(manifest):
                kind = "seeds_not_in_effect" if "seed" in text.lower() else "determinism_not_in_effect"
                if "--keep-project-determinism" in text:
                    kind = "project_determinism_kept"
                found.setdefault((kind, re.sub(r"\d+", "#", text)), []).append((group, replica, text))
            if manifest.injection == "none":
                note = manifest.injection_note
                text = one_line(note) if note is not None and note.strip() else _NO_INJECTION_NOTE
                found.setdefault(("no_injection", text), []).append((group, replica, text))
            calls = _kept_seeding(manifest) if seeded else None
            if calls is not None:
                found.setdefault(("project_seeds_kept", calls), []).append((group, replica, calls))
            for text in _recording_problems(manifest):
                found.setdefault(("recording_failed", re.sub(r"\d+", "#", text)), []).append((group, replica, text))
    problems = []
    for (kind, _), entries in found.items():
        members = groups_of((group, replica) for group, replica, _ in entries)
        texts = [text for _, _, text in entries]
        text = texts[0]
        if len(set(texts)) > 1:
            (experiment, variant), replica, _ = entries[0]
            which = (
                f"replica {replica}"
                if len(members) == 1
                else f"experiment={experiment} variant={variant} replica {replica}"
            )
            text = f"{text} ({which}; the others alike with their own numbers)"
        head = groups_text(members)
        if kind == "seeds_not_in_effect":
            message = f"{head}: the seed was not in effect: {text}"
        elif kind == "determinism_not_in_effect":
            message = f"{head}: a determinism switch was not in effect: {text}"
        elif kind == "project_determinism_kept":
            message = f"{head}: the variant's determinism was not in effect: {text}"
        elif kind == "recording_failed":
            message = f"{head}: the callback could not record everything (the training went on): {text}"
        elif kind == "no_injection":
            message = (
                f"{head}: {text}" if text.startswith("no DeviateCallback") else f"{head}: nothing was injected: {text}"
            )
        else:
            message = (
                f"{head}: the project seeded itself ({text}) and --keep-project-seeds kept its seeds: "
                "seed variance is suppressed"
            )
        problems.append(make_problem(kind, members, message))
    return problems


def _recording_problems(manifest: RunManifest) -> list[str]:
    """The manifest's ``problems`` (recording errors after training started, :mod:`deviate_cb.capture.guard`)."""
    listed = manifest.problems
    if listed is None:
        return []
    texts = []
    for entry in listed:
        if isinstance(entry, Mapping) and isinstance(entry.get("where"), str):
            texts.append(one_line(f"{entry['where']}: {entry.get('error', '')}"))
    return texts


def _determinism_problems(manifest: RunManifest) -> list[str]:
    record = manifest.determinism
    listed = record.get("problems") if record is not None else None
    if not isinstance(listed, list):
        return []
    return [one_line(text) for text in listed if isinstance(text, str) and text.strip()]


def _kept_seeding(manifest: RunManifest) -> Optional[str]:
    """The seeding calls the project made and kept, as ``lightning.seed_everything(42)``, or ``None``."""
    seeding = manifest.seeding
    if seeding is None or seeding.get("take_over") is not False:
        return None
    calls = seeding.get("calls")
    calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    more = seeding.get("more")
    more = more if isinstance(more, int) and not isinstance(more, bool) and more > 0 else 0
    more += max(0, len(calls) - _MAX_CALLS)
    if not calls and not more:
        return None
    parts = []
    for call in calls[:_MAX_CALLS]:
        name = str(call.get("call") or "a seeding call")
        asked, applied = call.get("asked"), call.get("applied")
        arguments = "" if asked is None else str(asked)
        if applied is not None and applied != asked:
            arguments += f" -> {applied}"
        count = call.get("count")
        times = f" x{count}" if isinstance(count, int) and not isinstance(count, bool) and count > 1 else ""
        parts.append(f"{name}({arguments}){times}")
    if more:
        parts.append(f"{more} more call{'s' * (more != 1)}")
    return one_line(", ".join(parts))
