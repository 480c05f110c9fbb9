"""Problems with a study that its statistics alone would hide, each as one line naming where it is.

A study can look healthy and be wrong: replicas meant to differ by their seeds came out bit-identical (the
project reseeded itself), control replicas meant to be identical differ, the seed or a determinism switch was
not in effect, the project's own seeds were kept, or nothing could be injected into a command's processes.
:func:`find_problems` finds these in the runs the report already read (:class:`~deviate_cb.report.runs.RunRecord`:
their manifests and the manifests' copies of the per-series summaries; a metrics file's footer is read only
where the manifest holds no current copy); :func:`study_problems` does the same for a study, experiment or
variant directory. Only completed replicas are looked at, and nothing here raises on a missing field, a
malformed manifest or a run without metrics: what cannot be read is left out.

The kinds (:data:`KINDS`):

- ``seeds_not_in_effect``, ``determinism_not_in_effect``: the manifest's ``determinism.problems``, one
  :class:`Problem` per text (texts that differ only in their numbers, such as each replica's own seed, are
  grouped), listing the replicas that recorded it.
- ``identical_replicas``: replicas of a variant whose seeds differ (``algo``, ``algo+impl``) whose every series
  summary (count, last value and its position, largest, smallest, sum) is bit-identical; each set of identical
  replicas is one problem. Where fewer than two replicas of the group can be compared that way, the metric
  values the caller read (``values``) are compared, or else the report's rows say it (std exactly 0 on every
  metric).
- ``control_differs``: ``control`` replicas that are not all bit-identical, with the metrics that differ.
- ``project_seeds_kept``: the manifest's ``seeding`` says the project seeded itself and its seeds were kept
  (``take_over`` false), in a variant whose seeds differ.
- ``project_determinism_kept``: a ``determinism.problems`` text saying that the project switched determinism
  itself against its variant and ``--keep-project-determinism`` kept it (``run.json`` ``determinism_calls``).
- ``no_injection``: the manifest's ``injection`` is ``"none"`` (its ``injection_note`` says why).
- ``recording_failed``: the manifest's ``problems``: what the callback could not record once training had
  started (:mod:`deviate_cb.capture.guard`), each ``where: error`` text grouped across replicas.
- ``shared_outputs``: paths outside the run directories that two or more replicas of the study wrote (in this
  group or another), from the study's ledger (:mod:`deviate_cb.store.ledger`, entries of each replica's current
  attempt) and the manifests' ``outside_writes``: they overwrote each other's files.
- ``read_other_replica``: a replica read a file outside its run directory that another replica wrote (the
  ledger's reads and the manifests' ``outside_reads``): its result may depend on another replica's run.

Example:
    >>> import tempfile
    >>> from deviate_cb.store.run_directory import RunDirectory, run_path
    >>> root = Path(tempfile.mkdtemp())
    >>> for k in range(3):
    ...     run = RunDirectory(run_path(root, "mlp", "algo", k))
    ...     _ = run.update_manifest(status="completed")
    ...     _ = run.metrics().append({"step": [9], "epoch": [0], "stage": ["val"], "scope": ["epoch"],
    ...                               "name": ["val_acc"], "value": [0.8], "wall_time": [float(k)]})
    >>> (problem,) = study_problems(root)
    >>> problem.kind, problem.replicas
    ('identical_replicas', (0, 1, 2))
    >>> print(format_problem(problem))  # doctest: +ELLIPSIS
    experiment=mlp variant=algo: replicas 0, 1, 2 came out bit-identical on every metric: the seeds did not ...
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from deviate_cb.errors import DeviateError
from deviate_cb.report.metrics.names import display_names
from deviate_cb.report.runs import RunRecord, read_runs, run_directories
from deviate_cb.report.text import printable, strip_styles
from deviate_cb.store.bounded_read import check_parquet
from deviate_cb.store.footer_summary import footer_summary, valid_summary
from deviate_cb.store.ledger import read_ledger
from deviate_cb.store.run_directory import MANIFEST_FILE, METRICS_FILE, read_manifest_file
from deviate_cb.variants import VARIANTS

__all__ = ["KINDS", "GroupReplicas", "Problem", "find_problems", "format_problem", "replica_list", "study_problems"]

KINDS = (
    "recording_failed",
    "no_injection",
    "seeds_not_in_effect",
    "identical_replicas",
    "project_seeds_kept",
    "project_determinism_kept",
    "determinism_not_in_effect",
    "control_differs",
    "shared_outputs",
    "read_other_replica",
)
IDENTICAL_REASON = "the seeds did not reach the training (the project may seed itself; see run.json 'seeding')"
_NO_INJECTION_NOTE = (
    "the command started no Python process deviate-cb could bootstrap, so no seed, determinism switch or "
    "callback reached the training"
)
_MAX_METRICS = 5  # metrics named in a control_differs line
_MAX_CALLS = 3  # seeding calls named in a project_seeds_kept line
_MAX_TEXT = 300  # characters kept of a recorded text (a problem, a note)
_MAX_NAMED = 5  # paths and other replicas named in a shared_outputs or read_other_replica line

# A run's metrics as compared: ("summary" | "values", ((key, exact value...), ...)) with every item as text
_Fingerprint = tuple[str, tuple[tuple[str, ...], ...]]
GroupKey = tuple[str, str]


@dataclass(frozen=True)
class GroupReplicas:
    """One (experiment, variant) group a problem touches, and its replicas concerned (sorted)."""

    experiment: str
    variant: str
    replicas: tuple[int, ...]

    def label(self) -> str:
        """``experiment=E variant=V``, as the messages name a group."""
        return f"experiment={self.experiment} variant={self.variant}"


@dataclass(frozen=True)
class Problem:
    """One problem: one cause, named once, with every (experiment, variant) group and replica it touches.

    Most kinds belong to one group; a cause found in several groups (the same path written by replicas of two
    experiments, the same determinism text in two variants) is one problem whose ``groups`` lists them all.

    Attributes:
        experiment: The experiment of the group it is listed under (the first of ``groups``).
        variant: The variant of that group.
        kind: One of :data:`KINDS`.
        replicas: That group's replicas it concerns, sorted.
        message: The line shown to users; it names every group and replica (long lists cut, "and N more").
        groups: Every group it touches with its replicas, sorted; left out, the one group above.

    Example:
        >>> problem = Problem("mlp", "algo", "no_injection", (0,), "experiment=mlp variant=algo: replica 0: x")
        >>> problem.groups
        (GroupReplicas(experiment='mlp', variant='algo', replicas=(0,)),)
    """

    experiment: str
    variant: str
    kind: str
    replicas: tuple[int, ...]
    message: str
    groups: tuple[GroupReplicas, ...] = ()

    def __post_init__(self) -> None:
        if not self.groups:
            object.__setattr__(self, "groups", (GroupReplicas(self.experiment, self.variant, self.replicas),))

    def line(self) -> str:
        """The message as one line (:func:`format_problem`)."""
        return format_problem(self)

    def concerns(self, experiment: str, variant: str) -> bool:
        """Whether the problem touches the group (``experiment``, ``variant``)."""
        return any((g.experiment, g.variant) == (experiment, variant) for g in self.groups)


def _problem(kind: str, groups: Sequence[GroupReplicas], message: str) -> Problem:
    first = groups[0]
    return Problem(first.experiment, first.variant, kind, first.replicas, message, tuple(groups))


def _groups_text(groups: Sequence[GroupReplicas]) -> str:
    """Who a problem touches, as its message starts: ``experiment=E variant=V: replicas 0, 1`` for one group;
    ``experiment=E variant=V (replicas 0, 1) and experiment=F variant=W (replica 0)`` for several, the groups past
    the fifth counted (``and 3 more groups (7 replicas)``).

    Example:
        >>> _groups_text([GroupReplicas("a", "algo", (0, 1))])
        'experiment=a variant=algo: replicas 0, 1'
        >>> _groups_text([GroupReplicas("a", "algo", (0, 1)), GroupReplicas("b", "control", (2,))])
        'experiment=a variant=algo (replicas 0, 1) and experiment=b variant=control (replica 2)'
    """
    if len(groups) == 1:
        return f"{groups[0].label()}: {replica_list(groups[0].replicas)}"
    named = [f"{g.label()} ({replica_list(g.replicas)})" for g in groups[:_MAX_NAMED]]
    rest = groups[_MAX_NAMED:]
    if rest:
        replicas = sum(len(g.replicas) for g in rest)
        named.append(f"{len(rest)} more group{'s' * (len(rest) > 1)} ({replicas} replica{'s' * (replicas > 1)})")
    return ", ".join(named[:-1]) + " and " + named[-1]


def format_problem(problem: Problem) -> str:
    """The one line shown to users for ``problem``: its message, whitespace collapsed, other control characters
    escaped (:func:`~deviate_cb.report.text.printable`: a manifest's text may hold terminal escapes).

    Example:
        >>> format_problem(Problem("mlp", "algo", "no_injection", (0,), "experiment=mlp variant=algo: replica 0:\\n x"))
        'experiment=mlp variant=algo: replica 0: x'
        >>> print(format_problem(Problem("mlp", "algo", "no_injection", (0,), "replica 0: \\x1b[2J")))
        replica 0: \\x1b[2J
    """
    return printable(" ".join(problem.message.split()))


def replica_list(replicas: Iterable[int]) -> str:
    """``replica 3`` or ``replicas 0, 1, 2``; runs of four or more consecutive replicas as ``0-9``.

    Example:
        >>> replica_list([2]), replica_list([2, 0, 1]), replica_list([0, 1, 2, 3, 4, 7])
        ('replica 2', 'replicas 0, 1, 2', 'replicas 0-4, 7')
    """
    numbers = sorted(set(replicas))
    if len(numbers) == 1:
        return f"replica {numbers[0]}"
    parts: list[str] = []
    start = 0
    while start < len(numbers):
        end = start
        while end + 1 < len(numbers) and numbers[end + 1] == numbers[end] + 1:
            end += 1
        if end - start >= 3:
            parts.append(f"{numbers[start]}-{numbers[end]}")
        else:
            parts.extend(str(n) for n in numbers[start : end + 1])
        start = end + 1
    return "replicas " + ", ".join(parts)


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
        runs: The runs as the report read them (:func:`~deviate_cb.report.runs.find_runs`, ``Report.completed``).
            Runs that did not complete, or whose ``replica`` is not a number, are left out.
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
    problems = _manifest_problems(read) + _outside_problems(read)
    for (experiment, variant), manifests in read.items():
        problems += _metric_problems(
            experiment, variant, manifests, values or {}, by_group.get((experiment, variant), [])
        )
    return sorted(problems, key=lambda p: (p.experiment, p.variant, KINDS.index(p.kind), p.replicas, p.message))


# -- what the manifests say ----------------------------------------------------------------------------------


def _manifest(run: RunRecord) -> dict[str, Any]:
    try:
        manifest = read_manifest_file(os.path.join(run.path, MANIFEST_FILE))
    except (DeviateError, OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def _manifest_problems(groups: Mapping[GroupKey, Sequence[tuple[int, RunRecord, dict[str, Any]]]]) -> list[Problem]:
    """What the manifests recorded, one problem per kind and text (texts alike but for their numbers are one),
    across the groups that recorded it."""
    # (kind, key) -> [(group, replica, text)]: texts alike but for their numbers share a key
    found: dict[tuple[str, str], list[tuple[GroupKey, int, str]]] = {}
    for group, manifests in sorted(groups.items()):
        seeded = _seeds_differ(group[1])
        for replica, _, manifest in manifests:
            for text in _determinism_problems(manifest):
                kind = "seeds_not_in_effect" if "seed" in text.lower() else "determinism_not_in_effect"
                if "--keep-project-determinism" in text:
                    kind = "project_determinism_kept"
                found.setdefault((kind, re.sub(r"\d+", "#", text)), []).append((group, replica, text))
            injection = manifest.get("injection")
            if injection == "none":
                note = manifest.get("injection_note")
                text = _one_line(note) if isinstance(note, str) and note.strip() else _NO_INJECTION_NOTE
                found.setdefault(("no_injection", text), []).append((group, replica, text))
            calls = _kept_seeding(manifest) if seeded else None
            if calls is not None:
                found.setdefault(("project_seeds_kept", calls), []).append((group, replica, calls))
            for text in _recording_problems(manifest):
                found.setdefault(("recording_failed", re.sub(r"\d+", "#", text)), []).append((group, replica, text))
    problems = []
    for (kind, _), entries in found.items():
        touched = _touched((group, replica) for group, replica, _ in entries)
        texts = [text for _, _, text in entries]
        text = texts[0]
        if len(set(texts)) > 1:
            (experiment, variant), replica, _ = entries[0]
            which = (
                f"replica {replica}"
                if len(touched) == 1
                else f"experiment={experiment} variant={variant} replica {replica}"
            )
            text = f"{text} ({which}; the others alike with their own numbers)"
        head = _groups_text(touched)
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
        problems.append(_problem(kind, touched, message))
    return problems


def _touched(members: Iterable[tuple[GroupKey, int]]) -> list[GroupReplicas]:
    """The groups of ``(group, replica)`` pairs, each with its replicas, sorted."""
    by_group: dict[GroupKey, set[int]] = {}
    for group, replica in members:
        by_group.setdefault(group, set()).add(replica)
    return [GroupReplicas(e, v, tuple(sorted(replicas))) for (e, v), replicas in sorted(by_group.items())]


def _recording_problems(manifest: Mapping[str, Any]) -> list[str]:
    """The manifest's ``problems`` (recording errors after training started, :mod:`deviate_cb.capture.guard`)."""
    listed = manifest.get("problems")
    if not isinstance(listed, list):
        return []
    texts = []
    for entry in listed:
        if isinstance(entry, Mapping) and isinstance(entry.get("where"), str):
            texts.append(_one_line(f"{entry['where']}: {entry.get('error', '')}"))
    return texts


def _determinism_problems(manifest: Mapping[str, Any]) -> list[str]:
    record = manifest.get("determinism")
    listed = record.get("problems") if isinstance(record, dict) else None
    if not isinstance(listed, list):
        return []
    return [_one_line(text) for text in listed if isinstance(text, str) and text.strip()]


def _kept_seeding(manifest: Mapping[str, Any]) -> Optional[str]:
    """The seeding calls the project made and kept, as ``lightning.seed_everything(42)``, or ``None``."""
    seeding = manifest.get("seeding")
    if not isinstance(seeding, dict) or seeding.get("take_over") is not False:
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
    return _one_line(", ".join(parts))


def _one_line(text: str) -> str:
    """A recorded text on one line, its colours dropped (a stored message), cut to :data:`_MAX_TEXT`."""
    line = " ".join(strip_styles(text).split())
    return line if len(line) <= _MAX_TEXT else line[: _MAX_TEXT - 3] + "..."


def _seeds_differ(variant: str) -> bool:
    known = VARIANTS.get(variant)
    return known is not None and known.seed_per_replica


# -- what replicas wrote outside their run directories --------------------------------------------------------

_Writer = tuple[str, str, str]  # experiment, variant, replica


def _outside_problems(
    groups: Mapping[GroupKey, Sequence[tuple[int, RunRecord, dict[str, Any]]]],
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
                    reads.setdefault(who, {})[path] = _one_line(entry["written_by"])
    for (experiment, variant), members in groups.items():
        for replica, _, manifest in members:
            who = (experiment, variant, str(replica))
            listed = manifest.get("outside_writes")
            paths = listed.get("paths") if isinstance(listed, Mapping) else None
            for path in paths if isinstance(paths, list) else []:
                if isinstance(path, str):
                    writes.setdefault(path, set()).add(who)
            for entry in manifest.get("outside_reads") or [] if isinstance(manifest.get("outside_reads"), list) else []:
                if (
                    isinstance(entry, Mapping)
                    and isinstance(entry.get("path"), str)
                    and isinstance(entry.get("written_by"), str)
                ):
                    reads.setdefault(who, {}).setdefault(entry["path"], _one_line(entry["written_by"]))
    isolated = {
        key for key, members in groups.items() if members and all(m.get("isolate") is True for *_, m in members)
    }
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
        groups = _touched(m for members in paths.values() for m in members)
        where = _paths_text(sorted(paths))
        message = (
            f"{_groups_text(groups)} wrote the same paths outside their run directories ({where}): "
            f"they overwrote each other's files; {_advice(touched, isolated)}"
        )
        problems.append(_problem("shared_outputs", groups, message))
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
        groups = _touched(readers)
        pairs = sorted({(path, writer) for got in readers.values() for path, writer in got.items()})
        named = "; ".join(f"{path} written by {writer}" for path, writer in pairs[:_MAX_NAMED])
        named += f"; {len(pairs) - _MAX_NAMED} more" if len(pairs) > _MAX_NAMED else ""
        message = (
            f"{_groups_text(groups)} read files that another replica wrote outside the run directories ({named}): a "
            "result may depend on another replica's run (a checkpoint it resumed from); "
            f"{_advice({group for group, _ in readers}, isolated)}"
        )
        problems.append(_problem("read_other_replica", groups, message))
    return problems


def _current(root: Path, who: _Writer, attempt: Any, attempts: dict[tuple[Path, _Writer], Optional[int]]) -> bool:
    """Whether a ledger entry of replica ``who`` belongs to its current attempt (its run directory is there and its
    manifest records that attempt; an entry without one counts)."""
    if (root, who) not in attempts:
        try:
            manifest = read_manifest_file(
                os.path.join(root, f"experiment={who[0]}", f"variant={who[1]}", f"replica={who[2]}", MANIFEST_FILE)
            )
        except (DeviateError, OSError, ValueError):
            manifest = None
        recorded = manifest.get("attempt", 1) if isinstance(manifest, dict) and manifest else None
        attempts[(root, who)] = recorded if isinstance(recorded, int) else (1 if manifest else None)
    current = attempts[(root, who)]
    return current is not None and (not isinstance(attempt, int) or attempt == current)


def _paths_text(paths: Sequence[str]) -> str:
    text = ", ".join(paths[:_MAX_NAMED])
    return text + (f" and {len(paths) - _MAX_NAMED} more" if len(paths) > _MAX_NAMED else "")


# -- what the metrics say ------------------------------------------------------------------------------------


def _metric_problems(
    experiment: str,
    variant: str,
    manifests: Sequence[tuple[int, RunRecord, dict[str, Any]]],
    values: Mapping[tuple[str, str, str], Mapping[str, float]],
    rows: Sequence[Any],
) -> list[Problem]:
    seeded, control = _seeds_differ(variant), variant == "control"
    if not (seeded or control) or len(manifests) < 2:
        return []
    where = f"experiment={experiment} variant={variant}"
    prints: dict[int, _Fingerprint] = {}
    for replica, run, manifest in manifests:
        fingerprint = _fingerprint(run, manifest, values.get((experiment, variant, run.replica)))
        if fingerprint is not None:
            prints[replica] = fingerprint
    kinds = [kind for kind, _ in prints.values()]
    if len(set(kinds)) > 1:  # summaries and values are not comparable: keep the kind most runs have
        keep = max(("summary", "values"), key=kinds.count)
        prints = {replica: fingerprint for replica, fingerprint in prints.items() if fingerprint[0] == keep}
    everyone = tuple(replica for replica, _, _ in manifests)
    hint = "" if seeded else audit_hint(manifests)
    if len(prints) < 2:
        return _row_problems(experiment, variant, everyone, rows, seeded, hint)
    if seeded:
        classes: dict[_Fingerprint, list[int]] = {}
        for replica, fingerprint in prints.items():
            classes.setdefault(fingerprint, []).append(replica)
        return [
            Problem(
                experiment,
                variant,
                "identical_replicas",
                tuple(same),
                f"{where}: {replica_list(same)} came out bit-identical on every metric: {IDENTICAL_REASON}",
            )
            for same in sorted(sorted(r) for r in classes.values() if len(r) > 1)
        ]
    differing = _differing_metrics(prints)
    if not differing:
        return []
    replicas = tuple(sorted(prints))
    message = _control_message(where, replicas, differing) + hint
    return [Problem(experiment, variant, "control_differs", replicas, message)]


def _row_problems(
    experiment: str, variant: str, replicas: tuple[int, ...], rows: Sequence[Any], seeded: bool, hint: str = ""
) -> list[Problem]:
    """From the report's rows, for a group whose runs could not be compared one by one."""
    spread: list[tuple[str, float]] = []
    for row in rows:
        n, std = getattr(row, "n", 0), getattr(row, "std", math.nan)
        if isinstance(n, int) and n >= 2 and isinstance(std, (int, float)):
            spread.append((str(getattr(row, "metric", "?")), float(std)))
    if not spread:
        return []
    where = f"experiment={experiment} variant={variant}"
    if seeded and all(std == 0.0 for _, std in spread):
        message = f"{where}: {replica_list(replicas)} came out identical on every metric (std 0): {IDENTICAL_REASON}"
        return [Problem(experiment, variant, "identical_replicas", replicas, message)]
    differing = sorted(metric for metric, std in spread if std != 0.0 and not math.isnan(std))
    if not seeded and differing:
        message = _control_message(where, replicas, differing) + hint
        return [Problem(experiment, variant, "control_differs", replicas, message)]
    return []


def audit_hint(manifests: Sequence[tuple[int, RunRecord, Mapping[str, Any]]]) -> str:
    """What to add to a ``control_differs`` line: where the replicas' audit records first differ, when they have
    them (``audit.parquet``), else the ``deviate audit`` command that finds it.

    Example:
        >>> run = RunRecord(Path("/nonexistent/replica=0"), "e", "control", "0", "completed")
        >>> audit_hint([(0, run, {"trainer": "train.py:main"})])
        '; find where with `deviate audit --trainer train.py:main`'
    """
    from deviate_cb.audit.divergence import compare_audits
    from deviate_cb.store.audit import AUDIT_FILE, read_audit

    records = {}
    for replica, run, _ in manifests:
        if (run.path / AUDIT_FILE).is_file():
            with contextlib.suppress(OSError, ValueError):
                records[replica] = read_audit(run.path)
    records = {replica: rows for replica, rows in records.items() if rows}
    if len(records) >= 2:
        first = compare_audits(records).first
        if first is not None:
            return (
                f"; their audit records first differ at training step {first.step}: {first.kind} "
                f"`{first.name}` (replicas {', '.join(map(str, first.replicas))})"
            )
    manifest = manifests[0][2] if manifests else {}
    trainer, command = manifest.get("trainer"), manifest.get("command")
    if isinstance(trainer, str) and trainer:
        suggestion = f"deviate audit --trainer {shlex.quote(trainer)}"
    elif isinstance(command, list) and command and all(isinstance(word, str) for word in command):
        suggestion = f"deviate audit -- {shlex.join(command)}"
    else:
        suggestion = "deviate audit"
    return f"; find where with `{suggestion}`"


def _control_message(where: str, replicas: tuple[int, ...], metrics: Sequence[str]) -> str:
    named = ", ".join(metrics[:_MAX_METRICS])
    if len(metrics) > _MAX_METRICS:
        named += f", ... ({len(metrics)} in all)"
    label = "metric" if len(metrics) == 1 else "metrics"
    return (
        f"{where}: {replica_list(replicas)}: control replicas differ ({label} {named}): "
        "something nondeterministic is not controlled"
    )


def _fingerprint(
    run: RunRecord, manifest: Mapping[str, Any], values: Optional[Mapping[str, float]]
) -> Optional[_Fingerprint]:
    """The run's metrics as compared: its series summary (the manifest's current copy, else the file's footer),
    else the values the caller read; ``None`` when there is neither or it holds no series.

    Each item is ``(stage, name, exact values...)``; ``stage`` is ``""`` for a caller's value, whose ``name`` is
    the metric's display name.
    """
    series = _series(run, manifest)
    if series is not None:
        items = []
        for entry in series:
            if not isinstance(entry, (list, tuple)) or len(entry) < 3:
                return None  # not a summary this reader understands
            items.append((str(entry[0]), str(entry[1]), *(_exact(x) for x in entry[2:])))
        return ("summary", tuple(sorted(items))) if items else None
    if values:
        return ("values", tuple(sorted(("", str(metric), _exact(value)) for metric, value in values.items())))
    return None


def _series(run: RunRecord, manifest: Mapping[str, Any]) -> Optional[list[Any]]:
    path = os.path.join(run.path, METRICS_FILE)
    try:
        stat = os.stat(path)
    except OSError:
        return None  # no metrics file: nothing to compare
    copy = valid_summary(manifest.get("metrics_summary")) or valid_summary(run.metrics_summary)
    if copy is not None and (copy.get("file_size"), copy.get("file_mtime_ns")) == (stat.st_size, stat.st_mtime_ns):
        return list(copy["series"])
    try:  # no current copy in the manifest: the footer (metadata only, no values)
        import pyarrow as pa
    except ImportError:
        return None
    try:
        summary = footer_summary(check_parquet(path))  # a FIFO, too many rows: HostileFileError (a ValueError)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return list(summary["series"]) if summary is not None else None


def _exact(x: Any) -> str:
    """``x`` as text that tells apart any two different values (floats bit for bit)."""
    if isinstance(x, float):
        return x.hex()
    if isinstance(x, bool) or x is None:
        return repr(x)
    if isinstance(x, int):
        return float(x).hex() if abs(x) < 2**53 else repr(x)  # 1 and 1.0 are one value in JSON
    return repr(x)


def _differing_metrics(prints: Mapping[int, _Fingerprint]) -> list[str]:
    """The metrics whose series are not the same in every run (by display name), sorted."""
    per_run = [{(item[0], item[1]): item for item in items} for _, items in prints.values()]
    keys = sorted({key for items in per_run for key in items})
    differing = [key for key in keys if len({items.get(key) for items in per_run}) > 1]
    names = display_names(keys)
    return sorted({names[key] for key in differing})
