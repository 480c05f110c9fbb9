"""Determinism overhead of the Keras models on TensorFlow, measured in alternating fresh processes.

Example:
    >>> worker_command({"model": "keras_small_cnn", "mode": "on"})[1:3]
    ['-m', 'deviate_cb.bench.keras_runner']
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Optional

from deviate_cb.errors import UsageError

__all__ = ["MARKER", "measure_keras", "run_worker", "worker_command"]

MARKER = "DEVIATE_BENCH "


def worker_command(config: dict[str, Any]) -> list[str]:
    """The command line of one worker process."""
    return [sys.executable, "-m", "deviate_cb.bench.keras_runner", "--worker", json.dumps(config)]


def measure_keras(
    model: str,
    *,
    windows: int = 2,
    steps_per_window: int = 10,
    warmup: int = 3,
    batch_size: int = 32,
    profile_steps: int = 3,
    seed: int = 0,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Run ``2 * windows`` worker processes in alternating order; same result shape as the torch runner's."""
    rows: list[dict[str, Any]] = []
    ops: list[dict[str, Any]] = []
    devices: set[str] = set()
    for window in range(windows):
        for mode in ("off", "on") if window % 2 == 0 else ("on", "off"):
            config = {
                "model": model,
                "mode": mode,
                "steps": steps_per_window,
                "warmup": warmup,
                "batch_size": batch_size,
                "profile_steps": profile_steps if window == 0 else 0,
                "seed": seed,
            }
            result = _spawn(config, timeout_s)
            devices.add(result["device"])
            rows.append({"window": window, "mode": mode, "steps": steps_per_window, "step_s": result["step_s"]})
            ops += [{"mode": mode, **row} for row in result["ops"]]
    by_window: dict[int, dict[str, float]] = {}
    for row in rows:
        by_window.setdefault(row["window"], {})[row["mode"]] = row["step_s"]
    ratios = [w["on"] / w["off"] for _, w in sorted(by_window.items())]
    return {"windows": rows, "ratios": ratios, "ops": ops, "device": "gpu" if "gpu" in devices else "cpu"}


def _spawn(config: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
    try:
        done = subprocess.run(worker_command(config), capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise UsageError(f"the Keras benchmark worker for {config['model']} ran past {timeout_s:.0f} s.") from exc
    for line in done.stdout.splitlines():
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER) :])
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    raise UsageError(f"the Keras benchmark worker for {config['model']} failed (exit {done.returncode}): {tail}")


def run_worker(config: dict[str, Any]) -> dict[str, Any]:
    """Body of one worker process (imports TensorFlow; call only in a fresh process)."""
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import keras
    import numpy as np
    import tensorflow as tf

    from deviate_cb.bench.models import build_keras_model
    from deviate_cb.capture.step_timer import StepTimer
    from deviate_cb.profiling.tensorflow_profiler import TensorFlowProfileWindow
    from deviate_cb.profiling.window import ProfileWindow

    keras.utils.set_random_seed(int(config["seed"]))
    if config["mode"] == "on":
        tf.config.experimental.enable_op_determinism()
    model = build_keras_model(config["model"])
    rng = np.random.default_rng(int(config["seed"]))
    x = rng.standard_normal((config["batch_size"], 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, config["batch_size"])
    for _ in range(max(1, int(config["warmup"]))):
        model.train_on_batch(x, y)
    timer = StepTimer()
    for index in range(int(config["steps"])):
        timer.start_step()
        model.train_on_batch(x, y)
        timer.end_step("train", 0, index)
    ops: list[dict[str, Any]] = []
    profile_steps = int(config.get("profile_steps", 0))
    if profile_steps:
        driver = TensorFlowProfileWindow(ProfileWindow(wait=0, warmup=0, active=profile_steps))
        driver.start()
        for _ in range(profile_steps):
            model.train_on_batch(x, y)
            driver.step()
        driver.stop()
        ops = [
            {
                "op": row["op"],
                "device_type": row["device_type"],
                "calls": row["calls"],
                "self_us_per_step": row["self_time_us"] / profile_steps,
                "total_us_per_step": row["total_time_us"] / profile_steps,
            }
            for row in driver.rows()
        ]
    device = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    return {
        "step_s": statistics.median(row["wall_s"] for row in timer.rows()),
        "ops": ops,
        "device": device,
        "finished_at": time.time(),
    }


def _main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "--worker":
        print("usage: python -m deviate_cb.bench.keras_runner --worker JSON", file=sys.stderr)
        return 2
    print(MARKER + json.dumps(run_worker(json.loads(argv[1]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
