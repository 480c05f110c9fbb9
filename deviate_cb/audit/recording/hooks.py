"""The audit of a torch model: hooks that digest a training step's tensors on the device, for K steps.

Example:
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    >>> audit = TorchAudit(steps=1)
    >>> audit.attach(named_modules(model), named_parameters(model))
    >>> audit.begin_step(0, torch.ones(4, 3))
    >>> loss = model(torch.ones(4, 3)).sum()
    >>> audit.record_loss(loss); loss.backward(); rows = audit.end_step()
    >>> [(r["kind"], r["name"]) for r in rows][:7]  # doctest: +NORMALIZE_WHITESPACE
    [('input', 'batch'), ('forward_input', '0'), ('forward', '0'), ('forward_input', '1'), ('forward', '1'),
     ('forward_input', '(root)'), ('forward', '(root)')]
    >>> [(r["kind"], r["name"]) for r in rows if r["kind"] in ("loss", "grad_output")]  # `1` returns the root output
    [('loss', 'loss'), ('grad_output', '1'), ('grad_output', '(root)'), ('grad_output', '0')]
    >>> audit.done, audit.attached
    (True, False)
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from deviate_cb.audit.recording.log import DEFAULT_VALUES_MAX, AuditLog
from deviate_cb.audit.recording.torch_digest import clear_weights, pack

__all__ = ["ROOT_NAME", "TorchAudit", "named_modules", "named_parameters", "named_tensors"]

ROOT_NAME = "(root)"  # the name of the model itself, whose qualified name is empty
_MAX_TENSORS = 64  # per structure (a batch, one forward output): more are not digested


def named_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """Every module of ``model`` with its qualified name (the model itself as :data:`ROOT_NAME`)."""
    return [(name or ROOT_NAME, module) for name, module in model.named_modules()]


def named_parameters(model: torch.nn.Module) -> list[tuple[str, Optional[str], torch.Tensor]]:
    """``(qualified name, owning module, parameter)`` for every parameter of ``model``, in registration order."""
    found: list[tuple[str, Optional[str], torch.Tensor]] = []
    for name, parameter in model.named_parameters():
        owner = name.rpartition(".")[0] or ROOT_NAME
        found.append((name, owner, parameter))
    return found


def named_tensors(value: Any, prefix: str, limit: int = _MAX_TENSORS) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors in a batch or an output (nested tuples, lists and dicts), named ``prefix``, ``prefix[0]``, ...

    Example:
        >>> [name for name, _ in named_tensors({"x": torch.ones(1), "y": [torch.ones(1), 3]}, "batch")]
        ["batch['x']", "batch['y'][0]"]
    """
    stack: list[tuple[str, Any]] = [(prefix, value)]
    count = 0
    while stack and count < limit:
        name, item = stack.pop(0)
        if isinstance(item, torch.Tensor):
            if item.layout == torch.strided and not item.is_quantized and item.device.type != "meta":
                count += 1
                yield name, item
        elif isinstance(item, Mapping):
            stack[:0] = [(f"{name}[{key!r}]", sub) for key, sub in item.items()]
        elif isinstance(item, (list, tuple)):
            stack[:0] = [(f"{name}[{k}]", sub) for k, sub in enumerate(item)]


class TorchAudit:
    """Digests of the first ``steps`` training steps of a torch model (see docs/design/audit.md).

    Args:
        steps: Training steps to record.
        values_max: Tensors of at most this many elements keep their values (exact differences).
    """

    def __init__(self, steps: int, *, values_max: int = DEFAULT_VALUES_MAX) -> None:
        self.log = AuditLog(steps)
        self.values_max = values_max
        self._handles: list[Any] = []
        self._parameters: list[tuple[str, Optional[str], torch.Tensor]] = []
        self._rows: list[torch.Tensor] = []
        self._calls: list[tuple[torch.nn.Module, list[_Packed]]] = []  # inputs digested as each call began
        # the step's digests by tensor: a module's input is mostly the output digested just before, unchanged
        self._packed: dict[int, tuple[weakref.ref[torch.Tensor], int, torch.Tensor]] = {}

    @property
    def done(self) -> bool:
        return self.log.done

    @property
    def attached(self) -> bool:
        """Whether hooks are in place."""
        return bool(self._handles) or bool(self._parameters)

    def attach(
        self,
        modules: Iterable[tuple[str, torch.nn.Module]],
        parameters: Iterable[tuple[str, Optional[str], torch.Tensor]],
    ) -> None:
        """Hook ``modules`` (inputs, outputs, their gradients) and ``parameters`` (gradients; values after each
        step)."""
        self.detach()
        for name, module in modules:
            pre = functools.partial(self._on_forward_pre, name)
            self._handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            self._handles.append(module.register_forward_hook(functools.partial(self._on_forward, name)))
        self._parameters = list(parameters)
        for name, owner, parameter in self._parameters:
            if parameter.requires_grad:
                hook = functools.partial(self._on_gradient, name, owner)
                self._handles.append(parameter.register_post_accumulate_grad_hook(hook))

    def detach(self) -> None:
        """Remove every hook and drop the cached weights; what was recorded stays in :attr:`log`."""
        for handle in self._handles:
            handle.remove()
        self._handles, self._parameters, self._rows, self._calls, self._packed = [], [], [], [], {}
        clear_weights()

    def begin_step(self, step: int, batch: Any = None) -> None:
        """Start recording ``step`` (nothing once :attr:`done`); digest the tensors of ``batch`` (``input``)."""
        if self.done or not self.attached:
            return
        self.log.begin_step(step)
        self._rows, self._calls, self._packed = [], [], {}
        for name, tensor in named_tensors(batch, "batch"):
            self.record("input", name, None, tensor)

    def record(self, kind: str, name: str, module: Optional[str], tensor: torch.Tensor) -> None:
        """Digest ``tensor`` now, on its device, as the next entry of the step."""
        if self.log.active:
            self._add(kind, module, self._pack(name, tensor))

    def _pack(self, name: str, tensor: torch.Tensor) -> _Packed:
        """Digest ``tensor``, or reuse its digest when this step already made one of it and it has not changed
        since (the same tensor object, still alive, at the same version counter: in-place ops bump it)."""
        try:
            version: Optional[int] = tensor._version
        except RuntimeError:  # an inference tensor keeps no version counter: digested every time
            version = None
        seen = self._packed.get(id(tensor)) if version is not None else None
        if seen is not None and seen[0]() is tensor and seen[1] == version:
            row = seen[2]
        else:
            with torch.no_grad():
                row = pack(tensor, self.values_max)
            if version is not None:
                with contextlib.suppress(TypeError):  # a tensor type without weak references: not reused
                    self._packed[id(tensor)] = (weakref.ref(tensor), version, row)
        return _Packed(name, row, str(tensor.dtype).replace("torch.", ""), tuple(tensor.shape), tensor.numel())

    def _add(self, kind: str, module: Optional[str], packed: _Packed) -> None:
        self._rows.append(packed.row)
        self.log.add(kind, packed.name, module, packed.dtype, packed.shape, packed.numel, packed.row.numel())

    def record_loss(self, loss: Any) -> None:
        """Digest the loss the step is about to back-propagate."""
        if isinstance(loss, torch.Tensor):
            self.record("loss", "loss", None, loss)

    def end_step(self) -> list[dict[str, Any]]:
        """Digest every parameter (after the optimizer step), move the step's digests to the host, return its rows.

        After the last step the hooks are removed.
        """
        if not self.log.active:
            return []
        for name, owner, parameter in self._parameters:
            self.record("parameter", name, owner, parameter)
        rows = self.log.end_step(_to_host(self._rows))
        self._rows, self._packed = [], {}
        if self.done:
            self.detach()
        return rows

    def _on_forward_pre(self, name: str, module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        """A forward pre-hook (``with_kwargs=True``): digest the tensors ``module`` receives, before it runs."""
        if self.log.active:
            self._calls.append((module, [self._pack(f"{name}{suffix}", t) for suffix, t in _inputs(args, kwargs)]))

    def _on_forward(self, name: str, module: torch.nn.Module, args: Any, output: Any) -> None:
        """A forward hook: record the call's inputs (``forward_input``: those :meth:`_on_forward_pre` digested as
        the call began, else ``args`` as they are now), then its outputs (``forward``), and hook the gradient
        flowing into each output that requires one (``grad_output``)."""
        if not self.log.active:
            return
        inputs = None
        for index in range(len(self._calls) - 1, -1, -1):  # the innermost open call of this module
            if self._calls[index][0] is module:
                inputs = self._calls[index][1]
                del self._calls[index:]  # and calls left open inside it (their forward raised)
                break
        if inputs is None:
            inputs = [self._pack(f"{name}{suffix}", tensor) for suffix, tensor in _inputs(args, None)]
        for packed in inputs:
            self._add("forward_input", name, packed)
        for suffix, tensor in named_tensors(output, ""):
            self.record("forward", f"{name}{suffix}", name, tensor)
            if tensor.requires_grad and torch.is_grad_enabled():
                with contextlib.suppress(RuntimeError):  # a tensor that takes no hook: no grad_output for it
                    tensor.register_hook(functools.partial(self._on_grad_output, f"{name}{suffix}", name))

    def _on_grad_output(self, name: str, module: str, grad: torch.Tensor) -> None:
        if self.log.active and grad is not None:
            self.record("grad_output", name, module, grad)

    def _on_gradient(self, name: str, owner: Optional[str], parameter: torch.Tensor) -> None:
        if self.log.active and parameter.grad is not None:
            self.record("gradient", name, owner, parameter.grad)


@dataclass(frozen=True)
class _Packed:
    """A tensor digested on its device, waiting to be recorded."""

    name: str
    row: torch.Tensor
    dtype: str
    shape: tuple[int, ...]
    numel: int


def _inputs(args: Any, kwargs: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors a module's call receives, named by their place: ``""`` for a lone tensor argument, else
    ``[0]``, ``[1]``... and ``['key']`` for keyword arguments."""
    keyword = list(named_tensors(kwargs, "")) if kwargs else []
    if isinstance(args, tuple) and len(args) == 1 and not keyword:
        args = args[0]
    yield from named_tensors(args, "")
    yield from keyword


def _to_host(rows: list[torch.Tensor]) -> list[np.ndarray]:
    """The rows as NumPy arrays: one concatenation and one transfer per device."""
    by_device: dict[torch.device, list[int]] = {}
    for index, row in enumerate(rows):
        by_device.setdefault(row.device, []).append(index)
    found: list[Optional[np.ndarray]] = [None] * len(rows)
    for indices in by_device.values():
        host = torch.cat([rows[i] for i in indices]).cpu().numpy()
        start = 0
        for i in indices:
            end = start + rows[i].numel()
            found[i] = host[start:end]
            start = end
    return [row for row in found if row is not None]
