"""Assemble a run's ``fingerprint.json``: the hardware and software facts that decide implementation-level results.

Example:
    >>> fp = collect_fingerprint(seed=3)
    >>> fp["seed"], fp["flat"]["seed"], missing_fields(fp)
    (3, 3, [])
"""

from __future__ import annotations

import copy
import functools
import platform
import socket
import sys
from collections.abc import Mapping
from typing import Any, Optional

from deviate_cb.fingerprint.frameworks import (
    FRAMEWORKS,
    blas_facts,
    framework_sections,
    package_versions,
    thread_facts,
)
from deviate_cb.fingerprint.gpu import cuda_facts, gpu_facts, nvml_facts
from deviate_cb.fingerprint.switches import determinism_in_effect
from deviate_cb.store.run_directory import iso_time

__all__ = ["GPU_FIELDS", "REQUIRED_FIELDS", "collect_fingerprint", "flatten", "missing_fields"]

#: Dotted paths (in ``fingerprint["flat"]``) present on every machine, possibly ``None`` with ``present: False``.
REQUIRED_FIELDS = (
    *(f"{name}.{field}" for name in FRAMEWORKS for field in ("present", "version", "git_version")),
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
    versions = package_versions()
    nvml = copy.deepcopy(_nvml_once())
    python, system, cpu = (dict(section) for section in _host())
    fingerprint: dict[str, Any] = {
        "collected_at": iso_time(),
        "seed": seed,
        "dataloader_workers": dataloader_workers,
        "python": python,
        "os": system,
        "hostname": socket.gethostname(),
        "packages": versions,
        "cpu": cpu,
        "determinism": determinism_in_effect(),
        "nvml": {key: value for key, value in nvml.items() if key != "gpus"},
    }
    fingerprint.update(framework_sections(versions))
    fingerprint["threads"] = thread_facts(fingerprint)
    fingerprint["blas"] = blas_facts(fingerprint["torch"].get("build") or {})
    fingerprint["cuda"] = cuda_facts(fingerprint, nvml)
    fingerprint["gpus"] = gpu_facts(fingerprint, nvml)
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
    _flatten_into(flat, tree, prefix)
    return flat


def _flatten_into(flat: dict[str, Any], tree: Mapping[str, Any], prefix: str) -> None:
    for key, value in tree.items():
        kind = type(value)  # the usual leaves first: an ABC check (Mapping) costs ten times a type test
        if kind is str or kind is int or kind is float or kind is bool or value is None:
            flat[f"{prefix}{key}"] = value
        elif kind is dict or isinstance(value, Mapping):
            _flatten_into(flat, value, f"{prefix}{key}.")
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping) for v in value):
            for index, item in enumerate(value):
                _flatten_into(flat, item, f"{prefix}{key}.{index}.")
        else:
            flat[f"{prefix}{key}"] = value


@functools.lru_cache(maxsize=1)
def _host() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The ``python``, ``os`` and ``cpu`` sections: the same for every run of the process, read once (callers copy)."""
    python = {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }
    system = {
        "platform": platform.platform(),
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
    }
    return python, system, _cpu()


@functools.lru_cache(maxsize=1)
def _nvml_once() -> dict[str, Any]:
    """NVML's driver and GPU facts, asked once per process (initialising NVML costs milliseconds; callers copy)."""
    return nvml_facts()


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
