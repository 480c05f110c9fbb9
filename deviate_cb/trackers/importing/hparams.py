"""The ``hparams.yaml`` Lightning's loggers write next to a run's logs, as ``hparams.<key>`` -> text.

Nested mappings are flattened with dots (``model.lr``); every value is kept as text, as MLflow keeps params
(``0.1``, ``True``, ``None``). Objects YAML cannot rebuild safely (``!!python/object`` tags, which Lightning writes
for an ``argparse.Namespace``) are read as the mapping or text they hold, never executed.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "hparams.yaml"
    >>> _ = path.write_text("lr: 0.1\\nseed: 3\\nmodel:\\n  width: 8\\n")
    >>> read_hparams(path)
    {'hparams.lr': '0.1', 'hparams.seed': '3', 'hparams.model.width': '8'}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deviate_cb.errors import UsageError

__all__ = ["HPARAMS_FILE", "read_hparams"]

HPARAMS_FILE = "hparams.yaml"


def read_hparams(path: Path) -> dict[str, str]:
    """``hparams.<key>`` -> value as text of the YAML file at ``path`` (``{}`` when there is none).

    Raises:
        UsageError: The file is not YAML, or PyYAML is missing (Lightning installs it).
    """
    if not path.is_file():
        return {}
    try:
        import yaml
    except ImportError:
        raise UsageError(
            f"reading {path} needs PyYAML, which Lightning installs: pip install pyyaml. Received: {path}."
        ) from None

    class _Loader(yaml.SafeLoader):
        pass

    def _any(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    _Loader.add_multi_constructor("", _any)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # a SafeLoader: nothing executed
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        raise UsageError(f"{path}: not a readable hparams.yaml ({' '.join(str(exc).split())[:200]}).") from None
    flat: dict[str, str] = {}
    _flatten("hparams", data if isinstance(data, Mapping) else {}, flat)
    return flat


def _flatten(prefix: str, data: Mapping[Any, Any], flat: dict[str, str]) -> None:
    for key, value in data.items():
        name = f"{prefix}.{key}"
        if isinstance(value, Mapping) and value:
            _flatten(name, value, flat)
        else:
            flat[name] = str(value)
