"""The ``slurm`` backend: one submitit job array per study, each array task one replica (or ``K``).

Example:
    >>> backend = SlurmBackend(partition="debug", gpus_per_replica=1, time=90, slurm_opt={"constraint": "a100"})
    >>> params = backend.sbatch_parameters(4, "mlp")
    >>> params["gpus_per_node"], params["time"], params["array_parallelism"], params["additional_parameters"]
    (1, 90, 1, {'constraint': 'a100'})
    >>> grouped = SlurmBackend(parallel=8, time=10, replicas_per_task=4).sbatch_parameters(2, "mlp")
    >>> grouped["time"], grouped["array_parallelism"]
    (40, 2)
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time as _time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import require
from deviate_cb.launch.backends.base import (
    Backend,
    Job,
    Listener,
    Outcome,
    Placement,
    register_backend,
    tell_cold_start,
)
from deviate_cb.launch.backends.options import check_replicas_per_task
from deviate_cb.launch.backends.remote import GroupedTasks, run_tasks, task_groups
from deviate_cb.launch.backends.slurm.jobs import (
    ACTIVE_STATES,
    SlurmQueryError,
    live_states,
    query_sacct,
    query_squeue,
    read_jobs_file,
    write_jobs_file,
)
from deviate_cb.launch.backends.slurm.options import SLURM_OPTIONS
from deviate_cb.launch.backends.slurm.outcome import ENDED_STATUSES, lost_note, outcome_from_manifest
from deviate_cb.launch.backends.slurm.submit import (
    array_executor,
    check_sinfo,
    experiment_name,
    refusal_reason,
    submitit_folder,
    task_specs,
)
from deviate_cb.launch.backends.threads import task_note
from deviate_cb.store.manifest import RunManifest
from deviate_cb.store.run_directory import RunDirectory

__all__ = ["DEFAULT_TIME_MIN", "SlurmBackend"]

DEFAULT_TIME_MIN = 60  # submitit always sends --time; without --time, a 1-hour limit per replica


class SlurmBackend(GroupedTasks, Backend):
    """Submit replicas as one Slurm job array through submitit and follow them to the end.

    Args:
        parallel: Array tasks running at once (``%parallel`` of the array).
        partition, account, qos: sbatch ``--partition``, ``--account``, ``--qos``.
        gpus_per_replica: ``--gpus-per-node`` of each task (one task per replica).
        cpus_per_replica: ``--cpus-per-task``.
        mem: ``--mem`` of each task (``4G``).
        time: Time limit per replica in minutes (default :data:`DEFAULT_TIME_MIN`).
        slurm_opt: Further sbatch options (``{"constraint": "a100"}``).
        no_wait: Return right after submission.
        poll_interval_s: How often ``squeue`` is asked.
        sacct_wait_s: How long a job that left the queue may stay unknown to ``sacct``.
        replicas_per_task: Replicas each array task runs, one after another, started warm (default 1).
    """

    name = "slurm"
    declared = SLURM_OPTIONS

    def __init__(
        self,
        *,
        parallel: int = 1,
        kill_grace_s: float = 5.0,
        partition: Optional[str] = None,
        gpus_per_replica: Optional[int] = None,
        cpus_per_replica: Optional[int] = None,
        mem: Optional[str] = None,
        time: Optional[int] = None,
        account: Optional[str] = None,
        qos: Optional[str] = None,
        slurm_opt: Optional[Mapping[str, str]] = None,
        no_wait: bool = False,
        poll_interval_s: float = 1.0,
        sacct_wait_s: float = 30.0,
        replicas_per_task: int = 1,
    ) -> None:
        super().__init__(parallel=parallel)
        self.replicas_per_task = check_replicas_per_task(replicas_per_task)
        self.kill_grace_s = kill_grace_s
        self.partition, self.account, self.qos, self.mem = partition, account, qos, mem
        self.gpus_per_replica, self.cpus_per_replica = gpus_per_replica, cpus_per_replica
        self.time = DEFAULT_TIME_MIN if time is None else time
        self.slurm_opt = dict(slurm_opt or {})
        self.no_wait = no_wait
        self.poll_interval_s, self.sacct_wait_s = poll_interval_s, sacct_wait_s
        self._cancelled = False
        self._detached = False

    @property
    def detached(self) -> bool:
        return self._detached

    def describe(self) -> str:
        parts = [f"partition {self.partition}" if self.partition else "default partition"]
        if self.gpus_per_replica:
            parts.append(f"{self.gpus_per_replica} GPU(s) per replica")
        if self.cpus_per_replica:
            parts.append(f"{self.cpus_per_replica} CPU(s) per replica")
        parts.append(f"time limit {self.time} min")
        parts.append(task_note(self.cpus_per_replica, os.environ))
        k = self.replicas_per_task
        if k > 1:
            parts.append(f"{k} replicas per task, one after another")
            return f"Slurm job array ({', '.join(parts)}), {self.tasks_at_once} task(s) at a time"
        return f"Slurm job array ({', '.join(parts)}), {self.parallel} at a time"

    def sbatch_parameters(self, tasks: int, experiment: str) -> dict[str, Any]:
        """The ``SlurmExecutor.update_parameters`` keywords for an array of ``tasks`` tasks."""
        params: dict[str, Any] = {
            "job_name": f"deviate-{experiment}",
            "time": self.time * self.replicas_per_task,
            "array_parallelism": min(self.tasks_at_once, tasks),
            "additional_parameters": dict(self.slurm_opt),
        }
        optional = {
            "partition": self.partition,
            "account": self.account,
            "qos": self.qos,
            "mem": self.mem,
            "gpus_per_node": self.gpus_per_replica,
            "cpus_per_task": self.cpus_per_replica,
        }
        params.update({k: v for k, v in optional.items() if v is not None})
        return params

    def cancel(self) -> None:
        self._cancelled = True

    def preflight(self) -> None:
        """submitit must be installed and ``sinfo`` must answer (:meth:`check_cluster`)."""
        require("submitit", extra="slurm")
        self.check_cluster()

    def check_cluster(self) -> None:
        """``sinfo`` must answer, and know ``--partition``; else a one-line :class:`UsageError`."""
        check_sinfo(self.partition)

    def live_jobs(self, run_dirs: Mapping[int, Path]) -> dict[int, str]:
        if not run_dirs:
            return {}
        record = read_jobs_file(next(iter(run_dirs.values())).parent, "deviate-replicate").get("replicas", {})
        ids = {replica: record[path.name] for replica, path in run_dirs.items() if path.name in record}
        states = live_states(ids.values()) or {}
        return {r: f"Slurm job {j} {states[j]}" for r, j in ids.items() if j in states}

    def run(self, jobs: Sequence[Job], listener: Listener) -> None:
        if not jobs:
            return
        require("submitit", extra="slurm")
        placements = {job.key: Placement(slot=i) for i, job in enumerate(jobs)}
        for job in jobs:
            listener.prepare(job, placements[job.key])
        variant_dir = Path(jobs[0].stdout_path).parent.parent
        folder = submitit_folder(variant_dir)
        groups = task_groups(list(jobs), self.replicas_per_task)
        executor = array_executor(folder, self.sbatch_parameters(len(groups), experiment_name(variant_dir)))
        specs = task_groups(task_specs(jobs, self.kill_grace_s, warm=self.warm_start), self.replicas_per_task)
        try:
            submitted = executor.map_array(run_tasks, specs)
        except Exception as exc:  # sbatch refused (bad account, QOS, option...): every replica failed to start
            reason = refusal_reason(exc)
            for job in jobs:
                now = _time.time()
                listener.finished(
                    job, placements[job.key], Outcome(None, started_at=now, ended_at=now, launch_error=reason)
                )
            return
        ids = {job.key: sjob.job_id for group, sjob in zip(groups, submitted, strict=True) for job in group}
        write_jobs_file(
            variant_dir,
            "slurm",
            {Path(j.stdout_path).parent.name: ids[j.key] for j in jobs},
            submitit_folder=str(folder),
        )
        _message(
            listener,
            f"submitted Slurm job {str(submitted[0].job_id).split('_')[0]} ({len(groups)} tasks); logs in {folder}",
        )
        if self.no_wait:
            self._detached = True
            return
        pending: dict[str, list[tuple[Job, Placement]]] = {}
        for job in jobs:
            pending.setdefault(ids[job.key], []).append((job, placements[job.key]))
        self._watch(pending, listener)

    def _watch(self, pending: dict[str, list[tuple[Job, Placement]]], listener: Listener) -> None:
        """Follow each array task (``job_id`` -> its replicas, in the order it runs them) until it leaves the queue.

        A replica of a running task is shown started once its task has recorded its start in its manifest (a
        task of several replicas runs them one after another); every replica of a task is finished when the
        task has left the queue, with the task's Slurm state.
        """
        started: set[str] = set()
        left_queue: dict[str, float] = {}
        cancelled: set[str] = set()
        told: set[str] = set()
        warned = False
        try:
            while pending:
                if self._cancelled and set(pending) - cancelled:
                    _scancel(sorted(set(pending) - cancelled))
                    cancelled |= set(pending)
                try:
                    live = query_squeue(pending)
                except SlurmQueryError as exc:
                    _message(listener, f"warning: {exc}; retrying")
                    _time.sleep(max(self.poll_interval_s, 5.0))
                    continue
                gone = []
                for job_id, group in pending.items():
                    state = live.get(job_id)
                    if state not in ACTIVE_STATES:
                        gone.append(job_id)
                    elif state != "PENDING":
                        for job, placement in group:
                            if job.key not in started and (len(group) == 1 or _task_started(job)):
                                started.add(job.key)
                                listener.started(job, Placement(placement.slot, host=f"Slurm job {job_id}"), None)
                if gone:
                    try:
                        final = query_sacct(gone)
                        note = ""
                    except SlurmQueryError as exc:
                        final = {}
                        note = f"sacct is unavailable ({exc}); the job's end state is unknown"
                        if not warned:
                            warned = True
                            _message(
                                listener,
                                f"warning: {note}. Replicas are judged by their manifests; one that left the queue "
                                f"without recording its end is failed after {self.sacct_wait_s:.0f} s. Enable Slurm "
                                "accounting (slurmdbd) for exact states.",
                            )
                    now = _time.monotonic()
                    for job_id in gone:
                        state = final.get(job_id)
                        first = left_queue.setdefault(job_id, now)
                        manifests = [_manifest(job) for job, _ in pending[job_id]]
                        unknown = state is None or state in ACTIVE_STATES  # accounting lags, or there is none
                        ended = all(m.status in ENDED_STATUSES for m in manifests)
                        if unknown and now - first < self.sacct_wait_s and not (ended and note):
                            continue
                        group = pending.pop(job_id)
                        for (job, placement), manifest in zip(group, manifests, strict=True):
                            tell_cold_start(listener, manifest.cold_reason, told)
                            # a replica that completed before a later one of its task ran out of time stays completed
                            own = "COMPLETED" if len(group) > 1 and _completed(manifest) else state
                            outcome = outcome_from_manifest(
                                manifest, own, job_id, cancelled=job_id in cancelled, note=note or lost_note(job_id)
                            )
                            listener.finished(job, placement, outcome)
                if pending:
                    _time.sleep(self.poll_interval_s)
        except BaseException:
            _scancel(sorted(pending))
            self._wait_gone(list(pending))  # the tasks write their own end first; ours must come last
            for job_id, group in pending.items():
                for job, placement in group:
                    outcome = outcome_from_manifest(_manifest(job), "CANCELLED", job_id)
                    listener.finished(job, placement, dataclasses.replace(outcome, interrupted=True))
            raise

    def _wait_gone(self, job_ids: list[str]) -> None:
        """Wait (at most ``kill_grace_s`` + 10 s; a second Ctrl-C stops it) for cancelled jobs to leave the queue."""
        deadline = _time.monotonic() + self.kill_grace_s + 10.0
        try:
            while job_ids and _time.monotonic() < deadline:
                try:
                    live = query_squeue(job_ids, timeout_s=5.0)
                except SlurmQueryError:
                    return
                if not any(live.get(j) in ACTIVE_STATES for j in job_ids):
                    return
                _time.sleep(0.2)
        except KeyboardInterrupt:
            return


def _manifest(job: Job) -> RunManifest:
    return RunDirectory(Path(job.stdout_path).parent).manifest()


def _task_started(job: Job) -> bool:
    """Whether the task on the node has started this replica (it records ``slurm_job_id`` first)."""
    return _manifest(job).recorded("slurm_job_id")


def _completed(manifest: RunManifest) -> bool:
    return manifest.status == "completed" and manifest.exit_code == 0


def _scancel(job_ids: Sequence[str]) -> None:
    if job_ids:
        subprocess.run(["scancel", *job_ids], capture_output=True, timeout=60, check=False)


def _message(listener: Listener, text: str) -> None:
    say = getattr(listener, "message", None)
    if callable(say):
        say(text)


register_backend("slurm", SlurmBackend)
