"""Warm start, the launcher's side: templates that fork replicas, and when a replica must start cold instead.

Example:
    >>> cold_reason([sys.executable, "-m", "deviate_cb.launch.replica.child"]) is None
    True
    >>> cold_reason([sys.executable, "-X", "dev", "train.py"])
    'the command passes options to the interpreter (-X dev)'
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from deviate_cb.launch.backends.watchdog import die_with_parent
from deviate_cb.launch.replica.isolation import launch_dir_of

__all__ = ["PER_REPLICA", "Template", "WarmProcess", "WarmStartUnavailable", "WarmStarter", "cold_reason"]

PER_REPLICA = frozenset({"PL_GLOBAL_SEED", "PL_SEED_WORKERS", "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG"})
_READY_TIMEOUT_S = 600.0
_MAX_DEATHS = 3


class WarmStartUnavailable(Exception):
    """A template cannot start replicas exactly as a fresh interpreter would; the message says why (one line)."""


def cold_reason(argv: Sequence[str]) -> Optional[str]:
    """Why the command line ``argv`` cannot run in a forked child of this interpreter, or ``None`` when it can.

    A child can run ``python -m module ARGS`` and ``python script.py ARGS`` of this very interpreter, with no
    interpreter options (they configure an interpreter at its start).
    """
    if not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return f"warm start needs fork() on Linux (this is {sys.platform})"
    if not argv or os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
        return f"the command runs {argv[0] if argv else 'nothing'}, not this Python ({sys.executable})"
    args = list(argv[1:])
    if args[:1] == ["-m"] and len(args) > 1:
        return None
    if not args or args[0] == "-" or args[0].startswith("-c"):
        return "the command runs no script or module file (-c or stdin)"
    if args[0].startswith("-"):
        options = [a for a in args if a.startswith("-")][:2]
        return f"the command passes options to the interpreter ({' '.join(args[: len(options) + 1])})"
    return None


class WarmProcess:
    """A replica forked by a :class:`Template`: its pid, and its exit status once the template reported it."""

    def __init__(self, template: Template, pid: int) -> None:
        self.template, self.pid = template, pid
        self.returncode: Optional[int] = None
        self.lost: Optional[str] = None  # why the status is not the child's own (its template died)
        self.signalled: Optional[int] = None  # the strongest signal the launcher sent its group (SIGKILL > SIGTERM)
        self._pidfd: Optional[int] = None
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(pid)

    def poll(self) -> Optional[int]:
        """The exit status (negative: the signal), or ``None`` while the replica runs."""
        if self.returncode is None:
            self.template.pump()
        if self.returncode is None and not self.template.alive and not self._running():
            # Its exit status went to no one. The template's death sent it SIGTERM (PR_SET_PDEATHSIG); the
            # launcher may have sent its group SIGKILL since (timeout, interrupt): record the signal it got.
            self.lost = f"its warm-start template (pid {self.template.pid}) died"
            self.returncode = -int(signal.SIGKILL if self.signalled == signal.SIGKILL else signal.SIGTERM)
        if self.returncode is not None and self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Signal the replica (not its group), unless it has ended."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signum)

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def _running(self) -> bool:
        if self._pidfd is not None:
            return not select.select([self._pidfd], [], [], 0)[0]
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class Template:
    """A template process: imports ``modules`` with ``env`` in ``cwd``, then forks a child per :meth:`fork`.

    Raises:
        WarmStartUnavailable: The template could not start, its imports failed, or forking it would not be exact.
    """

    def __init__(
        self, modules: Sequence[str], env: Mapping[str, str], cwd: str, *, timeout_s: float = _READY_TIMEOUT_S
    ) -> None:
        self.modules = tuple(modules)
        self.children: dict[int, WarmProcess] = {}
        self._buffer = b""
        self._messages: list[dict[str, Any]] = []
        self._closed = False
        self.log = tempfile.TemporaryFile(prefix="deviate-template-")  # noqa: SIM115 - closed by close()
        ours, theirs = socket.socketpair()
        self.channel = ours
        try:
            self.popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "deviate_cb.launch.backends.template",
                    str(theirs.fileno()),
                    json.dumps(self.modules),
                ],
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            self.close()
            raise WarmStartUnavailable(f"the warm-start template cannot start ({exc})") from None
        finally:
            theirs.close()
        self.pid = self.popen.pid
        try:
            self.ready = self._wait_ready(timeout_s)
        except BaseException:
            self.close()
            raise

    @property
    def alive(self) -> bool:
        return not self._closed and self.popen.poll() is None

    def fork(self, argv: Sequence[str], env: Mapping[str, str], cwd: str, stdout: str, stderr: str) -> WarmProcess:
        """Start a replica; :class:`WarmStartUnavailable` when the template is gone or cannot fork."""
        request = {"argv": list(argv), "env": dict(env), "cwd": cwd, "stdout": stdout, "stderr": stderr}
        try:
            self.channel.sendall((json.dumps(request) + "\n").encode())
            reply = self._next(lambda m: "pid" in m or "error" in m, timeout_s=60.0)
        except OSError as exc:
            raise WarmStartUnavailable(f"the warm-start template (pid {self.pid}) is gone ({exc})") from None
        if "error" in reply:
            raise WarmStartUnavailable(f"the warm-start template could not fork: {reply['error']}")
        process = WarmProcess(self, int(reply["pid"]))
        self.children[process.pid] = process
        return process

    def pump(self) -> None:
        """Read what the template said without blocking; record the exits it reported."""
        if self._closed:
            return
        with contextlib.suppress(OSError):
            while select.select([self.channel], [], [], 0)[0]:
                chunk = self.channel.recv(65536)
                if not chunk:
                    self._closed = True
                    break
                self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = json.loads(line)
            if "exit" in message:
                child = self.children.pop(int(message["exit"]), None)
                if child is not None:
                    child.returncode = int(message["returncode"])
            else:
                self._messages.append(message)

    def log_tail(self, limit: int = 300) -> str:
        """The last characters the template printed, on one line."""
        with contextlib.suppress(OSError):
            self.log.seek(0)
            text = self.log.read().decode(errors="replace")
            return " ".join(text.split())[-limit:]
        return ""

    def close(self, grace_s: float = 5.0) -> None:
        """End the template (it stops any child still running) and wait for it."""
        self._closed = True
        with contextlib.suppress(OSError):
            self.channel.close()
        popen = getattr(self, "popen", None)
        if popen is not None and popen.poll() is None and not hasattr(self, "ready"):
            popen.terminate()  # still importing (Ctrl-C while it starts): nothing of it is worth waiting for
        if popen is not None and popen.poll() is None:
            try:
                popen.wait(timeout=grace_s + 2)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
        with contextlib.suppress(OSError):
            self.log.close()

    def _wait_ready(self, timeout_s: float) -> dict[str, Any]:
        try:
            ready = self._next(lambda m: "ready" in m, timeout_s=timeout_s)["ready"]
        except WarmStartUnavailable as exc:
            raise WarmStartUnavailable(f"{exc}{self._said()}") from None
        if ready.get("problem"):
            raise WarmStartUnavailable(f"the warm-start template is not safe to fork: {ready['problem']}")
        return dict(ready)

    def _said(self) -> str:
        tail = self.log_tail()
        return f"; it printed: {tail}" if tail else ""

    def _next(self, wanted: Any, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            self.pump()
            for message in self._messages:
                if wanted(message):
                    self._messages.remove(message)
                    return message
            if self._closed or self.popen.poll() is not None:
                code = self.popen.poll()
                raise WarmStartUnavailable(f"the warm-start template (pid {self.pid}) ended (exit status {code})")
            if time.monotonic() >= deadline:
                raise WarmStartUnavailable(
                    f"the warm-start template (pid {self.pid}) did not answer in {timeout_s:.0f} s"
                )
            select.select([self.channel], [], [], 0.05)


class WarmStarter:
    """Templates by shared environment; :meth:`start` forks a replica or says why it must start cold."""

    def __init__(self, *, timeout_s: float = _READY_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.templates: dict[tuple[Any, ...], Template] = {}
        self.refused: dict[tuple[Any, ...], str] = {}
        self.deaths: dict[tuple[Any, ...], int] = {}

    def start(
        self, modules: Sequence[str], argv: Sequence[str], env: Mapping[str, str], cwd: str, stdout: str, stderr: str
    ) -> tuple[Optional[WarmProcess], Optional[str]]:
        """Fork the replica from its template (started, or restarted, as needed): ``(process, None)``; or
        ``(None, reason)`` when it must start cold."""
        reason = cold_reason(argv)
        if reason is not None:
            return None, reason
        shared = {k: v for k, v in env.items() if not k.startswith("DEVIATE_") and k not in PER_REPLICA}
        home = launch_dir_of(cwd)  # --isolate: one template in the launch directory for all the workdirs
        key = (tuple(modules), home, tuple(sorted(shared.items())))
        if key in self.refused:
            return None, self.refused[key]
        template = self.templates.get(key)
        if template is not None and not template.alive:
            template.close()
            del self.templates[key]
            self.deaths[key] = self.deaths.get(key, 0) + 1
            if self.deaths[key] >= _MAX_DEATHS:
                self.refused[key] = f"the warm-start template died {_MAX_DEATHS} times"
                return None, self.refused[key]
            template = None
        if template is None:
            try:
                template = self.templates[key] = Template(modules, shared, home, timeout_s=self.timeout_s)
            except WarmStartUnavailable as exc:  # it would fail the same way again: the study starts cold
                self.refused[key] = str(exc)
                return None, str(exc)
        try:
            return template.fork(argv, env, cwd, stdout, stderr), None
        except WarmStartUnavailable as exc:  # it died meanwhile: this replica starts cold, the next one restarts it
            return None, str(exc)

    def close(self) -> None:
        for template in self.templates.values():
            template.close()
        self.templates.clear()
