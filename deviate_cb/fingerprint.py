"""The hardware/software fingerprint of a run: what determines implementation-level results.

Every field of DESIGN.md's "Fingerprint" is present on every machine (:data:`REQUIRED_FIELDS`); a section that
does not apply here (no NVIDIA driver, a framework the run never imported) keeps its fields, set to ``None``,
and says so: ``{"present": False, "reason": "no NVIDIA driver (...)", ...}``. Sections:

- ``packages``: installed versions; ``torch``/``lightning``/``keras``/``tensorflow``/``jax``: version, git
  revision and run-time facts (thread counts, Keras backend, TF build info) of the frameworks the process imported.
- ``cuda``: runtime, cuDNN, NCCL, driver; ``gpus``: per GPU name, compute capability, SM count, hashed UUID, MIG
  mode (plus clocks, power limit, ECC, memory: informational).
- ``cpu`` (model, ISA flags), ``blas`` (NumPy's and torch's), ``threads`` (intra/inter-op, ``OMP_NUM_THREADS``,
  ``MKL_NUM_THREADS``), ``determinism`` (every switch and related environment variable), ``seed``,
  ``dataloader_workers``; informational: ``python``, ``os``, ``hostname``, ``collected_at``.

Collected in-process and cheaply (a few milliseconds; no subprocesses, no framework imports): versions of
frameworks not imported come from installed metadata (the ``Version:`` line only), run-time facts only from
frameworks the training process already imported, GPU facts from NVML (nvidia-ml-py) and, once CUDA is
initialised, ``torch.cuda`` (SM count). CUDA is never initialised here. GPU UUIDs are hashed (SHA-256, 16 hex).

Example:
    >>> fp = collect_fingerprint(seed=3)
    >>> fp["seed"], fp["flat"]["seed"], missing_fields(fp)
    (3, 3, [])
"""

from __future__ import annotations

import functools
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

__all__ = ["GPU_FIELDS", "REQUIRED_FIELDS", "collect_fingerprint", "flatten", "missing_fields"]

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
_FRAMEWORKS = ("torch", "lightning", "keras", "tensorflow", "jax")

#: Dotted paths (in ``fingerprint["flat"]``) present on every machine, possibly ``None`` with ``present: False``.
REQUIRED_FIELDS = (
    *(f"{name}.{field}" for name in _FRAMEWORKS for field in ("present", "version", "git_version")),
    "keras.backend",
    "cuda.present",
    "cuda.runtime",
    "cuda.cudnn",
    "cuda.nccl",
    "cuda.driver",
    "gpus.present",
    "gpus.count",
    "cpu.model",
    "cpu.flags",
    "blas.numpy_blas",
    "blas.numpy_lapack",
    "blas.torch_blas",
    "blas.torch_lapack",
    "threads.torch_intra_op",
    "threads.torch_inter_op",
    "threads.tensorflow_intra_op",
    "threads.tensorflow_inter_op",
    "threads.OMP_NUM_THREADS",
    "threads.MKL_NUM_THREADS",
    "determinism.python_hash_randomization",
    "seed",
    "dataloader_workers",
)
#: Fields of each entry of ``fingerprint["gpus"]["devices"]``.
GPU_FIELDS = ("name", "compute_capability", "sm_count", "uuid_sha256", "mig_mode")


def collect_fingerprint(
    *, seed: Optional[int] = None, dataloader_workers: Optional[int] = None, extra: Optional[Mapping[str, Any]] = None
) -> dict[str, Any]:
    """Collect the fingerprint of this process and machine as a nested dict, plus a ``flat`` copy.

    Args:
        seed: The run's seed, recorded alongside.
        dataloader_workers: Number of DataLoader workers, when the adapter knows it.
        extra: Adapter-specific facts merged in at the top level (e.g. ``{"lightning": {...}}``); a dict merged
            into a section that exists is merged key by key.

    Example:
        >>> fp = collect_fingerprint(dataloader_workers=2)
        >>> fp["dataloader_workers"], fp["gpus"]["present"] in (True, False), "python" in fp
        (2, True, True)
    """
    versions = _package_versions()
    nvml = _nvml()
    fingerprint: dict[str, Any] = {
        "collected_at": iso_time(),
        "seed": seed,
        "dataloader_workers": dataloader_workers,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "os": {
            "platform": platform.platform(),
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
        },
        "hostname": socket.gethostname(),
        "packages": versions,
        "cpu": _cpu(),
        "determinism": determinism_in_effect(),
        "nvml": {key: value for key, value in nvml.items() if key != "gpus"},
    }
    collectors = {"torch": _torch, "tensorflow": _tensorflow, "jax": _jax, "keras": _keras, "lightning": _lightning}
    for name in _FRAMEWORKS:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "__version__"):  # imported by the training code
            fingerprint[name] = {"present": True, **collectors[name](module)}
        else:
            fingerprint[name] = _absent(
                f"{name} is not imported by this process",
                version=versions.get(name) or versions.get(f"{name}-cpu"),
                git_version=None,
            )
    fingerprint["keras"].setdefault("backend", os.environ.get("KERAS_BACKEND"))
    fingerprint["threads"] = _threads(fingerprint)
    fingerprint["blas"] = _blas(fingerprint["torch"].get("build") or {})
    fingerprint["cuda"] = _cuda(fingerprint, nvml)
    fingerprint["gpus"] = _gpus(fingerprint, nvml)
    for key, value in (extra or {}).items():
        if isinstance(value, Mapping) and isinstance(fingerprint.get(key), dict):
            fingerprint[key] = {**fingerprint[key], **value}
        else:
            fingerprint[key] = value
    fingerprint["flat"] = flatten({k: v for k, v in fingerprint.items() if k != "flat"})
    return fingerprint


def missing_fields(fingerprint: Mapping[str, Any]) -> list[str]:
    """The required fields (and per-GPU fields) a fingerprint lacks: empty for a complete one.

    Example:
        >>> missing_fields({"flat": {"seed": 1}})[:2]
        ['torch.present', 'torch.version']
    """
    flat = fingerprint.get("flat") or flatten({k: v for k, v in fingerprint.items() if k != "flat"})
    missing = [field for field in REQUIRED_FIELDS if field not in flat]
    gpus = fingerprint.get("gpus") or {}
    for index, device in enumerate(gpus.get("devices") or []):
        missing += [f"gpus.devices.{index}.{field}" for field in GPU_FIELDS if field not in device]
    return missing


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


def _absent(reason: str, **fields: Any) -> dict[str, Any]:
    return {"present": False, "reason": reason, **fields}


@functools.lru_cache(maxsize=1)
def _installed_versions() -> tuple[tuple[str, str], ...]:
    found = []
    for name in _PACKAGES:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        version = None
        for line in (dist.read_text("METADATA") or "").splitlines():  # the Version line, without parsing it all
            if line.startswith("Version:"):
                version = line.partition(":")[2].strip()
                break
            if not line:
                break
        found.append((name, version or dist.version))
    return tuple(found)


def _package_versions() -> dict[str, str]:
    return dict(_installed_versions())


def _cpu() -> dict[str, Any]:
    info: dict[str, Any] = {"processor": platform.processor() or None, "model": None, "flags": None}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and info["model"] is None:
                    info["model"] = value.strip()
                elif key in ("flags", "Features") and info["flags"] is None:
                    info["flags"] = " ".join(sorted(value.split()))
                if info["model"] is not None and info["flags"] is not None:
                    break
    except OSError:  # not Linux: py-cpuinfo knows more platforms, when installed
        try:
            import cpuinfo  # type: ignore[import-not-found]

            raw = cpuinfo.get_cpu_info()
            info.update(model=raw.get("brand_raw"), flags=" ".join(sorted(raw.get("flags", []))))
        except ImportError:
            pass
    return info


def _threads(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    torch, tf = fingerprint["torch"], fingerprint["tensorflow"]
    return {
        "os_cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_intra_op": torch.get("num_threads"),
        "torch_inter_op": torch.get("num_interop_threads"),
        "tensorflow_intra_op": tf.get("intra_op_threads"),
        "tensorflow_inter_op": tf.get("inter_op_threads"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
    }


def _blas(torch_build: Mapping[str, Any]) -> dict[str, Any]:
    """BLAS/LAPACK libraries NumPy and torch were built with (``name version`` strings, or ``None``)."""
    facts: dict[str, Any] = {"numpy_blas": None, "numpy_lapack": None}
    try:
        import numpy as np

        deps = np.show_config(mode="dicts")["Build Dependencies"]  # type: ignore[index]
        for lib in ("blas", "lapack"):
            facts[f"numpy_{lib}"] = " ".join(str(deps[lib].get(k)) for k in ("name", "version") if deps[lib].get(k))
    except Exception:  # show_config's layout is not a stable API
        pass
    facts["torch_blas"] = torch_build.get("blas_info")
    facts["torch_lapack"] = torch_build.get("lapack_info")
    return facts


def _hash_uuid(uuid: Any) -> Optional[str]:
    """SHA-256 of a GPU UUID, the same for NVML's ``GPU-1a2b...`` and torch's ``1a2b...`` spellings."""
    if uuid is None or str(uuid) == "":
        return None
    text = str(uuid).lower()
    for prefix in ("gpu-", "mig-"):
        text = text.removeprefix(prefix)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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
        "cuda_initialized": bool(torch.cuda.is_initialized()),
        "nccl": None,
        "gpus": [],
    }
    if info["cuda_available"]:
        try:
            nccl = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        except Exception:  # a build without NCCL
            pass
    if info["cuda_available"] and info["cuda_initialized"]:  # properties would initialise CUDA otherwise
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            info["gpus"].append(
                {
                    "index": index,
                    "name": props.name,
                    "compute_capability": f"{props.major}.{props.minor}",
                    "sm_count": props.multi_processor_count,
                    "total_memory": props.total_memory,
                    "uuid_sha256": _hash_uuid(getattr(props, "uuid", None)),
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
        "git_version": None,
        "jaxlib": jaxlib_version,
        "default_backend": jax.default_backend(),
        "devices": [{"platform": d.platform, "kind": d.device_kind} for d in jax.devices()],
        "xla_flags": os.environ.get("XLA_FLAGS"),
    }


def _keras(keras: Any) -> dict[str, Any]:
    return {
        "version": keras.__version__,
        "git_version": None,
        "backend": keras.backend.backend(),
        "floatx": keras.config.floatx(),
        "image_data_format": keras.config.image_data_format(),
    }


def _lightning(lightning: Any) -> dict[str, Any]:
    return {"version": lightning.__version__, "git_version": None}


def _cuda(fingerprint: Mapping[str, Any], nvml: Mapping[str, Any]) -> dict[str, Any]:
    torch, tf_build = fingerprint["torch"], fingerprint["tensorflow"].get("build") or {}
    facts = {
        "runtime": torch.get("cuda_runtime") or tf_build.get("cuda_version"),
        "cudnn": torch.get("cudnn") if torch.get("cuda_runtime") else tf_build.get("cudnn_version"),
        "nccl": torch.get("nccl"),
        "driver": nvml.get("driver"),
        "cuda_driver": nvml.get("cuda_driver"),
    }
    if facts["runtime"] is None and facts["driver"] is None:
        builds = "torch is a CPU build" if torch["present"] else "no CUDA build of an imported framework"
        return _absent(f"no CUDA: {builds} and {nvml.get('reason') or 'no NVIDIA driver'}", **facts)
    return {"present": True, **facts}


def _gpus(fingerprint: Mapping[str, Any], nvml: Mapping[str, Any]) -> dict[str, Any]:
    devices = [dict(device) for device in nvml.get("gpus", [])]
    by_uuid = {device["uuid_sha256"]: device for device in devices}
    for props in fingerprint["torch"].get("gpus", []):  # SM counts come from torch once CUDA is initialised
        match = by_uuid.get(props["uuid_sha256"])
        if match is None:
            devices.append({**props, "mig_mode": None})
        elif match.get("sm_count") is None:
            match["sm_count"] = props["sm_count"]
    if not devices:
        return _absent(nvml.get("reason") or "no NVIDIA GPU", count=0, devices=[])
    return {"present": True, "count": len(devices), "devices": devices}


def _nvml() -> dict[str, Any]:
    try:
        import pynvml
    except ImportError:
        return _absent("nvidia-ml-py is not installed", driver=None, cuda_driver=None)
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no driver / no GPU: the common CPU case
        return _absent(f"no NVIDIA driver ({type(exc).__name__}: {exc})", driver=None, cuda_driver=None)
    try:
        facts: dict[str, Any] = {
            "present": True,
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
            attributes = _call(pynvml.nvmlDeviceGetAttributes, handle)  # SM count: MIG devices, recent drivers
            facts["gpus"].append(
                {
                    "nvml_index": index,
                    "name": _call(pynvml.nvmlDeviceGetName, handle),
                    "uuid_sha256": _hash_uuid(_call(pynvml.nvmlDeviceGetUUID, handle)),
                    "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
                    "sm_count": getattr(attributes, "multiprocessorCount", None),
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
