"""``deviate audit`` stops a replica that trains outside any fit at its first optimizer step, not at its end.

The audit hooks a Lightning ``Trainer.fit`` or a Keras ``Model.fit`` (:mod:`deviate_cb.capture.audit`). A program
whose source imports neither is refused before it starts (:mod:`deviate_cb.launch.audit_scan`); one that imports
Lightning but trains in a loop of its own would otherwise run its whole training for nothing. Inside a replica of
``deviate audit`` (``DEVIATE_AUDIT`` set), a global optimizer-step hook of torch looks, at the first step, whether
a fit has started in the replica (the callback's ``fit`` in ``run.json``); if none has, the replica records why in
``run.json`` (``audit_refused``) and exits with status 3 there, and ``deviate audit`` says so.

Example:
    >>> refused_line(2.04)
    'trained without a Lightning Trainer.fit or Keras Model.fit: stopped at its first optimizer step, after 2 s'
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from types import ModuleType
from typing import Any, Optional

from deviate_cb.capture.import_hooks import when_imported
from deviate_cb.store.run_directory import RunDirectory

__all__ = ["REFUSED_KEY", "install_audit_guard", "refused_line"]

REFUSED_KEY = "audit_refused"
_EXIT_STATUS = 3
_state: dict[str, Any] = {"run": None, "checked": False, "started": 0.0, "handle": None}


def refused_line(seconds: float) -> str:
    """What ``run.json`` records (``audit_refused``) when a replica is stopped, ``seconds`` after it started."""
    return (
        "trained without a Lightning Trainer.fit or Keras Model.fit: stopped at its first optimizer step, "
        f"after {seconds:.0f} s"
    )


def install_audit_guard(run: RunDirectory, environ: Optional[dict[str, str]] = None) -> bool:
    """Watch the first optimizer step of this process when it is a replica of ``deviate audit``.

    Returns whether the guard was installed (``DEVIATE_AUDIT`` set, torch's optimizer hooks available).
    """
    from deviate_cb.capture.audit.settings import AUDIT_ENV

    if not (os.environ if environ is None else environ).get(AUDIT_ENV, "").strip() or _state["run"] is not None:
        return False
    _state.update(run=run, started=time.monotonic())
    when_imported("torch.optim.optimizer", _register)
    return True


def _register(module: ModuleType) -> None:
    register = getattr(module, "register_optimizer_step_pre_hook", None)
    if register is not None and _state["handle"] is None:
        _state["handle"] = register(_first_step)


def _first_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    if _state["checked"]:
        return None
    _state["checked"] = True
    handle = _state["handle"]
    if handle is not None:
        handle.remove()  # one look: a hook per step would cost every step of the fit
    run: Optional[RunDirectory] = _state["run"]
    if run is None:
        return None
    try:
        manifest = run.read_manifest()
    except Exception:  # a check that cannot run must not stop a training that may be auditable
        return None
    if "fit" in manifest:
        return None
    line = refused_line(time.monotonic() - _state["started"])
    with contextlib.suppress(Exception):  # the line on stderr still says it
        run.update_manifest(**{REFUSED_KEY: line})
    sys.stderr.write(f"deviate audit: {line}\n")
    sys.stderr.flush()
    raise SystemExit(_EXIT_STATUS)
