"""The audit digest of :mod:`deviate_cb.audit.recording.digest`, computed by torch on the tensor's own device.

Example:
    >>> t = torch.arange(6, dtype=torch.float32)
    >>> row = pack(t, values_max=4)  # 6 elements > 4: no values
    >>> row.shape, row.dtype
    (torch.Size([4]), torch.int64)
    >>> from deviate_cb.audit.recording.digest import numpy_digest
    >>> tuple(int(v) & (2**64 - 1) for v in row[:2]) == numpy_digest(t.numpy())
    True
"""

from __future__ import annotations

from typing import Any

import torch

from deviate_cb.audit.recording.digest import _GOLDEN, _MIX1, _MIX2, SALTS, to_signed

__all__ = ["HEADER_WORDS", "clear_weights", "pack", "torch_words"]

HEADER_WORDS = 4  # h_0, h_1, bits of the sum, bits of the largest absolute value
_weights: dict[Any, torch.Tensor] = {}


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's ``>>`` on int64 is arithmetic)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def _splitmix(z: torch.Tensor) -> torch.Tensor:
    """SplitMix64's output mix of the states ``z`` (int64 bits; products wrap modulo ``2**64``)."""
    z = (z ^ _shift_right(z, 30)) * to_signed(_MIX1)
    z = (z ^ _shift_right(z, 27)) * to_signed(_MIX2)
    return z ^ _shift_right(z, 31)


def _weights_for(n: int, device: torch.device) -> torch.Tensor:
    cached = _weights.get(device)
    if cached is None or cached.shape[1] < n:
        size = max(n, 1024, 0 if cached is None else 2 * cached.shape[1])
        index = torch.arange(size, dtype=torch.int64, device=device)
        states = (index + 1) * to_signed(_GOLDEN)
        cached = _weights[device] = torch.stack([_splitmix(states + to_signed(salt)) for salt in SALTS])
    return cached[:, :n]


def clear_weights() -> None:
    """Drop the cached weights (the audit is over)."""
    _weights.clear()


def torch_words(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as unsigned 32-bit words in int64, on its device (see the digest's definition)."""
    flat = tensor.detach().reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    size = flat.element_size()
    if size == 1:
        return flat.view(torch.uint8).to(torch.int64)
    if size == 2:
        return flat.view(torch.int16).to(torch.int64) & 0xFFFF
    if size % 4:
        raise ValueError(f"cannot digest elements of {size} bytes ({tensor.dtype})")
    return flat.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _real(tensor: torch.Tensor) -> torch.Tensor:
    """The elements as one flat real tensor (a complex number is two; bools become 0/1), in their own dtype."""
    flat = tensor.detach().reshape(-1)
    if flat.is_complex():
        return torch.view_as_real(flat).reshape(-1)
    return flat.to(torch.uint8) if flat.dtype == torch.bool else flat


def pack(tensor: torch.Tensor, values_max: int) -> torch.Tensor:
    """One int64 row: digest, bits of the sum and of the abs-max, and the values' bits when ``numel <= values_max``."""
    words = torch_words(tensor)
    digest = (words.unsqueeze(0) * _weights_for(words.numel(), words.device)).sum(dim=1)
    real = _real(tensor)
    if real.numel():
        low, high = torch.aminmax(real)  # in the tensor's own dtype: no float64 copy of a large tensor
        largest = torch.maximum(low.abs(), high.abs()).to(torch.float64)
        summary = torch.stack([real.sum(dtype=torch.float64), largest])
    else:
        summary = torch.zeros(2, dtype=torch.float64, device=real.device)
    parts = [digest, summary.view(torch.int64)]
    if tensor.numel() <= values_max:
        parts.append(real.to(torch.float64).view(torch.int64))
    return torch.cat(parts)
