"""A light trainer (NumPy only at top level) whose behaviour depends on the replica, for warm-start tests.

``main``: replica 1 raises, 2 segfaults, 3 hangs (until ``--timeout``); the others return the NumPy draw and the
hash of a string, so seeding and ``PYTHONHASHSEED`` in a forked replica can be compared with a cold one.
``sleepy``: replicas 0 and 1 sleep for a minute; the others return at once.
"""

from __future__ import annotations

import ctypes
import random
import time

import numpy as np

from deviate_cb.context import RunContext


def main(ctx: RunContext) -> dict[str, float]:
    if ctx.replica == 1:
        raise RuntimeError("replica 1 fails on purpose")
    if ctx.replica == 2:
        ctypes.string_at(0)  # SIGSEGV
    if ctx.replica == 3:
        time.sleep(600)
    return {
        "numpy_draw": float(np.random.random()),
        "random_draw": random.random(),
        "str_hash": float(hash("deviate-cb") % 100_000),
    }


def sleepy(ctx: RunContext) -> dict[str, float]:
    if ctx.replica in (0, 1):
        time.sleep(60)
    return {"replica": float(ctx.replica)}
