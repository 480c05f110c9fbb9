"""The ``--trainer`` replica: ``python -m deviate_cb.launch.child``, started by a backend for every replica.

The process is bootstrapped before any user code runs (:mod:`deviate_cb.launch.bootstrap`: seeds, determinism,
seeding takeover, callback injection, the Keras backend guard, isolated outputs). Then the ``--trainer``
function is imported, called according to its signature with ``sys.argv[1:]`` set to the arguments given
after ``--``, and a returned mapping of numbers is recorded as final metrics. A plain trainer (no callback)
also gets the determinism record and the fingerprint the callback would have written.

Exit status: the function's (0 when it returns or calls ``sys.exit(0)``, as click commands do; 1 with a
traceback when it raises), or :data:`EXIT_TRAINER_SPEC` when the ``--trainer`` spec cannot be used; then one
line goes to stderr and the manifest's ``trainer_error`` holds it, so the launcher can stop and report a usage
error.

Example:
    >>> import os, subprocess, sys
    >>> env = {**os.environ, "DEVIATE_RUN_DIR": ""}
    >>> subprocess.run([sys.executable, "-m", "deviate_cb.launch.child"], env=env).returncode  # doctest: +SKIP
    2
"""

from __future__ import annotations

import os
import sys

from deviate_cb.context import RunContext
from deviate_cb.launch.bootstrap import bootstrap_replica, complete_plain_run, is_recording_process
from deviate_cb.launch.final_metrics import record_final_metrics
from deviate_cb.launch.keras_backend import KerasBackendNotInstalled
from deviate_cb.launch.trainer_spec import TrainerSpec, TrainerSpecError, call_trainer
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
            f"{_PROG}: error: deviate_cb.launch.child runs one replica started by deviate-replicate; "
            "DEVIATE_RUN_DIR and DEVIATE_TRAINER are not set.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return run_replica(ctx)


def run_replica(ctx: RunContext) -> int:
    """Bootstrap, import and call the trainer of ``ctx``; return the exit status (exceptions propagate)."""
    bootstrap_replica(ctx)  # a no-op when sitecustomize already did it
    run = RunDirectory(ctx.run_dir)
    writer = is_recording_process()  # DDP re-launches this module for the other ranks: only rank zero records
    if writer:
        run.update_manifest(pid=os.getpid(), python=sys.executable)
    try:
        spec = TrainerSpec.parse(ctx.trainer or "")
        sys.argv = [spec.target, *ctx.trainer_args]  # what the project sees, as if its file were run
        if spec.is_path:  # Hydra finds config_path next to the file, as under `python file.py` (not as a package)
            os.environ.setdefault("HYDRA_MAIN_MODULE", "__main__")
        fn = spec.resolve()
        result = call_trainer(fn, ctx, spec.text)
    except SystemExit as exc:
        if exc.code not in (0, None):  # `sys.exit(0)` at the end (click commands, Hydra apps) counts as returning
            raise
        result = None
    except TrainerSpecError as exc:
        message = str(exc)
        if writer:
            run.update_manifest(trainer_error=message)
        print(f"{_PROG}: error: {message}", file=sys.stderr)
        return EXIT_TRAINER_SPEC
    except KerasBackendNotInstalled as exc:  # imported by the function: one line, not a traceback
        if writer:
            run.update_manifest(exception=f"{type(exc).__name__}: {exc}")
        print(f"{_PROG}: error: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:
        if writer and not isinstance(exc, SystemExit):  # the traceback goes to stderr.log; the manifest: one line
            run.update_manifest(exception=f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:2000])
        raise
    if writer:
        names = record_final_metrics(result, ctx.run_dir)
        complete_plain_run(run, ctx, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
