"""The ``hparams.yaml`` Lightning's loggers write next to a run's logs, as ``hparams.<key>`` -> text.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "hparams.yaml"
    >>> _ = path.write_text("lr: 0.1\\nseed: 3\\nmodel:\\n  width: 8\\n")
    >>> read_hparams(path)
    {'hparams.lr': '0.1', 'hparams.seed': '3', 'hparams.model.width': '8'}
    >>> _ = path.write_text("a: &a [x, x, x, x]\\n" + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}]\\n"
    ...     for p, c in zip("abcdefghijklmn", "bcdefghijklmno")))
    >>> try:
    ...     read_hparams(path)
    ... except LogFileError as exc:
    ...     print(exc.reason)
    YAML aliases expand past 2000000 characters (an alias bomb); not read
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deviate_cb.errors import UsageError
from deviate_cb.trackers.importing.log_files import LogFileError, read_log_file

__all__ = ["HPARAMS_FILE", "MAX_ALIASES", "MAX_DEPTH", "MAX_EXPANDED", "MAX_HPARAMS_BYTES", "read_hparams"]

HPARAMS_FILE = "hparams.yaml"
#: The largest ``hparams.yaml`` read (Lightning's are a few KB).
MAX_HPARAMS_BYTES = 1024 * 1024
#: The most YAML aliases (``*name``) one file may use (Lightning writes one where a value is shared).
MAX_ALIASES = 100
#: The deepest nesting of sequences and mappings read.
MAX_DEPTH = 50
#: The most characters of scalars the file holds once every alias is expanded.
MAX_EXPANDED = 2_000_000


def read_hparams(path: Path) -> dict[str, str]:
    """``hparams.<key>`` -> value as text of the YAML file at ``path`` (``{}`` when there is none).

    Raises:
        LogFileError: Not a regular file, too large, not YAML, or a bomb (aliases, depth, expanded size).
        UsageError: PyYAML is missing (Lightning installs it).
    """
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        import yaml
    except ImportError:
        raise UsageError(
            f"reading {path} needs PyYAML, which Lightning installs: pip install pyyaml. Received: {path}."
        ) from None
    try:
        text = read_log_file(path, MAX_HPARAMS_BYTES).decode("utf-8")
        loader = _loader(yaml)(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _expanded(node, {}, yaml)
            data = None if node is None else loader.construct_document(node)  # a SafeLoader: nothing executed
        finally:
            loader.dispose()
    except LogFileError:
        raise
    except _Refused as exc:
        raise LogFileError(path, f"{exc}; not read") from None
    except (yaml.YAMLError, UnicodeDecodeError, OSError, RecursionError) as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise LogFileError(path, f"not a readable hparams.yaml ({reason})") from None
    flat: dict[str, str] = {}
    _flatten("hparams", data if isinstance(data, Mapping) else {}, flat)
    return flat


class _Refused(Exception):
    """A YAML document over one of the bounds (the message says which)."""


def _loader(yaml: Any) -> Any:
    """A ``SafeLoader`` that reads unknown tags as plain data and counts aliases and depth while composing."""

    class _Loader(yaml.SafeLoader):  # type: ignore[name-defined,misc]
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.aliases = 0
            self.depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise _Refused(f"more than {MAX_ALIASES} YAML aliases")
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise _Refused(f"YAML nested more than {MAX_DEPTH} deep")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    def _any(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    _Loader.add_multi_constructor("", _any)
    return _Loader


def _expanded(node: Any, sizes: dict[int, int], yaml: Any) -> int:
    """The characters of scalars under ``node`` with every alias expanded (each node measured once)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    if isinstance(node, yaml.ScalarNode):
        size = len(node.value) + 1
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded(child, sizes, yaml) for child in node.value)
    else:
        size = 1 + sum(_expanded(k, sizes, yaml) + _expanded(v, sizes, yaml) for k, v in node.value)
    if size > MAX_EXPANDED:
        raise _Refused(f"YAML aliases expand past {MAX_EXPANDED} characters (an alias bomb)")
    sizes[id(node)] = size
    return size


def _flatten(prefix: str, data: Mapping[Any, Any], flat: dict[str, str]) -> None:
    for key, value in data.items():
        name = f"{prefix}.{key}"
        if isinstance(value, Mapping) and value:
            _flatten(name, value, flat)
        else:
            flat[name] = str(value)
