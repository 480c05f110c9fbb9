"""``deviate audit --against DIR``: the replicas run here compared with a kept recording made elsewhere.

Example:
    >>> import argparse, json, tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> run = root / "ref" / "experiment=mlp" / "variant=control" / "replica=0"
    >>> run.mkdir(parents=True)
    >>> _ = (run / "run.json").write_text(json.dumps({"status": "completed", "audit": {"steps": 5}}))
    >>> args = argparse.Namespace(against=str(root / "ref"), out=str(root / "here"), experiment=None,
    ...                           variant="control", seed="0", steps=None, runs=None, keras_backend=None)
    >>> against = open_against(args)
    >>> args.runs, args.steps, args.experiment
    ('1', '5', 'mlp')
    >>> against.unusable()  # doctest: +ELLIPSIS
    'nothing to compare: the reference .../ref/experiment=mlp/variant=control holds no audit record (replica 0 ...'
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, Optional

from deviate_cb.audit.divergence import AuditResult, compare_audits
from deviate_cb.audit.machine_diff import MachineDifference, machine_differences, read_fingerprint
from deviate_cb.audit.reference import (
    ReferenceRecording,
    ReferenceReplica,
    check_comparable,
    configuration_notes,
    open_reference,
)
from deviate_cb.cli._common import say
from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.options import integer_option
from deviate_cb.report.text.safe import printable
from deviate_cb.store.run_directory import MANIFEST_FILE, read_run_manifest

__all__ = ["Against", "open_against"]

_DECIDING = "versions and builds, devices, CPU model and flags, BLAS, threads, determinism switches, environment"


def open_against(args: argparse.Namespace) -> Against:
    """Read the recording ``args.against`` names, refuse what cannot be compared, and fill ``args.runs``,
    ``args.steps``, ``args.keras_backend`` and ``args.experiment`` from it (see the module docstring).

    Raises:
        UsageError: As :func:`~deviate_cb.audit.reference.open_reference` and
            :func:`~deviate_cb.audit.reference.check_comparable`.
    """
    reference = open_reference(args.against, out=args.out, experiment=args.experiment, variant=args.variant)
    if not _given(args.runs):
        args.runs = "1"
    if not _given(args.steps):
        args.steps = str(reference.steps or 20)
    if args.keras_backend is None and isinstance(reference.configuration.get("keras_backend"), str):
        args.keras_backend = reference.configuration["keras_backend"]
    steps = integer_option("--steps", 1)(args.steps)
    seed = integer_option("--seed", 0)(args.seed)
    check_comparable(reference, variant=args.variant, seed=seed, steps=steps, keras_backend=args.keras_backend)
    args.experiment = reference.experiment
    return Against(reference)


class Against:
    """The reference side of an audit against a kept recording, and what is said beside the comparison."""

    def __init__(self, reference: ReferenceRecording) -> None:
        self.reference = reference
        self.replicas: tuple[ReferenceReplica, ...] = reference.replicas
        self.chosen: Optional[int] = None  # the reference's replica compared (replica 0 of the comparison)
        self.labels: dict[int, str] = {}
        self.self_check: Optional[AuditResult] = None
        self.differences: Optional[list[MachineDifference]] = None
        self.missing_fingerprint = ""
        self.notes: list[str] = []

    def unusable(self) -> str:
        """Why nothing can be compared with the reference (it holds no audit record); ``""`` when it can."""
        return self.reference.unusable()

    def relabel(self, theirs: Sequence[Any], ours: Sequence[Any], results: Sequence[Any], err: IO[str]) -> list[Any]:
        """Both sides as one list of :class:`~deviate_cb.audit.replicas.AuditedReplica`: the reference's replica
        first as replica 0, this machine's replica ``i`` as ``i + 1``, each one's ``how`` and ``problem`` saying
        which it is. ``theirs``: the reference's replicas read; ``ours``: this machine's; ``results``: the
        launcher's replicas here (their run directories). Warns on ``err`` when the reference's replicas disagree
        with each other or the configurations differ.

        Raises:
            UsageError: No replica of the reference has a readable audit record.
        """
        recorded = [a for a in theirs if a.rows]
        if not recorded:
            why = "; ".join(f"replica {a.replica} {a.problem}" for a in theirs if a.problem) or "no record"
            raise UsageError(
                f"`--against` must hold a readable audit record. Received: --against={self.reference.path} ({why})."
            )
        chosen = next((a for a in recorded if a.ended), recorded[0])
        self.chosen = chosen.replica
        if len(recorded) >= 2:
            rows = {a.replica: a.rows for a in recorded}
            self.self_check = compare_audits(rows, next_count=0, complete=[a.replica for a in recorded if a.ended])
        self.labels = {0: f"the reference's replica {chosen.replica}"}
        self.labels.update({a.replica + 1: f"replica {a.replica} here" for a in ours})
        self._compare_machines(chosen.replica, results)
        if self.self_check is not None and self.self_check.diverged:
            say(err, "warning", self._self_line())
        for note in self.notes:
            say(err, "warning", f"the configuration differs from the reference's: {note}")
        merged = [_labelled(chosen, 0, self.labels[0])]
        merged.extend(_labelled(a, a.replica + 1, self.labels[a.replica + 1]) for a in ours)
        return merged

    def legend(self) -> str:
        """The first line of the text output: which replica of the comparison is which."""
        where = f"experiment={self.reference.experiment}, variant={self.reference.variant}"
        if self.reference.host:
            where += f", recorded on host {self.reference.host}"
        others = ", ".join(f"replica {k} is {label}" for k, label in sorted(self.labels.items()) if k)
        return (
            f"deviate audit --against {printable(self.reference.path)} ({printable(where)}): replica 0 is "
            f"{self.labels.get(0, 'the reference')}; {others}."
        )

    def lines(self) -> list[str]:
        """What the text output says after the comparison: the fingerprint differences and the notes."""
        lines = [f"reference: {printable(str(self.reference.group_dir))}"]
        if self.differences is None:
            lines.append(f"fingerprints not compared: {self.missing_fingerprint}")
        elif not self.differences:
            lines.append(f"fingerprints: no difference in the fields that decide results ({_DECIDING})")
        else:
            count = len(self.differences)
            lines.append(f"fingerprint differences, reference -> here ({count} field{'s' if count > 1 else ''}):")
            lines.extend(f"  {printable(d.describe())}" for d in self.differences)
        if self.self_check is not None and self.self_check.diverged:
            lines.append(f"note: {self._self_line()}")
        lines.extend(f"note: the configuration differs from the reference's: {printable(n)}" for n in self.notes)
        return lines

    def wrap(self, text: str) -> str:
        """The text report of ``deviate audit`` with the legend before it and :meth:`lines` after it."""
        return self.legend() + "\n" + text + "".join(line + "\n" for line in self.lines())

    def to_dict(self) -> dict[str, Any]:
        """The fields ``--format json`` adds: ``against`` and ``fingerprint_differences``."""
        check = self.self_check
        return {
            "against": {
                "path": self.reference.path,
                "group": str(self.reference.group_dir),
                "experiment": self.reference.experiment,
                "variant": self.reference.variant,
                "host": self.reference.host,
                "steps": self.reference.steps,
                "reference_replica": self.chosen,
                "replicas": {str(k): label for k, label in sorted(self.labels.items())},
                "reference_agrees": None if check is None else not check.diverged,
                "reference_divergence": check.to_dict() if check is not None and check.diverged else None,
                "configuration_differences": list(self.notes),
                "fingerprints_not_compared": self.missing_fingerprint or None,
            },
            "fingerprint_differences": None if self.differences is None else [d.to_dict() for d in self.differences],
        }

    def _compare_machines(self, chosen: int, results: Sequence[Any]) -> None:
        reference_dir = self.reference.group_dir / f"replica={chosen}"
        here_dirs = [Path(r.run_dir) for r in sorted(results, key=lambda r: r.replica)]
        here_dir = next((d for d in here_dirs if read_fingerprint(d) is not None), None)
        if read_fingerprint(reference_dir) is None:
            self.missing_fingerprint = f"{reference_dir} has no readable fingerprint.json"
        elif here_dir is None:
            self.missing_fingerprint = "no replica here wrote a readable fingerprint.json"
        else:
            self.differences = machine_differences(reference_dir, here_dir)
        for run in here_dirs:
            try:
                manifest = read_run_manifest(str(run / MANIFEST_FILE))
            except UsageError:
                continue
            if not manifest.is_empty:
                self.notes = configuration_notes(self.reference, manifest)
                break

    def _self_line(self) -> str:
        first = self.self_check.first if self.self_check is not None else None
        at = f" at training step {first.step}, first in {first.kind} `{first.name}`" if first is not None else ""
        return (
            f"the reference is not a reference: its own replicas diverge{at} ({self.reference.group_dir}); "
            "a divergence from it may not come from this machine"
        )


def _given(value: Any) -> bool:
    """Whether an option was given on the command line: argparse gives a plain ``str`` then, and ``deviate audit``
    keeps its defaults as a subclass of ``str`` (or ``None``)."""
    return type(value) is str


def _labelled(audited: Any, key: int, label: str) -> Any:
    """``audited`` as replica ``key`` of the comparison, its ``how`` and ``problem`` naming which replica it is."""
    how = f"({label}) {audited.how}" if audited.how else ""
    problem = f"({label}) {audited.problem}" if audited.problem else ""
    return replace(audited, replica=key, how=how, problem=problem)
