"""Whether ``deviate audit`` can hook a project's training, told from its source before anything runs.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "loop.py").write_text("import numpy\\ndef main():\\n    import time\\n")
    >>> print(audit_refusal(TrainerSpec.parse(f"{folder / 'loop.py'}:main"), folder))  # doctest: +ELLIPSIS
    cannot audit .../loop.py:main: it imports neither Lightning nor Keras nor torch (loop.py read), and the audit ...
    >>> _ = (folder / "plain.py").write_text("def main():\\n    import torch\\n")
    >>> audit_refusal(TrainerSpec.parse(f"{folder / 'plain.py'}:main"), folder)
    ''
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shlex
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Optional, Union

from deviate_cb.launch.target.command import Command
from deviate_cb.launch.target.preimport import project_files
from deviate_cb.launch.target.source_checks import find_module_file
from deviate_cb.launch.target.trainer_spec import TrainerSpec

__all__ = ["AUDITABLE", "MAX_FILES", "RESUMABLE", "audit_refusal", "reaches_audited_framework", "reaches_resumable"]

#: Top-level modules whose import means the audit may hook the training (``tensorflow``: ``tf.keras``; ``torch``:
#: a plain loop, through torch's global hooks).
AUDITABLE = frozenset(
    {"lightning", "pytorch_lightning", "keras", "tensorflow", "tf_keras", "keras_core", "torch", "torchvision",
     "torchaudio", "torchmetrics", "transformers", "trl", "accelerate"}
)  # fmt: skip
#: Distributions (normalised names) that provide them: an installed package requiring one may train with it.
_AUDITABLE_DISTRIBUTIONS = frozenset(
    {"lightning", "pytorch-lightning", "keras", "keras-nightly", "keras-core", "tf-keras", "tensorflow",
     "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos", "tensorflow-intel", "tf-nightly", "torch"}
)  # fmt: skip
#: Top-level modules whose import may give ``deviate audit --resume-at`` a checkpoint to resume from (Lightning's,
#: a Keras ``BackupAndRestore``): a project that imports torch but none of them is a plain PyTorch loop.
RESUMABLE = frozenset(
    {"lightning", "pytorch_lightning", "keras", "tensorflow", "tf_keras", "keras_core", "transformers", "trl"}
)
_RESUMABLE_DISTRIBUTIONS = frozenset(
    {"lightning", "pytorch-lightning", "keras", "keras-nightly", "keras-core", "tf-keras", "tensorflow",
     "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos", "tensorflow-intel", "tf-nightly", "transformers", "trl"}
)  # fmt: skip
#: Installed packages known to train nothing with torch, Lightning or Keras themselves (no metadata lookup needed).
_PLAIN = frozenset(
    {"numpy", "scipy", "pandas", "pyarrow", "sklearn", "jax", "jaxlib", "flax", "optax", "yaml", "omegaconf", "tqdm",
     "matplotlib", "PIL", "seaborn", "safetensors"}
)  # fmt: skip
#: The project files read at most; a project with more is not refused (the scan could not end).
MAX_FILES = 300
# Calls that import or run code named at run time: what they reach cannot be read from the source.
_BY_NAME = frozenset(
    {"import_module", "__import__", "run_module", "run_path", "exec", "instantiate", "locate", "get_class",
     "get_method", "load_entry_point", "entry_points", "Popen", "check_call", "check_output"}
)  # fmt: skip


class _Inconclusive(Exception):
    """The scan cannot tell: the audit goes on."""


def audit_refusal(target: Union[TrainerSpec, Command], cwd: Path) -> str:
    """Why ``deviate audit`` cannot audit ``target`` (one line, starting ``cannot audit``), or ``""`` when it
    may (or when the source does not tell: the audit then goes on)."""
    if isinstance(target, Command) and target.python is not None and target.kind == "python":
        if Path(target.program).absolute() != Path(sys.executable).absolute():
            return ""  # another interpreter: its installed packages are not these
    elif isinstance(target, Command):
        return ""  # a shell script, a console script, a program: what it runs is not read here
    files = project_files(target, cwd)
    if not files:
        return ""
    try:
        read = reaches_audited_framework(files, cwd)
    except _Inconclusive:
        return ""
    if read is None:
        return ""
    what = target.text if isinstance(target, TrainerSpec) else f"`{shlex.join(target.given)}`"
    others = f" and {read - 1} module(s) of its own" if read > 1 else ""
    return (
        f"cannot audit {what}: it imports neither Lightning nor Keras nor torch ({files[0].name}{others} read), "
        "and the audit hooks into a Lightning Trainer's fit, a Keras Model.fit or torch's modules and optimizers "
        "(a plain PyTorch loop); with none of them there is nothing to hook, so nothing was run"
    )


def reaches_resumable(target: Union[TrainerSpec, Command], cwd: Path) -> Optional[bool]:
    """For ``--resume-at``: ``False`` when it is certain that ``target`` imports neither Lightning nor Keras (nor
    TensorFlow), directly, through its own modules or an installed package requiring one (a plain PyTorch loop has no
    standard checkpoint); ``True`` when it does; ``None`` when the source does not tell."""
    if isinstance(target, Command) and (target.python is None or target.kind != "python"):
        return None
    if isinstance(target, Command) and Path(target.program).absolute() != Path(sys.executable).absolute():
        return None
    files = project_files(target, cwd)
    if not files:
        return None
    try:
        read = reaches_audited_framework(files, cwd, modules=RESUMABLE, distributions=_RESUMABLE_DISTRIBUTIONS)
    except _Inconclusive:
        return None
    return read is None


def reaches_audited_framework(
    files: list[Path],
    cwd: Path,
    *,
    modules: frozenset[str] = AUDITABLE,
    distributions: frozenset[str] = _AUDITABLE_DISTRIBUTIONS,
) -> Optional[int]:
    """``None`` when the project starting at ``files`` imports torch, Lightning or Keras (``modules``: directly,
    through its own modules, or through an installed package requiring one of ``distributions``), else the number of
    project files read.

    Raises:
        _Inconclusive: The source does not tell (see docs/design/audit.md).
    """
    library = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "purelib", "platlib")}
    queue = [path.resolve() for path in files]
    if any(_in_library(path, library) for path in queue):
        raise _Inconclusive  # `python -m some_installed_tool`: not the project's source
    seen: set[Path] = set()
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        if len(seen) >= MAX_FILES:
            raise _Inconclusive
        seen.add(path)
        tree = _parse(path)
        for name, local, optional in _imports(tree, path):
            top = name.split(".")[0]
            if top in modules or name in ("deviate_cb.lightning", "deviate_cb.keras"):
                return None
            if top == "deviate_cb" or top in sys.stdlib_module_names or top == "__future__":
                continue
            if local:  # a relative import
                queue.extend(file for found in local for file in _with_packages(found))
                continue
            found = _module_file(name, [path.parent, cwd])
            if found is None and optional:
                continue  # `from pkg import name`: a name, not a module
            if found is None:
                raise _Inconclusive  # found nowhere from here: the replica's path may differ
            if not _in_library(found, library):
                queue.extend(_with_packages(found))
                continue
            if top not in _PLAIN and _requires_audited(top, distributions):
                return None
    return len(seen)


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        raise _Inconclusive from None


def _imports(tree: ast.Module, path: Path) -> Iterator[tuple[str, list[Path], bool]]:
    """Every import of the file, anywhere in it: ``name``, for a relative import the project files it names, and
    whether the name may be no module (``from pkg import name``: ``pkg.name``).

    Raises:
        _Inconclusive: The file imports or runs code named at run time.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], False
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, [], False
            for alias in node.names:  # `from pkg import sub`: sub may be a module
                if alias.name != "*":
                    yield f"{node.module}.{alias.name}", [], True
        elif isinstance(node, ast.ImportFrom):
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            parts = node.module.split(".") if node.module else []
            package = base.joinpath(*parts)
            files = [package / "__init__.py", package.with_suffix(".py") if parts else None]
            files += [package / f"{alias.name}.py" for alias in node.names if alias.name != "*"]
            files += [package / alias.name / "__init__.py" for alias in node.names if alias.name != "*"]
            existing = [f.resolve() for f in files if f is not None and f.is_file()]
            if not existing:
                raise _Inconclusive
            yield f"{'.' * node.level}{node.module or ''}", existing, False
        elif isinstance(node, ast.Call) and _called_by_name(node.func):
            raise _Inconclusive


def _called_by_name(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in _BY_NAME
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        if owner == "os" and func.attr.startswith(("exec", "spawn", "system", "popen")):
            return True
        return func.attr in _BY_NAME or owner == "subprocess"
    return False


def _module_file(name: str, folders: list[Path]) -> Optional[Path]:
    """The file of module ``name`` found from ``folders`` (then ``sys.path``); ``None``: none (a namespace
    package has none either)."""
    for folder in folders:
        found = find_module_file(name, folder, package_main=False)
        if found is not None and found.is_file():
            return found.resolve()
    return None


def _with_packages(path: Path) -> list[Path]:
    """``path`` and the ``__init__.py`` of the packages holding it, which importing it runs."""
    found = [path]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        found.append(folder / "__init__.py")
        folder = folder.parent
    return found


def _in_library(path: Path, library: set[Path]) -> bool:
    resolved = path.resolve()
    return any(root == resolved or root in resolved.parents for root in library)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requires_audited(top: str, wanted: frozenset[str] = _AUDITABLE_DISTRIBUTIONS) -> bool:
    """Whether the installed package ``top`` requires torch, Lightning or Keras: directly, with any of its extras
    that is installed, or through what it requires unconditionally.

    Raises:
        _Inconclusive: ``top`` belongs to no installed distribution that its metadata names.
    """
    distributions = importlib.metadata.packages_distributions().get(top)
    if not distributions:
        raise _Inconclusive
    seen: set[str] = set()
    queue = [(_normal(d), True) for d in distributions]
    while queue:
        name, with_extras = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed: nothing of it runs
        if name in wanted:
            return True
        for requirement in requires:
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match is None:
                continue
            if "extra" in requirement.partition(";")[2] and not with_extras:
                continue
            queue.append((_normal(match.group(1)), False))
    return False
