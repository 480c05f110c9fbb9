"""What a warm-start template imports before it forks replicas, found without running the project's code.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "model.py").write_text("import torch.nn as nn\\nimport requests\\n")
    >>> _ = (folder / "train.py").write_text("import lightning as L\\nfrom model import Net\\n")
    >>> preimports([folder / "train.py"], folder)  # doctest: +ELLIPSIS
    ('lightning', 'torch.nn', 'deviate_cb.launch.replica.bootstrap', 'deviate_cb.launch.target.trainer_spec', ...)
"""

from __future__ import annotations

import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

from deviate_cb.launch.target.command import Command
from deviate_cb.launch.target.source_checks import find_module_file, top_level_imports
from deviate_cb.launch.target.trainer_spec import TrainerSpec

__all__ = ["CAPTURE_PATH", "FRAMEWORKS", "preimports", "project_files"]

#: Top-level packages a template may import: numerical and training frameworks and their configuration
#: libraries. Anything else the project imports (its own code, loggers that start threads) is left to the replica.
FRAMEWORKS = frozenset(
    {
        "numpy",
        "scipy",
        "pandas",
        "pyarrow",
        "sklearn",
        "torch",
        "torchvision",
        "torchaudio",
        "torchmetrics",
        "lightning",
        "lightning_fabric",
        "pytorch_lightning",
        "tensorflow",
        "keras",
        "jax",
        "flax",
        "transformers",
        "accelerate",
        "tokenizers",
        "datasets",
        "optax",
        "hydra",
        "omegaconf",
        "yaml",
    }
)
#: deviate-cb's own modules every replica runs: the bootstrap and the ``--trainer`` child.
CAPTURE_PATH = (
    "deviate_cb.launch.replica.bootstrap",
    "deviate_cb.launch.target.trainer_spec",
    "deviate_cb.launch.replica.final_metrics",
)
_ADAPTERS = {
    "lightning": "deviate_cb.lightning",
    "pytorch_lightning": "deviate_cb.lightning",
    "keras": "deviate_cb.keras",
    "transformers": "deviate_cb.transformers",
}
_MAX_FILES = 20
_MAX_DEPTH = 2


def project_files(target: Union[TrainerSpec, Command], cwd: Path) -> list[Path]:
    """The Python file a replica starts from: the trainer's file or module, the command's script or ``-m`` module.

    Example:
        >>> project_files(Command.parse(["bash", "run.sh"]), Path.cwd())
        []
    """
    found: Optional[Path] = None
    if isinstance(target, TrainerSpec):
        found = cwd / target.target if target.is_path else find_module_file(target.target, cwd, package_main=False)
    elif target.python is not None and target.kind == "python":
        if target.python.script:
            found = cwd / target.python.script
        elif target.python.module:
            found = find_module_file(target.python.module, cwd)
    return [found] if found is not None and found.suffix == ".py" and found.is_file() else []


def preimports(files: Sequence[Path], cwd: Path) -> tuple[str, ...]:
    """The modules a template imports for a project starting at ``files``: frameworks, then deviate-cb's own."""
    modules: list[str] = []
    seen: set[Path] = set()
    library = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "purelib", "platlib")}
    queue = [(path.resolve(), 0) for path in files]
    while queue and len(seen) < _MAX_FILES:
        path, depth = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        for name in top_level_imports(path):
            top = name.split(".")[0]
            if top in FRAMEWORKS:
                if name not in modules:
                    modules.append(name)
            elif depth < _MAX_DEPTH and not top.startswith("deviate_cb"):
                local = _project_module(name, [path.parent, cwd], library)
                if local is not None:
                    queue.append((local, depth + 1))
    tops = {name.split(".")[0] for name in modules}
    adapters = [_ADAPTERS[top] for top in sorted(tops) if top in _ADAPTERS]
    return tuple(modules) + CAPTURE_PATH + tuple(dict.fromkeys(adapters))


def _project_module(name: str, folders: Sequence[Path], library: set[Path]) -> Optional[Path]:
    """The file of module ``name`` when it is the project's own (found from ``folders``, not an installed one)."""
    for folder in folders:
        found = find_module_file(name, folder, package_main=False)
        if found is None or found.suffix != ".py":
            continue
        resolved = found.resolve()
        if any(root == resolved or root in resolved.parents for root in library):
            return None
        return resolved
    return None
