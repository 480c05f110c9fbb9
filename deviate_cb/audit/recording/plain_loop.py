"""The audit of a plain PyTorch training loop (no Lightning ``Trainer.fit``, no Keras ``Model.fit``), through
torch's global hooks.

Example:
    >>> import torch
    >>> from deviate_cb.audit.recording.log import AuditLog
    >>> written: list[AuditLog] = []
    >>> audit = PlainLoopAudit(2, written.append)
    >>> audit.install(torch)
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> for _ in range(3):
    ...     with torch.no_grad():
    ...         _ = model(torch.ones(2, 3))  # evaluation: not a training step
    ...     optimizer.zero_grad()
    ...     model(torch.ones(2, 3)).pow(2).mean().backward()
    ...     optimizer.step()
    >>> log = written[0]
    >>> log.recorded_steps, audit.installed, sorted({row["step"] for row in log.rows})
    (2, False, [0, 1])
    >>> [(r["kind"], r["name"]) for r in log.rows if r["kind"] in ("input", "loss", "parameter")][:4]
    [('input', 'batch[0]'), ('loss', 'loss'), ('parameter', '0.weight'), ('parameter', '0.bias')]
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, Optional

from deviate_cb.audit.recording.stopping import stops_after_audit

if TYPE_CHECKING:
    from deviate_cb.audit.recording.hooks import TorchAudit
    from deviate_cb.audit.recording.log import AuditLog
    from deviate_cb.store.run_directory import RunDirectory

__all__ = ["FRAMEWORK", "PlainLoopAudit", "install_plain_audit"]

FRAMEWORK = "torch"  # the manifest's `audit.framework` of a plain loop's record
# Modules whose frames on the stack mean a fit is running: its callback audits (Lightning, Keras on torch).
_FITTING = ("lightning.pytorch", "pytorch_lightning", "keras", "tf_keras")
_STACK_DEPTH = 400  # frames looked at, at most, when a step opens
_VALUES_MAX = 4096  # deviate_cb.audit.recording.log.DEFAULT_VALUES_MAX, without importing NumPy before torch
_MODULE_FILE = os.path.join("torch", "nn", "modules", "module.py")  # where Module._call_impl calls the hooks
_AUDIT_ENV = "DEVIATE_AUDIT"  # deviate_cb.audit.recording.settings.AUDIT_ENV (importing it imports NumPy)
_state: dict[str, Any] = {"audit": None}


class PlainLoopAudit:
    """Digests of the first ``steps`` optimizer steps of whatever trains in this process (see docs/design/audit.md).

    Args:
        steps: Optimizer steps to record.
        on_done: Called once with the :class:`~deviate_cb.audit.recording.log.AuditLog` when the steps are recorded,
            or by :meth:`finish` (at exit) when fewer ran; never when the audit stepped aside for a fit.
        values_max: Tensors of at most this many elements keep their values.
        first_step: The number of the first step recorded (a run resumed at step K: K).
    """

    def __init__(
        self,
        steps: int,
        on_done: Callable[[AuditLog], None],
        *,
        values_max: int = _VALUES_MAX,
        on_failed: Optional[Callable[[str], None]] = None,
        on_stop: Optional[Callable[[int], None]] = None,
        first_step: int = 0,
    ) -> None:
        self.steps = steps
        self.on_done = on_done
        self.on_stop = on_stop  # deviate audit without --finish: called, then the training stops (AuditStepsDone)
        self.on_failed = on_failed  # told why, when the audit stops on an error of its own
        self.values_max = values_max
        self.stepped_aside = False
        self.failed = ""  # why the audit stopped on an error of its own (then nothing is handed over)
        self._torch: Optional[ModuleType] = None
        self._audit: Optional[TorchAudit] = None
        self._handles: list[tuple[str, Any]] = []  # (which hook, its handle)
        self._busy: Optional[str] = None  # the optimizer hook ("pre", "post") of ours torch is calling now
        self._left: list[Any] = []  # handles torch was iterating over when the audit ended: removed later
        self._backward: Optional[Callable[..., Any]] = None  # Tensor.backward before it was wrapped
        self._wrapper: Optional[Callable[..., Any]] = None
        self._pid = os.getpid()
        self._depth = 0  # module forwards running (0: the next call is made from no module's forward)
        self._first = first_step
        self._step = first_step  # a run resumed from step K (deviate audit --resume-at) numbers its steps from K
        self._open = False
        self._ended = False  # on_done was called, or the audit stepped aside
        self._names: dict[int, str] = {}  # id(module) -> its name
        self._kept: list[Any] = []  # the modules and parameters named: alive while their ids are keys
        self._classes: dict[str, int] = {}  # class name -> models of that class named after it
        self._step_classes: dict[str, int] = {}  # the same for modules without parameters, in the open step
        self._primary = False  # a model has taken the plain qualified names
        self._parameters: dict[int, tuple[str, Optional[str], Any]] = {}  # id -> (name, owner, parameter)
        self._hooked: set[int] = set()  # parameters the TorchAudit hooks (attached between steps)

    @property
    def installed(self) -> bool:
        """Whether the global hooks are in place."""
        return bool(self._handles or self._left)

    @property
    def log(self) -> Optional[AuditLog]:
        """What was recorded so far (``None`` before ``import torch``)."""
        return self._audit.log if self._audit is not None else None

    def install(self, torch_module: ModuleType) -> None:
        """Install the global hooks and wrap ``Tensor.backward`` (``torch_module`` is ``torch``)."""
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_module

        from deviate_cb.audit.recording.hooks import TorchAudit

        if self._handles or self._ended:
            return
        self._torch = torch_module
        self._audit = TorchAudit(self.steps, values_max=self.values_max)
        self._handles = [
            ("forward_pre", nn_module.register_module_forward_pre_hook(self._on_forward_pre)),
            ("forward", nn_module.register_module_forward_hook(self._on_forward, always_call=True)),
            ("pre", optim_module.register_optimizer_step_pre_hook(self._on_step_pre)),
            ("post", optim_module.register_optimizer_step_post_hook(self._on_step_post)),
        ]
        original = torch_module.Tensor.backward

        @functools.wraps(original)
        def backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if self._handles:
                self._guarded(self._on_backward, tensor)
            return original(tensor, *args, **kwargs)

        self._backward, self._wrapper = original, backward
        torch_module.Tensor.backward = backward

    def remove(self) -> None:
        """Remove every global hook, restore ``Tensor.backward`` and the audit's own hooks; the log stays.

        torch iterates over the live dict of optimizer hooks while it calls them, so the one being called now is
        removed by the next module call instead (a global forward pre-hook that removes it and itself).
        """
        for kind, handle in self._handles:
            if kind == self._busy:
                self._left.append(handle)
            else:
                handle.remove()
        self._handles = []
        if self._left:
            from torch.nn.modules import module as nn_module

            self._left.append(nn_module.register_module_forward_pre_hook(self._remove_left))
        torch_module = self._torch
        if torch_module is not None and self._wrapper is not None:
            if torch_module.Tensor.backward is self._wrapper:
                torch_module.Tensor.backward = self._backward
            self._wrapper = None  # wrapped again by someone else since: it stays, as a pass-through
        if self._audit is not None:
            self._audit.detach()
        self._names, self._kept, self._parameters, self._hooked = {}, [], {}, set()
        self._open = False

    def finish(self) -> None:
        """At the process's exit: hand over what was recorded when fewer steps ran (a step left open is dropped),
        provided the audit recorded or opened a step and did not step aside."""
        if self._ended or os.getpid() != self._pid:
            return
        engaged = self._step > self._first or self._open
        self.remove()
        self._ended = True
        if engaged and self._audit is not None:
            self.on_done(self._audit.log)

    def _remove_left(self, module: Any, args: Any) -> None:
        left, self._left = self._left, []
        for handle in left:
            handle.remove()

    # -- the hooks ---------------------------------------------------------------------------------------------
    def _guarded(self, hook: Callable[..., None], *args: Any) -> None:
        """Run a hook; an error in it stops the audit rather than the training, and no record is handed over: an
        audit cut short by its own failure must not pass for a training that was shorter."""
        try:
            hook(*args)
        except Exception as exc:
            self.failed = f"the audit stopped at training step {self._step} on an error in its hooks: {exc!r}"
            sys.stderr.write(f"deviate audit: error: {self.failed}; no audit record is written\n")
            self.remove()
            self._ended = True
            if self.on_failed is not None:
                try:
                    self.on_failed(self.failed)
                except Exception as error:  # the reason stays in stderr.log; the training goes on
                    sys.stderr.write(f"deviate audit: warning: could not record why the audit stopped: {error!r}\n")

    def _on_forward_pre(self, module: Any, args: Any) -> None:
        if not self._handles:
            return
        outermost = self._depth == 0
        self._depth += 1
        kwargs = None
        if outermost and not self._open:
            kwargs = _call_kwargs(sys._getframe(1))
            self._guarded(self._maybe_open, module, args, kwargs)
        if self._open and self._audit is not None:
            kwargs = _call_kwargs(sys._getframe(1)) if kwargs is None else kwargs
            self._guarded(self._forward_pre, module, args, kwargs)

    def _on_forward(self, module: Any, args: Any, output: Any) -> None:
        if not self._handles:
            return
        self._depth = max(0, self._depth - 1)
        if self._open and self._audit is not None:
            self._guarded(self._audit._on_forward, self._name_of(module), module, args, output)

    def _forward_pre(self, module: Any, args: Any, kwargs: Optional[dict[str, Any]]) -> None:
        assert self._audit is not None
        pre = getattr(self._audit, "_on_forward_pre", None)  # the inputs as the call starts, where TorchAudit has it
        if pre is not None:
            pre(self._name_of(module), module, args, kwargs)

    def _maybe_open(self, module: Any, args: Any, kwargs: Optional[dict[str, Any]]) -> None:
        """Open a step at the model's forward with gradients enabled (or step aside inside a fit)."""
        torch_module = self._torch
        if torch_module is None or not torch_module.is_grad_enabled() or os.getpid() != self._pid:
            return
        if not any(p.requires_grad for p in module.parameters()):
            return  # a transform, a loss module: not the model
        if _inside_fit():
            self._step_aside()
            return
        self._name_of(module)
        self._open_step((*args, kwargs) if args and kwargs else kwargs or args)

    def _on_backward(self, tensor: Any) -> None:
        if not self._open and self._parameters and os.getpid() == self._pid:
            self._open_step(None)
        if self._open and self._audit is not None:
            self._audit.record_loss(tensor)

    def _on_step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._handles:
            self._busy = "pre"
            try:
                self._guarded(self._step_pre, optimizer)
            finally:
                self._busy = None

    def _step_pre(self, optimizer: Any) -> None:
        """Name the optimizer's parameters not seen in a model, open the step if none is, read the gradients the
        audit's hooks did not see."""
        assert self._audit is not None
        if os.getpid() != self._pid:
            return
        if not self._open and _inside_fit():
            self._step_aside()
            return
        for group_index, group in enumerate(optimizer.param_groups):
            for index, parameter in enumerate(group["params"]):
                if id(parameter) not in self._parameters:
                    name = f"{type(optimizer).__name__}.param_groups[{group_index}][{index}]"
                    self._parameters[id(parameter)] = (name, None, parameter)
                    self._kept.append(parameter)
        if not self._open:
            self._open_step(None)
        for key, (name, owner, parameter) in self._parameters.items():
            if key not in self._hooked and parameter.grad is not None:
                self._audit.record("gradient", name, owner, parameter.grad)

    def _on_step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._open and self._handles:
            self._busy = "post"
            try:
                self._guarded(self._step_post)
            finally:
                self._busy = None

    def _step_post(self) -> None:
        """Digest the parameters (after the step), close the step; after the last one, remove every hook and hand
        the record over."""
        audit = self._audit
        assert audit is not None
        for key, (name, owner, parameter) in self._parameters.items():
            if key not in self._hooked:  # the hooked ones: end_step digests them
                audit.record("parameter", name, owner, parameter)
        audit.end_step()
        self._open = False
        self._step += 1
        if audit.done:
            self.remove()
            self._ended = True
            self.on_done(audit.log)
            if self.on_stop is not None:
                self._stop()
        elif len(self._hooked) < len(self._parameters):
            self._attach()

    def _stop(self) -> None:
        """Record the stop and end the training: :class:`AuditStepsDone` (``SystemExit(0)``) passes through the
        optimizer step and the project's ``except Exception``; its ``finally`` blocks and ``atexit`` still run."""
        from deviate_cb.audit.recording.stopping import AuditStepsDone, stop_line

        assert self.on_stop is not None
        try:
            self.on_stop(self.steps)
        except Exception as exc:  # unrecorded, the stop would read as a training that ended early: train on
            sys.stderr.write(f"deviate audit: warning: could not record the stop, the training goes on: {exc!r}\n")
            return
        sys.stderr.write(stop_line(self.steps) + "\n")
        sys.stderr.flush()
        raise AuditStepsDone(self.steps)

    # -- steps and names ---------------------------------------------------------------------------------------
    def _open_step(self, batch: Any) -> None:
        assert self._audit is not None
        self._step_classes = {}
        if len(self._hooked) < len(self._parameters) or not self._audit.attached:
            self._attach()
        self._audit.begin_step(self._step, batch)
        self._open = self._audit.log.active

    def _attach(self) -> None:
        """Hook every parameter named so far (between steps only: attaching resets the step in progress)."""
        assert self._audit is not None
        parameters = list(self._parameters.values())
        self._audit.attach([], parameters)
        self._hooked = set(self._parameters)

    def _name_of(self, module: Any) -> str:
        name = self._names.get(id(module))
        return name if name is not None else self._add_model(module)

    def _add_model(self, model: Any) -> str:
        """Name ``model`` and its modules and parameters not named yet (the rule of docs/design/audit.md)."""
        trainable = any(p.requires_grad for p in model.parameters())
        if not self._primary and trainable:
            self._primary, prefix = True, ""
        else:
            # a module without parameters (a loss module made in every forward, as transformers' models do) is
            # counted within its step: its name is the same in every step and in a run resumed mid-way
            counts = self._step_classes if next(iter(model.parameters()), None) is None else self._classes
            cls = type(model).__name__
            count = counts.get(cls, 0) + 1
            counts[cls] = count
            prefix = cls if count == 1 else f"{cls}#{count}"
        for qualified, sub in model.named_modules():
            if id(sub) not in self._names:
                self._names[id(sub)] = _joined(prefix, qualified)
                self._kept.append(sub)
        for qualified, parameter in model.named_parameters():
            if id(parameter) not in self._parameters:
                owner = _joined(prefix, qualified.rpartition(".")[0])
                self._parameters[id(parameter)] = (_joined(prefix, qualified), owner, parameter)
                self._kept.append(parameter)
        return self._names[id(model)]

    def _step_aside(self) -> None:
        """A fit's callback audits: remove everything, record nothing."""
        self.stepped_aside = True
        self.remove()
        self._ended = True


def _joined(prefix: str, qualified: str) -> str:
    """``prefix.qualified``; the model itself (``qualified`` empty) is ``prefix``, or ``(root)`` without one."""
    from deviate_cb.audit.recording.hooks import ROOT_NAME

    if prefix and qualified:
        return f"{prefix}.{qualified}"
    return prefix or qualified or ROOT_NAME


def _call_kwargs(frame: Optional[FrameType]) -> Optional[dict[str, Any]]:
    """The keyword arguments of the module call whose global forward pre-hook runs (torch hands global pre-hooks
    the positional ones only): the ``kwargs`` of ``Module._call_impl``'s frame that calls the hook, when the frame
    is that one (checked: torch/nn/modules/module.py); ``None`` otherwise, or when there are none."""
    if frame is None or not frame.f_code.co_filename.endswith(_MODULE_FILE):
        return None
    kwargs = frame.f_locals.get("kwargs")
    return kwargs if isinstance(kwargs, dict) and kwargs else None


def _inside_fit() -> bool:
    """Whether a Lightning or Keras frame is on the stack (a fit, whose callback audits)."""
    frame: Optional[FrameType] = sys._getframe(1)
    for _ in range(_STACK_DEPTH):
        if frame is None:
            return False
        name = str(frame.f_globals.get("__name__", ""))
        if any(name == top or name.startswith(f"{top}.") for top in _FITTING):
            return True
        frame = frame.f_back
    return False


def install_plain_audit(run: RunDirectory, environ: Optional[dict[str, str]] = None) -> bool:
    """In a replica of ``deviate audit`` (``DEVIATE_AUDIT`` set), audit a plain loop once torch is imported: the
    record goes to ``run``. Returns whether it was set up (once per process)."""
    from deviate_cb.capture.import_hooks import when_imported

    text = (os.environ if environ is None else environ).get(_AUDIT_ENV, "").strip()
    if not text.isdigit() or int(text) < 1 or _state["audit"] is not None:
        return False  # not an audit (a malformed value: the launcher and the callbacks say so)

    written: list[int] = []  # the steps of the record written: a replica whose record is lost is not stopped

    def write(log: AuditLog) -> None:
        from deviate_cb.audit.recording.log import KINDS
        from deviate_cb.audit.recording.settings import write_audit_record

        try:
            write_audit_record(run, log, framework=FRAMEWORK, covered=KINDS)
            written.append(log.recorded_steps)
        except Exception as exc:  # the replica's training goes on; the audit will say its record is missing
            sys.stderr.write(f"deviate audit: warning: could not write the audit record: {exc!r}\n")

    def failed(reason: str) -> None:  # no record, but the reason: `deviate audit` prints it
        from deviate_cb.store.manifest import CaptureRecord

        audit = {"steps": int(text), "recorded_steps": 0, "framework": FRAMEWORK, "error": reason}
        run.record(CaptureRecord(audit=audit))

    def stop(steps: int) -> None:  # deviate audit without --finish: the launcher records the replica `audited`
        from deviate_cb.audit.recording.stopping import record_stop

        if not written:
            raise RuntimeError("its audit record was not written")
        record_stop(run, steps, FRAMEWORK)

    variables = os.environ if environ is None else environ
    alone = variables.get("WORLD_SIZE", "1").strip() in ("", "1")  # a rank that left would hold up the others
    stopping = alone and stops_after_audit(variables)
    from deviate_cb.capture.resume_state import resume_plan

    plan = resume_plan(variables)  # --resume-at: the resumed run's first optimizer step is step K
    first = plan.at if plan is not None and plan.role == "resumed" else 0
    audit = PlainLoopAudit(int(text), write, on_failed=failed, on_stop=stop if stopping else None, first_step=first)
    _state["audit"] = audit
    when_imported("torch", audit.install)
    atexit.register(audit.finish)
    return True
