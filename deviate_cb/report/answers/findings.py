"""A problem found in a study: its kind, the groups and replicas it touches, and the one line that names them.

Example:
    >>> groups_text(groups_of([(("mlp", "algo"), k) for k in (0, 1, 2, 3, 4, 7)]))
    'experiment=mlp variant=algo: replicas 0-4, 7'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from deviate_cb.report.reading.configurations import replica_list
from deviate_cb.report.text.safe import printable, strip_styles
from deviate_cb.variants import VARIANTS

__all__ = [
    "KINDS",
    "MAX_NAMED",
    "GroupKey",
    "GroupReplicas",
    "Problem",
    "format_problem",
    "groups_of",
    "groups_text",
    "make_problem",
    "one_line",
    "seeds_differ",
]

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
MAX_TEXT = 300  # characters kept of a recorded text (a problem, a note)
MAX_NAMED = 5  # paths and other replicas named in a shared_outputs or read_other_replica line
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


def make_problem(kind: str, groups: Sequence[GroupReplicas], message: str) -> Problem:
    """The :class:`Problem` of ``kind`` listed under the first of ``groups``."""
    first = groups[0]
    return Problem(first.experiment, first.variant, kind, first.replicas, message, tuple(groups))


def groups_text(groups: Sequence[GroupReplicas]) -> str:
    """Who a problem touches, as its message starts: ``experiment=E variant=V: replicas 0, 1`` for one group;
    ``experiment=E variant=V (replicas 0, 1) and experiment=F variant=W (replica 0)`` for several, the groups past
    the fifth counted (``and 3 more groups (7 replicas)``).

    Example:
        >>> groups_text([GroupReplicas("a", "algo", (0, 1))])
        'experiment=a variant=algo: replicas 0, 1'
        >>> groups_text([GroupReplicas("a", "algo", (0, 1)), GroupReplicas("b", "control", (2,))])
        'experiment=a variant=algo (replicas 0, 1) and experiment=b variant=control (replica 2)'
    """
    if len(groups) == 1:
        return f"{groups[0].label()}: {replica_list(groups[0].replicas)}"
    named = [f"{g.label()} ({replica_list(g.replicas)})" for g in groups[:MAX_NAMED]]
    rest = groups[MAX_NAMED:]
    if rest:
        replicas = sum(len(g.replicas) for g in rest)
        named.append(f"{len(rest)} more group{'s' * (len(rest) > 1)} ({replicas} replica{'s' * (replicas > 1)})")
    return ", ".join(named[:-1]) + " and " + named[-1]


def format_problem(problem: Problem) -> str:
    """The one line shown to users for ``problem``: its message, whitespace collapsed, other control characters
    escaped (:func:`~deviate_cb.report.text.safe.printable`: a manifest's text may hold terminal escapes).

    Example:
        >>> format_problem(Problem("mlp", "algo", "no_injection", (0,), "experiment=mlp variant=algo: replica 0:\\n x"))
        'experiment=mlp variant=algo: replica 0: x'
        >>> print(format_problem(Problem("mlp", "algo", "no_injection", (0,), "replica 0: \\x1b[2J")))
        replica 0: \\x1b[2J
    """
    return printable(" ".join(problem.message.split()))


def groups_of(members: Iterable[tuple[GroupKey, int]]) -> list[GroupReplicas]:
    """The groups of ``(group, replica)`` pairs, each with its replicas, sorted."""
    by_group: dict[GroupKey, set[int]] = {}
    for group, replica in members:
        by_group.setdefault(group, set()).add(replica)
    return [GroupReplicas(e, v, tuple(sorted(replicas))) for (e, v), replicas in sorted(by_group.items())]


def one_line(text: str) -> str:
    """A recorded text on one line, its colours dropped (a stored message), cut to :data:`MAX_TEXT`."""
    line = " ".join(strip_styles(text).split())
    return line if len(line) <= MAX_TEXT else line[: MAX_TEXT - 3] + "..."


def seeds_differ(variant: str) -> bool:
    """Whether ``variant`` gives each replica its own seed (``algo``, ``algo+impl``)."""
    known = VARIANTS.get(variant)
    return known is not None and known.seed_per_replica
