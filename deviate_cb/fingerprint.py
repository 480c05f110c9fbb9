"""The hardware/software fingerprint of a run: what determines implementation-level results.

Collected in-process and cheaply (no subprocesses, no framework imports): package versions come from
installed metadata; framework details only for frameworks the training process has already imported; GPU
facts from NVML (nvidia-ml-py) when a driver is present, plus ``torch.cuda`` device properties (SM count)
when CUDA is already initialised. GPU UUIDs are hashed. See DESIGN.md, "Fingerprint".
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import socket
import sys
from collections.abc import Mapping
from typing import Any, Optional

from deviate_cb.determinism import determinism_in_effect
from deviate_cb.store import iso_time

__all__ = ["collect_fingerprint", "flatten"]

_PACKAGES = (
    "torch",
    "lightning",
    "pytorch-lightning",
    "torchmetrics",
    "keras",
    "tensorflow",
    "tensorflow-cpu",
    "jax",
    "jaxlib",
    "numpy",
    "scipy",
    "pyarrow",
    "nvidia-ml-py",
    "deviate-cb",
)


def collect_fingerprint(
    *, seed: Optional[int] = None, dataloader_workers: Optional[int] = None, extra: Optional[Mapping[str, Any]] = None
) -> dict[str, Any]:
    """Collect the fingerprint of this process and machine as a nested dict, plus a ``flat`` copy.

    Args:
        seed: The run's seed, recorded alongside.
        dataloader_workers: Number of DataLoader workers, when the adapter knows it.
        extra: Adapter-specific facts merged in at the top level (e.g. ``{"keras": {...}}``).

    Example:
        >>> fp = collect_fingerprint(seed=3)
        >>> fp["seed"], "python" in fp, fp["flat"]["seed"]
        (3, True, 3)
    """
    fingerprint: dict[str, Any] = {
        "collected_at": iso_time(),
        "seed": seed,
        "dataloader_workers": dataloader_workers,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "os": {"platform": platform.platform(), "system": platform.system(), "machine": platform.machine()},
        "hostname": socket.gethostname(),
        "packages": _package_versions(),
        "cpu": _cpu(),
        "threads": {
            "os_cpu_count": os.cpu_count(),
            "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        },
        "blas": {"numpy": _numpy_blas()},
        "determinism": determinism_in_effect(),
        "nvml": _nvml(),
    }
    for name, collect in (("torch", _torch), ("tensorflow", _tensorflow), ("jax", _jax), ("keras", _keras)):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "__version__"):  # imported by the training code
            fingerprint[name] = collect(module)
    if extra:
        fingerprint.update(extra)
    fingerprint["flat"] = flatten({k: v for k, v in fingerprint.items() if k != "flat"})
    return fingerprint


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts and lists into dotted keys, for cross-run queries.

    Example:
        >>> flatten({"gpu": [{"name": "A100"}], "seed": 1})
        {'gpu.0.name': 'A100', 'seed': 1}
    """
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{path}."))
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping) for v in value):
            for index, item in enumerate(value):
                flat.update(flatten(item, f"{path}.{index}."))
        else:
            flat[path] = value
    return flat


def _package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def _cpu() -> dict[str, Any]:
    info: dict[str, Any] = {"processor": platform.processor() or None}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and "model" not in info:
                    info["model"] = value.strip()
                elif key in ("flags", "Features") and "flags" not in info:
                    info["flags"] = " ".join(sorted(value.split()))
                if "model" in info and "flags" in info:
                    break
    except OSError:  # not Linux: py-cpuinfo knows more platforms, when installed
        try:
            import cpuinfo  # type: ignore[import-not-found]

            raw = cpuinfo.get_cpu_info()
            info.update(model=raw.get("brand_raw"), flags=" ".join(sorted(raw.get("flags", []))))
        except ImportError:
            pass
    return info


def _numpy_blas() -> Optional[dict[str, Any]]:
    try:
        import numpy as np

        deps = np.show_config(mode="dicts")["Build Dependencies"]  # type: ignore[index]
        return {lib: {"name": deps[lib].get("name"), "version": deps[lib].get("version")} for lib in ("blas", "lapack")}
    except Exception:  # show_config's layout is not a stable API
        return None


def _hash_uuid(uuid: Any) -> str:
    return hashlib.sha256(str(uuid).encode()).hexdigest()[:16]


def _torch(torch: Any) -> dict[str, Any]:
    config = torch.__config__.show()
    build = {}
    for part in config.replace("\n", ",").split(","):
        key, sep, value = part.strip().partition("=")
        key = key.split()[-1] if key.split() else ""
        if sep and key in {"BLAS_INFO", "LAPACK_INFO", "USE_CUDNN", "USE_MKL", "USE_MKLDNN", "USE_OPENMP"}:
            build[key.lower()] = value.strip()
    info: dict[str, Any] = {
        "version": torch.__version__,
        "git_version": getattr(torch.version, "git_version", None),
        "cuda_runtime": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "build": build,
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "cuda_available": bool(torch.cuda.is_available()),
        "gpus": [],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            info["nccl"] = None
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            info["gpus"].append(
                {
                    "index": index,
                    "name": props.name,
                    "compute_capability": f"{props.major}.{props.minor}",
                    "sm_count": props.multi_processor_count,
                    "total_memory": props.total_memory,
                    "uuid_sha256": _hash_uuid(getattr(props, "uuid", "")),
                }
            )
    return info


def _tensorflow(tf: Any) -> dict[str, Any]:
    build = dict(tf.sysconfig.get_build_info())
    return {
        "version": tf.__version__,
        "git_version": getattr(tf.version, "GIT_VERSION", None),
        "build": {key: build.get(key) for key in ("is_cuda_build", "cuda_version", "cudnn_version", "is_rocm_build")},
        "onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "devices": [{"name": d.name, "type": d.device_type} for d in tf.config.list_physical_devices()],
    }


def _jax(jax: Any) -> dict[str, Any]:
    try:
        import jaxlib

        jaxlib_version = getattr(jaxlib, "__version__", None) or importlib.metadata.version("jaxlib")
    except (ImportError, importlib.metadata.PackageNotFoundError):
        jaxlib_version = None
    return {
        "version": jax.__version__,
        "jaxlib": jaxlib_version,
        "default_backend": jax.default_backend(),
        "devices": [{"platform": d.platform, "kind": d.device_kind} for d in jax.devices()],
        "xla_flags": os.environ.get("XLA_FLAGS"),
    }


def _keras(keras: Any) -> dict[str, Any]:
    return {
        "version": keras.__version__,
        "backend": keras.backend.backend(),
        "floatx": keras.config.floatx(),
        "image_data_format": keras.config.image_data_format(),
    }


def _nvml() -> Optional[dict[str, Any]]:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver / no GPU: the common CPU case
        return None
    try:
        facts: dict[str, Any] = {
            "driver": _call(pynvml.nvmlSystemGetDriverVersion),
            "cuda_driver": _call(pynvml.nvmlSystemGetCudaDriverVersion),
            "gpus": [],
        }
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            cc = _call(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
            mig = _call(pynvml.nvmlDeviceGetMigMode, handle)
            power = _call(pynvml.nvmlDeviceGetPowerManagementLimit, handle)
            memory = _call(pynvml.nvmlDeviceGetMemoryInfo, handle)
            facts["gpus"].append(
                {
                    "index": index,
                    "name": _call(pynvml.nvmlDeviceGetName, handle),
                    "uuid_sha256": _hash_uuid(_call(pynvml.nvmlDeviceGetUUID, handle)),
                    "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
                    "mig_mode": mig[0] if mig else None,
                    "sm_clock_max_mhz": _call(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
                    "power_limit_w": power / 1000 if power else None,
                    "ecc_mode": (_call(pynvml.nvmlDeviceGetEccMode, handle) or [None])[0],
                    "memory_total": getattr(memory, "total", None),
                }
            )
        return facts
    finally:
        _call(pynvml.nvmlShutdown)


def _call(fn: Any, *args: Any) -> Any:
    try:
        value = fn(*args)
    except Exception:  # a field the GPU or driver does not support
        return None
    return value.decode() if isinstance(value, bytes) else value
