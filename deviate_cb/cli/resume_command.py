"""``deviate audit --resume-at K --steps N``: does a run resumed from a checkpoint continue bit for bit?

Example:
    >>> check_resume_args(at="4", steps="8", runs="2")
    (4, 8)
    >>> check_resume_args(at="8", steps="8", runs="2")
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--resume-at` must be an integer >= 1 and below --steps (8). Received: --resume-at=8.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Optional

from deviate_cb.audit.resume import PLAIN_PYTORCH, written_checkpoint
from deviate_cb.cli._common import say
from deviate_cb.errors import UsageError
from deviate_cb.store.manifest import RunManifest

__all__ = ["EXIT_NOT_CHECKED", "check_resume_args", "run_resume_audit"]

EXIT_NOT_CHECKED = 3
_ROLES = ("checkpointed", "resumed", "uninterrupted")  # in the order they run: the checkpoint first


def check_resume_args(*, at: str, steps: str, runs: str, against: Optional[str] = None) -> tuple[int, int]:
    """``(K, N)`` from ``--resume-at`` and ``--steps``; ``-n`` must be left at its default, ``--against`` unset.

    Raises:
        UsageError: K is not an integer in 1..N-1, N not an integer >= 2, ``-n`` or ``--against`` given.
    """
    from deviate_cb.launch.backends.options import integer_option

    n = integer_option("--steps", 2)(steps)
    try:
        k = int(at)
    except ValueError:
        k = 0
    if not 0 < k < n:
        raise UsageError(f"`--resume-at` must be an integer >= 1 and below --steps ({n}). Received: --resume-at={at}.")
    if against is not None:
        raise UsageError(
            "`--against` does not apply with `--resume-at`: the resumed run is compared with an uninterrupted run "
            f"made now. Received: --against={against}."
        )
    if runs != "2":
        raise UsageError(
            "`-n` does not apply with `--resume-at`: it runs one uninterrupted, one checkpointed and one resumed run. "
            f"Received: -n={runs}."
        )
    return k, n


@contextlib.contextmanager
def _environment(values: Mapping[str, Optional[str]]) -> Iterator[None]:
    """Set (or with ``None`` remove) environment variables while the replicas start, then put them back."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_resume_audit(
    args: argparse.Namespace,
    out: IO[str],
    err: IO[str],
    *,
    timeout: Optional[float],
    read_replicas: Callable[[Any], tuple[list[Any], str]],
) -> int:
    """Run the three replicas and print the verdict (see the module docstring); returns the exit status.
    ``read_replicas``: :func:`deviate_cb.audit.replicas.read_replicas` (what became of a replica, its rows)."""
    at, steps = check_resume_args(
        at=args.resume_at, steps=args.steps, runs=args.runs, against=getattr(args, "against", None)
    )
    from deviate_cb.launch.backends.options import integer_option

    seed = integer_option("--seed", 0)(args.seed)
    shown = integer_option("--next", 0)(args.next)
    from deviate_cb.capture.resume_state import RESUME_ENV, RESUME_FROM_ENV
    from deviate_cb.launch.runner import replicate
    from deviate_cb.store.run_directory import RunDirectory

    if _reaches_no_checkpoint(args):  # told from the source before anything runs (launch.target.audit_scan)
        say(err, "error", f"{PLAIN_PYTORCH} (the project's source imports neither: nothing was run)")
        return EXIT_NOT_CHECKED
    root = Path(args.out)
    audited: dict[str, Any] = {}
    recorded_runs: dict[str, RunManifest] = {}
    checkpoint = ""
    for role in _ROLES:
        # a Keras fit's BackupAndRestore is redirected to <out>/backups/<role> (deviate_cb.capture.backup_restore)
        plan = json.dumps({"at": at, "steps": steps, "role": role, "backup": str((root / "backups" / role).absolute())})
        with _environment({RESUME_ENV: plan, RESUME_FROM_ENV: checkpoint if role == "resumed" else None}):
            result = replicate(
                args.trainer,
                command=args.after if args.trainer is None else None,
                trainer_args=(args.after or ()) if args.trainer is not None else (),
                runs=1,
                variant=args.variant,
                seed=seed,
                out=root / role,
                experiment=args.experiment,
                parallel=1,
                timeout=timeout,
                force=True,
                keras_backend=args.keras_backend,
                cold=True,  # one replica per launch: a warm-start template would only add its own start
                stream=err,  # type: ignore[arg-type]
                live=False,
                audit=at if role == "checkpointed" else steps - at if role == "resumed" else steps,
                argv=["deviate", *(getattr(args, "argv", None) or ["audit"])],
            )
        replica = result.replicas[0]
        try:
            recorded_runs[role] = RunDirectory(replica.run_dir).manifest()
        except (UsageError, OSError):
            recorded_runs[role] = RunManifest.from_json({})
        audited[role] = read_replicas(result.replicas)[0][0]
        if role == "checkpointed":
            checkpoint, problem = written_checkpoint(recorded_runs[role], audited[role], at)
            record = recorded_runs[role].resume
            if record is not None and record.get("refused") == "bad_at":
                raise UsageError(
                    "`--resume-at` must be a step at the end of which the fit's keras.callbacks.BackupAndRestore "
                    f"writes its backup: {record.get('possible')}. Received: --resume-at={at}."
                )
            if problem:
                say(err, "error", problem)
                return EXIT_NOT_CHECKED
    return _verdict(args, out, err, audited, recorded_runs, at=at, steps=steps, shown=shown, checkpoint=checkpoint)


def _reaches_no_checkpoint(args: argparse.Namespace) -> bool:
    """Whether the target's source certainly imports neither Lightning nor Keras
    (:mod:`deviate_cb.launch.target.audit_scan`; a target it cannot read, or a wrong one the launcher will explain, is
    not refused here)."""
    from deviate_cb.launch.target.audit_scan import reaches_resumable
    from deviate_cb.launch.target.command import Command
    from deviate_cb.launch.target.trainer_spec import TrainerSpec

    try:
        target: TrainerSpec | Command = (
            TrainerSpec.parse(args.trainer) if args.trainer is not None else Command.parse(args.after or ())
        )
        target.precheck()
    except UsageError:
        return False
    return reaches_resumable(target, Path.cwd()) is False


def _verdict(
    args: argparse.Namespace,
    out: IO[str],
    err: IO[str],
    audited: Mapping[str, Any],
    recorded_runs: Mapping[str, RunManifest],
    *,
    at: int,
    steps: int,
    shown: int,
    checkpoint: str,
) -> int:
    from deviate_cb.audit.resume import compare_resume, render_resume

    runs = {role: str(Path(args.out) / role) for role in _ROLES}
    ended_badly = [f"the {role} run {audited[role].how}" for role in _ROLES if not audited[role].ended]
    unrecorded = [f"the {role} run recorded no step" for role in _ROLES if not audited[role].rows]
    stopped = "; ".join(ended_badly)
    if unrecorded:
        for line in [*unrecorded, *ended_badly]:
            say(err, "error", line)
        return EXIT_NOT_CHECKED
    states = []
    for role in ("uninterrupted", "checkpointed", "resumed"):
        record = recorded_runs[role].resume
        found = record.get("states") if record is not None else None
        states.append(found if isinstance(found, dict) else {})
    rows = [audited[role].rows for role in ("uninterrupted", "checkpointed", "resumed")]
    try:
        restarted = (recorded_runs["resumed"].resume or {}).get("data_restarted") is True
        result = compare_resume(*rows, at=at, steps=steps, states=states, data_restarted=restarted,
                                ended=[audited[role].ended for role in ("uninterrupted", "checkpointed", "resumed")],
                                next_count=shown)  # fmt: skip
    except ValueError as exc:
        say(err, "error", f"{exc}; see the runs in {args.out}")
        return EXIT_NOT_CHECKED
    if stopped:
        say(err, "warning" if result.diverged else "error", stopped)
    if args.format == "json":
        verdict = "diverged" if result.diverged else "incomplete" if stopped else "agree"
        payload = {**result.to_dict(), "verdict": verdict, "stopped": stopped or None, "checkpoint": checkpoint}
        payload.update(variant=args.variant, runs=runs)
        out.write(json.dumps(payload, indent=2) + "\n")
    else:
        out.write(render_resume(result, where=str(args.out), stopped=stopped))
    if result.diverged:
        return 1
    return EXIT_NOT_CHECKED if stopped else 0
