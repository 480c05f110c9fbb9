"""Which tracker runs are runs of the study: sweeps' parent runs left out, ``--run-name`` and ``--where`` applied.

Example:
    >>> runs = [TrackerRun("mlflow", "u", "p1", "e", run_name="optuna", parent=True),
    ...         TrackerRun("mlflow", "u", "c1", "e", run_name="trial-0", keys={"params.lr": "0.1"}),
    ...         TrackerRun("mlflow", "u", "c2", "e", run_name="trial-1", keys={"params.lr": "0.2"})]
    >>> notes = []
    >>> [run.run_id for run in select_runs(runs, RunSelection.parse(where=["params.lr=0.1"]), notes)]
    ['c1']
    >>> print(notes[0][:60])
    1 parent run left out (a run other runs name as their parent
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from deviate_cb.errors import UsageError
from deviate_cb.trackers.importing.imported import KEY_NAMESPACES, TrackerRun

__all__ = ["RunSelection", "select_runs"]

_SHOWN = 3


@dataclass(frozen=True)
class RunSelection:
    """The runs of the source to import: ``--run-name`` globs, ``--where KEY=VALUE`` pairs, ``--include-parents``.

    Attributes:
        run_names: fnmatch patterns of run names (MLflow's run name, a log folder's path); any one matches.
        where: ``(key, value)`` pairs a run must all hold (``params.lr``, ``tags.team``, ``hparams.seed``).
        include_parents: Import the runs other runs name as their parent too (left out by default).
    """

    run_names: tuple[str, ...] = ()
    where: tuple[tuple[str, str], ...] = ()
    include_parents: bool = False

    @classmethod
    def parse(
        cls, run_names: Sequence[str] = (), where: Sequence[str] = (), include_parents: bool = False
    ) -> RunSelection:
        """The selection from the command line's values.

        Raises:
            UsageError: A ``--where`` that is not ``<namespace>.<name>=<value>``.
        """
        pairs = []
        for text in where:
            key, equals, value = text.partition("=")
            namespace, _, name = key.strip().partition(".")
            if not equals or namespace not in KEY_NAMESPACES or not name:
                raise UsageError(
                    f"`--where` takes KEY=VALUE with a key such as params.lr, tags.team or hparams.lr. "
                    f"Received: --where {text}. Expected: e.g. --where params.optimizer=adam."
                )
            pairs.append((key.strip(), value))
        return cls(tuple(run_names), tuple(pairs), include_parents)

    def matches(self, run: TrackerRun) -> bool:
        """Whether ``run`` is selected by its name and keys (parents aside)."""
        if self.run_names and not any(fnmatch.fnmatchcase(run.run_name or "", p) for p in self.run_names):
            return False
        return all(run.keys.get(key) == value for key, value in self.where)

    def described(self) -> str:
        """The options as typed, for messages."""
        parts = [f"--run-name {p}" for p in self.run_names] + [f"--where {k}={v}" for k, v in self.where]
        return " ".join(parts)


def select_runs(runs: Sequence[TrackerRun], selection: RunSelection, notes: list[str]) -> list[TrackerRun]:
    """The runs of ``runs`` that are runs of the study and that ``selection`` keeps; one line in ``notes`` for each
    kind left out.

    Raises:
        UsageError: Runs there were, and the selection keeps none of them.
    """
    parents = [] if selection.include_parents else [run for run in runs if run.parent]
    candidates = list(runs) if selection.include_parents else [run for run in runs if not run.parent]
    if parents:
        them = "it" if len(parents) == 1 else "them"
        notes.append(
            f"{_count(parents, 'parent run')} left out (a run other runs name as their parent: a sweep's or a study's "
            f"own run, no replica): {_shown(parents)}; --include-parents imports {them}"
        )
    kept = [run for run in candidates if selection.matches(run)]
    if runs and not kept:
        names = sorted({run.run_name or run.run_id for run in candidates})
        raise UsageError(
            f"the selection leaves no run to import. Received: {selection.described() or 'no selection'}"
            f"{f' ({len(parents)} parent run(s) left out)' if parents else ''}. "
            f"Expected: a selection some run matches; the runs are {', '.join(names[:10]) or 'only parent runs'}"
            f"{' ...' if len(names) > 10 else ''}."
        )
    if len(kept) < len(candidates):
        notes.append(f"{len(candidates) - len(kept)} run(s) not selected by {selection.described()}")
    return kept


def _count(runs: Sequence[TrackerRun], what: str) -> str:
    return f"{len(runs)} {what}{'s' if len(runs) > 1 else ''}"


def _shown(runs: Sequence[TrackerRun]) -> str:
    shown = ", ".join(run.label() for run in runs[:_SHOWN])
    return shown + (f" and {len(runs) - _SHOWN} more" if len(runs) > _SHOWN else "")
