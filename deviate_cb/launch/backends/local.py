"""The ``local`` backend: a pool of ``parallel`` slots, one process per replica, forked warm or started fresh."""

from __future__ import annotations

import contextlib
import heapq
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Optional, Union

from deviate_cb.errors import UsageError
from deviate_cb.launch.backends.base import (
    Backend,
    BackendOption,
    Job,
    Listener,
    Outcome,
    Placement,
    register_backend,
    tell,
    tell_cold_start,
)
from deviate_cb.launch.backends.survivors import (
    become_subreaper,
    find_leftovers,
    leftovers_line,
    now_ticks,
    stop_leftovers,
)
from deviate_cb.launch.backends.threads import budget_note, replica_thread_env, usable_cpus
from deviate_cb.launch.backends.warm import WarmProcess, WarmStarter
from deviate_cb.launch.backends.watchdog import GroupWatchdog, die_with_parent
from deviate_cb.launch.records import StoreWriteError, signal_name, writing
from deviate_cb.store.manifest import LaunchEnd

__all__ = ["LocalBackend", "detect_gpus", "parse_gpus"]

_GPU_ID = re.compile(r"^(\d+|(GPU|MIG)-[0-9A-Za-z/-]+)$")


def parse_gpus(text: str) -> tuple[str, ...]:
    """Parse ``--gpus``: comma-separated ids (``0,1``, or UUIDs ``GPU-...``); ``none`` or empty for none.

    Example:
        >>> parse_gpus("0, 1"), parse_gpus("none")
        (('0', '1'), ())
    """
    if text.strip().lower() in ("", "none"):
        return ()
    ids = tuple(part.strip() for part in text.split(","))
    if not all(_GPU_ID.match(i) for i in ids) or len(set(ids)) != len(ids):
        raise UsageError(
            "`--gpus` must be distinct GPU ids separated by commas (e.g. 0,1, or GPU-<uuid>), or 'none'. "
            f"Received: --gpus={text}."
        )
    return ids


def detect_gpus(environ: Optional[Mapping[str, str]] = None) -> tuple[str, ...]:
    """The GPUs to spread slots over: ``CUDA_VISIBLE_DEVICES`` if set, else NVML's devices, else none.

    Example:
        >>> detect_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}), detect_gpus({"CUDA_VISIBLE_DEVICES": "-1"})
        (('2', '3'), ())
    """
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids: list[str] = []
        for part in visible.split(","):
            part = part.strip()
            if not part or part.startswith("-"):  # CUDA ignores everything from the first invalid id on
                break
            ids.append(part)
        return tuple(ids)
    try:
        import pynvml
    except ImportError:
        return ()
    try:
        pynvml.nvmlInit()
        try:
            return tuple(str(i) for i in range(pynvml.nvmlDeviceGetCount()))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no device, or NVML refuses: run without GPU placement
        return ()


class _Running:
    """A started replica process and what the backend has done to it."""

    def __init__(
        self,
        job: Job,
        placement: Placement,
        popen: Union[subprocess.Popen[bytes], WarmProcess],
        start: Optional[LaunchEnd] = None,
    ) -> None:
        self.job, self.placement, self.popen = job, placement, popen
        self.start = start or LaunchEnd(start_mode="warm" if isinstance(popen, WarmProcess) else "cold")
        self.started_at, self.started_mono = time.time(), time.monotonic()
        self.term_sent: Optional[float] = None
        self.killed = False
        self.timed_out = self.interrupted = self.cancelled = False
        self.since = 0  # when it started, in /proc ticks: its leftovers started later
        self.leftovers = LaunchEnd()  # its end record's leftover processes stopped, survivors

    def signal_group(self, signum: int) -> None:
        if isinstance(self.popen, WarmProcess) and self.popen.poll() is not None:
            return  # its template reaped it: the pid may be another process's by now
        if isinstance(self.popen, WarmProcess) and self.popen.signalled != signal.SIGKILL:
            self.popen.signalled = signum  # what it got, should its template die before reporting its exit
        try:
            if hasattr(os, "killpg"):
                os.killpg(self.popen.pid, signum)
            else:  # pragma: no cover - Windows
                self.popen.send_signal(signum)
        except (ProcessLookupError, PermissionError):
            pass

    def terminate(self) -> None:
        if self.term_sent is None:
            self.term_sent = time.monotonic()
            self.signal_group(signal.SIGTERM)

    def tick(self, grace_s: float) -> None:
        """Apply the timeout, and escalate to SIGKILL once the grace after SIGTERM has passed."""
        now = time.monotonic()
        timeout = self.job.timeout_s
        if timeout is not None and self.term_sent is None and now - self.started_mono >= timeout:
            self.timed_out = True
            self.terminate()
        if self.term_sent is not None and not self.killed and now - self.term_sent >= grace_s:
            self.killed = True
            self.signal_group(signal.SIGKILL)

    def exited(self) -> bool:
        """Reap the process if it ended; kill what it left in its group first (its pid keeps the group id).

        A warm replica is its template's child: the template does both and reports the exit status.
        """
        if isinstance(self.popen, WarmProcess):
            return self.popen.poll() is not None
        if hasattr(os, "waitid"):
            try:
                if os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                    return False
                self.signal_group(signal.SIGKILL)
            except ChildProcessError:
                pass
        return self.popen.poll() is not None

    def reap(self) -> None:
        """Wait for the process to end, kill what it left in its group, then reap it."""
        if hasattr(os, "waitid") and not isinstance(self.popen, WarmProcess):
            try:
                os.waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOWAIT)
                self.signal_group(signal.SIGKILL)
            except ChildProcessError:
                pass
        self.popen.wait()

    def outcome(self) -> Outcome:
        rc = self.popen.returncode
        return Outcome(
            returncode=rc,
            signal=signal_name(rc),
            timed_out=self.timed_out,
            interrupted=self.interrupted,
            cancelled=self.cancelled,
            started_at=self.started_at,
            ended_at=time.time(),
            pid=self.popen.pid,
            end=self._end(),
        )

    def _end(self) -> LaunchEnd:
        """This backend's values of the end record: how the replica started, what it left running."""
        end = self.start
        if isinstance(self.popen, WarmProcess) and self.popen.lost:
            end = end.with_changes(warm_lost=self.popen.lost)
        return end.merged(self.leftovers)


class LocalBackend(Backend):
    """Run replicas as local subprocesses, at most ``parallel`` at once.

    Args:
        parallel: Number of slots (concurrent replicas).
        gpus: GPU ids to spread slots over (slot ``i`` gets ``gpus[i % len(gpus)]``); empty: no placement.
        kill_grace_s: Seconds between SIGTERM and SIGKILL when a replica is terminated.
        poll_interval_s: How often running replicas are checked.

    Example:
        >>> backend = LocalBackend(parallel=3, gpus=("0", "1"))
        >>> [backend.placement(slot).gpu for slot in range(3)]
        ['0', '1', '0']
    """

    name = "local"
    declared = (
        BackendOption(
            "gpus",
            "--gpus",
            "GPU ids to spread slots over, e.g. 0,1, or 'none' (default: CUDA_VISIBLE_DEVICES, else NVML)",
            "local backend",
            "IDS",
        ),
    )
    lazy_jobs = True  # `run` takes the jobs one at a time, as slots free up: a long study is never held at once

    def __init__(
        self,
        *,
        parallel: int = 1,
        gpus: Sequence[str] = (),
        kill_grace_s: float = 5.0,
        poll_interval_s: float = 0.05,
    ) -> None:
        super().__init__(parallel=parallel)
        self.gpus = tuple(gpus)
        self.kill_grace_s = kill_grace_s
        self.poll_interval_s = poll_interval_s
        self._cancelled = False
        self._warm: Optional[WarmStarter] = None
        self._told: set[str] = set()
        self._threads: dict[str, str] = {}
        self._watchdog: Optional[GroupWatchdog] = None

    def placement(self, slot: int) -> Placement:
        return Placement(slot=slot, gpu=self.gpus[slot % len(self.gpus)] if self.gpus else None)

    def describe(self) -> str:
        gpus = ", ".join(self.gpus) if self.gpus else "none"
        threads = budget_note(cores=usable_cpus(), at_once=self.parallel, environ=os.environ)
        return f"{self.parallel} at a time, {threads + ', ' if threads else ''}GPUs: {gpus}"

    def thread_env(self) -> dict[str, str]:
        """The CPU threads each replica gets (:func:`~deviate_cb.launch.backends.threads.replica_thread_env`): the CPUs
        this process may use shared by the ``parallel`` slots, where the launching environment has not chosen."""
        return replica_thread_env(cores=usable_cpus(), at_once=self.parallel, environ=os.environ)

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def warm_start(self) -> bool:
        return True

    def run(self, jobs: Iterable[Job], listener: Listener) -> None:
        self._cancelled = False
        pending = iter(jobs)
        upcoming = next(pending, None)
        free = list(range(self.parallel))
        running: list[_Running] = []
        self._warm, self._told = WarmStarter(), set()
        self._threads = self.thread_env()
        watchdog = self._watchdog = GroupWatchdog(self.kill_grace_s)  # ends the replicas' groups if it is killed
        was_subreaper = become_subreaper()  # a replica's orphans (own session, daemons) become this launcher's
        try:
            while running or (upcoming is not None and not self._cancelled):
                while upcoming is not None and free and not self._cancelled:
                    job, placement = upcoming, self.placement(heapq.heappop(free))
                    upcoming = next(pending, None)
                    listener.prepare(job, placement)
                    since = now_ticks()
                    proc = self._start(job, placement, listener)
                    if proc is None:
                        heapq.heappush(free, placement.slot)
                        continue
                    proc.since = since
                    running.append(proc)
                    watchdog.watch(proc.popen.pid, proc.job.stdout_path.parent, since)
                    listener.started(job, placement, proc.popen.pid)
                for proc in list(running):
                    if self._cancelled and proc.term_sent is None:
                        proc.cancelled = True
                        proc.terminate()
                    if not proc.exited():
                        proc.tick(self.kill_grace_s)
                        continue
                    running.remove(proc)
                    watchdog.forget(proc.popen.pid)
                    self._stop_leftovers(proc, running, listener)
                    heapq.heappush(free, proc.placement.slot)
                    listener.finished(proc.job, proc.placement, proc.outcome())
                if running:
                    time.sleep(self.poll_interval_s)
        except BaseException:
            self._stop_all(running, listener)
            raise
        finally:
            self._warm.close()
            watchdog.close()
            if was_subreaper is False:
                become_subreaper(False)

    def _start(self, job: Job, placement: Placement, listener: Listener) -> Optional[_Running]:
        env = {**os.environ, **self._threads, **job.env, **placement.env()}
        start: Optional[LaunchEnd] = None
        if job.warm_modules is not None and self._warm is not None:
            warm = self._start_warm(job, placement, listener, env)
            if isinstance(warm, _Running) or warm is None:
                return warm
            start = LaunchEnd(start_mode="cold", cold_reason=warm)
        try:
            with contextlib.ExitStack() as logs:
                out, err = _open_log(logs, job.stdout_path), _open_log(logs, job.stderr_path)
                popen = subprocess.Popen(
                    list(job.argv),
                    env=env,
                    cwd=job.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    close_fds=True,
                    preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
                )
        except (OSError, StoreWriteError) as exc:  # a log that cannot be created names the file and the cause
            now = time.time()
            outcome = Outcome(returncode=None, started_at=now, ended_at=now, launch_error=f"cannot start: {exc}")
            listener.finished(job, placement, outcome)
            return None
        return _Running(job, placement, popen, start)

    def _start_warm(
        self, job: Job, placement: Placement, listener: Listener, env: dict[str, str]
    ) -> Union[_Running, str, None]:
        """Fork ``job`` from its template: the running replica; ``None`` when its logs cannot be created (reported
        finished); or why it must start cold (told to the listener once per reason)."""
        assert self._warm is not None and job.warm_modules is not None
        try:
            with contextlib.ExitStack() as logs:  # created (emptied) here, as for a cold replica; the child appends
                _open_log(logs, job.stdout_path), _open_log(logs, job.stderr_path)
        except (OSError, StoreWriteError) as exc:
            now = time.time()
            outcome = Outcome(returncode=None, started_at=now, ended_at=now, launch_error=f"cannot start: {exc}")
            listener.finished(job, placement, outcome)
            return None
        cwd = str(job.cwd or Path.cwd())
        process, reason = self._warm.start(
            job.warm_modules, job.argv, env, cwd, str(job.stdout_path), str(job.stderr_path)
        )
        if process is not None:
            return _Running(job, placement, process)
        assert reason is not None
        tell_cold_start(listener, reason, self._told)
        return reason

    def _stop_all(self, running: list[_Running], listener: Listener) -> None:
        """Terminate every running replica (SIGTERM, grace, SIGKILL), wait for all, report them interrupted."""
        for proc in running:
            proc.interrupted = proc.interrupted or not (proc.timed_out or proc.cancelled)
            proc.terminate()
        deadline = time.monotonic() + self.kill_grace_s
        try:
            while time.monotonic() < deadline and not all([proc.exited() for proc in running]):
                time.sleep(self.poll_interval_s)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
            pass
        for proc in running:
            if proc.popen.returncode is None:
                proc.signal_group(signal.SIGKILL)
                proc.reap()
        for proc in running:
            with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: what is left is left (and said)
                self._stop_leftovers(proc, [], listener)
        for proc in running:
            listener.finished(proc.job, proc.placement, proc.outcome())

    def _stop_leftovers(self, proc: _Running, running: Sequence[_Running], listener: Listener) -> None:
        """Stop what the ended replica ``proc`` left running outside its group
        (:mod:`deviate_cb.launch.backends.survivors`), say so in one line, and record it in its outcome:
        ``leftovers_stopped`` (a count) and ``survivors`` (each one that could not be stopped, also named on stderr).
        While no other replica runs, every orphan that was reparented to this launcher is the ended replica's too (a
        daemon whose environment is not its own)."""
        known = {other.popen.pid for other in running}
        known |= {template.pid for template in (self._warm.templates.values() if self._warm else ())}
        if self._watchdog is not None and self._watchdog.popen is not None:
            known.add(self._watchdog.popen.pid)
        found = find_leftovers(
            proc.job.stdout_path.parent,
            since=proc.since,
            exclude=known,
            exclude_group=proc.popen.pid,
            strays=not running,
        )
        if not found:
            return
        left = stop_leftovers(found, self.kill_grace_s, self.poll_interval_s)
        stopped = [leftover for leftover in found if leftover not in left]
        proc.leftovers = LaunchEnd(leftovers_stopped=len(stopped))
        if stopped:
            tell(listener, leftovers_line(proc.job.key, stopped, stopped=True))
        if left:
            proc.leftovers = proc.leftovers.with_changes(survivors=[leftover.describe() for leftover in left])
            line = leftovers_line(proc.job.key, left, stopped=False)
            print(f"deviate-replicate: warning: {line}", file=sys.stderr, flush=True)


def _open_log(stack: contextlib.ExitStack, path: Path) -> IO[bytes]:
    """Open a replica's log for writing, closed with ``stack``; :class:`StoreWriteError` names it when it cannot be.

    Example:
        >>> import tempfile
        >>> with contextlib.ExitStack() as stack:
        ...     _open_log(stack, Path(tempfile.mkdtemp()) / "stdout.log").writable()
        True
    """
    with writing(path):
        return stack.enter_context(open(path, "wb"))


register_backend("local", LocalBackend)
