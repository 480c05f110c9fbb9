"""The ``--trainer`` spec: parse it, check it cheaply, resolve it to a function, and call that function."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from deviate_cb.context import RunContext
from deviate_cb.errors import UsageError
from deviate_cb.launch.replica.bootstrap import SignalExit, terminating_signal
from deviate_cb.launch.target.source_checks import (
    check_python_source,
    defined_functions,
    defines_name,
    find_module_file,
)

__all__ = ["CONTEXT_PARAMETERS", "TrainerSpec", "TrainerSpecError", "bind_trainer", "call_trainer"]

CONTEXT_PARAMETERS = ("ctx", "context", "run_context")


class TrainerSpecError(UsageError):
    """The ``--trainer`` spec cannot be used: malformed, not found, raising at import, or an unusable signature."""


@dataclass(frozen=True)
class TrainerSpec:
    """A parsed ``--trainer`` spec.

    Attributes:
        text: The spec as given.
        target: A dotted module name, or a path to a ``.py`` file.
        function: The (possibly dotted) attribute naming the function inside the module.
        is_path: ``True`` for the ``path/to/file.py:fn`` form.

    Example:
        >>> spec = TrainerSpec.parse("examples/train.py:main")
        >>> spec.is_path, spec.function, spec.default_experiment()
        (True, 'main', 'train')
        >>> TrainerSpec.parse("mypkg.train:main").default_experiment()
        'mypkg.train'
    """

    text: str
    target: str
    function: str
    is_path: bool

    @classmethod
    def parse(cls, text: str) -> TrainerSpec:
        """Parse ``module:fn`` or ``path/to/file.py:fn``; raise :class:`TrainerSpecError` when malformed."""
        if isinstance(text, str) and ":" not in text and text.strip():
            raise _without_function(text.strip())
        if not isinstance(text, str) or text.count(":") != 1:
            raise _error("must look like `module:function` or `path/to/file.py:function`", text)
        target, function = (part.strip() for part in text.split(":"))
        if not target or not function:
            raise _error("must look like `module:function` or `path/to/file.py:function`", text)
        if not all(part.isidentifier() for part in function.split(".")):
            raise _error(f"must end in a Python function name after ':', not {function!r}", text)
        is_path = target.endswith(".py") or "/" in target or os.sep in target
        if not is_path and not all(part.isidentifier() for part in target.split(".")):
            raise _error(f"must name an importable module before ':', not {target!r}", text)
        return cls(text=text, target=target, function=function, is_path=is_path)

    def default_experiment(self) -> str:
        """The experiment name used when ``--experiment`` is not given: the file stem or the module name."""
        return Path(self.target).stem if self.is_path else self.target

    def precheck(self) -> None:
        """Check what can be checked without running user code (the launcher calls this before any replica).

        The file (path form) or the module's file (module form, found without importing its packages) exists,
        compiles, and binds the function's name at top level (unless its source makes any name possible: a
        star import, a module ``__getattr__``).
        """
        if self.is_path:
            path = Path(self.target)
            if not self.target.endswith(".py"):
                raise _error(f"must name a Python file ending in .py, not {self.target!r}", self.text)
            if not path.is_file():
                what = "is a directory" if path.is_dir() else "does not exist"
                raise _error(f"names the file {self.target!r}, which {what}", self.text)
            where = f"the file {self.target!r}"
        else:
            top = self.target.split(".")[0]
            with _cwd_on_path():
                try:
                    found = importlib.util.find_spec(top)
                except (ImportError, ValueError) as exc:
                    raise _error(f"names module {self.target!r}, which cannot be found ({exc})", self.text) from None
            if found is None:
                raise _error(
                    f"names module {self.target!r}, but no module {top!r} is importable from the current directory "
                    "or sys.path (is the package installed, or the command run from the right directory?)",
                    self.text,
                )
            located = find_module_file(self.target, Path.cwd(), package_main=False)
            if located is None:
                raise _error(f"names module {self.target!r}, which cannot be found", self.text)
            if located.suffix != ".py":  # compiled or built-in: nothing to read
                return
            path, where = located, f"module {self.target!r} ({located})"
        problem = check_python_source(path)
        if problem:
            raise _error(f"names {where}, which {problem}", self.text)
        name = self.function.split(".")[0]
        if defines_name(path, name) is False:
            defined = sorted(n for n in defined_functions(path) if not n.startswith("_"))
            hint = f"; functions defined there: {', '.join(defined[:8])}" if defined else ""
            raise _error(f"names {self.function!r}, which {where} does not define{hint}", self.text)

    def load_module(self) -> ModuleType:
        """Import the module (or execute the file) that holds the function. Runs user code.

        Whatever the module raises becomes a :class:`TrainerSpecError`, except Ctrl-C (``KeyboardInterrupt``) and
        the replica being stopped (a ``--timeout`` or an interrupted launcher: the ``SystemExit(143)`` of
        :class:`~deviate_cb.launch.replica.bootstrap.SignalExit`, or anything raised once SIGTERM came), which propagate
        as they are: a replica stopped while its module imports is not a bad ``--trainer``.
        """
        if not self.is_path:
            cwd = os.getcwd()
            if cwd not in sys.path and "" not in sys.path:
                sys.path.insert(0, cwd)  # what `python -m` does
            try:
                return importlib.import_module(self.target)
            except BaseException as exc:
                if _stopping(exc):
                    raise
                if isinstance(exc, ModuleNotFoundError) and exc.name and _is_prefix(exc.name, self.target):
                    raise _error(f"names module {self.target!r}, which cannot be imported: {exc}", self.text) from None
                raise _error(
                    f"names module {self.target!r}, which raised at import: {_describe(exc)}", self.text
                ) from None
        path = Path(self.target).resolve()
        if not path.is_file():
            raise _error(f"names the file {self.target!r}, which does not exist", self.text)
        sys.path.insert(0, str(path.parent))  # what `python path/to/file.py` does
        name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules else "__deviate_trainer__"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise _error(f"names the file {self.target!r}, which cannot be loaded as a Python module", self.text)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # so pickle and multiprocessing find what it defines
        try:
            module_spec.loader.exec_module(module)
        except BaseException as exc:
            sys.modules.pop(name, None)
            if _stopping(exc):
                raise
            raise _error(
                f"names the file {self.target!r}, which raised at import: {_describe(exc)}", self.text
            ) from None
        return module

    def resolve(self) -> Callable[..., Any]:
        """Import the module and return the function. Runs user code; call it in the replica only."""
        module = self.load_module()
        obj: Any = module
        for part in self.function.split("."):
            if not hasattr(obj, part):
                available = sorted(
                    n
                    for n, v in vars(module).items()
                    if callable(v) and not n.startswith("_") and _defined_in(v, module)
                )
                hint = f"; functions defined there: {', '.join(available[:8])}" if available else ""
                raise _error(f"names {self.function!r}, which {self.target!r} does not define{hint}", self.text)
            obj = getattr(obj, part)
        if not callable(obj):
            raise _error(f"names {self.function!r}, which is a {type(obj).__name__}, not a function", self.text)
        return obj


def call_trainer(fn: Callable[..., Any], ctx: RunContext, spec: str = "") -> Any:
    """Call ``fn`` with what its signature asks for (:func:`bind_trainer`, then the call).

    Example:
        >>> ctx = RunContext(Path("runs/r"), "e", "algo", 1, 8, True)
        >>> call_trainer(lambda seed, ctx=None: (seed, ctx.replica), ctx)
        (8, 1)
    """
    return bind_trainer(fn, ctx, spec)()


def bind_trainer(fn: Callable[..., Any], ctx: RunContext, spec: str = "") -> Callable[[], Any]:
    """``fn`` with the arguments its signature asks for, ready to call; nothing of ``fn`` runs yet.

    No parameters: ``fn()``. A parameter named ``seed``: the replica's seed. A parameter named ``ctx``,
    ``context`` or ``run_context``, or annotated ``RunContext``: the run context. Parameters with defaults
    and ``*args``/``**kwargs`` are left alone; any other required parameter is a :class:`TrainerSpecError`.
    A decorated function is read through ``__wrapped__`` (to find ``seed`` and ``ctx``), but when the wrapped
    signature asks for more than can be filled and the decorator's own wrapper can be called without arguments
    (``@hydra.main``, which reads its config from the command line; a ``click`` command), it is called so.
    Coroutine functions are run with :func:`asyncio.run` when the result is called. A signature that cannot be
    filled raises :class:`TrainerSpecError` here, before any of the function runs, so a ``TrainerSpecError``
    the function itself raises is never taken for a bad ``--trainer``.

    Example:
        >>> ctx = RunContext(Path("runs/r"), "e", "algo", 1, 8, True)
        >>> call = bind_trainer(lambda seed, ctx=None: (seed, ctx.replica), ctx)
        >>> call()
        (8, 1)
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: call without arguments
        signature = inspect.Signature()
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.name == "seed":
            value: Any = ctx.seed
        elif param.name in CONTEXT_PARAMETERS or _is_context_annotation(param.annotation):
            value = ctx
        elif param.default is not param.empty:
            if param.kind is param.POSITIONAL_ONLY:
                args.append(param.default)
            continue
        elif _callable_without_arguments(fn):  # @hydra.main, click: the wrapper reads the command line itself
            args, kwargs = [], {}
            break
        else:
            name = getattr(fn, "__qualname__", repr(fn))
            raise _error(
                f"names {name}{signature}, whose required parameter {param.name!r} deviate-replicate cannot fill "
                f"(it passes only `seed` (int) and `ctx`/`context`/`run_context` (RunContext))",
                spec or ctx.trainer or name,
            )
        if param.kind is param.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[param.name] = value
    if inspect.iscoroutinefunction(fn):

        def run_coroutine() -> Any:
            import asyncio

            return asyncio.run(fn(*args, **kwargs))

        return run_coroutine
    return functools.partial(fn, *args, **kwargs)


def _callable_without_arguments(fn: Callable[..., Any]) -> bool:
    """Whether the outermost signature (not following ``__wrapped__``) needs no argument."""
    try:
        outer = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):
        return False
    return all(
        p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty for p in outer.parameters.values()
    )


def _is_context_annotation(annotation: Any) -> bool:
    if annotation is RunContext:
        return True
    if isinstance(annotation, str):  # postponed annotations: compare names, not objects
        names = set(re.findall(r"[A-Za-z_][\w.]*", annotation)) - {"Optional", "typing.Optional", "Union", "None"}
        return len(names) == 1 and names.pop().rsplit(".", 1)[-1] == "RunContext"
    return False


def _stopping(exc: BaseException) -> bool:
    """Whether an exception raised at import is the replica being stopped (Ctrl-C, SIGTERM), not its code."""
    return isinstance(exc, (KeyboardInterrupt, SignalExit)) or terminating_signal() is not None


def _is_prefix(name: str, module: str) -> bool:
    return module == name or module.startswith(name + ".")


def _defined_in(value: Any, module: ModuleType) -> bool:
    return getattr(value, "__module__", None) == module.__name__


def _describe(exc: BaseException) -> str:
    """``ValueError: boom (train.py, line 3)``: the exception and the innermost frame, on one line."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_import_machinery(f.filename)]
    if frames:
        frame = frames[-1]
        text += f" ({frame.filename}, line {frame.lineno})"
    return text


# The package's own import hooks, relative to deviate_cb/: an error raised through them is the user's.
_IMPORT_MACHINERY = {("capture", "import_hooks.py"), ("launch", "replica", "keras_backend.py")}


def _is_import_machinery(filename: str) -> bool:
    """Frames of Python's import system and of the replica's import hooks: never where the user's error is."""
    if filename.startswith("<frozen "):
        return True
    path = Path(filename)
    package = Path(__file__).resolve().parents[2]  # deviate_cb/
    try:
        relative = path.resolve().relative_to(package)
    except (ValueError, OSError):
        return False
    return relative.parts in _IMPORT_MACHINERY


def _without_function(target: str) -> TrainerSpecError:
    """``--trainer FILE.py`` or ``--trainer module`` without ``:function``: the error names the function to add,
    read from the file without running it (the one its ``if __name__ == "__main__":`` block calls, else ``main``,
    else the first), or says to replicate a script without functions as a command.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "train.py"
        >>> _ = path.write_text("def fit():\\n    pass\\ndef cli():\\n    fit()\\n"
        ...                     "if __name__ == '__main__':\\n    cli()\\n")
        >>> print(str(_without_function(str(path))).partition("Expected: ")[2].replace(str(path), "train.py"))
        --trainer train.py:cli (functions defined there: fit, cli).
    """
    problem = "must look like `module:function` or `path/to/file.py:function`, the function to call after ':'"
    is_path = target.endswith(".py") or "/" in target or os.sep in target
    path: Any = Path(target) if is_path else None
    if not is_path and all(part.isidentifier() for part in target.split(".")):
        path = find_module_file(target, Path.cwd(), package_main=False)
    if path is None or not path.is_file() or path.suffix != ".py":
        return _error(problem, target)
    defined = [name for name in defined_functions(path) if not name.startswith("_")]
    if not defined:
        command = f"python {target}" if is_path else f"python -m {target}"
        return _error(
            f"{problem}; {target} defines no function at top level, so replicate it as a command: "
            f"deviate-replicate -n N -- {command}",
            target,
        )
    ranked = [*_called_when_main(path, defined), *(["main"] if "main" in defined else []), *defined]
    listed = f" (functions defined there: {', '.join(defined[:8])})" if len(defined) > 1 else ""
    return TrainerSpecError(
        f"`--trainer` {problem}. Received: --trainer={target}. Expected: --trainer {target}:{ranked[0]}{listed}."
    )


def _called_when_main(path: Path, defined: list[str]) -> list[str]:
    """The functions of ``defined`` that the file's ``if __name__ == "__main__":`` block calls, in order."""
    import ast

    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    called = []
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if not (isinstance(test, ast.Compare) and "__main__" in ast.unparse(test) and "__name__" in ast.unparse(test)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in defined:
                called.append(inner.func.id)
    return called


def _error(problem: str, received: str) -> TrainerSpecError:
    return TrainerSpecError(f"`--trainer` {problem}. Received: --trainer={received}.")


class _cwd_on_path:
    """Put the current directory first on ``sys.path`` while checking, as ``python -m`` does for the replica."""

    def __enter__(self) -> None:
        self._added = os.getcwd()
        sys.path.insert(0, self._added)

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ValueError):
            sys.path.remove(self._added)
