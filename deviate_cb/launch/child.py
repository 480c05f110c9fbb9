"""The replica bootstrap: ``python -m deviate_cb.launch.child``, started by a backend for every replica.

In order, before any user code runs: read the :class:`~deviate_cb.context.RunContext` from the environment,
seed ``random``/NumPy/torch, turn on the requested determinism switches (torch's when it is imported),
arrange for every Lightning ``Trainer`` and every Keras ``fit``/``evaluate`` to get a ``DeviateCallback``, and
make ``import keras`` fail with one clear line when the package of its backend is not installed. Then import
the ``--trainer`` function, call it according to its signature, and record a returned mapping of numbers as
final metrics. A plain trainer (no callback) also gets the determinism record and the fingerprint the callback
would have written.

Exit status: the function's (0 when it returns; 1 with a traceback when it raises), or
:data:`EXIT_TRAINER_SPEC` when the ``--trainer`` spec cannot be used; then one line goes to stderr and the
manifest's ``trainer_error`` holds it, so the launcher can stop and report a usage error.

Example:
    >>> import os, subprocess, sys
    >>> env = {**os.environ, "DEVIATE_RUN_DIR": ""}
    >>> subprocess.run([sys.executable, "-m", "deviate_cb.launch.child"], env=env).returncode  # doctest: +SKIP
    2
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from types import FrameType
from typing import Any, Optional

from deviate_cb.capture.determinism import apply_determinism, determinism_record, seed_everything
from deviate_cb.context import RunContext
from deviate_cb.launch.final_metrics import record_final_metrics
from deviate_cb.launch.inject import install_keras_injection, install_trainer_injection
from deviate_cb.launch.keras_backend import KerasBackendNotInstalled, install_backend_guard
from deviate_cb.launch.trainer_spec import TrainerSpec, TrainerSpecError, call_trainer
from deviate_cb.store.run_directory import RunDirectory

__all__ = ["EXIT_TRAINER_SPEC", "EXIT_USAGE", "is_rank_zero", "main", "run_replica"]

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
    _terminate_as_exit()
    seed_everything(ctx.seed)
    apply_determinism(ctx.deterministic)
    install_trainer_injection()
    install_keras_injection()
    install_backend_guard()
    run = RunDirectory(ctx.run_dir)
    writer = is_rank_zero()  # DDP re-launches this module for the other ranks: only rank zero records
    if writer:
        run.update_manifest(pid=os.getpid(), python=sys.executable)
    try:
        spec = TrainerSpec.parse(ctx.trainer or "")
        fn = spec.resolve()
        result = call_trainer(fn, ctx, spec.text)
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
        _complete_plain_run(run, ctx, names)
    return 0


def is_rank_zero(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether this process is global rank zero (``RANK``, ``LOCAL_RANK``, ``NODE_RANK`` unset or 0).

    Example:
        >>> is_rank_zero({}), is_rank_zero({"LOCAL_RANK": "1"})
        (True, False)
    """
    environ = os.environ if environ is None else environ
    return all(environ.get(name, "0") in ("0", "") for name in ("RANK", "LOCAL_RANK", "NODE_RANK"))


def _complete_plain_run(run: RunDirectory, ctx: RunContext, final_metrics: list[str]) -> None:
    """Record what a DeviateCallback would have (determinism, fingerprint) when none ran."""
    manifest = run.read_manifest()
    fields: dict[str, Any] = {}
    if final_metrics:
        fields["final_metrics"] = final_metrics
    if "determinism" not in manifest:
        fields["determinism"] = determinism_record(ctx.seed, ctx.deterministic)
    if fields:
        run.update_manifest(**fields)
    if not run.fingerprint_path.exists():
        try:
            from deviate_cb.fingerprint.collect import collect_fingerprint

            run.write_fingerprint(collect_fingerprint(seed=ctx.seed))
        except Exception as exc:  # a fingerprint is informative; never fail a finished run for it
            print(f"{_PROG}: warning: could not record the fingerprint: {exc}", file=sys.stderr)


def _terminate_as_exit() -> None:
    """Turn SIGTERM (sent on timeout or interrupt) into ``SystemExit`` so callbacks flush on the way out.

    Lightning calls the previous handler from its own and then runs ``on_exception``; forked DataLoader
    workers inherit the handler, so in any other process it falls back to the default (terminate).
    """
    pid = os.getpid()

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        if os.getpid() != pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise SystemExit(128 + signum)

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, handler)


if __name__ == "__main__":
    sys.exit(main())
