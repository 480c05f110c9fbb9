"""Replicate a trainer ``n`` times under a noise variant: plan, launch, record, summarise.

Example:
    >>> replicate("train.py:main", runs=0)  # arguments are checked before anything is created
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--runs` must be a positive integer. Received: --runs=0.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, TextIO, Union, cast

from deviate_cb.audit.recording.settings import AUDIT_ENV
from deviate_cb.audit.recording.stopping import STOP_ENV
from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.base import Job, backend_class
from deviate_cb.launch.backends.local import detect_gpus, parse_gpus
from deviate_cb.launch.backends.options import parse_backend_options
from deviate_cb.launch.outdir import OutputDirectory
from deviate_cb.launch.planner import ReplicaPlan, ReplicationPlan
from deviate_cb.launch.progress import make_progress
from deviate_cb.launch.records import (
    StoreWriteError,
)
from deviate_cb.launch.replica.isolation import workdir_of
from deviate_cb.launch.replica.keras_backend import check_keras_backend
from deviate_cb.launch.replication import WARNING, Replication, ReplicationResult
from deviate_cb.launch.spec import MAX_REPLICAS, ReplicationSpec
from deviate_cb.launch.target.command import Command, run_dir_alias, uses_run_dir_after_equals
from deviate_cb.launch.target.preimport import preimports, project_files
from deviate_cb.launch.target.trainer_spec import TrainerSpec, TrainerSpecError
from deviate_cb.store.metric_hint import nothing_recorded_line
from deviate_cb.store.output_metrics import compile_metric_patterns
from deviate_cb.store.run_directory import RunDirectory, check_partition_value

__all__ = [
    "KEEP_DETERMINISM_WARNING",
    "KEEP_SEEDS_WARNING",
    "SITE_DIR",
    "experiment_name",
    "replicate",
    "run_replication",
]

CHILD_COMMAND = (sys.executable, "-m", "deviate_cb.launch.replica.child")
# Put first on every replica's PYTHONPATH: its sitecustomize bootstraps each Python process of the replica.
SITE_DIR = Path(__file__).resolve().parent / "replica" / "sitedir"
KEEP_SEEDS_WARNING = (
    "--keep-project-seeds: the project's own seeding calls keep their seeds, so a project that seeds itself "
    "with a fixed seed (seed_everything(42)) trains every replica from that seed and seed variance is suppressed"
)
KEEP_DETERMINISM_WARNING = (
    "--keep-project-determinism: the project's own determinism switches stay in effect, so a project that switches "
    "determinism on itself suppresses the implementation noise impl and algo+impl measure, and one that switches it "
    "off (cudnn.benchmark = True) makes algo and control replicas nondeterministic; each replica where this happened "
    "is listed as a problem"
)


def replicate(
    trainer: Optional[str] = None,
    *,
    command: Optional[Sequence[str]] = None,
    trainer_args: Sequence[str] = (),
    keep_project_seeds: bool = False,
    keep_project_determinism: bool = False,
    cold: bool = False,
    metric_regex: Sequence[str] = (),
    runs: int = 1,
    variant: str = "algo+impl",
    seed: int = 0,
    out: Union[str, Path] = "deviate_runs",
    experiment: Optional[str] = None,
    parallel: Optional[int] = None,
    timeout: Optional[float] = None,
    force: bool = False,
    gpus: Union[str, Sequence[str], None] = None,
    keras_backend: Optional[str] = None,
    backend: str = "local",
    backend_options: Optional[Mapping[str, Any]] = None,
    argv: Optional[Sequence[str]] = None,
    stream: Optional[TextIO] = None,
    live: Optional[bool] = None,
    kill_grace_s: float = 5.0,
    audit: Optional[int] = None,
    audit_stop: bool = False,
    max_replicas: int = MAX_REPLICAS,
    isolate: bool = False,
    said_problems: Optional[set[str]] = None,
) -> ReplicationResult:
    """Run ``runs`` replicas of ``trainer`` (``module:fn`` or ``path/to/file.py:fn``) or of ``command``.

    Args:
        trainer: The ``--trainer`` spec; give it or ``command``.
        command: The command line after ``--`` (:mod:`deviate_cb.launch.target.command`): each replica runs it with
            the placeholders ``{seed}``, ``{replica}``, ``{run_dir}``, ``{variant}``, ``{experiment}`` filled.
        trainer_args: With ``trainer``: the arguments after ``--``, which the function sees as ``sys.argv[1:]``.
        keep_project_seeds: Leave the project's own seeding calls alone (no seeding takeover); the launcher
            warns that seed variance may be suppressed.
        keep_project_determinism: Leave the project's own determinism switches in effect (no determinism
            takeover, :mod:`deviate_cb.capture.switch_takeover`); the launcher warns, and each replica whose
            switches disagree with its variant is a problem of the study.
        cold: Start every replica as a fresh interpreter. By default a Python replica is forked from a warm-start
            template that has imported the project's frameworks once (:mod:`deviate_cb.launch.backends.warm`), with the
            same numbers; where that cannot be exact, the replica starts cold and a note says why.
        metric_regex: Regular expressions with named groups; their last matches in a replica's output are
            recorded as final metrics (:mod:`deviate_cb.store.output_metrics`).
        parallel: Replicas at once (default: 1 locally; all of them on a cluster backend, which queues them).
        backend: ``local`` (default), ``slurm``, ``ray`` or a backend from the ``deviate_cb.backends`` entry points.
        backend_options: The backend's options by name (``partition``, ``gpus_per_replica``, ``address``...; see
            :mod:`deviate_cb.launch.backends.options`); one that the backend does not take is a usage error.
        gpus: GPU ids to spread slots over (``"0,1"`` or a list); ``None`` detects them
            (``CUDA_VISIBLE_DEVICES``, else NVML), ``"none"`` or ``[]`` disables placement.
        keras_backend: ``tensorflow``, ``torch`` or ``jax``: ``KERAS_BACKEND`` of every replica (checked here
            without importing anything: Keras 3 and the backend's package must be installed); ``None`` leaves
            the environment's.
        argv: The command line recorded in every manifest (default ``sys.argv``).
        stream: Where progress goes (default stdout); ``live`` forces (or disables) the live table.
        kill_grace_s: Seconds between SIGTERM and SIGKILL when a replica is terminated.
        audit: Training steps every replica's callback audits (``DEVIATE_AUDIT``, :mod:`deviate_cb.audit.recording`;
            what ``deviate audit`` runs); ``None``: no audit. ``audit_stop``: each replica stops once its audited
            steps are recorded (status ``audited``, :mod:`deviate_cb.audit.recording.stopping`).
        max_replicas: The most replicas one launch may plan (default :data:`MAX_REPLICAS`); a larger ``runs``
            is refused as a likely typo (``--max-replicas`` lifts it).
        isolate: Run each replica in its own working directory, ``<run_dir>/.workdir/<launch dir name>``, which
            links every top-level entry of the launch directory (and ``..`` those of its parent,
            :mod:`deviate_cb.launch.replica.isolation`), so that files the project writes to relative paths are the
            replica's own.
        said_problems: The problem lines already printed by earlier launches of one run of rounds
            (``--until-decided``): not printed again; the lines printed now are added.

    Returns:
        What became of each replica; ``stopped`` says why the study stopped early when the run directory could
        not be written (disk full, I/O error: exit status 1 on the command line, with that line on stderr).

    Raises:
        UsageError: Exit status 2 on the command line; nothing was run, or (a ``--trainer`` that fails in
            the replica) the replicas were stopped and their new, empty run directories removed.
        MissingDependencyError: The backend's engine (submitit, Ray) is not installed; nothing was created.

    Example:
        >>> result = replicate("examples/train.py:main", runs=4, variant="control", out="runs")  # doctest: +SKIP
        >>> result.exit_status, result.summary()  # doctest: +SKIP
        (0, '4 completed, 0 failed, 0 skipped in 9.8 s; run `deviate report runs`')
    """
    spec = ReplicationSpec(
        trainer=trainer,
        command=command,
        trainer_args=trainer_args,
        keep_project_seeds=keep_project_seeds,
        keep_project_determinism=keep_project_determinism,
        cold=cold,
        metric_regex=metric_regex,
        runs=runs,
        variant=variant,
        seed=seed,
        out=out,
        experiment=experiment,
        parallel=parallel,
        timeout=timeout,
        force=force,
        gpus=gpus,
        keras_backend=keras_backend,
        backend=backend,
        backend_options=dict(backend_options or {}),
        argv=argv,
        kill_grace_s=kill_grace_s,
        audit=audit,
        audit_stop=audit_stop,
        max_replicas=max_replicas,
        isolate=isolate,
    )
    return run_replication(spec, stream=stream, live=live, said_problems=said_problems)


def run_replication(
    spec: ReplicationSpec,
    *,
    stream: Optional[TextIO] = None,
    live: Optional[bool] = None,
    said_problems: Optional[set[str]] = None,
) -> ReplicationResult:
    """Run the replication ``spec`` describes (checked when it was made); what :func:`replicate` does.

    Args:
        spec: The replication.
        stream: Where progress goes (default stdout); ``live`` forces (or disables) the live table.
        said_problems: The problem lines already printed by earlier launches of one run of rounds.

    Returns:
        What became of each replica, as :func:`replicate` says.
    """
    started = time.monotonic()
    factory, options = _backend_options(spec)
    keras_backend = check_keras_backend(spec.keras_backend)
    patterns = compile_metric_patterns(list(spec.metric_regex))
    target = _target(spec.trainer, spec.command, spec.trainer_args)
    experiment = _check_experiment(spec.experiment, target)
    if "gpus" in getattr(factory, "options", ()):
        gpus = spec.gpus
        options["gpus"] = detect_gpus() if gpus is None else parse_gpus(gpus) if isinstance(gpus, str) else tuple(gpus)
    slots = spec.parallel if spec.parallel is not None else (1 if spec.backend == "local" else spec.runs)
    launcher = factory(parallel=slots, kill_grace_s=spec.kill_grace_s, **options)
    launcher.preflight()
    out, variant = spec.out, spec.variant
    outdir = OutputDirectory(Path(out).absolute(), experiment, variant, given=str(out))
    outdir.open()
    trainer_text = target.text if isinstance(target, TrainerSpec) else None
    configuration = spec.configuration(
        trainer=trainer_text,
        command=None if isinstance(target, TrainerSpec) else target.given,
        keras_backend=keras_backend,
    )
    try:
        plan = ReplicationPlan(
            outdir.root,
            experiment,
            variant,
            spec.runs,
            spec.seed,
            trainer=trainer_text,
            trainer_args=tuple(spec.trainer_args),
            keep_project_seeds=spec.keep_project_seeds,
            keep_project_determinism=spec.keep_project_determinism,
            force=spec.force,
            configuration=configuration,
        )
    except BaseException:
        outdir.close(remove_created=True)
        raise
    progress = make_progress(stream, live=live)
    modules = preimports(project_files(target, Path.cwd()), Path.cwd())
    first, last = plan.seed_range
    what = target.text if isinstance(target, TrainerSpec) else f"`{shlex.join(target.given)}`"
    runs = spec.runs
    progress.message(
        f"deviate-replicate: {runs} replica{'s' * (runs != 1)} of {what}, variant {variant} "
        f"(seed{'s' * (first != last)} {first}{f'..{last}' if first != last else ''}) in "
        f"{Path(str(out)) / f'experiment={experiment}' / f'variant={variant}'}; {launcher.describe()}"
        + (f"; Keras backend {keras_backend}" if keras_backend else "")
        + (_start_line(spec.cold, modules) if getattr(launcher, "warm_start", False) else "")
    )
    if spec.keep_project_seeds:
        progress.message(f"{WARNING} {KEEP_SEEDS_WARNING}")
    if spec.keep_project_determinism:
        progress.message(f"{WARNING} {KEEP_DETERMINISM_WARNING}")
    if plan.other_configurations:
        progress.message(f"{WARNING} {_other_configurations_line(plan)}")
    for replica, why in sorted(plan.unreadable.items()):  # rerun: say which file made it so, and what it was
        progress.message(f"{WARNING} replica={replica}: {why}: rerun")
    replication = Replication(
        progress,
        launcher,
        base_seed=spec.seed,
        argv=sys.argv if spec.argv is None else spec.argv,
        keras_backend=keras_backend,
        command=target if isinstance(target, Command) else None,
        patterns=patterns,
        configuration=configuration,
    )
    left_running = {k: p.run_dir for k, p in plan.existing.items() if p.run and p.previous_status == "running"}
    running = launcher.live_jobs(left_running) if left_running else {}
    for replica in running:  # still queued or running under a job an earlier launcher submitted: not rerun
        plan.existing[replica] = dataclasses.replace(plan.existing[replica], run=False)
    replication.live = running

    def jobs() -> Iterator[Job]:
        """One job per replica to run, made when the backend asks for it (a long study is never held at once)."""
        for replica_plan in plan:
            replica = replica_plan.replica
            reason = f"still queued/running: {running[replica]}" if replica in running else "already completed"
            progress.add(replica, replica_plan.seed, skipped="" if replica_plan.run else reason)
            if replica_plan.run:
                job = _job(replica_plan, spec, keras_backend, target if isinstance(target, Command) else None)
                env = {**job.env, "DEVIATE_PREIMPORT": json.dumps(modules)}  # cold replicas import them first too
                if spec.audit:
                    env[AUDIT_ENV] = str(spec.audit)
                    if spec.audit_stop:  # deviate audit without --finish (deviate_cb.audit.recording.stopping)
                        env[STOP_ENV] = "1"
                yield dataclasses.replace(job, env=env, warm_modules=None if spec.cold else modules)

    interrupted = False
    try:
        # a lazy backend takes the iterator as it is (its `run` is typed for the common case, a list)
        launcher.run(cast(Sequence[Job], jobs()) if launcher.lazy_jobs else list(jobs()), replication)
    except KeyboardInterrupt:
        interrupted = True
        raise
    except StoreWriteError as exc:  # from the listener's prepare: recorded there; the backend stopped the others
        replication.stop(exc)
    finally:
        replication.settle_unfinished()
        progress.close()
        if replication.spec_error is None:
            outdir.close(remove_created=True)  # only what is still empty: nothing ran there
        results = [replication.result_of(replica_plan) for replica_plan in plan]
        result = ReplicationResult(
            str(out),
            experiment,
            variant,
            results,
            time.monotonic() - started,
            interrupted,
            stopped=replication.stop_line(results),
        )
        if replication.spec_error is None:
            progress.message(result.summary())
            if not interrupted:
                for line in _problem_lines(outdir.root / f"experiment={experiment}" / f"variant={variant}"):
                    if said_problems is None or line not in said_problems:
                        progress.message(f"{WARNING} {line}")
                    if said_problems is not None:
                        said_problems.add(line)
                trained, regex = spec.trainer is not None, spec.metric_regex
                nothing = "" if spec.audit else nothing_recorded_line(results, metric_regex=regex, trainer=trained)
                if nothing:  # once per launch: what was captured (nothing) and how to capture it
                    progress.message(f"{WARNING} {nothing}")
    if replication.spec_error is not None:
        empty = tuple(d for d in replication.created_run_dirs if not RunDirectory(d).metrics_path.exists())
        outdir.close(remove_created=True, remove_run_dirs=empty)
        raise TrainerSpecError(replication.spec_error)
    return result


def _backend_options(spec: ReplicationSpec) -> tuple[Any, dict[str, Any]]:
    """The backend's factory and the options given for it, checked (``gpus`` among them when given)."""
    factory = backend_class(spec.backend)
    raw_options = {**spec.backend_options, **({"gpus": spec.gpus} if spec.gpus is not None else {})}
    return factory, parse_backend_options(spec.backend, raw_options, tuple(getattr(factory, "options", ())))


def _job(plan: ReplicaPlan, spec: ReplicationSpec, keras_backend: Optional[str], command: Optional[Command]) -> Job:
    cwd = workdir_of(plan.run_dir, Path.cwd()) if spec.isolate else Path.cwd()  # made by Replication.prepare
    env = plan.context.to_env()
    for name, value in (("WANDB_RUN_GROUP", plan.context.experiment), ("WANDB_JOB_TYPE", plan.context.variant)):
        if name not in os.environ:  # W&B groups the replicas natively; a grouping the user set is kept
            env[name] = value
    if keras_backend is not None:
        env["KERAS_BACKEND"] = keras_backend
    env.setdefault("PYTHONUNBUFFERED", os.environ.get("PYTHONUNBUFFERED", "1"))  # logs up to date if killed
    inherited = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = str(SITE_DIR) + (os.pathsep + inherited if inherited else "")
    if command is None:
        argv: Sequence[str] = CHILD_COMMAND
    else:
        ctx = plan.context
        values: dict[str, object] = dict(
            seed=ctx.seed, replica=ctx.replica, run_dir=ctx.run_dir, variant=ctx.variant, experiment=ctx.experiment
        )
        if uses_run_dir_after_equals(command.given):  # `key={run_dir}/...`: a path its parser can split on `=`
            alias = run_dir_alias(Path(ctx.run_dir), Path(ctx.run_dir).parents[2], cwd)
            if alias is not None:
                values["run_dir_alias"] = alias
        argv = command.fill(**values)
    return Job(
        key=f"replica={plan.replica}",
        argv=tuple(argv),
        env=env,
        stdout_path=plan.run_dir / "stdout.log",
        stderr_path=plan.run_dir / "stderr.log",
        timeout_s=spec.timeout,
        cwd=cwd,
        payload=plan,
    )


def _start_line(cold: bool, modules: Sequence[str]) -> str:
    """How replicas start, for the header: ``; cold start`` or the frameworks the warm-start template imports.

    Example:
        >>> _start_line(False, ("lightning", "deviate_cb.launch.replica.child")), _start_line(True, ())
        ('; warm start (the template imports lightning)', '; cold start (--cold)')
    """
    if cold:
        return "; cold start (--cold)"
    frameworks = [name for name in modules if not name.startswith("deviate_cb")]
    return f"; warm start (the template imports {', '.join(frameworks) or 'deviate-cb only'})"


def _target(
    trainer: Optional[str], command: Optional[Sequence[str]], trainer_args: Sequence[str]
) -> Union[TrainerSpec, Command]:
    """The parsed ``--trainer`` or command, prechecked (nothing of the project runs)."""
    if trainer is None and not command:
        raise UsageError(
            "`--trainer` or a command after `--` is required, e.g. `--trainer train.py:main` or "
            "`-- python train.py --seed {seed}`. Received: neither."
        )
    if trainer is not None and command:
        raise UsageError(
            "`--trainer` and a command cannot be given together (with --trainer, the words after `--` are the "
            f"function's sys.argv[1:]). Received: --trainer={trainer} and a command."
        )
    if trainer is not None:
        spec = TrainerSpec.parse(trainer)
        spec.precheck()
        return spec
    parsed = Command.parse(command or ())
    parsed.precheck()
    return parsed


def _problem_lines(variant_dir: Path) -> list[str]:
    """What the study's manifests and metrics show to be wrong (seeds not in effect, identical replicas...)."""
    try:
        from deviate_cb.report.answers.findings import format_problem
        from deviate_cb.report.answers.problems import study_problems

        return [format_problem(problem) for problem in study_problems(variant_dir)]
    except Exception as exc:  # the study ran; a failed check must not hide its summary
        return [f"could not check the study for problems: {type(exc).__name__}: {exc}"]


def _other_configurations_line(plan: ReplicationPlan) -> str:
    """The warning for completed replicas past ``--runs`` that ran another configuration (kept, never pooled)."""
    numbers = sorted(plan.other_configurations)
    first = plan.other_configurations[numbers[0]]
    which = ", ".join(str(n) for n in numbers[:10]) + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
    return (
        f"replica{'s' * (len(numbers) > 1)} {which} of this group completed with another configuration "
        f"({'; '.join(first)}: recorded vs this launch) and {'are' if len(numbers) > 1 else 'is'} kept; the report "
        "refuses to pool the group until they are removed or rerun (a larger --runs with --force)"
    )


def _check_experiment(experiment: Optional[str], spec: Union[TrainerSpec, Command]) -> str:
    name = experiment if experiment is not None else spec.default_experiment()
    try:
        return check_partition_value("experiment", name)
    except UsageError as exc:
        source = "--trainer" if isinstance(spec, TrainerSpec) else "the command"
        derived = "" if experiment is not None else f" (derived from {source}; pass --experiment)"
        message = (
            str(exc)
            .replace("`experiment`", "`--experiment`", 1)
            .replace("Received: experiment=", "Received: --experiment=", 1)
        )
        raise UsageError(message.rstrip(".") + f"{derived}.") from None


def experiment_name(
    trainer: Optional[str],
    command: Optional[Sequence[str]] = None,
    trainer_args: Sequence[str] = (),
    experiment: Optional[str] = None,
) -> str:
    """The experiment :func:`replicate` files the replicas under: ``experiment``, else the one derived from the
    trainer or command (as ``--experiment`` would be checked; a one-line :class:`UsageError` otherwise).

    Example:
        >>> experiment_name(None, ["python", "-m", "json.tool"]), experiment_name(None, ["ls"], experiment="mlp")
        ('json.tool', 'mlp')
    """
    return _check_experiment(experiment, _target(trainer, command, trainer_args))
