"""Determinism overhead of a torch training step, measured in one process with interleaved off/on windows.

Example:
    >>> model, step = builtin_setup("small_cnn", device="cpu", batch_size=4)
    >>> result = measure(step, windows=2, steps_per_window=2, warmup=1, profile_steps=1)
    >>> len(result["ratios"]), sorted({row["mode"] for row in result["windows"]})
    (2, ['off', 'on'])
"""

from __future__ import annotations

import inspect
import os
import statistics
from collections.abc import Callable, Mapping
from typing import Any, Optional

from deviate_cb.errors import UsageError

__all__ = ["builtin_setup", "determinism_switches", "measure", "resolve_device", "user_setup"]


def builtin_setup(name: str, *, device: str, batch_size: int, seed: int = 0) -> tuple[Any, Callable[[], Any]]:
    """A built-in model with SGD, cross-entropy and one fixed random CIFAR-shaped batch: ``(model, step)``."""
    import torch

    from deviate_cb.bench.models import INPUT_SHAPE, NUM_CLASSES, build_torch_model

    torch.manual_seed(seed)
    model = build_torch_model(name).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch_size, *INPUT_SHAPE, device=device)
    y = torch.randint(0, NUM_CLASSES, (batch_size,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    return model, step


def user_setup(spec: str, *, device: str, batch_size: int) -> tuple[Any, Callable[[], Any]]:
    """Resolve ``--trainer mod:fn`` and call it under the contract of the module docstring."""
    from deviate_cb.launch.target.trainer_spec import TrainerSpec

    fn = TrainerSpec.parse(spec).resolve()
    parameters: Mapping[str, inspect.Parameter]
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        parameters = {}
    offered = {"device": device, "batch_size": batch_size}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    kwargs = {k: v for k, v in offered.items() if takes_any or k in parameters}
    made = fn(**kwargs)
    if isinstance(made, tuple) and len(made) == 2 and callable(made[1]):
        return made[0], made[1]
    if callable(getattr(made, "step", None)):
        return getattr(made, "model", None), made.step
    raise UsageError(
        f"`--trainer` must name a function returning (model, step) or an object with a callable `step`. "
        f"Received: --trainer={spec} returned {type(made).__name__}."
    )


def determinism_switches(on: bool) -> None:
    """Turn torch's deterministic algorithms and cuDNN determinism on, or back to the defaults (off)."""
    import torch

    torch.use_deterministic_algorithms(on)
    torch.backends.cudnn.deterministic = on
    if on:
        torch.backends.cudnn.benchmark = False


def measure(
    step: Callable[[], Any],
    *,
    windows: int = 6,
    steps_per_window: int = 10,
    warmup: int = 5,
    profile_steps: int = 3,
    device: str = "cpu",
) -> dict[str, Any]:
    """Time ``step`` in ``windows`` interleaved off/on pairs; profile ``profile_steps`` steps per mode.

    Returns a dict with ``windows`` (one row per window: ``window``, ``mode``, ``steps``, ``step_s``),
    ``ratios`` (one on/off ratio per pair), ``ops`` (``mode``, ``op``, ``device_type``, ``calls``,
    ``self_us_per_step``, ``total_us_per_step``) and ``errors`` (a one-line reason per mode that raised).
    """
    import torch

    from deviate_cb.capture.step_timer import StepTimer
    from deviate_cb.profiling.torch_profiler import TorchProfileWindow
    from deviate_cb.profiling.window import ProfileWindow

    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (torch <= 2.9)
    sync = torch.cuda.synchronize if device.startswith("cuda") else None
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    rows: list[dict[str, Any]] = []
    ops: list[dict[str, Any]] = []
    try:
        for mode in ("off", "on"):
            determinism_switches(mode == "on")
            for _ in range(warmup):
                _run(step, mode)
        for window in range(windows):
            for mode in ("off", "on") if window % 2 == 0 else ("on", "off"):
                determinism_switches(mode == "on")
                timer = StepTimer(synchronize=sync)
                for index in range(steps_per_window):
                    timer.start_step()
                    _run(step, mode)
                    timer.end_step("train", window, index)
                times = [row["wall_s"] for row in timer.rows()]
                rows.append({"window": window, "mode": mode, "steps": len(times), "step_s": statistics.median(times)})
        if profile_steps > 0:
            for mode in ("off", "on"):
                determinism_switches(mode == "on")
                driver = TorchProfileWindow(ProfileWindow(wait=0, warmup=1, active=profile_steps))
                driver.start()
                for _ in range(1 + profile_steps):
                    _run(step, mode)
                    driver.step()
                driver.stop()
                for row in driver.rows():
                    ops.append(
                        {
                            "mode": mode,
                            "op": row["op"],
                            "device_type": row["device_type"],
                            "calls": row["calls"],
                            "self_us_per_step": row["self_time_us"] / profile_steps,
                            "total_us_per_step": row["total_time_us"] / profile_steps,
                        }
                    )
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[2], saved[3]
    return {"windows": rows, "ratios": _ratios(rows), "ops": ops}


def _run(step: Callable[[], Any], mode: str) -> None:
    try:
        step()
    except RuntimeError as exc:
        if mode == "on" and "deterministic" in str(exc):
            first = str(exc).strip().splitlines()[0]
            raise UsageError(
                f"the training step uses an op without a deterministic implementation, so determinism cannot be "
                f"measured on it: {first}"
            ) from exc
        raise


def _ratios(rows: list[dict[str, Any]]) -> list[float]:
    by_window: dict[int, dict[str, float]] = {}
    for row in rows:
        by_window.setdefault(row["window"], {})[row["mode"]] = row["step_s"]
    return [w["on"] / w["off"] for _, w in sorted(by_window.items()) if w.get("off")]


def resolve_device(device: str) -> tuple[str, Optional[str]]:
    """``auto`` → ``cuda`` when available, else ``cpu``; returns (device, why CPU when CUDA is not used)."""
    import torch

    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"`--device` must be auto, cpu or cuda. Received: --device={device}.")
    available = torch.cuda.is_available()
    if device == "cuda" and not available:
        raise UsageError(
            f"`--device cuda` needs CUDA, which torch {torch.__version__} does not see here. Received: --device=cuda."
        )
    if device == "auto":
        device = "cuda" if available else "cpu"
    reason = None
    if device == "cpu":
        reason = "CUDA is not available to torch" if not available else "--device cpu was asked for"
    return device, reason
