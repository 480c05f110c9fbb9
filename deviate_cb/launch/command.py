"""Command mode: ``deviate-replicate [options] -- COMMAND [ARGS...]`` runs a command as each replica.

The command is the one a user types to train: ``python train.py --lr 0.1``, ``python -m pkg.train``, a console
script of a Python program (a LightningCLI entry point), or any other program. Placeholders in any word are
filled per replica: ``{seed}``, ``{replica}``, ``{run_dir}``, ``{variant}`` and ``{experiment}`` (other braces,
such as Hydra's ``${...}`` interpolations, are left alone). A bare ``python``/``python3`` is the interpreter
that runs ``deviate-replicate``, so a command behaves the same whether or not a virtual environment is active.

The launcher checks a command without running it (:meth:`Command.precheck`): the program exists, a script
exists and compiles, a ``-m`` module can be found (without importing its packages). Python programs are
bootstrapped in the replica by :mod:`deviate_cb.launch.sitedir` (seeds, determinism, callback injection);
anything else still runs, and its exit status and logs are recorded.

Example:
    >>> cmd = Command.parse(["python", "train.py", "--seed", "{seed}", "--out", "{run_dir}/ckpt"])
    >>> cmd.fill(seed=3, replica=1, run_dir="/runs/r1", variant="algo", experiment="train")[2:]
    ['--seed', '3', '--out', '/runs/r1/ckpt']
    >>> cmd.python.script, cmd.default_experiment()
    ('train.py', 'train')
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from deviate_cb.errors import UsageError
from deviate_cb.launch.source_checks import check_python_source, find_module_file

__all__ = ["PLACEHOLDERS", "Command", "PythonInvocation"]

PLACEHOLDERS = ("seed", "replica", "run_dir", "variant", "experiment")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")
# Interpreter options that take a value as the next word (python --help).
_OPTIONS_WITH_VALUE = {"-W", "-X", "--check-hash-based-pycs"}


@dataclass(frozen=True)
class PythonInvocation:
    """What a Python command line runs: a script, a module (``-m``) or code (``-c``), and the interpreter options.

    Example:
        >>> PythonInvocation.parse(["-u", "-m", "pkg.train", "fit"])
        PythonInvocation(script=None, module='pkg.train', code=False, isolated=False)
    """

    script: Optional[str] = None
    module: Optional[str] = None
    code: bool = False
    isolated: bool = False  # -I, -E or -S: PYTHONPATH or site is ignored, so the replica cannot be bootstrapped

    @classmethod
    def parse(cls, args: Sequence[str]) -> PythonInvocation:
        """Read the words after the interpreter up to the script, ``-m MODULE`` or ``-c CODE``."""
        isolated = False
        words = list(args)
        i = 0
        while i < len(words):
            word = words[i]
            if word in _OPTIONS_WITH_VALUE:
                i += 2
                continue
            if word == "-m" or word == "-c":
                target = words[i + 1] if i + 1 < len(words) else ""
                return cls(module=target if word == "-m" else None, code=word == "-c", isolated=isolated)
            if word.startswith("-m") and len(word) > 2:
                return cls(module=word[2:], isolated=isolated)
            if word.startswith("-c") and len(word) > 2:
                return cls(code=True, isolated=isolated)
            if word == "-" or not word.startswith("-"):
                return cls(script=None if word == "-" else word, isolated=isolated)
            if not word.startswith("--"):
                flags = word[1:]
                isolated = isolated or any(flag in flags for flag in "IES")
                if flags[-1:] in ("W", "X"):
                    i += 1  # -uW ignore: the value follows
            i += 1
        return cls(isolated=isolated)


@dataclass(frozen=True)
class Command:
    """A parsed command line.

    Attributes:
        given: The words as given on the command line (placeholders unfilled).
        program: The first word as it will run: a bare ``python``/``python3`` becomes ``sys.executable``.
        python: What the Python interpreter runs, when the program is a Python interpreter or a console script of
            one; ``None`` for other programs.
        kind: ``"python"`` (an interpreter), ``"python script"`` (a console script or executable Python file) or
            ``"program"`` (anything else: it still runs, but no callback can be injected).
    """

    given: tuple[str, ...]
    program: str
    python: Optional[PythonInvocation]
    kind: str

    @classmethod
    def parse(cls, words: Sequence[str]) -> Command:
        """Parse the words after ``--``; raise :class:`~deviate_cb.errors.UsageError` for an empty command."""
        given = tuple(str(w) for w in words)
        if not given or not given[0].strip():
            raise UsageError(
                "`COMMAND` after `--` must name a program to run, e.g. `-- python train.py --seed {seed}`. "
                f"Received: -- {shlex.join(given)}."
            )
        first = given[0]
        if _PYTHON_NAME.match(first):  # bare `python`, `python3`, `python3.11`: the launcher's interpreter
            return cls(given, sys.executable, PythonInvocation.parse(given[1:]), "python")
        found = _which(first)
        if found is not None and _PYTHON_NAME.match(Path(found).name):
            return cls(given, first, PythonInvocation.parse(given[1:]), "python")
        if found is not None and _python_shebang(found):
            return cls(given, first, PythonInvocation(script=found), "python script")
        return cls(given, first, None, "program")

    def fill(self, **values: object) -> list[str]:
        """The command as run for one replica: placeholders filled, the program resolved.

        Raises:
            KeyError: A placeholder this command uses has no value in ``values``.
        """

        def word(text: str) -> str:
            return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)

        return [self.program, *(word(w) for w in self.given[1:])]

    def uses(self, placeholder: str) -> bool:
        """Whether any word holds ``{placeholder}``."""
        return any(f"{{{placeholder}}}" in word for word in self.given)

    def default_experiment(self) -> str:
        """The experiment name when ``--experiment`` is not given: the script's stem, the module, or the program."""
        if self.python is not None and self.kind == "python":
            if self.python.module:
                return self.python.module
            if self.python.script and not _PLACEHOLDER.search(self.python.script):
                return Path(self.python.script).stem
        stem = Path(self.given[0]).stem
        if self.kind == "program" and len(self.given) > 1 and Path(self.given[1]).suffix in (".sh", ".py", ".bash"):
            return Path(self.given[1]).stem
        return stem

    def precheck(self, cwd: Optional[Path] = None) -> None:
        """Check, without running it, that the command can start; raise a one-line :class:`UsageError` if not."""
        cwd = Path.cwd() if cwd is None else cwd
        if self.kind == "program" and _which(self.given[0]) is None:
            where = "is not an executable file" if os.sep in self.given[0] else "is not on PATH"
            raise self._error(f"names the program {self.given[0]!r}, which {where}")
        invocation = self.python
        if invocation is None or self.kind != "python":
            return
        if invocation.script is not None and not _PLACEHOLDER.search(invocation.script):
            script = cwd / invocation.script
            if not script.is_file():
                what = "is a directory" if script.is_dir() else "does not exist"
                raise self._error(f"runs the script {invocation.script!r}, which {what} (in {cwd})")
            problem = check_python_source(script)
            if problem:
                raise self._error(f"runs the script {invocation.script!r}, which {problem}")
        elif invocation.module is not None:
            if not invocation.module or not all(p.isidentifier() for p in invocation.module.split(".")):
                raise self._error(f"runs `-m {invocation.module}`, which is not a module name")
            origin = find_module_file(invocation.module, cwd)
            if origin is None:
                raise self._error(
                    f"runs `-m {invocation.module}`, but no module {invocation.module!r} can be found from {cwd} or "
                    "sys.path (is the package installed, or the command run from the right directory?)"
                )
            if origin.suffix == ".py":
                problem = check_python_source(origin)
                if problem:
                    raise self._error(f"runs `-m {invocation.module}`, whose file {origin} {problem}")

    def _error(self, problem: str) -> UsageError:
        return UsageError(f"`COMMAND` {problem}. Received: -- {shlex.join(self.given)}.")


def _which(program: str) -> Optional[str]:
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program)
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(program)


def _python_shebang(path: str) -> bool:
    """Whether an executable file is a Python program: its ``#!`` line runs a Python interpreter."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(512)
    except OSError:
        return False
    if not first.startswith(b"#!"):
        return False
    words = first[2:].decode("utf-8", errors="replace").split()
    names = [Path(w).name for w in words[:2]]  # `#!/path/python3` or `#!/usr/bin/env python3`
    return any(_PYTHON_NAME.match(name) for name in names)
