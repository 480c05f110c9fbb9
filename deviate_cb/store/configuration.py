"""A replica's configuration: everything that decides what it trains, as its manifest records it.

Replicas are pooled (one group, one spread) only when they ran the same configuration: the same trainer spec or
command, the same arguments, variant, base seed, Keras backend, the same ``--metric-regex`` patterns, the same
``--keep-project-seeds`` choice, the same audit and the same ``--isolate`` choice (a replica run in its own
working directory writes where one without it does not). The launcher records them in ``run.json`` as
``configuration`` (:func:`configuration_fields`); a rerun into a group whose completed replicas ran another
configuration is refused (:mod:`deviate_cb.launch.planner`), and the report refuses to pool replicas whose
recorded configurations differ (:mod:`deviate_cb.report.configurations`). A manifest written before the field
existed is read from the fields it has (``mode``, ``trainer``, ``trainer_args``, ``command``, ``keras_backend``,
``keep_project_seeds``, ``base_seed``); a key one of two manifests does not record is not compared.

What is not the configuration: where and when it ran (host, slot, GPU, ``--parallel``, ``--cold``, the backend,
``--timeout``) and the replica's own seed (checked on its own: replica ``k`` of a variant always gets the seed
the variant gives it).

Example:
    >>> a = configuration_fields(mode="trainer", trainer="t.py:main", trainer_args=["0.1"], variant="algo")
    >>> b = {**a, "trainer_args": ["0.01"]}
    >>> configuration_differences(a, b)
    ["trainer arguments ['0.1'] vs ['0.01']"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

__all__ = [
    "CONFIGURATION_KEY",
    "CONFIGURATION_LABELS",
    "configuration_differences",
    "configuration_fields",
    "configuration_of",
    "describe_value",
]

CONFIGURATION_KEY = "configuration"
# The keys of a configuration, in the order a difference is named, with the words that name them.
CONFIGURATION_LABELS: dict[str, str] = {
    "mode": "launch mode",
    "trainer": "--trainer",
    "command": "command",
    "trainer_args": "trainer arguments",
    "variant": "variant",
    "base_seed": "--seed",
    "keras_backend": "Keras backend",
    "metric_regex": "--metric-regex",
    "keep_project_seeds": "--keep-project-seeds",
    "keep_project_determinism": "--keep-project-determinism",
    "audit_steps": "audited steps",
    "isolate": "--isolate",
}
# Keys a manifest older than `configuration` records at its top level.
_LEGACY_KEYS = (
    "mode",
    "trainer",
    "command",
    "trainer_args",
    "variant",
    "base_seed",
    "keras_backend",
    "keep_project_seeds",
)
# Where an absent value means the default.
_DEFAULTS: dict[str, Any] = {
    "trainer_args": [],
    "metric_regex": [],
    "keep_project_seeds": False,
    "keep_project_determinism": False,
    "isolate": False,
}


def configuration_fields(
    *,
    mode: str,
    variant: str,
    trainer: Optional[str] = None,
    command: Optional[Sequence[str]] = None,
    trainer_args: Sequence[str] = (),
    base_seed: Optional[int] = None,
    keras_backend: Optional[str] = None,
    metric_regex: Sequence[str] = (),
    keep_project_seeds: bool = False,
    audit_steps: Optional[int] = None,
    keep_project_determinism: bool = False,
    isolate: bool = False,
) -> dict[str, Any]:
    """The ``configuration`` the launcher records in every replica's manifest (JSON values only).

    ``command`` is the command line as given, with its placeholders unfilled (what every replica shares).
    """
    return {
        "mode": mode,
        "trainer": trainer,
        "command": None if command is None else list(command),
        "trainer_args": list(trainer_args),
        "variant": variant,
        "base_seed": base_seed,
        "keras_backend": keras_backend,
        "metric_regex": list(metric_regex),
        "keep_project_seeds": bool(keep_project_seeds),
        "keep_project_determinism": bool(keep_project_determinism),
        "audit_steps": audit_steps,
        "isolate": bool(isolate),
    }


def configuration_of(manifest: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The configuration a manifest records; ``None`` when it records none (not written by the launcher).

    A manifest written before ``configuration`` existed gives what its top-level fields say.

    Example:
        >>> configuration_of({"mode": "trainer", "trainer": "t.py:main", "variant": "algo", "seed": 3})
        {'mode': 'trainer', 'trainer': 't.py:main', 'variant': 'algo'}
        >>> configuration_of({"status": "completed"}) is None
        True
    """
    recorded = manifest.get(CONFIGURATION_KEY)
    if isinstance(recorded, Mapping):
        return {key: recorded[key] for key in CONFIGURATION_LABELS if key in recorded}
    if manifest.get("mode") not in ("trainer", "command"):
        return None
    return {key: manifest[key] for key in _LEGACY_KEYS if key in manifest}


def configuration_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two configurations, one phrase per key (``"--trainer 'a:f' vs 'b:f'"``).

    Only keys both record are compared; an absent list or flag means its default.

    Example:
        >>> configuration_differences({"variant": "algo", "keras_backend": None}, {"variant": "algo"})
        []
        >>> configuration_differences({"metric_regex": []}, {"metric_regex": ["acc=(?P<acc>.+)"]})
        ["--metric-regex none vs ['acc=(?P<acc>.+)']"]
    """
    found = []
    for key, label in CONFIGURATION_LABELS.items():
        if key not in a and key not in b:
            continue
        if (key in a) != (key in b) and key not in _DEFAULTS:
            continue
        left, right = _normal(key, a.get(key, _DEFAULTS.get(key))), _normal(key, b.get(key, _DEFAULTS.get(key)))
        if left != right:
            found.append(f"{label} {describe_value(left)} vs {describe_value(right)}")
    return found


def describe_value(value: Any) -> str:
    """A configuration value as a phrase: ``none`` for nothing, ``repr`` otherwise.

    Example:
        >>> describe_value(None), describe_value([]), describe_value(["0.1"]), describe_value("tensorflow")
        ('none', 'none', "['0.1']", "'tensorflow'")
    """
    if value is None or value == []:
        return "none"
    return repr(value)


def _normal(key: str, value: Any) -> Any:
    if isinstance(value, tuple):
        value = list(value)
    if key in ("keep_project_seeds", "keep_project_determinism", "isolate"):
        return bool(value)
    return value
