"""``deviate audit``: run replicas that must be bit-identical and report where they first stop being identical.

It names the training as ``deviate-replicate`` does (``--trainer SPEC [-- ARGS]`` or ``-- COMMAND``), runs ``-n``
replicas (default 2) under the ``control`` variant (same seed, determinism on; ``--variant impl`` audits with the
framework's default switches) through the normal launcher, with every replica's callback recording a digest of
each tensor of the first ``--steps`` training steps (``DEVIATE_AUDIT``, :mod:`deviate_cb.capture.audit`), then
compares the records (:mod:`deviate_cb.report.audit`) and prints the first divergence: the training step and,
within it in execution order, the input batch, a module's forward output, the loss, a parameter's gradient or a
parameter after the optimizer step, with the size of the difference and the divergences right after it.

Unless ``--finish``, each replica stops once its audited steps are recorded (:mod:`deviate_cb.capture.audit.stopping`;
status ``audited``, which counts here as a training that ended normally and never as a completed one elsewhere).

Exit status: 0 every replica ended its training normally (or stopped after its audited steps, or timed out after
recording every one of them: a note names it) and they agree bit for bit over the audited steps, 1
they diverge within the steps compared (even if a replica stopped later), 2 usage error, 3 the audit could not be
made or is incomplete: the project imports neither torch nor Lightning nor Keras (told from its source before
anything runs, :mod:`deviate_cb.launch.audit_scan`: nothing to hook), fewer than two replicas recorded anything (a
replica failed before recording, or trained without a Lightning ``Trainer.fit``, a Keras ``Model.fit`` or a
``torch.optim`` optimizer step: the line says so, with how long it ran), or a replica did not end its training
normally (failed, timed out, was killed, or exited 0 inside ``fit``: status ``incomplete``, or an ``exception`` or
``fit: "started"`` left in its manifest) or has no record while others do. Its record then stops early, so nothing
is compared after the last step every such replica recorded; one line says so and names each replica with how it
ended (its exception, else what stopped it, else the last line of its stderr), and the verdict of the steps that
were compared begins ``incomplete:``. A training that ended normally after fewer steps than asked is a full audit
of the steps it had (a note says so), but replicas that ended normally after different numbers of steps diverge
where the shorter one ended. The replicas' progress goes to stderr, the result to stdout (``--format json``: one
JSON object, with ``verdict`` ``agree``, ``diverged`` or ``incomplete``, ``stopped`` and ``not_completed``).

Example:
    >>> import argparse, io
    >>> parser = argparse.ArgumentParser(); commands = parser.add_subparsers()
    >>> add_audit(commands)
    >>> args = parser.parse_args(["audit", "--trainer", "train.py:main", "-n", "1"])
    >>> args.handler(args, io.StringIO(), io.StringIO())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `-n` must be an integer >= 2. Received: -n=1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from deviate_cb.capture.audit.stopping import AUDITED, stopped_after
from deviate_cb.cli._common import say
from deviate_cb.errors import UsageError

__all__ = [
    "EXIT_NOT_AUDITED",
    "AuditedReplica",
    "add_audit",
    "after_steps_line",
    "how_it_ended",
    "read_replicas",
    "render_audit",
    "stopped_line",
]

EXIT_NOT_AUDITED = 3
_VARIANTS = ("control", "impl")
# How the launcher's reason for a replica that exited 0 before its training ended (status incomplete) starts.
_EXITED_EARLY = "exited with code 0 before its training ended"
# What a replica that ended with no record and no fit did (its stderr.log has nothing to add).
_NOT_HOOKED = "trained without a Lightning Trainer.fit, a Keras Model.fit or a torch.optim optimizer step"


class _Default(str):
    """A default argparse kept (a value given on the command line is a plain ``str``): ``--against`` replaces it."""


def add_audit(commands: Any) -> None:
    """Declare ``deviate audit`` on the ``deviate`` subparsers."""
    parser = commands.add_parser(
        "audit",
        help="find the first training step and tensor where replicas that must be identical differ",
        description="Run N replicas under the control variant, record a bit-exact digest of every tensor of the "
        "first training steps (input batch, forward outputs, loss, gradients, parameters after the step) and "
        "report where they first differ; each replica stops once its audited steps are recorded (--finish: trains "
        "to its end). Exit status 0 identical (every replica recorded every audited step), 1 diverged, "
        "2 usage error, 3 not audited (the project imports neither torch nor Lightning nor Keras: refused before "
        "anything runs; a replica failed, timed out, was killed, stopped inside fit or took no optimizer step).",
        usage="deviate audit [options] (--trainer SPEC [-- ARGS...] | -- COMMAND [ARGS...])",
    )
    parser.add_argument("--trainer", metavar="SPEC", help="module:function or path/to/file.py:function")
    parser.add_argument("-n", "--runs", default=_Default("2"), metavar="N", help="replicas (default 2; --against: 1)")
    parser.add_argument("--steps", default=_Default("20"), metavar="K", help="steps audited (20; --against: its)")
    parser.add_argument("--variant", default="control", help="control (default) or impl (framework defaults)")
    parser.add_argument("--seed", default="0", metavar="SEED", help="the replicas' seed (default 0)")
    parser.add_argument("--out", default="deviate_audit", metavar="DIR", help="run store (default deviate_audit)")
    parser.add_argument("--experiment", metavar="NAME", help="experiment name (default: as deviate-replicate)")
    parser.add_argument("--parallel", default="1", metavar="K", help="replicas at once (default 1)")
    parser.add_argument("--timeout", metavar="SECONDS", help="stop a replica after this long")
    parser.add_argument(
        "--finish",
        action="store_true",
        help="run every replica's training to its end (default: a replica stops once its audited steps are recorded)",
    )
    parser.add_argument("--keras-backend", metavar="NAME", help="tensorflow, torch or jax (KERAS_BACKEND)")
    parser.add_argument("--cold", action="store_true", help="start every replica as a fresh interpreter")
    parser.add_argument("--next", default="5", metavar="M", help="divergences shown after the first (default 5)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    parser.add_argument("--against", metavar="DIR", help="compare with a kept recording (an earlier --out)")
    parser.add_argument("--resume-at", metavar="K", help="check that resuming from a checkpoint at step K is bit-exact")
    parser.set_defaults(handler=_run_audit, after=None)


def _run_audit(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.launch.options import integer_option

    if getattr(args, "resume_at", None) is not None:  # its usage errors first, --against's included
        from deviate_cb.cli.resume_command import check_resume_args

        check_resume_args(at=args.resume_at, steps=args.steps, runs=args.runs, against=getattr(args, "against", None))
    against = None
    if getattr(args, "against", None) is not None:  # a kept recording (deviate_cb.cli.against_check): its defaults
        from deviate_cb.cli.against_check import open_against

        against = open_against(args)
    runs = integer_option("-n", 1 if against else 2)(args.runs)
    steps = integer_option("--steps", 1)(args.steps)
    parallel = integer_option("--parallel", 1)(args.parallel)
    shown = integer_option("--next", 0)(args.next)
    if args.variant not in _VARIANTS:
        raise UsageError(
            f"`--variant` must be control or impl: the replicas must share their seed to be comparable step by "
            f"step. Received: --variant={args.variant}."
        )
    if args.trainer is None and not args.after:
        raise UsageError("`--trainer` or a command after `--` is required. Received: neither.")
    timeout = None
    if args.timeout is not None:
        try:
            timeout = float(args.timeout)
        except ValueError:
            timeout = -1.0
        if not timeout > 0:
            raise UsageError(f"`--timeout` must be a number of seconds > 0. Received: --timeout={args.timeout}.")
    if getattr(args, "resume_at", None) is not None:  # deviate_cb.cli.resume_command: three runs, not -n replicas
        from deviate_cb.cli.resume_command import run_resume_audit

        return run_resume_audit(args, out, err, timeout=timeout, read_replicas=read_replicas)
    refusal = _refusal(args.trainer, args.after)
    if refusal:  # before anything runs: a program with nothing to hook would train to its end for nothing
        say(err, "error", refusal)
        return EXIT_NOT_AUDITED
    if against is not None and against.unusable():  # the reference recorded nothing: nothing to compare with
        say(err, "error", against.unusable())
        return EXIT_NOT_AUDITED
    from deviate_cb.launch.runner import replicate

    result = replicate(
        args.trainer,
        command=args.after if args.trainer is None else None,
        trainer_args=(args.after or ()) if args.trainer is not None else (),
        runs=runs,
        variant=args.variant,
        seed=integer_option("--seed", 0)(args.seed),
        out=args.out,
        experiment=args.experiment,
        parallel=parallel,
        timeout=timeout,
        force=True,  # an audit runs its replicas again: a record from an earlier audit says nothing about now
        keras_backend=args.keras_backend,
        cold=args.cold,
        stream=err,  # type: ignore[arg-type]  # a text stream: the progress goes where warnings go
        live=False,
        audit=steps,
        audit_stop=not args.finish,  # deviate_cb.capture.audit.stopping: status `audited`
        argv=["deviate", *(getattr(args, "argv", None) or ["audit"])],
    )
    audited, not_covered = read_replicas(result.replicas)
    where = Path(result.out) / f"experiment={result.experiment}" / f"variant={result.variant}"
    records = {a.replica: a.rows for a in audited if a.rows}
    if len(records) < (1 if against else 2):
        for line in _not_audited(audited, len(records), where):
            say(err, "error", line)
        return EXIT_NOT_AUDITED
    if against is not None:  # the reference's replica first, as replica 0; this machine's replica i as i + 1
        audited = against.relabel(read_replicas(against.replicas)[0], audited, result.replicas, err)
        records = {a.replica: a.rows for a in audited if a.rows}
    from deviate_cb.report.audit import compare_audits

    complete = [a.replica for a in audited if a.ended]
    compared = compare_audits(records, next_count=shown, complete=complete)
    from deviate_cb.report.rank_audit import rank_comparison, with_rank_line

    ranked = None  # not distributed, or --against (its recording's ranks are not read: rank 0 is compared)
    if against is None:
        ranked = rank_comparison(result.replicas, next_count=shown, complete=complete)
    if ranked is not None and ranked.lead is not None:
        compared = ranked.lead  # the rank that diverged first (rank 0 when none did)
    stopped = stopped_line(audited, compared, steps)
    after = "" if stopped else after_steps_line(audited, steps)  # ended after every audited step: a note, no cut
    if ranked is not None and ranked.incomplete:  # a rank without a record, or that failed: incomplete
        stopped = "; ".join(part for part in (stopped, ranked.incomplete) if part)
    if stopped:
        say(err, "warning" if compared.diverged else "error", stopped)
    if args.format == "json":
        payload = {**compared.to_dict(), "steps": steps, "variant": args.variant, "runs": str(where)}
        payload["not_covered"] = not_covered or None
        payload["verdict"] = "diverged" if compared.diverged else "incomplete" if stopped else "agree"
        payload["stopped"] = stopped or None
        payload["after_audited_steps"] = after or None
        payload["not_completed"] = [
            {"replica": a.replica, "status": a.status, "how": a.how, "recorded_steps": a.recorded_steps}
            for a in audited
            if not a.ended
        ]
        if ranked is not None:
            payload.update(ranks=ranked.to_dict(), first_ranks=list(ranked.first))
        if against is not None:
            payload.update(against.to_dict())
        out.write(json.dumps(payload, indent=2) + "\n")
    else:
        text = render_audit(
            compared, steps=steps, where=str(where), not_covered=not_covered, stopped=stopped, after=after
        )
        text = with_rank_line(text, ranked) if ranked is not None else text
        out.write(against.wrap(text) if against is not None else text)
    if compared.diverged:
        return 1  # a difference within the steps every replica recorded, whatever stopped a replica later
    return EXIT_NOT_AUDITED if stopped else 0


def _refusal(trainer: str | None, after: Sequence[str] | None) -> str:
    """Why the target cannot be audited, read from its source (:mod:`deviate_cb.launch.audit_scan`); ``""`` when
    it may be, when the source does not tell, or when the target is wrong (the launcher then says how)."""
    from deviate_cb.launch.audit_scan import audit_refusal
    from deviate_cb.launch.command import Command
    from deviate_cb.launch.trainer_spec import TrainerSpec

    try:
        target: TrainerSpec | Command = (
            TrainerSpec.parse(trainer) if trainer is not None else Command.parse(after or ())
        )
        target.precheck()
    except UsageError:
        return ""
    return audit_refusal(target, Path.cwd())


@dataclass(frozen=True)
class AuditedReplica:
    """What became of one replica of an audit.

    Attributes:
        replica: Its index.
        status: The launcher's status (``completed``, ``failed``, ``timeout``, ``killed``, ``incomplete``...).
        ended: Whether its training ended normally: it completed, and no ``fit`` stopped on an exception (the
            manifest's ``exception``) or was left unfinished (``fit: "started"``).
        how: How it ended when it did not end normally (``failed with RuntimeError: boom``); ``""`` otherwise.
        rows: Its audit rows (empty: none recorded, or unreadable).
        recorded_steps: Training steps its record holds.
        problem: Why its record could not be read, or why it has none; ``""`` when it has one.
    """

    replica: int
    status: str
    ended: bool
    how: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    recorded_steps: int = 0
    problem: str = ""


def how_it_ended(status: str, manifest: Mapping[str, Any], note: str = "") -> tuple[bool, str]:
    """Whether a replica's training ended normally, and when not, how it ended in a few words, from its launcher
    ``status`` and its manifest: the exception that stopped it (``exception``), else what ended it (``reason``, a
    timeout or a signal), else the last line of its stderr (``error``).

    Example:
        >>> how_it_ended("completed", {"status": "completed"})
        (True, '')
        >>> how_it_ended("audited", {"status": "audited", "audit_stopped": {"after_steps": 3, "by": "torch"}})
        (True, '')
        >>> how_it_ended("failed", {"exception": "RuntimeError: boom", "reason": "exited with code 1"})
        (False, 'failed with RuntimeError: boom')
        >>> how_it_ended("failed", {"reason": "exited with code 1", "error": "Traceback...\\nKeyError: 'x'"})
        (False, "failed with KeyError: 'x'")
        >>> how_it_ended("timeout", {"reason": "timed out after 3.0 s; killed by SIGTERM", "exception": "SignalExit"})
        (False, 'timed out after 3.0 s; killed by SIGTERM')
        >>> how_it_ended("completed", {"exception": "SystemExit: 0"})  # sys.exit(0) inside fit
        (False, 'stopped before its training ended: SystemExit: 0')
        >>> how_it_ended("incomplete", {"fit": "started", "reason": "the process exited while fit() was running"})
        (False, 'stopped before its training ended: the process exited while fit() was running')
        >>> how_it_ended("incomplete", {"reason": "exited with code 0 before its training ended: os._exit(0)"})
        (False, 'exited with code 0 before its training ended: os._exit(0)')
    """
    exception = _one_line(manifest.get("exception"))
    reason = _one_line(manifest.get("reason"))
    error = manifest.get("error")
    tail = _one_line(error.strip().splitlines()[-1]) if isinstance(error, str) and error.strip() else ""
    fit_open = manifest.get("fit") == "started"
    if status == "completed" and manifest.get("status") in (None, "completed") and not exception and not fit_open:
        return True, ""
    if status == AUDITED and stopped_after(manifest) is not None:  # stopped after its audited steps, as asked
        return True, ""
    stopped = bool(reason) and not (isinstance(error, str) and error and not error.startswith(reason))
    if status in ("timeout", "killed", "not started"):  # what the launcher did says more than the exception it raised
        detail = reason or exception or tail
    elif status == "failed":
        detail = exception or (reason if stopped else tail) or reason
    else:
        detail = exception or reason or tail
    detail = detail or _one_line(note) or f"status {status}"
    if status == "failed":
        return False, f"failed with {detail}" if detail in (exception, tail) else f"failed: {detail}"
    if status == "timeout":
        return False, detail if detail.startswith("timed out") else f"timed out ({detail})"
    if status == "killed":
        return False, f"was {detail}" if detail.startswith("killed") else f"was killed ({detail})"
    if status == "not started":
        return False, f"did not start ({detail})"
    if status == "incomplete" and reason.startswith(_EXITED_EARLY):  # the launcher's reason says it all
        return False, reason
    return False, f"stopped before its training ended: {detail}"


def _one_line(text: Any, limit: int = 300) -> str:
    if not isinstance(text, str):
        return ""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def read_replicas(replicas: Any) -> tuple[list[AuditedReplica], str]:
    """What became of each replica (:class:`AuditedReplica`, with its audit rows), and what the audit could not
    cover on this framework (the manifests' ``audit.not_covered``)."""
    from deviate_cb.store.audit import read_audit
    from deviate_cb.store.run_directory import RunDirectory

    found = []
    not_covered = ""
    for replica in replicas:
        try:
            manifest = RunDirectory(replica.run_dir).read_manifest()
        except (UsageError, OSError):  # an unreadable manifest: its audit file still says what was recorded
            manifest = {}
        audit = manifest.get("audit")
        if isinstance(audit, dict) and isinstance(audit.get("not_covered"), str):
            not_covered = audit["not_covered"]
        status = replica.status
        if manifest.get("status") == "incomplete" and status == "completed":
            status = "incomplete"
        ended, how = how_it_ended(status, manifest, replica.note)
        problem = ""
        rows: list[dict[str, Any]] = []
        try:
            rows = read_audit(replica.run_dir)
        except FileNotFoundError:
            pass
        except ValueError as exc:
            problem = f"{how + ' and ' if how else ''}has an unreadable audit record: {exc}"
        failed = audit.get("error") if isinstance(audit, dict) else None
        if not rows and not problem and isinstance(failed, str) and failed:  # the audit's own error, not the training's
            problem = f"recorded no audit: {_one_line(failed)}" + (f" ({how})" if how else "")
        if not rows and not problem:
            if ended and manifest and "fit" not in manifest:  # no callback saw a fit start: nothing was hooked
                ran = getattr(replica, "duration_s", None)
                problem = f"{_NOT_HOOKED}, so nothing was hooked" + (
                    f" (it ran {ran:.0f} s)" if isinstance(ran, (int, float)) else ""
                )
            elif ended:
                problem = "completed without recording any training step: its fit trained no step"
            else:
                problem = f"{how} before recording any training step"
        steps = len({row["step"] for row in rows})
        found.append(AuditedReplica(replica.replica, status, ended, how, rows, steps, problem))
    return found, not_covered


def _not_audited(audited: Sequence[AuditedReplica], recorded: int, where: Path) -> list[str]:
    """The error lines when fewer than two replicas recorded anything."""
    if not recorded and audited and all(a.problem.startswith(_NOT_HOOKED) for a in audited):  # one line says it all
        return ["nothing to audit: " + "; ".join(f"replica {a.replica} {a.problem}" for a in audited)]
    if not any(a.ended for a in audited):
        named = "; ".join(f"replica {a.replica} {a.how}" for a in audited)
        return [f"no replica completed: {named}; see their stderr.log in {where}"]
    lines = [f"replica {a.replica} {a.problem}" + ("" if a.problem.startswith(_NOT_HOOKED) else
             f"; see {where / f'replica={a.replica}' / 'stderr.log'}") for a in audited if not a.rows]  # fmt: skip
    lines.append(f"the audit needs the records of at least 2 replicas; {recorded} recorded one.")
    return lines


def stopped_line(audited: Sequence[AuditedReplica], compared: Any, steps: int) -> str:
    """Why the comparison does not cover every replica over the steps asked, in one line; ``""`` when it does
    (every replica ended its training normally and has a record).

    Example:
        >>> from deviate_cb.report.audit import AuditResult
        >>> rows = [{"step": 0}, {"step": 1}]
        >>> crashed = AuditedReplica(0, "failed", False, "failed with RuntimeError: boom", rows, recorded_steps=2)
        >>> ended = AuditedReplica(1, "completed", True, rows=rows * 3, recorded_steps=6)
        >>> stopped_line([crashed, ended], AuditResult(False, (0, 1), 2, last_step=1), steps=20)
        'nothing to compare after step 1: replica 0 failed with RuntimeError: boom'
        >>> stopped_line([ended, ended], AuditResult(False, (1, 1), 6, last_step=5), steps=20)
        ''
        >>> late = AuditedReplica(0, "timeout", False, "timed out after 9.0 s", rows, recorded_steps=2)
        >>> stopped_line([late, ended], AuditResult(False, (0, 1), 2, last_step=1), steps=2)  # after its 2 steps
        ''
    """
    if all((a.ended and a.rows) or _timed_out_after(a, steps) for a in audited):
        return ""  # every replica ended its training or timed out after every step asked: the timeout is a note
    if not any(a.ended or _timed_out_after(a, steps) for a in audited):
        return "no replica completed: " + "; ".join(f"replica {a.replica} {a.how}" for a in audited)
    stopped = [a for a in audited if not a.ended and a.rows and not _timed_out_after(a, steps)]
    cut = [f"replica {a.replica} {a.how}" for a in stopped if a.recorded_steps < steps]  # it limits the comparison
    later = [f"replica {a.replica} {a.how} after its {a.recorded_steps} audited step(s)"
             for a in stopped if a.recorded_steps >= steps]  # fmt: skip
    unrecorded = [f"replica {a.replica} {a.problem or 'recorded nothing'}" for a in audited if not a.rows]
    named = "; ".join([*cut, *later, *unrecorded])
    if not cut:
        return named
    if compared.last_step is None:
        return f"nothing to compare: {named}"
    return f"nothing to compare after step {compared.last_step}: {named}"


def _timed_out_after(replica: AuditedReplica, steps: int) -> bool:
    """Whether ``replica`` timed out after recording every one of the ``steps`` audited steps: its record is whole
    (a replica that failed after them is not: what made it fail may be what the audit looks for)."""
    return replica.status == "timeout" and bool(replica.rows) and replica.recorded_steps >= steps


def after_steps_line(audited: Sequence[AuditedReplica], steps: int) -> str:
    """The replicas that timed out after recording every one of the ``steps`` audited steps: a note beside an
    answer they do not change; ``""`` when none.

    Example:
        >>> rows = [{"step": 0}, {"step": 1}]
        >>> late = AuditedReplica(1, "timeout", False, "timed out after 9.0 s", rows, recorded_steps=2)
        >>> after_steps_line([late], steps=2)
        'replica 1 timed out after 9.0 s after its 2 audited step(s)'
    """
    return "; ".join(
        f"replica {a.replica} {a.how} after its {a.recorded_steps} audited step(s)"
        for a in audited
        if _timed_out_after(a, steps)
    )


def render_audit(
    result: Any, *, steps: int, where: str, not_covered: str = "", stopped: str = "", after: str = ""
) -> str:
    """The text report of an :class:`~deviate_cb.report.audit.AuditResult`; ``stopped``: why the comparison does
    not cover every replica over the steps asked (:func:`stopped_line`), which the verdict then says; ``after``:
    the replicas that ended abnormally after every audited step (:func:`after_steps_line`), a note.

    Example:
        >>> from deviate_cb.report.audit import AuditResult
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
    from deviate_cb.report.audit import size_text, where_text
    from deviate_cb.report.text import printable, printable_message

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
