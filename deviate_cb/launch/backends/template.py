"""The warm-start template: an interpreter that imports the frameworks once and forks one child per replica.

Example:
    >>> fork_problem() is None or isinstance(fork_problem(), str)
    True
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any, Optional

__all__ = ["become_replica", "fork_problem", "main"]

_GRACE_S = 5.0


def fork_problem() -> Optional[str]:
    """Why forking this process would give children that differ from a fresh interpreter, or ``None``."""
    import threading

    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
        return f"a Python thread is running after the imports ({names})"
    if _cuda_driver_initialised():
        return "the CUDA driver was initialised during the imports"
    torch = sys.modules.get("torch")
    if torch is not None:
        count = getattr(getattr(torch, "cuda", None), "device_count", None)
        info = getattr(count, "cache_info", None)
        if torch.cuda.is_initialized() or (info is not None and info().currsize):
            return "torch counted or initialised the GPUs during the imports (CUDA_VISIBLE_DEVICES is read then)"
    context = sys.modules.get("tensorflow.python.eager.context")
    live = getattr(context, "_context", None)
    if live is not None and getattr(live, "_context_handle", None) is not None:
        return "TensorFlow's eager context was initialised during the imports"
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is not None and getattr(bridge, "_backends", None):
        return "JAX's backends were initialised during the imports"
    return None


def _cuda_driver_initialised() -> bool:
    """Whether ``cuInit`` ran here: only asked when ``libcuda`` is already loaded (it is never loaded for this)."""
    try:
        with open("/proc/self/maps") as maps:
            if "libcuda.so" not in maps.read():
                return False
        count = ctypes.c_int(0)
        return ctypes.CDLL("libcuda.so.1").cuDeviceGetCount(ctypes.byref(count)) == 0  # 3: not initialised
    except (OSError, AttributeError):
        return False


def main(argv: Sequence[str]) -> int:
    """Import, check, report ready, then serve fork requests until the socket closes."""
    fd, modules = int(argv[0]), json.loads(argv[1])
    channel = socket.socket(fileno=fd)
    began = time.time()
    imported: list[str] = []
    skipped: list[str] = []
    for name in modules:
        try:
            __import__(name)
        except Exception as exc:  # often imported only when available (`if _TORCHVISION_AVAILABLE:`): skipped;
            # a replica that needs it meets the error itself, as a cold one would
            skipped.append(f"{name} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})")
            continue
        imported.append(name)
    problem = fork_problem()
    ready = _send_ready(channel, began, imported, problem, skipped)
    if problem is not None:
        return 0
    return _serve(channel, ready)


def _send_ready(
    channel: socket.socket, began: float, imported: list[str], problem: Optional[str], skipped: Sequence[str] = ()
) -> dict[str, Any]:
    ready: dict[str, Any] = {
        "template_pid": os.getpid(),
        "import_s": round(time.time() - began, 3),
        "ready_at": time.time(),
    }
    if skipped:  # each forked replica records them (`warm.template_skipped`)
        ready["skipped"] = list(skipped)
    _send(channel, {"ready": {**ready, "modules": imported, "problem": problem}})
    return ready


def _send(channel: socket.socket, message: Mapping[str, Any]) -> None:
    channel.sendall((json.dumps(message) + "\n").encode())


def _serve(channel: socket.socket, ready: Mapping[str, Any]) -> int:
    children: set[int] = set()
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    buffer = b""
    try:
        while not stopping:
            readable, _, _ = select.select([channel], [], [], 0.02)
            if readable:
                chunk = channel.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    request = json.loads(line)
                    pid = _fork(request, channel, ready)
                    if pid is not None:
                        children.add(pid)
            _reap(children, channel)
    except (OSError, InterruptedError):  # the launcher is gone
        pass
    _stop(children, channel)
    return 0


def _fork(request: Mapping[str, Any], channel: socket.socket, template: Mapping[str, Any]) -> Optional[int]:
    """Fork a child for ``request``; answer with its pid once it has its own session (or with the error)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    started, ready = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(started)
        os.close(ready)
        _send(channel, {"error": f"cannot fork: {exc}"})
        return None
    if pid == 0:  # the replica: never returns
        os.close(started)
        code = 1
        try:
            code = become_replica(request, channel, ready, template)
        finally:
            os._exit(code)
    os.close(ready)
    with os.fdopen(started, "rb") as pipe:
        pipe.read(1)  # the child has called setsid: its group can be signalled
    _send(channel, {"pid": pid})
    return pid


def become_replica(
    request: Mapping[str, Any], channel: socket.socket, ready_fd: int, template: Mapping[str, Any]
) -> int:
    """In the forked child: turn into the replica a fresh interpreter would be, run its program, exit like one."""
    template_pid = os.getppid()
    os.setsid()
    from deviate_cb.launch.backends.watchdog import die_with_parent

    die_with_parent()
    os.write(ready_fd, b"1")
    os.close(ready_fd)
    channel.close()
    if os.getppid() != template_pid:  # the template died before the signal could be armed
        return 128 + signal.SIGTERM
    for signum in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _redirect(0, os.devnull, os.O_RDONLY)
    _redirect(1, request["stdout"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    _redirect(2, request["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    argv = list(request["argv"])
    sys.orig_argv = argv
    os.environ["DEVIATE_WARM_START"] = json.dumps({**template, "forked_at": time.time()})
    return _run_program(argv[1:])


def _redirect(fd: int, path: str, flags: int) -> None:
    opened = os.open(path, flags, 0o666)
    os.dup2(opened, fd)
    os.close(opened)


def _run_program(args: Sequence[str]) -> int:
    """Run ``python ARGS`` (``-m module ...`` or ``script.py ...``) in this process; return its exit status."""
    import runpy
    import threading

    code: int = 0
    try:
        from deviate_cb.launch.replica.bootstrap import bootstrap_from_environment

        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            sys.path[0] = os.getcwd()
            sys.modules.pop(args[1], None)  # a fresh `python -m` has not imported it either
            bootstrap_from_environment()
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(args[0])
            sys.argv = list(args)
            sys.path[0] = os.path.dirname(os.path.realpath(script))
            bootstrap_from_environment()
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException as exc:
        traceback.print_exc()
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__  # as the interpreter
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does: wait for non-daemon threads
        import atexit

        atexit._run_exitfuncs()
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _exit_code(value: object) -> int:
    """The exit status ``sys.exit(value)`` gives: ``None`` 0, an int itself, anything else printed and 1.

    Example:
        >>> _exit_code(None), _exit_code(3)
        (0, 3)
    """
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _reap(children: set[int], channel: socket.socket) -> None:
    """Report every child that ended, after killing what it left in its process group."""
    while children:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        pid = info.si_pid
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        children.discard(pid)
        _send(channel, {"exit": pid, "returncode": os.waitstatus_to_exitcode(status)})


def _stop(children: set[int], channel: socket.socket) -> None:
    """The launcher is gone or asked the template to end: SIGTERM every child's group, SIGKILL after a grace."""
    for pid in children:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_S
    while children and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            _reap(children, channel)
        time.sleep(0.02)
    for pid in list(children):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
