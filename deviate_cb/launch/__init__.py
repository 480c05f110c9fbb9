"""The launcher of ``deviate-replicate``; ``backends/`` start replicas, ``replica/`` runs in them, ``target/``
reads the project.

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
    "Backend": "backends.base",
    "Job": "backends.base",
    "Outcome": "backends.base",
    "Placement": "backends.base",
    "get_backend": "backends.base",
    "available_backends": "backends.base",
    "register_backend": "backends.base",
    "LocalBackend": "backends.local",
    "SlurmBackend": "backends.slurm.backend",
    "RayBackend": "backends.ray_backend",
    "ReplicaPlan": "planner",
    "plan_replicas": "planner",
    "ReplicaResult": "replication",
    "ReplicationResult": "replication",
    "replicate": "runner",
    "TrainerSpec": "target.trainer_spec",
    "TrainerSpecError": "target.trainer_spec",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"deviate_cb.launch.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'deviate_cb.launch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
