"""Software facts of the fingerprint: installed package versions and the imported frameworks' run-time facts.

Example:
    >>> "numpy" in package_versions()
    True
    >>> sections = framework_sections(package_versions())
    >>> list(sections) == list(FRAMEWORKS), all("version" in section for section in sections.values())
    (True, True)
    >>> thread_facts(sections)["OMP_NUM_THREADS"] == os.environ.get("OMP_NUM_THREADS")
    True
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import sys
from collections.abc import Mapping
from typing import Any

from deviate_cb.fingerprint.gpu import absent, hash_uuid

__all__ = ["FRAMEWORKS", "THREAD_BUDGET_ENV", "blas_facts", "framework_sections", "package_versions", "thread_facts"]

#: The threads per replica ``deviate-replicate`` gave (:mod:`deviate_cb.launch.backends.threads`), absent when it gave
#: none.
THREAD_BUDGET_ENV = "DEVIATE_THREADS"
#: Thread variables recorded besides ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` (the values a replica ran with).
_MORE_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")

#: Packages whose installed version is recorded (``packages`` section).
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
#: Frameworks with a section of their own, present when the process imported them.
FRAMEWORKS = ("torch", "lightning", "keras", "tensorflow", "jax")
_TORCH_KEYS = (
    "version",
    "git_version",
    "cuda_runtime",
    "hip",
    "cudnn",
    "build",
    "num_threads",
    "num_interop_threads",
    "cuda_available",
    "cuda_initialized",
    "nccl",
    "gpus",
)


def framework_sections(versions: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """One section per framework of :data:`FRAMEWORKS`, run-time facts only of those the process imported.

    Args:
        versions: Installed package versions (:func:`package_versions`), for frameworks not imported.
    """
    collectors = {"torch": _torch, "tensorflow": _tensorflow, "jax": _jax, "keras": _keras, "lightning": _lightning}
    sections: dict[str, dict[str, Any]] = {}
    for name in FRAMEWORKS:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "__version__"):  # imported by the training code
            sections[name] = {"present": True, **collectors[name](module)}
        else:
            sections[name] = absent(
                f"{name} is not imported by this process",
                version=versions.get(name) or versions.get(f"{name}-cpu"),
                git_version=None,
            )
    sections["keras"].setdefault("backend", os.environ.get("KERAS_BACKEND"))
    return sections


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


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that matter to results (metadata only, read once per process)."""
    return dict(_installed_versions())


def thread_facts(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The ``threads`` section: CPU count and affinity, the frameworks' thread pools, the thread variables, and
    ``launcher_budget``: the threads per replica ``deviate-replicate`` gave (``None``: it gave none, the user chose
    or the replicas ran one at a time)."""
    torch, tf = fingerprint["torch"], fingerprint["tensorflow"]
    budget = os.environ.get(THREAD_BUDGET_ENV, "")
    return {
        "os_cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_intra_op": torch.get("num_threads"),
        "torch_inter_op": torch.get("num_interop_threads"),
        "tensorflow_intra_op": tf.get("intra_op_threads"),
        "tensorflow_inter_op": tf.get("inter_op_threads"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
        **{name: os.environ.get(name) for name in _MORE_THREAD_VARIABLES},
        "launcher_budget": int(budget) if budget.isdigit() else None,
    }


def blas_facts(torch_build: Mapping[str, Any]) -> dict[str, Any]:
    """BLAS/LAPACK libraries NumPy and torch were built with (``name version`` strings, or ``None``)."""
    facts: dict[str, Any] = dict(_numpy_blas())
    facts["torch_blas"] = torch_build.get("blas_info")
    facts["torch_lapack"] = torch_build.get("lapack_info")
    return facts


@functools.lru_cache(maxsize=1)
def _numpy_blas() -> tuple[tuple[str, Any], ...]:
    """NumPy's BLAS and LAPACK: a build fact, read once per process."""
    facts: dict[str, Any] = {"numpy_blas": None, "numpy_lapack": None}
    try:
        import numpy as np

        deps = np.show_config(mode="dicts")["Build Dependencies"]  # type: ignore[index]
        for lib in ("blas", "lapack"):
            facts[f"numpy_{lib}"] = " ".join(str(deps[lib].get(k)) for k in ("name", "version") if deps[lib].get(k))
    except Exception:  # show_config's layout is not a stable API
        pass
    return tuple(facts.items())


@functools.lru_cache(maxsize=4)
def _torch_build(torch: Any) -> tuple[tuple[str, Any], ...]:
    """What cannot change while the process runs: versions, the build, CUDA's availability, NCCL (read once)."""
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
        "cuda_available": bool(torch.cuda.is_available()),
        "nccl": None,
    }
    if info["cuda_available"]:
        try:
            nccl = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        except Exception:  # a build without NCCL
            pass
    return tuple(info.items())


def _torch(torch: Any) -> dict[str, Any]:
    constant = dict(_torch_build(torch))
    info: dict[str, Any] = {
        **constant,
        "build": dict(constant["build"]),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "cuda_initialized": bool(torch.cuda.is_initialized()),
        "gpus": [],
    }
    info = {key: info[key] for key in _TORCH_KEYS}  # the order the section always had
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
                    "uuid_sha256": hash_uuid(getattr(props, "uuid", None)),
                }
            )
    return info


@functools.lru_cache(maxsize=4)
def _tensorflow_build(tf: Any) -> tuple[tuple[str, Any], ...]:
    """TensorFlow's build and physical devices: read once per process."""
    build = dict(tf.sysconfig.get_build_info())
    return (
        ("build", {key: build.get(key) for key in ("is_cuda_build", "cuda_version", "cudnn_version", "is_rocm_build")}),
        ("devices", [{"name": d.name, "type": d.device_type} for d in tf.config.list_physical_devices()]),
    )


def _tensorflow(tf: Any) -> dict[str, Any]:
    constant = dict(_tensorflow_build(tf))
    return {
        "version": tf.__version__,
        "git_version": getattr(tf.version, "GIT_VERSION", None),
        "build": dict(constant["build"]),
        "onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "devices": [dict(device) for device in constant["devices"]],
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
