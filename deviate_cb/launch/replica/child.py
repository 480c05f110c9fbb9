"""The ``--trainer`` replica: ``python -m deviate_cb.launch.replica.child``, started by a backend for every replica.

Example:
    >>> import os, subprocess, sys
    >>> env = {**os.environ, "DEVIATE_RUN_DIR": ""}
    >>> subprocess.run([sys.executable, "-m", "deviate_cb.launch.replica.child"], env=env).returncode  # doctest: +SKIP
    2
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from deviate_cb.context import RunContext
from deviate_cb.launch.ownership import process_mark
from deviate_cb.launch.records import StoreWriteError, writing
from deviate_cb.launch.replica.bootstrap import (
    SignalExit,
    bootstrap_replica,
    complete_plain_run,
    is_recording_process,
    terminating_signal,
)
from deviate_cb.launch.replica.final_metrics import record_final_metrics
from deviate_cb.launch.replica.keras_backend import KerasBackendNotInstalled
from deviate_cb.launch.target.trainer_spec import TrainerSpec, TrainerSpecError, bind_trainer
from deviate_cb.store.completion import TRAINER_RETURNED
from deviate_cb.store.manifest import ReplicaRecord
from deviate_cb.store.run_directory import RunDirectory

__all__ = ["EXIT_TRAINER_SPEC", "EXIT_USAGE", "main", "run_replica"]

EXIT_TRAINER_SPEC = 3
EXIT_USAGE = 2
_PROG = "deviate-replicate"


def main() -> int:
    """Run the replica described by the environment; return its exit status."""
    try:
        ctx = RunContext.from_env()
    except RuntimeError as exc:
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if ctx is None or not ctx.trainer:
        print(
            f"{_PROG}: error: deviate_cb.launch.replica.child runs one replica started by deviate-replicate; "
            "DEVIATE_RUN_DIR and DEVIATE_TRAINER are not set.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return run_replica(ctx)


def run_replica(ctx: RunContext) -> int:
    """Bootstrap, import and call the trainer of ``ctx``; return the exit status (exceptions propagate).

    Only a :class:`TrainerSpecError` raised while the spec is parsed, its module imported and the function's
    arguments bound (before any of the function runs) is a bad ``--trainer``: exit status
    :data:`EXIT_TRAINER_SPEC` and ``trainer_error`` in the manifest. A replica stopped meanwhile (SIGTERM from a
    ``--timeout`` or an interrupted launcher) exits 143 without ``trainer_error``, whatever its import raised.
    """
    bootstrap_replica(ctx)  # a no-op when sitecustomize already did it
    run = RunDirectory(ctx.run_dir)
    writer = is_recording_process()  # DDP re-launches this module for the other ranks: only rank zero records
    if writer:
        try:
            with writing(run.manifest_path):
                run.record(ReplicaRecord(pid=os.getpid(), pid_start=process_mark().get("start"), python=sys.executable))
        except StoreWriteError as exc:  # nothing could be recorded: fail before the training, in one line
            print(f"{_PROG}: error: {exc}", file=sys.stderr)
            return 1
    try:
        call = _load_trainer(ctx)
    except TrainerSpecError as exc:
        signum = terminating_signal()
        if signum is not None:  # stopped while importing: the error is the stop's, not the spec's
            raise SignalExit(signum) from None
        message = str(exc)
        if writer:
            _record(run, ReplicaRecord(trainer_error=message))
        print(f"{_PROG}: error: {message}", file=sys.stderr)
        return EXIT_TRAINER_SPEC
    except BaseException as exc:
        _record_exception(run, writer, exc)
        raise
    try:
        result = call()
        ended = TRAINER_RETURNED
    except SystemExit as exc:
        if exc.code not in (0, None):  # `sys.exit(0)` at the end (click commands, Hydra apps) counts as returning
            raise
        result, ended = None, f"sys.exit({exc.code!r})"  # mid-fit, the fit's own record says it did not end
    except KerasBackendNotInstalled as exc:  # imported by the function: one line, not a traceback
        if writer:
            _record(run, ReplicaRecord(exception=f"{type(exc).__name__}: {exc}"))
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:
        _record_exception(run, writer, exc)
        raise
    if writer:
        try:
            with writing(run.metrics_path):
                names = record_final_metrics(result, ctx.run_dir)
            with writing(run.manifest_path):  # without it, exit 0 reads as a replica that ended inside the function
                run.record(ReplicaRecord(trainer_end=ended))
        except StoreWriteError as exc:  # the training's result is lost: the replica failed, in one line
            print(f"{_PROG}: error: the trainer's return value could not be recorded: {exc}", file=sys.stderr)
            return 1
        complete_plain_run(run, ctx, names)
    return 0


def _load_trainer(ctx: RunContext) -> Callable[[], Any]:
    """Parse the spec, import its module and bind the function's arguments (:class:`TrainerSpecError`)."""
    spec = TrainerSpec.parse(ctx.trainer or "")
    sys.argv = [spec.target, *ctx.trainer_args]  # what the project sees, as if its file were run
    if spec.is_path:  # Hydra finds config_path next to the file, as under `python file.py` (not as a package)
        os.environ.setdefault("HYDRA_MAIN_MODULE", "__main__")
    return bind_trainer(spec.resolve(), ctx, spec.text)


def _record_exception(run: RunDirectory, writer: bool, exc: BaseException) -> None:
    """The exception as one line in the manifest (its traceback goes to stderr.log); not for ``SystemExit``."""
    if writer and not isinstance(exc, SystemExit):
        _record(run, ReplicaRecord(exception=f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:2000]))


def _record(run: RunDirectory, section: ReplicaRecord) -> None:
    """Record ``section`` in the manifest, or say in one warning line that the run directory cannot be written.

    Example:
        >>> import tempfile
        >>> run = RunDirectory(tempfile.mkdtemp())
        >>> _record(run, ReplicaRecord(exception="ValueError: x")); run.manifest().exception
        'ValueError: x'
    """
    try:
        with writing(run.manifest_path):
            run.record(section)
    except StoreWriteError as exc:  # the error being recorded matters more: it goes on, and stderr has it
        print(f"{_PROG}: warning: could not record {', '.join(section.fields())} in run.json: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
