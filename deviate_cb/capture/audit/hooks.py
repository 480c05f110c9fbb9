"""The audit of a torch model: hooks that digest a training step's tensors on the device, for K steps.

:class:`TorchAudit` holds an :class:`~deviate_cb.capture.audit.log.AuditLog` and the hooks that feed it:

- a forward hook on every module given (:meth:`TorchAudit.attach`): each tensor its forward returns, when it
  returns, so inner modules come before the modules that call them;
- a post-accumulate-grad hook on every parameter that requires a gradient: its gradient, in the order backward
  produces them (the last layers first);
- the adapter calls :meth:`~TorchAudit.begin_step` with the batch (``input``), :meth:`~TorchAudit.record_loss`
  before backward, and :meth:`~TorchAudit.end_step` after the optimizer step, which digests every parameter
  (``parameter``) and moves the step's digests to the host in one transfer per device.

Digests are computed on the tensor's device under ``torch.no_grad()`` (:func:`~.torch_digest.pack`); nothing is
synchronised per tensor. After ``steps`` steps (or :meth:`~TorchAudit.detach`) every hook is removed, so the rest
of training runs as if the audit had never been there. The adapters (Lightning, Keras on torch) decide the names:
qualified module and parameter names for Lightning, Keras paths for Keras.

Example:
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    >>> audit = TorchAudit(steps=1)
    >>> audit.attach(named_modules(model), named_parameters(model))
    >>> audit.begin_step(0, torch.ones(4, 3))
    >>> loss = model(torch.ones(4, 3)).sum()
    >>> audit.record_loss(loss); loss.backward(); rows = audit.end_step()
    >>> [(r["kind"], r["name"]) for r in rows][:5]
    [('input', 'batch'), ('forward', '0'), ('forward', '1'), ('forward', '(root)'), ('loss', 'loss')]
    >>> audit.done, audit.attached
    (True, False)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Optional

import numpy as np
import torch

from deviate_cb.capture.audit.log import DEFAULT_VALUES_MAX, AuditLog
from deviate_cb.capture.audit.torch_digest import clear_weights, pack

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
    """Digests of the first ``steps`` training steps of a torch model (see the module docstring).

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
        """Hook ``modules`` (forward outputs) and ``parameters`` (gradients; values after each step)."""
        self.detach()
        for name, module in modules:
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
        self._handles, self._parameters, self._rows = [], [], []
        clear_weights()

    def begin_step(self, step: int, batch: Any = None) -> None:
        """Start recording ``step`` (nothing once :attr:`done`); digest the tensors of ``batch`` (``input``)."""
        if self.done or not self.attached:
            return
        self.log.begin_step(step)
        self._rows = []
        for name, tensor in named_tensors(batch, "batch"):
            self.record("input", name, None, tensor)

    def record(self, kind: str, name: str, module: Optional[str], tensor: torch.Tensor) -> None:
        """Digest ``tensor`` now, on its device, as the next entry of the step."""
        if not self.log.active:
            return
        with torch.no_grad():
            row = pack(tensor, self.values_max)
        self._rows.append(row)
        self.log.add(kind, name, module, str(tensor.dtype).replace("torch.", ""), tensor.shape, tensor.numel(),
                     row.numel())  # fmt: skip

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
        self._rows = []
        if self.done:
            self.detach()
        return rows

    def _on_forward(self, name: str, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self.log.active:
            for suffix, tensor in named_tensors(output, ""):
                self.record("forward", f"{name}{suffix}", name, tensor)

    def _on_gradient(self, name: str, owner: Optional[str], parameter: torch.Tensor) -> None:
        if self.log.active and parameter.grad is not None:
            self.record("gradient", name, owner, parameter.grad)


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
