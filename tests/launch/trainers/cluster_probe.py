"""Tiny trainers for the cluster backends' tests (Slurm, Ray): quick, slow, or killed from outside.

None imports a framework, so a replica costs an interpreter start-up. Each returns numbers that identify it
(replica, seed) so the tests can check that every task got its own run context.
"""

from __future__ import annotations

import os
import signal
import time


def quick(ctx):
    """Return at once."""
    return {"replica": ctx.replica, "seed": ctx.seed}


def slow(ctx):
    """Sleep ``DEVIATE_TEST_SLEEP_S`` seconds (default 3), so that replicas overlap, then return."""
    time.sleep(float(os.environ.get("DEVIATE_TEST_SLEEP_S", "3")))
    return {"replica": ctx.replica, "seed": ctx.seed}


def hang_on_replica_one(ctx):
    """Replica 1 sleeps for ten minutes (to be cancelled from outside); the others return at once."""
    if ctx.replica == 1:
        time.sleep(600)
    return {"replica": ctx.replica}


def kill_worker_on_replica_one(ctx):
    """Replica 1 SIGKILLs the process that started it (a Ray worker), then waits to be taken down with it."""
    if ctx.replica == 1:
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)
    return {"replica": ctx.replica}
