"""Launch replicas: the planner, the backends (``local``, ``slurm``, ``ray``, plug-ins) and the replica bootstrap.

Example:
    >>> from deviate_cb.launch import replicate
    >>> result = replicate("examples/train.py:main", runs=3, variant="control")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Backend",
    "Job",
    "LocalBackend",
    "Outcome",
    "Placement",
    "RayBackend",
    "ReplicaPlan",
    "ReplicaResult",
    "ReplicationResult",
    "SlurmBackend",
    "TrainerSpec",
    "TrainerSpecError",
    "available_backends",
    "get_backend",
    "plan_replicas",
    "register_backend",
    "replicate",
]

_WHERE = {
    "Backend": "base",
    "Job": "base",
    "Outcome": "base",
    "Placement": "base",
    "get_backend": "base",
    "available_backends": "base",
    "register_backend": "base",
    "LocalBackend": "local",
    "SlurmBackend": "slurm.backend",
    "RayBackend": "ray_backend",
    "ReplicaPlan": "planner",
    "plan_replicas": "planner",
    "ReplicaResult": "replication",
    "ReplicationResult": "replication",
    "replicate": "runner",
    "TrainerSpec": "trainer_spec",
    "TrainerSpecError": "trainer_spec",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"deviate_cb.launch.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'deviate_cb.launch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
