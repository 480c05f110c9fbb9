"""The typed manifest: ``run.json`` written as one section per writer and read as a :class:`RunManifest`.

Example:
    >>> LaunchEnd(status="failed").fields(), RunManifest.from_json({"status": "failed"}).status
    ({'status': 'failed'}, 'failed')
"""

from deviate_cb.store.manifest.read import RunManifest
from deviate_cb.store.manifest.sections import (
    SECTIONS,
    UNSET,
    BenchRecord,
    CaptureRecord,
    ImportRecord,
    LaunchEnd,
    LaunchStart,
    ManifestSection,
    ReplicaRecord,
    StabilityRecord,
)

__all__ = [
    "SECTIONS",
    "UNSET",
    "BenchRecord",
    "CaptureRecord",
    "ImportRecord",
    "LaunchEnd",
    "LaunchStart",
    "ManifestSection",
    "ReplicaRecord",
    "RunManifest",
    "StabilityRecord",
]
