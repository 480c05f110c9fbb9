"""Seeds and determinism switches: apply what was requested, and report what is verifiably in effect.

Facts (DESIGN.md): ``PYTHONHASHSEED`` only works when set before the interpreter starts (the replicator
sets it in the child's environment); ``CUBLAS_WORKSPACE_CONFIG`` only when set before CUDA starts;
``torch.use_deterministic_algorithms`` does not set ``cudnn.deterministic``, so both are set here; TF32 and
matmul-precision flags change numerics, so they are recorded. Frameworks are never imported here: each
switch is applied when its framework is imported (immediately if it already is).
"""

from __future__ import annotations

import os
import random
import sys
from types import ModuleType
from typing import Any, Optional

from deviate_cb._import_hooks import when_imported
from deviate_cb.context import Deterministic, parse_deterministic

__all__ = [
    "apply_determinism",
    "determinism_in_effect",
    "determinism_record",
    "seed_everything",
    "verify_determinism",
]

_CUBLAS_CONFIG = ":4096:8"
_RELATED_ENV = (
    "PYTHONHASHSEED",
    "CUBLAS_WORKSPACE_CONFIG",
    "PL_GLOBAL_SEED",
    "PL_SEED_WORKERS",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "XLA_FLAGS",
    "KERAS_BACKEND",
)


def seed_everything(seed: int, *, workers: bool = True) -> None:
    """Seed Python's ``random``, NumPy and (now or as soon as it is imported) torch on every device.

    With ``workers=True`` Lightning seeds each DataLoader worker from this seed (its
    ``seed_everything(seed, workers=True)`` semantics, through ``PL_GLOBAL_SEED``/``PL_SEED_WORKERS``).

    Example:
        >>> seed_everything(7); a = random.random(); seed_everything(7); a == random.random()
        True
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"`seed` must be an integer in [0, 2**32). Received: seed={seed!r}.")
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    os.environ["PL_GLOBAL_SEED"] = str(seed)
    os.environ["PL_SEED_WORKERS"] = "1" if workers else "0"
    when_imported("torch", lambda torch: torch.manual_seed(seed))


def apply_determinism(deterministic: Optional[Deterministic]) -> None:
    """Turn deterministic tooling on (``True``), on with warnings only (``"warn"``), or leave it alone.

    ``False`` and ``None`` leave the framework defaults in place (nothing is switched off that the user
    switched on). Torch switches are applied now if torch is imported, otherwise when it is.
    """
    deterministic = parse_deterministic(deterministic)
    if not deterministic:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", _CUBLAS_CONFIG)
    warn_only = deterministic == "warn"

    def _torch_switches(torch: ModuleType) -> None:
        torch.use_deterministic_algorithms(True, warn_only=warn_only)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False

    when_imported("torch", _torch_switches)


def determinism_in_effect() -> dict[str, Any]:
    """What is verifiably in effect now: torch switches (if torch is imported), hash seeding, related env.

    Example:
        >>> "env" in determinism_in_effect()
        True
    """
    state: dict[str, Any] = {
        "python_hash_randomization": bool(sys.flags.hash_randomization),
        "env": {name: os.environ.get(name) for name in _RELATED_ENV},
    }
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "are_deterministic_algorithms_enabled"):
        backends = torch.backends
        state["torch"] = {
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
            "cudnn_deterministic": bool(backends.cudnn.deterministic),
            "cudnn_benchmark": bool(backends.cudnn.benchmark),
            "cuda_matmul_allow_tf32": bool(backends.cuda.matmul.allow_tf32),
            "cudnn_allow_tf32": bool(backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "initial_seed": int(torch.initial_seed()),
            "cuda_initialized": bool(torch.cuda.is_initialized()),
        }
    return state


def verify_determinism(
    seed: Optional[int], deterministic: Optional[Deterministic], in_effect: dict[str, Any]
) -> list[str]:
    """Compare a request with :func:`determinism_in_effect`; return the problems found (empty: verified).

    Example:
        >>> verify_determinism(None, None, determinism_in_effect())
        []
    """
    problems: list[str] = []
    env = in_effect.get("env", {})
    torch_state = in_effect.get("torch")
    if seed is not None:
        if env.get("PYTHONHASHSEED") != str(seed):
            problems.append(
                f"PYTHONHASHSEED is {env.get('PYTHONHASHSEED')!r}, not {str(seed)!r}: str/bytes hashing (set "
                "iteration order) is not seeded; it only takes effect when set before Python starts"
            )
        if torch_state is not None and torch_state["initial_seed"] != seed:
            problems.append(f"torch.initial_seed() is {torch_state['initial_seed']}, not {seed}")
    if deterministic and torch_state is not None:
        warn_only = deterministic == "warn"
        if not torch_state["deterministic_algorithms"]:
            problems.append("torch.are_deterministic_algorithms_enabled() is False")
        elif torch_state["deterministic_warn_only"] != warn_only:
            problems.append(f"torch deterministic warn_only is {torch_state['deterministic_warn_only']}")
        if not torch_state["cudnn_deterministic"]:
            problems.append("torch.backends.cudnn.deterministic is False")
        if torch_state["cudnn_benchmark"]:
            problems.append("torch.backends.cudnn.benchmark is True")
        if env.get("CUBLAS_WORKSPACE_CONFIG") not in (":4096:8", ":16:8"):
            problems.append(f"CUBLAS_WORKSPACE_CONFIG is {env.get('CUBLAS_WORKSPACE_CONFIG')!r}")
    if deterministic is False and torch_state is not None and torch_state["deterministic_algorithms"]:
        problems.append("deterministic tooling was requested off, but torch deterministic algorithms are on")
    return problems


def determinism_record(seed: Optional[int], deterministic: Optional[Deterministic]) -> dict[str, Any]:
    """The manifest's ``determinism`` section: what was requested, what is in effect now, what disagrees.

    Example:
        >>> record = determinism_record(None, None)
        >>> record["verified"], record["requested"]
        (True, {'seed': None, 'deterministic': None})
    """
    in_effect = determinism_in_effect()
    problems = verify_determinism(seed, deterministic, in_effect)
    return {
        "requested": {"seed": seed, "deterministic": deterministic},
        "in_effect": in_effect,
        "problems": problems,
        "verified": not problems,
    }
