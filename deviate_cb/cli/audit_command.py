"""``deviate audit``: run replicas that must be bit-identical and report where they first stop being identical.

It names the training as ``deviate-replicate`` does (``--trainer SPEC [-- ARGS]`` or ``-- COMMAND``), runs ``-n``
replicas (default 2) under the ``control`` variant (same seed, determinism on; ``--variant impl`` audits with the
framework's default switches) through the normal launcher, with every replica's callback recording a digest of
each tensor of the first ``--steps`` training steps (``DEVIATE_AUDIT``, :mod:`deviate_cb.capture.audit`), then
compares the records (:mod:`deviate_cb.report.audit`) and prints the first divergence: the training step and,
within it in execution order, the input batch, a module's forward output, the loss, a parameter's gradient or a
parameter after the optimizer step, with the size of the difference and the divergences right after it.

Exit status: 0 the replicas agree bit for bit over the audited steps, 1 they diverge, 2 usage error, 3 the audit
could not be made (a replica failed before recording, or recorded nothing: training that uses neither a Lightning
``Trainer`` nor Keras ``fit``). The replicas' progress goes to stderr, the result to stdout (``--format json``:
one JSON object).

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
from pathlib import Path
from typing import IO, Any

from deviate_cb.cli._common import say
from deviate_cb.errors import UsageError

__all__ = ["EXIT_NOT_AUDITED", "add_audit", "render_audit"]

EXIT_NOT_AUDITED = 3
_VARIANTS = ("control", "impl")
_WHAT = {
    "input": "the input batch `{name}`",
    "forward": "the forward output of module `{name}`",
    "loss": "the loss",
    "gradient": "the gradient of parameter `{name}`",
    "parameter": "parameter `{name}` after the optimizer step",
}


def add_audit(commands: Any) -> None:
    """Declare ``deviate audit`` on the ``deviate`` subparsers."""
    parser = commands.add_parser(
        "audit",
        help="find the first training step and tensor where replicas that must be identical differ",
        description="Run N replicas under the control variant, record a bit-exact digest of every tensor of the "
        "first training steps (input batch, forward outputs, loss, gradients, parameters after the step) and "
        "report where they first differ. Exit status 0 identical, 1 diverged, 2 usage error, 3 not audited.",
        usage="deviate audit [options] (--trainer SPEC [-- ARGS...] | -- COMMAND [ARGS...])",
    )
    parser.add_argument("--trainer", metavar="SPEC", help="module:function or path/to/file.py:function")
    parser.add_argument("-n", "--runs", default="2", metavar="N", help="replicas to compare (default 2)")
    parser.add_argument("--steps", default="20", metavar="K", help="training steps audited (default 20)")
    parser.add_argument("--variant", default="control", help="control (default) or impl (framework defaults)")
    parser.add_argument("--seed", default="0", metavar="SEED", help="the replicas' seed (default 0)")
    parser.add_argument("--out", default="deviate_audit", metavar="DIR", help="run store (default deviate_audit)")
    parser.add_argument("--experiment", metavar="NAME", help="experiment name (default: as deviate-replicate)")
    parser.add_argument("--parallel", default="1", metavar="K", help="replicas at once (default 1)")
    parser.add_argument("--timeout", metavar="SECONDS", help="stop a replica after this long")
    parser.add_argument("--keras-backend", metavar="NAME", help="tensorflow, torch or jax (KERAS_BACKEND)")
    parser.add_argument("--cold", action="store_true", help="start every replica as a fresh interpreter")
    parser.add_argument("--next", default="5", metavar="M", help="divergences shown after the first (default 5)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    parser.set_defaults(handler=_run_audit, after=None)


def _run_audit(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.launch.options import integer_option

    runs = integer_option("-n", 2)(args.runs)
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
        argv=["deviate", *(getattr(args, "argv", None) or ["audit"])],
    )
    records, missing, not_covered = _read_records(result.replicas)
    if len(records) < 2:
        for line in missing:
            say(err, "error", line)
        say(err, "error", f"the audit needs the records of at least 2 replicas; {len(records)} recorded one.")
        return EXIT_NOT_AUDITED
    for line in missing:
        say(err, "warning", f"{line}; the others are compared")
    from deviate_cb.report.audit import compare_audits

    compared = compare_audits(records, next_count=shown)
    where = Path(result.out) / f"experiment={result.experiment}" / f"variant={result.variant}"
    if args.format == "json":
        payload = {**compared.to_dict(), "steps": steps, "variant": args.variant, "runs": str(where)}
        payload["not_covered"] = not_covered or None
        out.write(json.dumps(payload, indent=2) + "\n")
    else:
        out.write(render_audit(compared, steps=steps, where=str(where), not_covered=not_covered))
    return 1 if compared.diverged else 0


def _read_records(replicas: Any) -> tuple[dict[int, list[dict[str, Any]]], list[str], str]:
    """Each replica's audit rows; a line for each replica that has none, saying why; and what the audit could
    not cover on this framework (the manifests' ``audit.not_covered``)."""
    from deviate_cb.report.text import printable
    from deviate_cb.store.audit import read_audit
    from deviate_cb.store.run_directory import RunDirectory

    records: dict[int, list[dict[str, Any]]] = {}
    missing = []
    not_covered = ""
    for replica in replicas:
        try:
            audit = RunDirectory(replica.run_dir).read_manifest().get("audit")
        except (UsageError, OSError):  # an unreadable manifest: its audit file still says what was recorded
            audit = None
        if isinstance(audit, dict) and isinstance(audit.get("not_covered"), str):
            not_covered = audit["not_covered"]
        try:
            rows = read_audit(replica.run_dir)
        except FileNotFoundError:
            rows = []
        except ValueError as exc:
            missing.append(f"replica {replica.replica}: {printable(str(exc))}")
            continue
        if rows:
            records[replica.replica] = rows
            continue
        if replica.status == "completed":
            why = (
                "completed without recording any training step: its training uses neither a Lightning Trainer "
                "(fit) nor Keras Model.fit, or it trained no step"
            )
        else:
            why = f"{replica.status}{f' ({printable(replica.note)})' if replica.note else ''} before recording"
        missing.append(f"replica {replica.replica} {why}; see {replica.run_dir / 'stderr.log'}")
    return records, missing, not_covered


def render_audit(result: Any, *, steps: int, where: str, not_covered: str = "") -> str:
    """The text report of an :class:`~deviate_cb.report.audit.AuditResult`.

    Example:
        >>> from deviate_cb.report.audit import AuditResult
        >>> print(render_audit(AuditResult(False, (0, 1), 20), steps=20, where="runs"), end="")
        deviate audit: replicas 0, 1 agree bit for bit over 20 audited training step(s).
        records: runs
    """
    from deviate_cb.report.text import printable

    replicas = ", ".join(str(r) for r in result.replicas)
    lines = []
    if not result.diverged:
        lines.append(
            f"deviate audit: replicas {replicas} agree bit for bit over {result.steps_compared} audited "
            "training step(s)."
        )
    else:
        first = result.first
        lines.append(
            f"deviate audit: replicas {replicas} diverge at training step {first.step} (0-based), first in "
            f"{_what(first, printable)}."
        )
        lines.append(f"  {_size(first)}")
        if first.note:
            lines.append(f"  {printable(first.note)}")
        if result.next:
            lines.append("then:")
            width = max(len(printable(d.name)) for d in result.next)
            for d in result.next:
                lines.append(f"  step {d.step:<4d} {d.kind:<9s} {printable(d.name):<{width}s}  {_size(d)}")
    for note in result.notes:
        lines.append(f"note: {printable(note)}")
    if not_covered:
        lines.append(f"note: not covered on this framework: {printable(not_covered)}")
    if result.steps_compared < steps:
        lines.append(f"note: {result.steps_compared} of the {steps} step(s) asked were recorded (training was shorter)")
    lines.append(f"records: {printable(where)}")
    return "\n".join(lines) + "\n"


def _what(divergence: Any, printable: Any) -> str:
    text = _WHAT.get(divergence.kind, "{name}").format(name=printable(divergence.name))
    if divergence.kind in ("gradient", "parameter") and divergence.module:
        text += f" (module `{printable(divergence.module)}`)"
    if divergence.occurrence:
        text += f", call {divergence.occurrence + 1} in the step"
    return text


def _size(divergence: Any) -> str:
    if divergence.max_abs_diff is None:
        return "size of the difference unknown"
    if not divergence.exact:
        return f"max abs diff at least {divergence.max_abs_diff:.3g} (from sums; tensor of {divergence.numel} elements)"
    return (
        f"max abs diff {divergence.max_abs_diff:.3g}, max rel diff {divergence.max_rel_diff or 0.0:.3g}, "
        f"{divergence.differing} of {divergence.numel} element(s) differ"
    )
