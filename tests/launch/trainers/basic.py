"""Tiny trainers for the launcher tests: NumPy only, so a replica starts in a fraction of a second.

Behaviour the tests switch on through the environment (inherited by every replica):
``LAUNCH_LOG``: a file each replica appends ``replica seed time`` to (counts launches);
``FAIL_REPLICA``: the replica index that raises in :func:`fail_on_replica` (default 1).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import numpy as np

from deviate_cb.context import RunContext
from deviate_cb.store.run_directory import RunDirectory

ENV_KEYS = (
    "DEVIATE_RUN_DIR",
    "DEVIATE_EXPERIMENT",
    "DEVIATE_VARIANT",
    "DEVIATE_REPLICA",
    "DEVIATE_SEED",
    "DEVIATE_DETERMINISTIC",
    "DEVIATE_TRAINER",
    "PYTHONHASHSEED",
    "DEVIATE_HASH_SEED",
    "PL_GLOBAL_SEED",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_VISIBLE_DEVICES",
)


def _log_launch(ctx: RunContext) -> None:
    log = os.environ.get("LAUNCH_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(f"{ctx.replica} {ctx.seed} {time.time()}\n")


def echo(ctx):
    """Write the environment to env.json and return numbers that prove seeding."""
    _log_launch(ctx)
    env = {key: os.environ.get(key) for key in ENV_KEYS}
    env["hash_abc"] = hash("abc")
    (ctx.run_dir / "env.json").write_text(json.dumps(env))
    return {
        "seed": ctx.seed,
        "replica": ctx.replica,
        "np_rand": float(np.random.rand()),
        "py_rand": random.random(),
        "hash": float(hash("abc") % 1_000_003),
        "cublas_set": "CUBLAS_WORKSPACE_CONFIG" in os.environ,
    }


def no_args():
    return {"called_with": 0.0}


def with_seed(seed):
    return {"called_with": float(seed)}


def with_context(context):
    return {"called_with": float(context.replica)}


def annotated(c: RunContext, unused: int = 5):
    return {"called_with": float(c.seed), "unused": unused}


def keyword_only(*, run_context, seed, **extra):
    return {"called_with": float(run_context.seed + seed)}


def bad_signature(lr):
    return {"lr": lr}


not_callable = {"lr": 0.1}


def fail_on_replica(ctx):
    _log_launch(ctx)
    if ctx.replica == int(os.environ.get("FAIL_REPLICA", "1")):
        print("about to fail", file=sys.stderr)
        raise RuntimeError(f"replica {ctx.replica} fails on purpose")
    return {"ok": 1.0}


def counted(ctx):
    """Resume tests: log the launch, return the replica."""
    _log_launch(ctx)
    return {"replica": ctx.replica}


def sigkill_midway(ctx):
    """Flush two epochs of metrics, then die by SIGKILL as an OOM killer would."""
    metrics = RunDirectory(ctx.run_dir).metrics()
    for epoch in range(2):
        metrics.append(
            {
                "step": [epoch * 10 + 9],
                "epoch": [epoch],
                "stage": ["train"],
                "scope": ["epoch"],
                "name": ["loss"],
                "value": [1.0 / (epoch + 1)],
                "wall_time": [time.time()],
            }
        )
    print("epoch 2 starting", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def sleep_forever(ctx):
    _log_launch(ctx)
    Path(ctx.run_dir, "sleeping").write_text(str(os.getpid()))
    time.sleep(600)


def ignore_sigterm(ctx):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Path(ctx.run_dir, "sleeping").write_text(str(os.getpid()))
    time.sleep(600)


def sleep_briefly(ctx):
    """Parallel tests: record when this replica ran and which GPU it saw."""
    start = time.time()
    time.sleep(float(os.environ.get("SLEEP_S", "1.0")))
    return {"start": start, "end": time.time(), "gpu": float(os.environ.get("CUDA_VISIBLE_DEVICES", "-1"))}


def mixed_values():
    return {
        "int": 3,
        "float32": np.float32(2.5),
        "bool": True,
        "zero_d": np.array(4.0),
        "nan": float("nan"),
        "inf": float("inf"),
        "text": "not a number",
        "vector": [1.0, 2.0],
        "none": None,
    }


def list_of_mappings():
    return [{"test_acc/dataloader_idx_0": 0.5}, {"test_acc/dataloader_idx_1": 0.25}]


def returns_model():
    return object()


def exits_three():
    """A user's own exit status 3 is a failure, not a --trainer error."""
    sys.exit(3)


async def coroutine(seed):
    return {"called_with": float(seed)}
