"""GPU facts of the fingerprint: NVML (driver, per-GPU name, compute capability, MIG mode...), CUDA, torch's GPUs.

:func:`nvml_facts` asks NVML (nvidia-ml-py) about the driver and every GPU without initialising CUDA;
:func:`cuda_facts` and :func:`gpu_facts` combine it with what the imported frameworks report into the
fingerprint's ``cuda`` and ``gpus`` sections. A section that does not apply here (no NVIDIA driver, a CPU build)
keeps its fields, set to ``None``, and says why (:func:`absent`). GPU UUIDs are hashed (:func:`hash_uuid`).

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
    """The ``cuda`` section: runtime, cuDNN, NCCL from the imported frameworks' builds, drivers from NVML."""
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
        return absent(f"no CUDA: {builds} and {nvml.get('reason') or 'no NVIDIA driver'}", **facts)
    return {"present": True, **facts}


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
