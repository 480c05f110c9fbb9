"""What a replica's ``run.json`` records about processes it left running that could not be stopped.

Example:
    >>> from deviate_cb.store.manifest import RunManifest
    >>> survivors_note(Path("r/run.json"), "replica 0", RunManifest.from_json({"survivors": []})) is None
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.manifest import RunManifest

__all__ = ["SHOWN_COMMAND", "SHOWN_PROCESSES", "survivors_note"]

SHOWN_COMMAND = 80  # characters of a command shown in a line
SHOWN_PROCESSES = 5  # processes named in one line; the rest are counted


def survivors_note(manifest_path: Path, replica: str, manifest: RunManifest) -> Optional[str]:
    """One line about the processes a replica's ``run.json`` (``manifest``) records as ``survivors`` (they could not
    be stopped at its end and may still write into its folder), or about a ``survivors`` field that is not a list
    of strings; ``None`` when it records none. A run store is untrusted: the line is bounded, whatever it holds.

    Example:
        >>> manifest = RunManifest.from_json({"survivors": ["pid 9: sleep 99"]})
        >>> print(survivors_note(Path("r/run.json"), "replica 0 of experiment=e variant=v", manifest))
        ... # doctest: +NORMALIZE_WHITESPACE
        r/run.json: replica 0 of experiment=e variant=v left 1 process running that could not be stopped at its
        end (pid 9: sleep 99); it may still run and write into the replica's folder
        >>> print(survivors_note(Path("r/run.json"), "replica 0", RunManifest.from_json({"survivors": 7})))
        r/run.json: `survivors` is not a list of strings (a JSON number); replica 0 may have left processes running
    """
    recorded = manifest.to_json().get("survivors")  # as read: a value of another type is named in the line
    if recorded is None or recorded == []:
        return None
    if not isinstance(recorded, list) or not all(isinstance(entry, str) for entry in recorded):
        kind = _json_kind(recorded)
        return (
            f"{manifest_path}: `survivors` is not a list of strings ({kind}); {replica} may have left processes running"
        )
    shown = "; ".join(_shorten(entry) for entry in recorded[:SHOWN_PROCESSES])
    more = f"; and {len(recorded) - SHOWN_PROCESSES} more" if len(recorded) > SHOWN_PROCESSES else ""
    count = f"{len(recorded)} process{'es' * (len(recorded) != 1)}"
    return (
        f"{manifest_path}: {replica} left {count} running that could not be stopped at its end ({shown}{more}); "
        f"{'they' if len(recorded) != 1 else 'it'} may still run and write into the replica's folder"
    )


def _shorten(text: str) -> str:
    """``text`` cut to a line's share (a recorded survivor is ``pid N: command``, but the store is untrusted)."""
    limit = SHOWN_COMMAND + 20
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_kind(value: Any) -> str:
    """What a JSON value is (``a JSON number``), never the value itself (it may be huge)."""
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object"}
    if isinstance(value, list):
        wrong = next((entry for entry in value if not isinstance(entry, str)), None)
        return f"a JSON list holding {_json_kind(wrong)}"
    return "null" if value is None else f"a JSON {names.get(type(value), 'value')}"
