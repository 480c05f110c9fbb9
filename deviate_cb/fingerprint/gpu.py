"""GPU facts of the fingerprint: NVML (driver, per-GPU name, compute capability, MIG mode...), CUDA, torch's GPUs.

Example:
    >>> hash_uuid("GPU-1A2B") == hash_uuid("1a2b"), len(hash_uuid("1a2b"))
    (True, 16)
    >>> absent("no NVIDIA GPU", count=0, devices=[])
    {'present': False, 'reason': 'no NVIDIA GPU', 'count': 0, 'devices': []}
    >>> gpu_facts({"torch": {"present": False}}, {"present": False, "reason": "no NVIDIA driver"})["reason"]
    'no NVIDIA driver'
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Optional

__all__ = ["absent", "cuda_facts", "gpu_facts", "hash_uuid", "nvml_facts"]


def absent(reason: str, **fields: Any) -> dict[str, Any]:
    """A fingerprint section that does not apply here: ``present: False``, the reason, and its fields."""
    return {"present": False, "reason": reason, **fields}


def hash_uuid(uuid: Any) -> Optional[str]:
    """SHA-256 of a GPU UUID, the same for NVML's ``GPU-1a2b...`` and torch's ``1a2b...`` spellings."""
    if uuid is None or str(uuid) == "":
        return None
    text = str(uuid).lower()
    for prefix in ("gpu-", "mig-"):
        text = text.removeprefix(prefix)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cuda_facts(fingerprint: Mapping[str, Any], nvml: Mapping[str, Any]) -> dict[str, Any]:
    """The ``cuda`` section: whether CUDA is usable here, and the CUDA versions found either way.

    ``present`` is True when this process can run CUDA: an imported framework is a CUDA build (``runtime``, the
    CUDA version torch or TensorFlow was built with, is known) *and* an NVIDIA GPU is there to run it (NVML lists
    one, torch reports CUDA available, or TensorFlow lists a GPU). Otherwise ``present`` is False and ``reason``
    (starting ``no CUDA``) says which half is missing. The versions are recorded either way: a CUDA build on a
    machine without a GPU (the CUDA wheels of torch or ``tensorflow`` on a CPU node) has ``present: False`` with
    ``runtime`` and ``cudnn`` set, and an NVIDIA driver without a CUDA build has ``present: False`` with ``driver``
    set.

    Fields: ``runtime``, ``cudnn`` (torch's when torch is a CUDA build, else TensorFlow's build), ``nccl`` (torch's,
    when CUDA is available to it), ``driver`` and ``cuda_driver`` (NVML's).

    Example:
        >>> cpu_torch = {"present": True, "cuda_runtime": None}
        >>> no_driver = {"present": False, "reason": "no NVIDIA driver (NVMLError_LibraryNotFound)"}
        >>> cuda_facts({"torch": cpu_torch, "tensorflow": {"present": False}}, no_driver)["reason"]
        'no CUDA: torch is a CPU build and no NVIDIA driver (NVMLError_LibraryNotFound)'
        >>> cuda_wheel = {"present": True, "build": {"cuda_version": "12.5.1", "cudnn_version": "9"}, "devices": []}
        >>> facts = cuda_facts({"torch": {"present": False}, "tensorflow": cuda_wheel}, no_driver)
        >>> facts["present"], facts["runtime"]
        (False, '12.5.1')
        >>> facts["reason"]
        'no CUDA device: tensorflow is a CUDA 12.5.1 build but no NVIDIA driver (NVMLError_LibraryNotFound)'
        >>> driver = {"present": True, "driver": "550.54", "cuda_driver": 12040, "gpus": [{"name": "NVIDIA H100"}]}
        >>> cuda_facts({"torch": {"present": True, "cuda_runtime": "12.8", "cuda_available": True},
        ...             "tensorflow": {"present": False}}, driver)["present"]
        True
    """
    torch, tensorflow = fingerprint["torch"], fingerprint["tensorflow"]
    tf_build = tensorflow.get("build") or {}
    facts = {
        "runtime": torch.get("cuda_runtime") or tf_build.get("cuda_version"),
        "cudnn": torch.get("cudnn") if torch.get("cuda_runtime") else tf_build.get("cudnn_version"),
        "nccl": torch.get("nccl"),
        "driver": nvml.get("driver"),
        "cuda_driver": nvml.get("cuda_driver"),
    }
    gpu_seen = (
        bool(nvml.get("gpus"))
        or bool(torch.get("cuda_available"))
        or any(device.get("type") == "GPU" for device in tensorflow.get("devices") or [])
    )
    if facts["runtime"] is not None and gpu_seen:
        return {"present": True, **facts}
    no_driver = nvml.get("reason") or "no NVIDIA driver"
    if facts["runtime"] is None:
        builds = "torch is a CPU build" if torch["present"] else "no CUDA build of an imported framework"
        if nvml.get("present"):
            return absent(f"no CUDA: {builds} (NVIDIA driver {facts['driver']} found)", **facts)
        return absent(f"no CUDA: {builds} and {no_driver}", **facts)
    built = f"{'torch' if torch.get('cuda_runtime') else 'tensorflow'} is a CUDA {facts['runtime']} build"
    if nvml.get("present"):
        return absent(f"no CUDA device: {built} but NVIDIA driver {facts['driver']} lists no GPU", **facts)
    return absent(f"no CUDA device: {built} but {no_driver}", **facts)


def gpu_facts(fingerprint: Mapping[str, Any], nvml: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gpus`` section: NVML's devices, completed (SM counts) or extended by the GPUs torch initialised."""
    devices = [dict(device) for device in nvml.get("gpus", [])]
    by_uuid = {device["uuid_sha256"]: device for device in devices}
    for props in fingerprint["torch"].get("gpus", []):  # SM counts come from torch once CUDA is initialised
        match = by_uuid.get(props["uuid_sha256"])
        if match is None:
            devices.append({**props, "mig_mode": None})
        elif match.get("sm_count") is None:
            match["sm_count"] = props["sm_count"]
    if not devices:
        return absent(nvml.get("reason") or "no NVIDIA GPU", count=0, devices=[])
    return {"present": True, "count": len(devices), "devices": devices}


def nvml_facts() -> dict[str, Any]:
    """Driver versions and per-GPU facts from NVML, or an absent section saying why there are none."""
    try:
        import pynvml
    except ImportError:
        return absent("nvidia-ml-py is not installed", driver=None, cuda_driver=None)
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no driver / no GPU: the common CPU case
        return absent(f"no NVIDIA driver ({type(exc).__name__}: {exc})", driver=None, cuda_driver=None)
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
                    "uuid_sha256": hash_uuid(_call(pynvml.nvmlDeviceGetUUID, handle)),
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
