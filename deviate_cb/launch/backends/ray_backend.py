"""The ``ray`` backend: each replica a Ray task with ``num_cpus``/``num_gpus``, on a cluster or a local one.

Example:
    >>> backend = RayBackend(num_gpus=0.5, num_cpus=2)
    >>> backend.task_options()
    {'num_cpus': 2.0, 'num_gpus': 0.5, 'max_retries': 0, 'retry_exceptions': False}
    >>> backend.describe(environ={})
    'Ray tasks on a local Ray cluster (2.0 CPU, 0.5 GPU per replica; 2 CPU threads each), 1 at a time'
    >>> RayBackend(parallel=8, replicas_per_task=4).describe(environ={}).split("(")[1]
    '1.0 CPU, 0.0 GPU per task of 4 replicas run one after another; 1 CPU thread each), 2 at a time'
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.errors import UsageError, require
from deviate_cb.launch.backends.base import (
    Backend,
    BackendOption,
    Job,
    Listener,
    Outcome,
    Placement,
    register_backend,
    tell_cold_start,
)
from deviate_cb.launch.backends.options import REPLICAS_PER_TASK, amount_option, check_replicas_per_task
from deviate_cb.launch.backends.remote import GroupedTasks, TaskSpec, check_marker, node_argv, run_tasks, task_groups
from deviate_cb.launch.backends.threads import task_note
from deviate_cb.store.manifest import LaunchEnd
from deviate_cb.store.run_directory import RunDirectory, unix_time

__all__ = ["RAY_GROUP", "RAY_OPTIONS", "RayBackend"]

_FINAL = ("completed", "incomplete", "failed", "timeout", "killed", "audited")
# Set by Ray in every worker (from the task's num_cpus) unless the driver's environment has it: the replica gets
# the driver's value, or the task's CPUs through deviate_cb.launch.backends.threads like every other thread variable
# (the fingerprint records the thread counts in effect).
_RAY_INJECTED = ("OMP_NUM_THREADS",)
RAY_GROUP = "ray backend (needs pip install 'deviate-cb[ray]')"


def _address(value: Any) -> str:
    text = str(value).strip()
    if not text or any(c.isspace() for c in text):
        raise UsageError(
            f"`--address` must be a Ray cluster address (host:port, ray://host:port, 'auto' or 'local'). "
            f"Received: --address={value}."
        )
    return text


RAY_OPTIONS = (
    BackendOption("address", "--address", "Ray cluster address (default: start a local one)", RAY_GROUP, "ADDR",
                  _address),
    BackendOption("num_gpus", "--num-gpus", "GPUs per replica task (fractions allowed)", RAY_GROUP, "X",
                  amount_option("--num-gpus", positive=False)),
    BackendOption("num_cpus", "--num-cpus", "CPUs per replica task (default 1)", RAY_GROUP, "X",
                  amount_option("--num-cpus", positive=True)),
    REPLICAS_PER_TASK,
)  # fmt: skip


class RayBackend(GroupedTasks, Backend):
    """Run replicas as Ray tasks, at most ``parallel`` submitted at once (Ray queues them by resources).

    Args:
        address: A running cluster's address; ``None`` or ``"local"`` starts a private local cluster.
        num_gpus: GPUs per replica (fractions allowed; default 0).
        num_cpus: CPUs per replica (default 1).
        poll_interval_s: How long each wait for finished tasks lasts.
        replicas_per_task: Replicas each Ray task runs, one after another, started warm (default 1);
            ``num_gpus``/``num_cpus`` are then per task.
    """

    name = "ray"
    declared = RAY_OPTIONS

    def __init__(
        self,
        *,
        parallel: int = 1,
        kill_grace_s: float = 5.0,
        address: Optional[str] = None,
        num_gpus: Optional[float] = None,
        num_cpus: Optional[float] = None,
        poll_interval_s: float = 0.5,
        replicas_per_task: int = 1,
    ) -> None:
        super().__init__(parallel=parallel)
        self.replicas_per_task = check_replicas_per_task(replicas_per_task)
        self.kill_grace_s = kill_grace_s
        self.address = None if address in (None, "local") else address
        self.num_gpus = float(num_gpus or 0.0)
        self.num_cpus = 1.0 if num_cpus is None else float(num_cpus)
        self.poll_interval_s = poll_interval_s
        self._cancelled = False

    def describe(self, environ: Optional[Mapping[str, str]] = None) -> str:
        """One line for the launcher's header; ``environ``: the launching environment (default ``os.environ``)."""
        where = f"Ray cluster {self.address}" if self.address else "a local Ray cluster"
        k = self.replicas_per_task
        unit = "replica" if k == 1 else f"task of {k} replicas run one after another"
        at_once = self.tasks_at_once
        threads = task_note(self.num_cpus, os.environ if environ is None else environ)
        resources = f"{self.num_cpus} CPU, {self.num_gpus} GPU per {unit}; {threads}"
        return f"Ray tasks on {where} ({resources}), {at_once} at a time"

    def task_options(self) -> dict[str, Any]:
        """Keywords of ``ray.remote(...).options`` for a replica task."""
        return {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus, "max_retries": 0, "retry_exceptions": False}

    def cancel(self) -> None:
        self._cancelled = True

    def preflight(self) -> None:
        """Ray must be installed (imported here: it is needed next anyway)."""
        if self.address is None:
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray reads it at import
        require("ray", extra="ray")

    def _connect(self) -> tuple[Any, bool]:
        """Import Ray and connect (or start a local cluster); return the module and whether we started it."""
        if self.address is None:
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a private cluster stays on loopback
        ray = require("ray", extra="ray")
        if ray.is_initialized():
            return ray, False
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        try:
            if self.address is None:
                ray.init(address="local", _node_ip_address="127.0.0.1", **kwargs)
            else:
                ray.init(address=self.address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(
                f"`--address` must reach a running Ray cluster, but connecting failed: {' '.join(str(exc).split())}. "
                f"Received: --address={self.address}."
            ) from None
        return ray, True

    def _check_resources(self, ray: Any) -> None:
        total = ray.cluster_resources()
        for flag, key, need in (("--num-gpus", "GPU", self.num_gpus), ("--num-cpus", "CPU", self.num_cpus)):
            if need > total.get(key, 0.0):
                raise UsageError(
                    f"`{flag}` asks {need:g} {key} per replica, but the Ray cluster has {total.get(key, 0.0):g} "
                    "in all; "
                    f"no replica could ever start. Received: {flag}={need:g}."
                )

    def _check_shared(self, ray: Any, variant_dir: Path) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        marker = variant_dir / f".deviate-ray-check-{uuid.uuid4().hex}"
        marker.write_text(f"written by {socket.gethostname()} pid {os.getpid()}\n")
        try:
            probe = ray.remote(check_marker)
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            refs = [
                probe.options(
                    num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
                ).remote(str(marker))
                for n in nodes
            ]
            answers = ray.get(refs, timeout=120)
        finally:
            marker.unlink(missing_ok=True)
        blind = [host for ok, host in answers if not ok]
        if blind:
            raise UsageError(
                f"`--out` must be on storage every Ray node sees, but node(s) {', '.join(sorted(set(blind)))} cannot "
                f"read {variant_dir}. Use a shared file system path. Received: --out={variant_dir.parent.parent}."
            )

    def run(self, jobs: Sequence[Job], listener: Listener) -> None:
        if not jobs:
            return
        ray, started_cluster = self._connect()
        try:
            self._check_resources(ray)
            self._check_shared(ray, Path(jobs[0].stdout_path).parent.parent)
            self._run(ray, list(jobs), listener)
        finally:
            if started_cluster:
                ray.shutdown()

    def _run(self, ray: Any, jobs: list[Job], listener: Listener) -> None:
        task = ray.remote(run_tasks).options(**self.task_options())
        extra_env = {k: os.environ[k] for k in ("PYTHONPATH", *_RAY_INJECTED) if k in os.environ}
        unset = tuple(k for k in _RAY_INJECTED if k not in os.environ)
        queue = task_groups(list(enumerate(jobs)), self.replicas_per_task)
        running: dict[Any, list[tuple[Job, Placement]]] = {}
        told: set[str] = set()
        try:
            while queue or running:
                while queue and len(running) < self.tasks_at_once and not self._cancelled:
                    group = [(job, Placement(slot=slot, host="Ray task")) for slot, job in queue.pop(0)]
                    for job, placement in group:
                        listener.prepare(job, placement)
                    specs = [self._spec(job, extra_env, unset) for job, _ in group]
                    ref = task.remote(specs)
                    running[ref] = group
                    for job, placement in group:
                        listener.started(job, placement, None)
                if self._cancelled:
                    queue.clear()
                    for ref in running:
                        ray.cancel(ref, force=True)
                if not running:
                    break
                ready, _ = ray.wait(list(running), num_returns=1, timeout=self.poll_interval_s)
                for ref in ready:
                    group = running.pop(ref)
                    for job, placement in group:
                        outcome = self._outcome(ray, ref, job, listener, told, shared=len(group) > 1)
                        listener.finished(job, placement, outcome)
        except BaseException:
            for ref in running:
                ray.cancel(ref, force=True)
            for group in running.values():
                for job, placement in group:
                    now = time.time()
                    listener.finished(job, placement, Outcome(None, interrupted=True, ended_at=now, started_at=now))
            raise

    def _spec(self, job: Job, extra_env: dict[str, str], unset: tuple[str, ...]) -> TaskSpec:
        """What the task runs for ``job``: forked warm when the task runs several replicas (and not ``--cold``)."""
        return TaskSpec(
            str(Path(job.stdout_path).parent),
            {**extra_env, **job.env},
            job.timeout_s,
            self.kill_grace_s,
            "ray",
            unset,
            argv=node_argv(job.argv),
            cwd=None if job.cwd is None else str(job.cwd),
            warm_modules=job.warm_modules if self.warm_start else None,
            cpus=self.num_cpus,
        )

    def _outcome(
        self, ray: Any, ref: Any, job: Job, listener: Listener, told: set[str], *, shared: bool = False
    ) -> Outcome:
        """``job``'s outcome from its manifest and the task's fate; in a ``shared`` task (several replicas), a
        replica that recorded its completion stays completed when the task failed later."""
        error = None
        try:
            ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            error = "TaskCancelledError"
        except ray.exceptions.RayError as exc:
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        manifest = RunDirectory(Path(job.stdout_path).parent).manifest()
        tell_cold_start(listener, manifest.cold_reason, told)
        status = manifest.status
        ended = status in _FINAL
        code = manifest.exit_code
        launch_error = None
        if not ended and error is None:
            launch_error = f"the Ray task ended without recording the replica's end in {Path(job.stdout_path).parent}"
        state = None if error is None or (shared and status == "completed") else error.split(":")[0]
        return Outcome(
            returncode=code if ended else None,
            signal=manifest.signal if ended else None,
            timed_out=status == "timeout",
            cancelled=self._cancelled,
            started_at=unix_time(manifest.started_at),
            ended_at=time.time(),
            launch_error=launch_error or (error if not ended else None),
            scheduler_state=state,
            end=LaunchEnd(ray_error=error) if error else LaunchEnd(),
        )


register_backend("ray", RayBackend)
