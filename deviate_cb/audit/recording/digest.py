"""Exact digests of arrays for the audit: equal digests iff equal bits, up to a stated collision bound.

Example:
    >>> a = np.arange(6, dtype=np.float32)
    >>> numpy_digest(a) == numpy_digest(a.copy()), numpy_digest(a) == numpy_digest(a + 1e-7)
    (True, False)
    >>> numpy_digest(np.array([0.0])) == numpy_digest(np.array([-0.0]))
    False
    >>> len(hex_digest(numpy_digest(a)))
    32
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "COLLISION_BOUND",
    "SALTS",
    "hex_digest",
    "index_weights",
    "numpy_digest",
    "numpy_pack",
    "numpy_words",
    "to_signed",
]

SALTS = (0x243F6A8885A308D3, 0x13198A2E03707344)  # digits of pi: two independent weight streams
COLLISION_BOUND = 2.0**-66  # per pair of different arrays of the same dtype and shape (see docs/design/audit.md)
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def to_signed(value: int) -> int:
    """An unsigned 64-bit constant as the signed int64 with the same bits (what torch's int64 arithmetic needs).

    Example:
        >>> to_signed(2**64 - 1), to_signed(5)
        (-1, 5)
    """
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def index_weights(n: int, salt: int) -> np.ndarray:
    """The first ``n`` outputs of SplitMix64 seeded with ``salt``, as uint64 (arithmetic wraps modulo ``2**64``).

    Example:
        >>> int(index_weights(1, 0)[0]) == 0xE220A8397B1DCDAF  # SplitMix64's first output from state 0
        True
    """
    with np.errstate(over="ignore"):
        z = (np.arange(n, dtype=np.uint64) + np.uint64(1)) * np.uint64(_GOLDEN) + np.uint64(salt)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
        return z ^ (z >> np.uint64(31))


def numpy_words(array: np.ndarray) -> np.ndarray:
    """The array's bytes as unsigned 32-bit words (one per element of at most 4 bytes), as uint64.

    Example:
        >>> numpy_words(np.array([1.0], dtype=np.float64)).tolist()  # two words, low half first
        [0, 1072693248]
    """
    flat = np.ascontiguousarray(array).reshape(-1)
    size = flat.dtype.itemsize
    raw = flat.view(np.uint8)
    if size == 1:
        return raw.astype(np.uint64)
    if size == 2:
        return raw.view(np.uint16).astype(np.uint64)
    if size % 4:
        raise ValueError(f"cannot digest elements of {size} bytes ({flat.dtype})")
    return raw.view(np.uint32).astype(np.uint64)


def numpy_digest(array: np.ndarray) -> tuple[int, int]:
    """The digest ``(h_0, h_1)`` of ``array`` (unsigned 64-bit integers), computed on the host with NumPy."""
    words = numpy_words(np.asarray(array))
    with np.errstate(over="ignore"):
        return tuple(  # type: ignore[return-value]
            int(np.sum(words * index_weights(words.size, salt), dtype=np.uint64)) for salt in SALTS
        )


def hex_digest(digest: tuple[int, int]) -> str:
    """The digest as 32 hexadecimal characters (``h_0`` then ``h_1``, each 16), as ``audit.parquet`` stores it."""
    return "".join(f"{value & 0xFFFFFFFFFFFFFFFF:016x}" for value in digest)


def numpy_pack(array: np.ndarray, values_max: int) -> np.ndarray:
    """The packed int64 row of :func:`deviate_cb.audit.recording.torch_digest.pack`, computed on the host.

    Example:
        >>> row = numpy_pack(np.array([1.5, -2.0]), values_max=8)
        >>> row[2:].view(np.float64).tolist()  # sum, largest absolute value, then the values
        [-0.5, 2.0, 1.5, -2.0]
    """
    array = np.asarray(array)
    digest = np.array(numpy_digest(array), dtype=np.uint64).view(np.int64)
    values = np.ascontiguousarray(array).reshape(-1)
    if np.iscomplexobj(values):
        values = values.view(values.real.dtype)
    values = values.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        summary = np.array([values.sum(), np.abs(values).max()] if values.size else [0.0, 0.0], dtype=np.float64)
    parts = [digest, summary.view(np.int64)]
    if array.size <= values_max:
        parts.append(values.view(np.int64))
    return np.concatenate(parts)
