"""``deviate audit``: run replicas that must be bit-identical and report where they first stop being identical.

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
from typing import IO, TYPE_CHECKING, Any, Optional

from deviate_cb.cli._common import say
from deviate_cb.errors import UsageError

if TYPE_CHECKING:
    from deviate_cb.audit.session import AuditOutcome, AuditRequest

__all__ = ["add_audit"]

_VARIANTS = ("control", "impl")


class _Default(str):
    """A default argparse kept (a value given on the command line is a plain ``str``): ``--against`` replaces it."""


# The flags deviate audit shares with deviate-replicate (declared once, launch/arguments.py), with its defaults.
_REPLICATION_FLAGS = ("trainer", "runs", "variant", "seed", "out", "experiment", "parallel", "timeout", "cold",
                      "keras_backend")  # fmt: skip
_DEFAULTS = {"runs": _Default("2"), "variant": "control", "out": "deviate_audit", "parallel": "1"}
_HELPS = {
    "trainer": "module:function or path/to/file.py:function",
    "runs": "replicas (default 2; --against: 1)",
    "variant": "control (default) or impl (framework defaults)",
    "seed": "the replicas' seed (default 0)",
    "out": "run store (default deviate_audit)",
    "experiment": "experiment name (default: as deviate-replicate)",
    "parallel": "replicas at once (default 1)",
    "timeout": "stop a replica after this long",
    "cold": "start every replica as a fresh interpreter",
    "keras_backend": "tensorflow, torch or jax (KERAS_BACKEND)",
}


def add_audit(commands: Any) -> None:
    """Declare ``deviate audit`` on the ``deviate`` subparsers."""
    from deviate_cb.launch.arguments import add_replication_arguments

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
    add_replication_arguments(parser, only=_REPLICATION_FLAGS, defaults=_DEFAULTS, helps=_HELPS, backends=False)
    parser.add_argument("--steps", default=_Default("20"), metavar="K", help="steps audited (20; --against: its)")
    parser.add_argument(
        "--finish",
        action="store_true",
        help="run every replica's training to its end (default: a replica stops once its audited steps are recorded)",
    )
    parser.add_argument("--next", default="5", metavar="M", help="divergences shown after the first (default 5)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    parser.add_argument("--against", metavar="DIR", help="compare with a kept recording (an earlier --out)")
    parser.add_argument("--resume-at", metavar="K", help="check that resuming from a checkpoint at step K is bit-exact")
    parser.set_defaults(handler=_run_audit, after=None)


def _run_audit(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.audit.replicas import read_replicas
    from deviate_cb.audit.session import EXIT_NOT_AUDITED, run_audit, target_refusal

    if getattr(args, "resume_at", None) is not None:  # its usage errors first, --against's included
        from deviate_cb.cli.resume_command import check_resume_args

        check_resume_args(at=args.resume_at, steps=args.steps, runs=args.runs, against=getattr(args, "against", None))
    against = None
    if getattr(args, "against", None) is not None:  # a kept recording (deviate_cb.cli.against_check): its defaults
        from deviate_cb.cli.against_check import open_against

        against = open_against(args)
    timeout = _checked(args, against is not None)
    if getattr(args, "resume_at", None) is not None:  # deviate_cb.cli.resume_command: three runs, not -n replicas
        from deviate_cb.cli.resume_command import run_resume_audit

        return run_resume_audit(args, out, err, timeout=timeout, read_replicas=read_replicas)
    refusal = target_refusal(args.trainer, args.after)
    if refusal:  # before anything runs: a program with nothing to hook would train to its end for nothing
        say(err, "error", refusal)
        return EXIT_NOT_AUDITED
    if against is not None and against.unusable():  # the reference recorded nothing: nothing to compare with
        say(err, "error", against.unusable())
        return EXIT_NOT_AUDITED
    request = _request(args, against is not None, timeout)
    outcome = run_audit(request, err, against)
    for line in outcome.errors:
        say(err, "error", line)
    if outcome.compared is None:
        return outcome.exit_status
    if outcome.stopped:
        say(err, "warning" if outcome.compared.diverged else "error", outcome.stopped)
    if args.format == "json":
        out.write(json.dumps(outcome.to_dict(request, against), indent=2) + "\n")
    else:
        out.write(_text(outcome, request, against))
    return outcome.exit_status


def _text(outcome: AuditOutcome, request: AuditRequest, against: Any) -> str:
    """The text report of a compared audit (:class:`~deviate_cb.audit.session.AuditOutcome`)."""
    from deviate_cb.audit.ranks import with_rank_line
    from deviate_cb.audit.rendering import render_audit

    text = render_audit(
        outcome.compared,
        steps=request.steps,
        where=str(outcome.where),
        not_covered=outcome.not_covered,
        stopped=outcome.stopped,
        after=outcome.after,
    )
    text = with_rank_line(text, outcome.ranked) if outcome.ranked is not None else text
    return against.wrap(text) if against is not None else text


def _checked(args: argparse.Namespace, against: bool) -> Optional[float]:
    """Check the flags an audit and a resume audit share (:class:`~deviate_cb.errors.UsageError` when one is
    wrong); the timeout, in seconds."""
    from deviate_cb.launch.backends.options import integer_option

    integer_option("-n", 1 if against else 2)(args.runs)
    integer_option("--steps", 1)(args.steps)
    integer_option("--parallel", 1)(args.parallel)
    integer_option("--next", 0)(args.next)
    if args.variant not in _VARIANTS:
        raise UsageError(
            f"`--variant` must be control or impl: the replicas must share their seed to be comparable step by "
            f"step. Received: --variant={args.variant}."
        )
    if args.trainer is None and not args.after:
        raise UsageError("`--trainer` or a command after `--` is required. Received: neither.")
    return _timeout(args.timeout)


def _request(args: argparse.Namespace, against: bool, timeout: Optional[float]) -> AuditRequest:
    """The request the flags make (checked by :func:`_checked`, but for ``--seed``)."""
    from deviate_cb.audit.session import AuditRequest
    from deviate_cb.launch.backends.options import integer_option

    return AuditRequest(
        trainer=args.trainer,
        after=args.after or (),
        runs=integer_option("-n", 1 if against else 2)(args.runs),
        steps=integer_option("--steps", 1)(args.steps),
        variant=args.variant,
        seed=integer_option("--seed", 0)(args.seed),
        out=args.out,
        experiment=args.experiment,
        parallel=integer_option("--parallel", 1)(args.parallel),
        timeout=timeout,
        finish=args.finish,
        keras_backend=args.keras_backend,
        cold=args.cold,
        shown=integer_option("--next", 0)(args.next),
        argv=["deviate", *(getattr(args, "argv", None) or ["audit"])],
    )


def _timeout(given: Optional[str]) -> Optional[float]:
    if given is None:
        return None
    try:
        timeout = float(given)
    except ValueError:
        timeout = -1.0
    if not timeout > 0:
        raise UsageError(f"`--timeout` must be a number of seconds > 0. Received: --timeout={given}.")
    return timeout
