"""The audit digest: torch on the tensor's device gives the NumPy reference's numbers, for every dtype and
layout, and any change of a single bit changes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deviate_cb.audit.recording.digest import COLLISION_BOUND, hex_digest, index_weights, numpy_digest, numpy_pack
from deviate_cb.audit.recording.torch_digest import pack, torch_words


def _torch_digest(tensor: torch.Tensor) -> tuple[int, int]:
    row = pack(tensor, values_max=0)
    return tuple(int(v) & (2**64 - 1) for v in row[:2])  # type: ignore[return-value]


def _bits(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's raw bytes as a NumPy array of the same element size (for dtypes NumPy lacks)."""
    size = tensor.element_size()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    flat = tensor.contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    return flat.view(view).numpy()


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8, torch.uint8,
     torch.bool, torch.complex64],
)  # fmt: skip
def test_torch_matches_the_numpy_reference(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(7, 5, generator=gen) * 100
    tensor = (base > 0) if dtype == torch.bool else base.to(dtype)
    assert _torch_digest(tensor) == numpy_digest(_bits(tensor))


def test_layout_does_not_matter_only_the_elements_in_order() -> None:
    tensor = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    assert _torch_digest(tensor.t()) == _torch_digest(tensor.t().contiguous())  # non-contiguous: copied in order
    assert _torch_digest(tensor.t()) != _torch_digest(tensor)
    assert numpy_digest(np.zeros(0, np.float32)) == (0, 0) == _torch_digest(torch.zeros(0))


def test_every_single_bit_flip_changes_the_digest() -> None:
    array = np.random.default_rng(1).standard_normal(33).astype(np.float32)
    reference = numpy_digest(array)
    words = array.view(np.uint32)
    for index in (0, 16, 32):
        for bit in range(32):
            flipped = words.copy()
            flipped[index] ^= np.uint32(1 << bit)
            assert numpy_digest(flipped.view(np.float32)) != reference, (index, bit)
    assert numpy_digest(np.array([0.0])) != numpy_digest(np.array([-0.0]))
    nan_a = np.array([0x7FC00000], dtype=np.uint32).view(np.float32)
    nan_b = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)
    assert numpy_digest(nan_a) == numpy_digest(nan_a.copy()) != numpy_digest(nan_b)  # bits, not values


def test_weights_are_splitmix64_and_the_bound_is_stated() -> None:
    # SplitMix64's published first outputs from state 0 (Vigna): the weights are that generator
    assert [int(w) for w in index_weights(3, 0)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    assert COLLISION_BOUND == 2.0**-66
    assert len(hex_digest((2**64 - 1, 1))) == 32


def test_torch_and_numpy_packs_agree_with_values_and_summaries() -> None:
    tensor = torch.tensor([[1.5, -2.0], [0.25, 3.0]], dtype=torch.float64)
    assert pack(tensor, values_max=8).tolist() == numpy_pack(tensor.numpy(), values_max=8).tolist()
    row = pack(tensor, values_max=3)  # 4 elements > 3: digest and summaries only
    assert row.numel() == 4 and row[2:].view(torch.float64).tolist() == [2.75, 3.0]


def test_words_of_wide_elements_are_split_in_halves() -> None:
    assert torch_words(torch.tensor([1.0], dtype=torch.float64)).tolist() == [0, 1072693248]
