"""Command mode: ``deviate-replicate [options] -- COMMAND [ARGS...]`` runs a command as each replica.

Example:
    >>> cmd = Command.parse(["python", "train.py", "--seed", "{seed}", "--out", "{run_dir}/ckpt"])
    >>> cmd.fill(seed=3, replica=1, run_dir="/runs/r1", variant="algo", experiment="train")[2:]
    ['--seed', '3', '--out', '/runs/r1/ckpt']
    >>> cmd.python.script, cmd.default_experiment()
    ('train.py', 'train')
    >>> print(Command.parse(["sh", "-c", "echo {run_dir} > '{run_dir}/x'"]).fill(run_dir="/runs/$(id)")[2])
    echo '/runs/$(id)' > '/runs/$(id)/x'
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from deviate_cb.errors import UsageError
from deviate_cb.launch.target.source_checks import check_python_source, find_module_file

__all__ = ["PLACEHOLDERS", "Command", "PythonInvocation", "run_dir_alias", "uses_run_dir_after_equals"]

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

        ``run_dir_alias``, when given, is what ``{run_dir}`` becomes inside a ``key=value`` word (after an ``=``:
        Hydra overrides, ``--out_dir=...`` configurators), whose parsers split on ``=``: a path to the run
        directory without ``=`` in it (:func:`run_dir_alias`).

        Raises:
            KeyError: A placeholder this command uses has no value in ``values``.
        """

        def value(match: re.Match[str], text: str) -> str:
            name = match.group(1)
            if name == "run_dir" and "run_dir_alias" in values and "=" in text[: match.start()]:
                return str(values["run_dir_alias"])  # a key=value word: its parser splits on `=`
            return str(values[name])

        def word(text: str) -> str:
            return _PLACEHOLDER.sub(lambda m: value(m, text), text)

        script = _shell_script_index(self.given)
        return [
            self.program,
            *(_fill_shell_script(w, values) if i == script else word(w) for i, w in enumerate(self.given[1:], start=1)),
        ]

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


# POSIX shells (and their relatives) whose `-c` script is parsed with POSIX quoting.
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "ash", "yash", "posh", "busybox"})
# Options of those shells that take the next word as their value.
_SHELL_OPTIONS_WITH_VALUE = frozenset({"--rcfile", "--init-file"})


def run_dir_alias(run_dir: Path, out_root: Path, cwd: Path) -> Optional[str]:
    """A path to ``run_dir`` without ``=`` in it, for ``{run_dir}`` inside a ``key=value`` word; ``None`` if none.

    The run directory's own path holds ``experiment=``, ``variant=`` and ``replica=``, which a parser that splits a
    ``key=value`` argument on ``=`` (a configurator's ``key, val = arg.split('=')``, Hydra's override grammar)
    cannot take. The alias is a symbolic link ``<out>/.run-dirs/<experiment>/<variant>/<replica>`` to it, in a
    dot-folder that no reader of the store visits; it is created here (replacing an older one), and given as an
    absolute path, or relative to ``cwd`` when only that has no ``=``. ``None`` when neither has no ``=`` (an
    ``--out`` with ``=`` in it, and in the way) or the link cannot be made.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> run = root / "experiment=e" / "variant=algo" / "replica=3"
        >>> alias = run_dir_alias(run, root, root)
        >>> Path(alias).relative_to(root).as_posix(), os.readlink(alias)
        ('.run-dirs/e/algo/3', '../../../experiment=e/variant=algo/replica=3')
    """
    relative = run_dir.relative_to(out_root)
    names = [part.partition("=")[2] for part in relative.parts]
    link = out_root.joinpath(".run-dirs", *names)
    choices = [str(link), os.path.relpath(link, cwd)]
    chosen = next((path for path in choices if "=" not in path), None)
    if chosen is None or "=" in "".join(names):
        return None
    try:
        link.parent.mkdir(parents=True, exist_ok=True)
        target = os.path.relpath(run_dir, link.parent)
        if os.path.islink(link) and os.readlink(link) == target:
            return chosen
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)
    except OSError:
        return None
    return chosen


def uses_run_dir_after_equals(words: Sequence[str]) -> bool:
    """Whether some word holds ``{run_dir}`` after an ``=`` (a ``key=value`` argument).

    Example:
        >>> uses_run_dir_after_equals(["python", "t.py", "hydra.run.dir={run_dir}/out"])
        True
        >>> uses_run_dir_after_equals(["python", "t.py", "--out", "{run_dir}"])
        False
    """
    return any("=" in word.partition("{run_dir}")[0] for word in words if "{run_dir}" in word)


def _shell_script_index(words: Sequence[str]) -> Optional[int]:
    """The index of the script in ``words`` when they run a POSIX shell with ``-c``; ``None`` otherwise.

    The script is the first operand after the options, when one of them (alone or in a group: ``-ec``) is ``c``.

    Example:
        >>> _shell_script_index(["bash", "-e", "-o", "pipefail", "-c", "echo {seed}", "name", "{seed}"])
        5
        >>> _shell_script_index(["/bin/sh", "-ec", "true"]), _shell_script_index(["sh", "script.sh", "-c"])
        (2, None)
    """
    if not words or Path(words[0]).name not in _SHELLS:
        return None
    i = 2 if Path(words[0]).name == "busybox" and words[1:2] in (["sh"], ["ash"]) else 1
    script = False
    while i < len(words):
        word = words[i]
        if word == "--":
            return i + 1 if script and i + 1 < len(words) else None
        if word.startswith("--"):
            i += 2 if word in _SHELL_OPTIONS_WITH_VALUE else 1
            continue
        if len(word) > 1 and word[0] in "-+":
            flags = word[1:]
            script = script or (word[0] == "-" and "c" in flags)
            i += 2 if ("o" in flags or "O" in flags) else 1
            continue
        return i if script else None
    return None


def _fill_shell_script(script: str, values: object) -> str:
    """``script`` with each placeholder's value quoted for the shell where it stands.

    Unquoted, a value becomes one word (:func:`shlex.quote`); inside ``'...'`` its single quotes close and reopen
    the quotes; inside ``"..."``, ``$``, a backquote, ``"`` and ``\\`` are escaped. So the script sees the value
    as it is, never as code, whatever quotes the user wrote around the placeholder.

    Example:
        >>> print(_fill_shell_script("echo {run_dir} '{run_dir}' \\"{run_dir}\\"", {"run_dir": "it's $HOME"}))
        echo 'it'"'"'s $HOME' 'it'\\''s $HOME' "it's \\$HOME"
    """
    assert isinstance(values, Mapping)
    out: list[str] = []
    state = ""  # "" unquoted, "'" in single quotes, '"' in double quotes
    i = 0
    while i < len(script):
        match = _PLACEHOLDER.match(script, i)
        if match is not None:
            value = str(values[match.group(1)])
            if state == "'":
                out.append(value.replace("'", "'\\''"))
            elif state == '"':
                out.append(re.sub(r'([$`"\\])', r"\\\1", value))
            else:
                out.append(shlex.quote(value))
            i = match.end()
            continue
        char = script[i]
        if state != "'" and char == "\\" and i + 1 < len(script):
            out.append(script[i : i + 2])
            i += 2
            continue
        if char == "'" and state != '"':
            state = "" if state == "'" else "'"
        elif char == '"' and state != "'":
            state = "" if state == '"' else '"'
        out.append(char)
        i += 1
    return "".join(out)


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
