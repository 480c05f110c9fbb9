"""A real local Ray cluster for the session: ``ray start --head --block`` on loopback, two CPUs and two fake GPUs,
in its own temporary directory and process group; stopped by signalling exactly that process group (never
``ray stop``, which would kill every Ray process on the machine).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # bind to loopback
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a loopback-only test cluster: no token to hand around


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="deviate-ray-")
    ray_cli = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [
            str(ray_cli), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
            "--num-cpus=2", "--num-gpus=2", "--include-dashboard=false", "--disable-usage-stats",
            f"--temp-dir={temp_dir}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            probe = subprocess.run([str(ray_cli), "status", f"--address={address}"], capture_output=True, check=False)
            if probe.returncode == 0:
                break
            assert head.poll() is None, "ray start exited"
            time.sleep(1)
        else:
            raise RuntimeError(f"the Ray head at {address} did not come up: {probe.stderr.decode()[-500:]}")
        yield address
    finally:
        for signum, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(head.pid, signum)
            except ProcessLookupError:
                break
            try:
                head.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
