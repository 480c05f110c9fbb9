"""The determinism switches and related environment variables in effect in this process, read, never set."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

__all__ = ["determinism_in_effect"]

_RELATED_ENV = (
    "PYTHONHASHSEED",
    "DEVIATE_HASH_SEED",
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
    "TF_ENABLE_ONEDNN_OPTS",
)


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
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "config"):
        state["tensorflow"] = {
            "op_determinism": _tf_op_determinism(),
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        }
    if "jax" in sys.modules:
        state["jax"] = {"xla_deterministic_ops": "xla_gpu_deterministic_ops=true" in os.environ.get("XLA_FLAGS", "")}
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        state["keras"] = {"backend": keras.backend.backend(), "global_random_seed": _keras_global_seed()}
    return state


def _tf_op_determinism() -> Optional[bool]:
    try:  # enable_op_determinism is public, its query is not
        from tensorflow.python.framework import config as tf_config

        return bool(tf_config.is_op_determinism_enabled())
    except (ImportError, AttributeError):
        return None


def _keras_global_seed() -> Optional[int]:
    try:
        from keras.src.backend.common import global_state
    except ImportError:
        return None
    seed = global_state.get_global_attribute("global_random_seed")
    return seed if isinstance(seed, int) else None
