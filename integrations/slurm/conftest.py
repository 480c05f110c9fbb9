"""A real single-node Slurm cluster (slurmctld, slurmd, slurmdbd + MariaDB so that ``sacct`` works, two fake
GPUs) for the session, started by this directory's ``start.sh`` and stopped by ``stop.sh`` unless it was
already running before the tests (then it is left as found).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
BASE = Path(os.environ.get("SLURM_LOCAL_DIR", f"{os.environ.get('TMPDIR', '/tmp')}/deviate-slurm"))


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


@pytest.fixture(scope="session", autouse=True)
def slurm_cluster() -> Iterator[Path]:
    was_running = _alive(BASE / "run" / "slurmctld.pid")
    env = {**os.environ, "FAKE_GPUS": "2", "WITH_DBD": "1", "SLURM_LOCAL_DIR": str(BASE)}
    subprocess.run(["bash", str(HERE / "start.sh")], check=True, env=env, timeout=600)
    yield BASE
    if not was_running:
        subprocess.run(["bash", str(HERE / "stop.sh")], check=False, env=env, timeout=120)
