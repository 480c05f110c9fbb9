"""A replica's configuration: everything that decides what it trains, as its manifest records it.

Example:
    >>> a = configuration_fields(mode="trainer", trainer="t.py:main", trainer_args=["0.1"], variant="algo")
    >>> b = {**a, "trainer_args": ["0.01"]}
    >>> configuration_differences(a, b)
    ["trainer arguments ['0.1'] vs ['0.01']"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from deviate_cb.store.manifest import RunManifest

__all__ = [
    "CONFIGURATION_KEY",
    "CONFIGURATION_LABELS",
    "UNREADABLE_KEY",
    "configuration_differences",
    "configuration_fields",
    "configuration_of",
    "describe_value",
    "unreadable_reason",
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
# The JSON type each key holds as the launcher writes it: a string, a list of strings, a bool, an int; `?`: or null.
_TYPES: dict[str, str] = {
    "mode": "str",
    "trainer": "str?",
    "command": "list?",
    "trainer_args": "list",
    "variant": "str",
    "base_seed": "int?",
    "keras_backend": "str?",
    "metric_regex": "list",
    "keep_project_seeds": "bool",
    "keep_project_determinism": "bool",
    "audit_steps": "int?",
    "isolate": "bool",
}
_WORDS = {"str": "a string", "list": "a list of strings", "bool": "true or false", "int": "an integer"}
_MAX_TEXT = 100_000  # characters of one string (a command line's argument is far shorter)
_MAX_ITEMS = 10_000  # strings of one list
UNREADABLE_KEY = "unreadable"  # the one key of a configuration that cannot be read: why
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


def configuration_of(manifest: RunManifest) -> Optional[dict[str, Any]]:
    """The configuration a manifest records; ``None`` when it records none (not written by the launcher).

    A manifest written before ``configuration`` existed gives what its top-level fields say. One that cannot be
    read (not an object, a value of the wrong type or absurd size) gives ``{"unreadable": WHY}``, never pooled.

    Example:
        >>> from deviate_cb.store.manifest import RunManifest as M
        >>> configuration_of(M.from_json({"mode": "trainer", "trainer": "t.py:main", "variant": "algo", "seed": 3}))
        {'mode': 'trainer', 'trainer': 't.py:main', 'variant': 'algo'}
        >>> configuration_of(M.from_json({"status": "completed"})) is None
        True
        >>> configuration_of(M.from_json({"configuration": [1, 2]}))
        {'unreadable': '`configuration` is a JSON list, not an object'}
        >>> configuration_of(M.from_json({"configuration": {"variant": "algo", "trainer_args": [["0.1"]]}}))
        {'unreadable': '`configuration.trainer_args` holds a JSON list, expected a list of strings'}
    """
    data = manifest.to_json()  # as read: a value of another type is named in `unreadable`
    if CONFIGURATION_KEY in data:
        recorded = data[CONFIGURATION_KEY]
        if not isinstance(recorded, Mapping):
            return {UNREADABLE_KEY: f"`{CONFIGURATION_KEY}` is {_json_kind(recorded)}, not an object"}
        prefix = f"{CONFIGURATION_KEY}."
        found = {key: recorded[key] for key in CONFIGURATION_LABELS if key in recorded}
    elif data.get("mode") in ("trainer", "command"):
        prefix, found = "", {key: data[key] for key in _LEGACY_KEYS if key in data}
    else:
        return None
    for key, value in found.items():
        problem = _value_problem(value, _TYPES[key])
        if problem:
            return {UNREADABLE_KEY: f"`{prefix}{key}` {problem}"}
    return found


def unreadable_reason(configuration: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Why a configuration :func:`configuration_of` gave cannot be read; ``None`` when it can (or is ``None``).

    Example:
        >>> from deviate_cb.store.manifest import RunManifest
        >>> unreadable_reason(configuration_of(RunManifest.from_json({"configuration": "algo"})))
        '`configuration` is a JSON string, not an object'
        >>> unreadable_reason({"variant": "algo"}) is None
        True
    """
    if configuration is None or UNREADABLE_KEY not in configuration:
        return None
    return str(configuration[UNREADABLE_KEY])


def _value_problem(value: Any, expected: str) -> Optional[str]:
    """What is wrong with one recorded value, or ``None``."""
    kind = expected.rstrip("?")
    if value is None and expected.endswith("?"):
        return None
    if kind == "list" and isinstance(value, list):
        if len(value) > _MAX_ITEMS:
            return f"holds {len(value):,} items, more than {_MAX_ITEMS:,}"
        wrong = next((item for item in value if not isinstance(item, str)), None)
        if wrong is not None or any(item is None for item in value):
            return f"holds {_json_kind(wrong)}, expected {_WORDS[kind]}"
        longest = max(value, key=len, default="")
        return _text_problem(longest)
    ok = {"str": str, "bool": bool, "int": int}.get(kind)
    if ok is None or not isinstance(value, ok) or (kind == "int" and isinstance(value, bool)):
        return f"is {_json_kind(value)}, expected {_WORDS[kind]}{' or null' * expected.endswith('?')}"
    return _text_problem(value) if isinstance(value, str) else None


def _text_problem(text: str) -> Optional[str]:
    if len(text) > _MAX_TEXT:
        return f"holds a string of {len(text):,} characters, more than {_MAX_TEXT:,}"
    return None


def _json_kind(value: Any) -> str:
    """``a JSON list``, ``a JSON number``...: what a JSON value is, never the value (it may be huge)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float)):
        return "a JSON number"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, (list, tuple)):
        return "a JSON list"
    return "a JSON object"


def configuration_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between two configurations, one phrase per key (``"--trainer 'a:f' vs 'b:f'"``).

    Only keys both record are compared; an absent list or flag means its default. A configuration that cannot be
    read differs from every other (one phrase: why it cannot be read).

    Example:
        >>> configuration_differences({"variant": "algo", "keras_backend": None}, {"variant": "algo"})
        []
        >>> configuration_differences({"metric_regex": []}, {"metric_regex": ["acc=(?P<acc>.+)"]})
        ["--metric-regex none vs ['acc=(?P<acc>.+)']"]
        >>> configuration_differences({"unreadable": "`configuration` is null, not an object"}, {"variant": "algo"})
        ['a recorded configuration that cannot be read (`configuration` is null, not an object)']
    """
    for side in (a, b):
        why = unreadable_reason(side)
        if why is not None:
            return [f"a recorded configuration that cannot be read ({why})"]
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
