"""Names and values a tracker accepts: every metric or param name mapped, one to one, to one MLflow takes.

Example:
    >>> mapped = tracker_names(["val_acc", "val//acc", "val/acc", "a+b", "a=b", ".."])
    >>> mapped["val_acc"], mapped["val/acc"]
    ('val_acc', 'val/acc')
    >>> mapped["val//acc"].startswith("val/acc_"), mapped["a+b"] != mapped["a=b"], len(set(mapped.values()))
    (True, True, 6)
    >>> all(accepted(name) for name in mapped.values())
    True
    >>> fit_value("x" * 50, 40)
    ('xxxxxxxx... [truncated: 50 characters]', True)
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable, Mapping

__all__ = ["MAX_NAME_CHARS", "accepted", "fit_value", "name_tags", "tracker_names"]

MAX_NAME_CHARS = 250  # MLflow's limit on metric, param and tag names
_MAX_TAG_CHARS = 8000  # MLflow's limit on a tag value
_REFUSED = re.compile(r"[^A-Za-z0-9_\-. /]")  # ASCII only; no ':' (refused by a server on Windows)
_HASH_CHARS = (8, 12, 16, 40)


def accepted(name: str) -> bool:
    """Whether MLflow accepts ``name`` as a metric, param or tag name, on any platform.

    Example:
        >>> [accepted(n) for n in ("val/acc", "val//acc", "/acc", "..", "a:b", "x" * 251, "")]
        [True, False, False, False, False, False, False]
    """
    if not name or len(name) > MAX_NAME_CHARS or _REFUSED.search(name):
        return False
    normal = posixpath.normpath(name)
    return normal == name and normal != "." and not normal.startswith(("..", "/"))


def tracker_names(names: Iterable[str]) -> dict[str, str]:
    """``{name: tracker name}`` for every name: accepted names kept, others cleaned, all distinct.

    A cleaned name is used as it is when no other name cleans to it and no accepted name is it (``a+b`` becomes
    ``a_b``); otherwise it is given a short hash of the original, so that two names never become one.

    Example:
        >>> tracker_names(["val_acc/algo+impl/std"])
        {'val_acc/algo+impl/std': 'val_acc/algo_impl/std'}
        >>> mapped = tracker_names(["a+b", "a=b", "a_b"])
        >>> mapped["a_b"], mapped["a+b"].startswith("a_b_"), mapped["a=b"].startswith("a_b_")
        ('a_b', True, True)
    """
    unique = sorted(set(names))
    out = {name: name for name in unique if accepted(name)}
    used = set(out.values())
    bases = {name: _clean(name) for name in unique if name not in out}
    shared = {base for base in bases.values() if list(bases.values()).count(base) > 1}
    for name, base in bases.items():
        if base not in shared and base not in used and accepted(base):
            out[name] = base  # the only name cleaned to it: readable, and still one to one
            used.add(base)
    for name in unique:
        if name in out:
            continue
        base = bases[name]
        for size in _HASH_CHARS:
            suffix = "_" + hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:size]
            candidate = base[: MAX_NAME_CHARS - len(suffix)].rstrip("/") + suffix
            if candidate not in used and accepted(candidate):
                break
        else:  # 40 hex digits collided: count up (deterministic: names are visited sorted)
            stem = base[: MAX_NAME_CHARS - 12].rstrip("/") or "_"
            candidate = next(f"{stem}_{k}" for k in range(len(used) + 1) if f"{stem}_{k}" not in used)
        out[name] = candidate
        used.add(candidate)
    return out


def name_tags(kind: str, mapping: Mapping[str, str]) -> dict[str, str]:
    """Tags recording the renamed names of ``kind`` (``metric`` or ``param``) as JSON ``{tracker name: original}``.

    One tag ``deviate.<kind>_names`` when it fits a tag value, else ``deviate.<kind>_names.1``, ``.2``, ...

    Example:
        >>> name_tags("metric", {"val//acc": "val/acc_4f1c", "loss": "loss"})
        {'deviate.metric_names': '{"val/acc_4f1c": "val//acc"}'}
    """
    renamed = sorted((new, old) for old, new in mapping.items() if new != old)
    if not renamed:
        return {}
    chunks: list[dict[str, str]] = [{}]
    for new, old in renamed:
        entry = {new: fit_value(old, 1000)[0]}
        if chunks[-1] and len(json.dumps({**chunks[-1], **entry})) > _MAX_TAG_CHARS:
            chunks.append({})
        chunks[-1].update(entry)
    if len(chunks) == 1:
        return {f"deviate.{kind}_names": json.dumps(chunks[0])}
    return {f"deviate.{kind}_names.{k}": json.dumps(chunk) for k, chunk in enumerate(chunks, 1)}


def fit_value(value: str, limit: int) -> tuple[str, bool]:
    """``(value, False)`` when it has at most ``limit`` characters, else its start with a marker and ``True``."""
    if len(value) <= limit:
        return value, False
    marker = f"... [truncated: {len(value)} characters]"
    return value[: max(0, limit - len(marker))] + marker, True


def _clean(name: str) -> str:
    """``name`` with refused characters as ``_``, no empty, ``.`` or ``..`` path parts, no leading ``..``."""
    parts = [part for part in _REFUSED.sub("_", name).split("/") if part]
    parts = ["_" + part if part in (".", "..") else part for part in parts]
    if parts and parts[0].startswith(".."):
        parts[0] = "_" + parts[0]
    return "/".join(parts) or "_"
