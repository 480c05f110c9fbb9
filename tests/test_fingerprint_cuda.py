"""The fingerprint's ``cuda.present``: CUDA is usable here (a CUDA build of an imported framework and an NVIDIA GPU).

Synthetic framework sections and NVML answers, so every combination is checked on any machine: CPU or CUDA wheels
(torch's, the ``tensorflow`` wheel's), with or without a driver, with or without a GPU.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from deviate_cb.fingerprint.gpu import cuda_facts

NO_DRIVER = {"present": False, "reason": "no NVIDIA driver (NVMLError_LibraryNotFound: NVML Shared Library Not Found)"}
NO_NVML = {"present": False, "reason": "nvidia-ml-py is not installed"}
DRIVER_GPU = {"present": True, "driver": "550.54.15", "cuda_driver": 12040, "gpus": [{"name": "NVIDIA H100"}]}
DRIVER_NO_GPU = {"present": True, "driver": "550.54.15", "cuda_driver": 12040, "gpus": []}
NOT_IMPORTED: dict[str, Any] = {"present": False, "reason": "not imported by this process"}


def torch_section(runtime: Optional[str], available: bool = False) -> dict[str, Any]:
    return {"present": True, "cuda_runtime": runtime, "cudnn": 91000 if runtime else None, "cuda_available": available}


def tf_section(cuda_version: Optional[str], gpu: bool = False) -> dict[str, Any]:
    build = {"is_cuda_build": bool(cuda_version), "cuda_version": cuda_version, "cudnn_version": "9"}
    devices = [{"name": "/physical_device:CPU:0", "type": "CPU"}]
    return {"present": True, "build": build, "devices": devices + ([{"name": "GPU:0", "type": "GPU"}] * gpu)}


@pytest.mark.parametrize(
    ("torch", "tensorflow", "nvml", "present", "runtime", "reason"),
    [
        # CPU wheels, no driver: the common CPU machine
        (torch_section(None), NOT_IMPORTED, NO_DRIVER, False, None, "no CUDA: torch is a CPU build and no NVIDIA"),
        # the CUDA wheel of torch on a CPU node: CUDA libraries, no driver
        (torch_section("12.8"), NOT_IMPORTED, NO_DRIVER, False, "12.8", "no CUDA device: torch is a CUDA 12.8 build"),
        # the `tensorflow` extra's CUDA wheel on a CPU node
        (torch_section(None), tf_section("12.5.1"), NO_DRIVER, False, "12.5.1", "no CUDA device: tensorflow is"),
        # a driver and a GPU, but CPU builds only
        (torch_section(None), NOT_IMPORTED, DRIVER_GPU, False, None, "no CUDA: torch is a CPU build (NVIDIA driver"),
        # a driver without GPUs
        (torch_section("12.8"), NOT_IMPORTED, DRIVER_NO_GPU, False, "12.8", "no CUDA device: torch is a CUDA 12.8"),
        # usable: a CUDA build and a GPU, seen by NVML, by torch or by TensorFlow
        (torch_section("12.8", available=True), NOT_IMPORTED, DRIVER_GPU, True, "12.8", None),
        (torch_section("12.8", available=True), NOT_IMPORTED, NO_NVML, True, "12.8", None),
        (NOT_IMPORTED, tf_section("12.5.1", gpu=True), NO_NVML, True, "12.5.1", None),
    ],
)
def test_present_needs_a_cuda_build_and_a_gpu(
    torch: dict, tensorflow: dict, nvml: dict, present: bool, runtime: Optional[str], reason: Optional[str]
) -> None:
    facts = cuda_facts({"torch": torch, "tensorflow": tensorflow}, nvml)
    assert facts["present"] is present and facts["runtime"] == runtime
    assert set(facts) >= {"present", "runtime", "cudnn", "nccl", "driver", "cuda_driver"}
    assert facts["driver"] == nvml.get("driver")  # versions are kept whether or not CUDA is usable
    if present:
        assert "reason" not in facts
    else:
        assert facts["reason"].startswith(reason) and "\n" not in facts["reason"], facts["reason"]
    if runtime is not None:
        assert facts["cudnn"] is not None
