"""``deviate bench``: what deterministic tooling costs a model on this machine.

Example:
    >>> results = run_bench(["small_cnn"], windows=2, steps_per_window=2, warmup=1, batch_size=4, profile_steps=1)
    >>> r = results[0]
    >>> r.model, r.device, r.ci.n
    ('small_cnn', 'cpu', 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from deviate_cb.bench.models import KERAS_MODELS, TORCH_MODELS
from deviate_cb.errors import UsageError

if TYPE_CHECKING:
    from deviate_cb.bench.results import BenchResult

__all__ = ["ALL_MODELS", "BenchResult", "run_bench"]

ALL_MODELS = (*TORCH_MODELS, *KERAS_MODELS)


def run_bench(
    models: Sequence[str] = ("small_cnn",),
    *,
    trainer: Optional[str] = None,
    device: str = "auto",
    windows: int = 6,
    keras_windows: Optional[int] = None,
    steps_per_window: int = 10,
    warmup: int = 5,
    batch_size: int = 32,
    profile_steps: int = 3,
    seed: int = 0,
    level: float = 0.95,
) -> list[BenchResult]:
    """Benchmark each model (and the ``trainer`` spec, when given); see the module docstring.

    ``keras_windows`` (default: ``windows``) sets the window pairs of Keras models, each window a fresh process.
    """
    from deviate_cb.bench.results import BenchResult

    keras_windows = windows if keras_windows is None else keras_windows
    for name, value, low in (
        ("windows", windows, 1),
        ("keras_windows", keras_windows, 1),
        ("steps_per_window", steps_per_window, 1),
        ("warmup", warmup, 0),
        ("batch_size", batch_size, 1),
        ("profile_steps", profile_steps, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UsageError(f"`{name}` must be an integer >= {low}. Received: {name}={value!r}.")
    unknown = [m for m in models if m not in ALL_MODELS]
    if unknown:
        raise UsageError(f"`--model` must be one of {', '.join(ALL_MODELS)} or all. Received: --model={unknown[0]}.")
    settings = {
        "windows": windows,
        "steps_per_window": steps_per_window,
        "warmup": warmup,
        "batch_size": batch_size,
        "profile_steps": profile_steps,
        "seed": seed,
    }
    results = []
    torch_jobs = [(m, None) for m in models if m in TORCH_MODELS] + ([(trainer, trainer)] if trainer else [])
    if torch_jobs:
        from deviate_cb.bench import torch_runner

        where, note = torch_runner.resolve_device(device)
        for label, spec in torch_jobs:
            if spec is None:
                _, step = torch_runner.builtin_setup(str(label), device=where, batch_size=batch_size, seed=seed)
            else:
                _, step = torch_runner.user_setup(spec, device=where, batch_size=batch_size)
            measured = torch_runner.measure(
                step,
                windows=windows,
                steps_per_window=steps_per_window,
                warmup=warmup,
                profile_steps=profile_steps,
                device=where,
            )
            results.append(
                BenchResult(
                    str(label), "torch", where, note, measured["windows"], measured["ratios"], measured["ops"],
                    {**settings, "device": where}, level,
                )
            )  # fmt: skip
    for name in (m for m in models if m in KERAS_MODELS):
        from deviate_cb.bench.keras_runner import measure_keras

        measured = measure_keras(
            name,
            windows=keras_windows,
            steps_per_window=steps_per_window,
            warmup=warmup,
            batch_size=batch_size,
            profile_steps=profile_steps,
            seed=seed,
        )
        note = "TensorFlow sees no GPU" if measured["device"] == "cpu" else None
        results.append(
            BenchResult(
                name, "keras-tensorflow", measured["device"], note, measured["windows"], measured["ratios"],
                measured["ops"], {**settings, "windows": keras_windows, "processes": 2 * keras_windows}, level,
            )
        )  # fmt: skip
    return results


def __getattr__(name: str) -> Any:
    # `deviate` builds every subcommand's parser, which needs the model names from this package: the results
    # and statistics modules (about 15 ms) load only when a benchmark runs or BenchResult is asked for.
    if name == "BenchResult":
        from deviate_cb.bench.results import BenchResult

        return BenchResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
