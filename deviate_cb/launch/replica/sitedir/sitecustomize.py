"""Run the environment's own sitecustomize; then bootstrap a replica's Python process before its program runs.

Example:
    >>> import os
    >>> "DEVIATE_RUN_DIR" in os.environ or _bootstrap() is None  # outside a replica: nothing happens
    True
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

__all__: list[str] = []


def _bootstrap() -> None:
    if not os.environ.get("DEVIATE_RUN_DIR"):
        return
    try:
        from deviate_cb.launch.replica.bootstrap import bootstrap_from_environment
    except Exception as exc:  # another interpreter, or a broken install: never stop the project
        sys.stderr.write(
            f"deviate-replicate: warning: {sys.executable} cannot import deviate_cb ({type(exc).__name__}: {exc}); "
            "this process runs without seeding, determinism or DeviateCallback.\n"
        )
        return
    bootstrap_from_environment()


def _run_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this one hides (Debian's, a conda environment's), as Python would have."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # what site.py does with a failing sitecustomize: report and go on
        sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}\n")


if __name__ == "sitecustomize":
    _run_next_sitecustomize()  # first, as in a warm-start template, which runs it before importing the frameworks
    _bootstrap()
