"""The replica bootstrap: what every Python process of a replica gets before the project's code runs.

Example:
    >>> is_recording_process({"LOCAL_RANK": "1"}, ["python", "train.py"])
    False
    >>> is_recording_process({}, ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"])
    False
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from types import FrameType
from typing import Any, Optional

from deviate_cb.audit.recording.plain_loop import install_plain_audit
from deviate_cb.capture.determinism import apply_determinism, determinism_record, seed_everything
from deviate_cb.capture.hf.arguments import install_arguments_takeover
from deviate_cb.capture.outside_writes import install_outside_writes
from deviate_cb.capture.seed_takeover import install_seed_takeover
from deviate_cb.capture.switch_takeover import install_switch_takeover
from deviate_cb.context import RunContext, is_rank_zero
from deviate_cb.launch.ownership import process_mark
from deviate_cb.launch.replica.copy_on_write import install_copy_on_write, patch_torch_save
from deviate_cb.launch.replica.inject import install_hf_injection, install_keras_injection, install_trainer_injection
from deviate_cb.launch.replica.keras_backend import install_backend_guard
from deviate_cb.launch.replica.logger_versions import install_logger_versions
from deviate_cb.launch.replica.project_outputs import install_hydra_outputs
from deviate_cb.store.manifest import ReplicaRecord
from deviate_cb.store.run_directory import RunDirectory

__all__ = [
    "MAX_PROCESSES_RECORDED",
    "SignalExit",
    "bootstrap_from_environment",
    "bootstrap_replica",
    "complete_plain_run",
    "is_recording_process",
    "preimport",
    "terminating_signal",
]

MAX_PROCESSES_RECORDED = 10
_PROG = "deviate-replicate"
_ENV_WARM_START = "DEVIATE_WARM_START"
_ENV_PREIMPORT = "DEVIATE_PREIMPORT"
_state: dict[str, Any] = {"context": None, "terminated": None}  # terminated: the signal number, once one came


class SignalExit(SystemExit):
    """``SystemExit(128 + signum)``, raised in the replica's main process by its SIGTERM handler.

    A ``--timeout``, an interrupted launcher or a cancelled study ends the replica this way, wherever its code
    is (importing the trainer's module included), so that the process exits with 143 and callbacks flush.

    Example:
        >>> exc = SignalExit(15)
        >>> exc.code, exc.signum, isinstance(exc, SystemExit)
        (143, 15, True)
    """

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def terminating_signal() -> Optional[int]:
    """The signal (SIGTERM's number) this process was told to stop by, or ``None`` while nobody asked it to.

    Example:
        >>> terminating_signal() is None
        True
    """
    signum = _state["terminated"]
    return signum if isinstance(signum, int) else None


def bootstrap_from_environment() -> bool:
    """Bootstrap this process from the run context in its environment; ``False`` when there is none (or done)."""
    try:
        ctx = RunContext.from_env()
    except RuntimeError as exc:
        sys.stderr.write(f"{_PROG}: warning: {exc}\n")
        return False
    return ctx is not None and bootstrap_replica(ctx)


def bootstrap_replica(ctx: RunContext) -> bool:
    """Seed, apply determinism, take over seeding, inject callbacks and isolate outputs, once per process.

    Returns ``False`` when this process was already bootstrapped (nothing is done twice).
    """
    if _state["context"] is not None:
        return False
    _state["context"] = ctx
    _terminate_as_exit()
    run = RunDirectory(ctx.run_dir)
    recording = is_recording_process()
    preimport()
    seed_everything(ctx.seed)
    apply_determinism(ctx.deterministic)

    def record_seeding(record: dict[str, Any]) -> None:
        run.record(ReplicaRecord(seeding=record))

    install_seed_takeover(
        ctx.seed, take_over=not ctx.keep_project_seeds, on_record=record_seeding if recording else None
    )

    def record_switches(record: dict[str, Any]) -> None:
        run.record(ReplicaRecord(determinism_calls=record))

    install_switch_takeover(
        ctx.deterministic,
        take_over=not ctx.keep_project_determinism,
        on_record=record_switches if recording else None,
    )
    install_trainer_injection(default_root_dir=str(ctx.run_dir))
    install_keras_injection()
    install_hf_injection()
    install_arguments_takeover(str(ctx.run_dir))  # TrainingArguments' seeds and full_determinism, as the variant says
    install_backend_guard()
    install_hydra_outputs(ctx.run_dir)

    def record_loggers(record: dict[str, Any]) -> None:
        run.record(ReplicaRecord(logger_versions=record))

    install_logger_versions(
        ctx.run_dir, ctx.experiment, ctx.variant, ctx.replica, on_record=record_loggers if recording else None
    )
    isolated = install_copy_on_write(ctx.run_dir)  # --isolate: before the watch, which then sees the replica's file
    _watch_outside_writes(run, ctx, recording)
    if isolated is not None:
        patch_torch_save()  # after the watch's torch.save wrapper: this one, outside it, acts first
    warm = _warm_start()
    if recording:
        _record_process(run, warm)
        atexit.register(_complete_at_exit, run, ctx, os.getpid())
        install_plain_audit(run)  # deviate audit: a training outside any fit is audited through torch's global hooks
    return True


def preimport(environ: Optional[MutableMapping[str, str]] = None) -> list[str]:
    """Import the modules a warm-start template imports (``DEVIATE_PREIMPORT``), before anything is seeded.

    A replica forked from a template has them imported already; a cold replica imports them here, so that in both
    the seeds are set after the same imports (importing Keras draws from NumPy's and Python's generators, and
    importing Lightning from Python's) and the project's code starts from the same state. The variable is removed,
    so processes this one starts are not affected. Stops at the first module that fails to import: the project's
    own import of it then raises as it would have. Returns the modules imported.

    Example:
        >>> preimport({"DEVIATE_PREIMPORT": '["json", "no_such_module_x", "csv"]'})
        ['json']
    """
    text = (os.environ if environ is None else environ).pop(_ENV_PREIMPORT, None)
    try:
        names = json.loads(text) if text else []
    except ValueError:
        names = []
    imported: list[str] = []
    for name in names if isinstance(names, list) else []:
        try:
            __import__(str(name))
        except Exception:
            break
        imported.append(str(name))
    return imported


def _watch_outside_writes(run: RunDirectory, ctx: RunContext, recording: bool) -> None:
    """Watch writes outside the run directory (:mod:`deviate_cb.capture.outside_writes`); only the recording
    process writes what it saw into the manifest, every process appends to the study's ledger."""

    def record(section: ReplicaRecord) -> None:
        run.record(section)

    try:
        from deviate_cb.launch.replica.isolation import launch_dir_of

        trainer_file = (ctx.trainer or "").rsplit(":", 1)[0]  # its folder is watched even inside the temp dir
        install_outside_writes(
            ctx.run_dir,
            ctx.experiment,
            ctx.variant,
            ctx.replica,
            record if recording else None,
            launch_dir=launch_dir_of(os.getcwd()),  # a process the replica starts gets its parent's (environment)
            script=trainer_file if trainer_file.endswith(".py") else None,
        )
    except Exception as exc:  # a watch that cannot start must not stop the training
        sys.stderr.write(f"{_PROG}: warning: writes outside the run directory are not watched: {exc}\n")


def _warm_start() -> Optional[dict[str, Any]]:
    """How this process was forked from a warm-start template (:mod:`deviate_cb.launch.backends.template`), if it was.

    The variable is removed, so the processes this one starts (DDP ranks, spawned workers) count as fresh.
    """
    text = os.environ.pop(_ENV_WARM_START, None)
    try:
        facts = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(facts, dict) or not isinstance(facts.get("ready_at"), (int, float)):
        return None
    found = {
        "template_pid": facts.get("template_pid"),
        "template_import_s": facts.get("import_s"),
        "ready_to_run_s": round(time.time() - facts["ready_at"], 3),
    }
    if isinstance(facts.get("skipped"), list):  # pre-imports that failed in the template: left to the replica
        found["template_skipped"] = [str(item) for item in facts["skipped"][:20]]
    return found


def is_recording_process(environ: Optional[Mapping[str, str]] = None, argv: Optional[Sequence[str]] = None) -> bool:
    """Whether this process writes the replica's records: rank zero, and not a multiprocessing child."""
    argv = list(getattr(sys, "orig_argv", sys.argv) if argv is None else argv)
    # spawn and forkserver children run `python -c "from multiprocessing... import ..."`
    helper = "--multiprocessing-fork" in argv or any(word.startswith("from multiprocessing") for word in argv)
    return is_rank_zero(environ) and not helper


def complete_plain_run(run: RunDirectory, ctx: RunContext, final_metrics: Sequence[str] = ()) -> None:
    """Record what a ``DeviateCallback`` would have (determinism in effect, fingerprint) when none ran."""
    try:
        section = ReplicaRecord()
        if final_metrics:
            section = section.with_changes(final_metrics=list(final_metrics))
        if not run.manifest().recorded("determinism"):
            section = section.with_changes(determinism=determinism_record(ctx.seed, ctx.deterministic))
        if section:
            run.record(section)
        if not run.fingerprint_path.exists():
            from deviate_cb.fingerprint.collect import collect_fingerprint

            run.write_fingerprint(collect_fingerprint(seed=ctx.seed))
    except Exception as exc:  # informative records: never fail a finished run for them
        sys.stderr.write(f"{_PROG}: warning: could not record the determinism and fingerprint: {exc}\n")


def _complete_at_exit(run: RunDirectory, ctx: RunContext, pid: int) -> None:
    """At the exit of the recording process (not a fork of it, not after SIGTERM): :func:`complete_plain_run`."""
    if os.getpid() == pid and terminating_signal() is None:
        complete_plain_run(run, ctx)


def _record_process(run: RunDirectory, warm: Optional[dict[str, Any]] = None) -> None:
    """Append this process (pid, interpreter, command line) to the manifest's ``bootstrap`` list; and ``warm``
    (the template it was forked from, the seconds from the template being ready to this process running)."""
    try:
        processes = list(run.manifest().bootstrap or [])
        if len(processes) < MAX_PROCESSES_RECORDED:
            argv = list(getattr(sys, "orig_argv", sys.argv))
            processes.append({"pid": os.getpid(), **process_mark(), "python": sys.executable, "argv": argv})
            run.record(ReplicaRecord(bootstrap=processes), ReplicaRecord(warm=warm) if warm else ReplicaRecord())
    except Exception as exc:
        sys.stderr.write(f"{_PROG}: warning: could not record this process in {run.manifest_path}: {exc}\n")


def _terminate_as_exit() -> None:
    """Turn SIGTERM (sent on timeout or interrupt) into :class:`SignalExit` so callbacks flush on the way out.

    Lightning calls the previous handler from its own and then runs ``on_exception``; forked DataLoader
    workers inherit the handler, so in any other process it falls back to the default (terminate).
    """
    pid = os.getpid()

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        if os.getpid() != pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        _state["terminated"] = signum
        raise SignalExit(signum)

    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread of the main interpreter
        pass
