"""Arrow columns from Python lists and NumPy arrays, and NumPy views of Arrow columns, without importing pandas.

Example:
    >>> import pyarrow as pa
    >>> column = string_array(["train", "val", "train"])
    >>> column.type, column.to_pylist() == pa.array(["train", "val", "train"]).to_pylist()
    (DataType(string), True)
    >>> int64_array([3, 1, 2]).equals(pa.array([3, 1, 2], type=pa.int64()))
    True
    >>> numpy_view(int64_array([3, 1, 2])).tolist()
    [3, 1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["bool_array", "float64_array", "int64_array", "numpy_view", "repeated_string", "string_array"]

_EXACT_FLOAT_INT = 2**53  # integers up to this size convert to float64 exactly; pa.array checks larger ones
_SEPARATOR = "\x1f"  # ASCII unit separator, between the values string_array joins


def int64_array(values: Any) -> pa.Array:
    """An int64 column of ``values`` (integers as a list or a NumPy array; others through ``pa.array``)."""
    import numpy as np
    import pyarrow as pa

    array = _numbers(values)
    if array is None or array.dtype.kind not in "iu" or (array.dtype.kind == "u" and array.size and array.max() >> 63):
        return pa.array(values, type=pa.int64())
    return _primitive(pa.int64(), np.ascontiguousarray(array, dtype=np.int64))


def float64_array(values: Any) -> pa.Array:
    """A float64 column of ``values`` (floats or integers as a list or a NumPy array; others through ``pa.array``)."""
    import numpy as np
    import pyarrow as pa

    array = _numbers(values)
    if array is None or array.dtype.kind not in "fiu":
        return pa.array(values, type=pa.float64())
    if array.dtype.kind in "iu" and array.size and int(np.abs(array).max()) > _EXACT_FLOAT_INT:
        return pa.array(values, type=pa.float64())
    return _primitive(pa.float64(), np.ascontiguousarray(array, dtype=np.float64))


def bool_array(values: Any) -> pa.Array:
    """A boolean column of ``values`` (booleans as a list or a NumPy array; others through ``pa.array``)."""
    import numpy as np
    import pyarrow as pa

    array = _numbers(values)
    if array is None or array.dtype.kind != "b":
        return pa.array(values, type=pa.bool_())
    bits = np.packbits(array, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), array.size, [None, pa.py_buffer(bits)], null_count=0)


def string_array(values: Sequence[Any]) -> pa.Array:
    """A string column of ``values`` (a list of ``str``; others, ``None`` included, through ``pa.array``).

    A column of one value repeated (a stage, a kind) is that value's bytes repeated (:func:`repeated_string`). Else
    the strings are joined in one C call; when they are ASCII (a value's length in bytes is its length in
    characters) the offsets are the running sum of their lengths; otherwise they are joined by a separator and split
    again by Arrow (``split_pattern``), which is used only when the separator occurs exactly between the values,
    never within one.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(values, (list, tuple)) or not values:
        return pa.array(values, type=pa.string())
    first = values[0]
    if type(first) is str and values.count(first) == len(values):
        return repeated_string(first, len(values))
    try:
        joined = "".join(values)
        data = joined.encode()
    except (TypeError, UnicodeEncodeError):  # not all str (None, bytes, a number), or not encodable: as pa.array says
        return pa.array(values, type=pa.string())
    if len(data) >= 2**31:  # past what 32-bit offsets address
        return pa.array(values, type=pa.string())
    if len(data) == len(joined):  # ASCII
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum(np.fromiter(map(len, values), dtype=np.int32, count=len(values)), out=offsets[1:])
        return _strings(data, offsets)
    joined = _SEPARATOR.join(values)
    if joined.count(_SEPARATOR) != len(values) - 1:  # a value holds the separator
        return pa.array(values, type=pa.string())
    data = joined.encode()
    whole = _strings(data, [0, len(data)])
    return pc.split_pattern(whole, pattern=_SEPARATOR).flatten()


def repeated_string(value: str, n: int) -> pa.Array:
    """A string column of ``n`` times ``value``.

    Example:
        >>> repeated_string("step", 2).to_pylist()
        ['step', 'step']
    """
    import numpy as np

    data = value.encode()
    return _strings(data * n, np.arange(n + 1, dtype=np.int32) * len(data))


def numpy_view(column: Any) -> np.ndarray:
    """The values of an integer or float column (``Array`` or ``ChunkedArray``) as a read-only NumPy array, without
    a copy where it has one chunk; a column with nulls, or of another type, through ``to_numpy``."""
    import numpy as np
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    dtype = _NUMPY_TYPES.get(str(column.type))
    if dtype is None or column.null_count:
        return column.to_numpy(zero_copy_only=False)
    data = column.buffers()[1]
    if data is None:  # an empty column
        return np.empty(0, dtype=dtype)
    item = np.dtype(dtype).itemsize
    return np.frombuffer(data, dtype=dtype, count=len(column), offset=column.offset * item)


_NUMPY_TYPES = {
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "double": "float64",
    "float": "float32",
}


def _numbers(values: Any) -> Any:
    """``values`` as a one-dimensional NumPy array of numbers or booleans, or ``None`` (objects: a ``None``, a
    string, an integer too large for NumPy, ...)."""
    import numpy as np

    try:
        array = values if isinstance(values, np.ndarray) else np.array(values)
    except (ValueError, TypeError, OverflowError):
        return None
    return array if array.ndim == 1 and array.dtype.kind in "biuf" else None


def _primitive(arrow_type: pa.DataType, array: np.ndarray) -> pa.Array:
    import pyarrow as pa

    return pa.Array.from_buffers(arrow_type, array.size, [None, pa.py_buffer(array)], null_count=0)


def _strings(data: bytes, offsets: Any) -> pa.Array:
    """The string column whose value ``i`` is ``data[offsets[i]:offsets[i + 1]]`` (UTF-8)."""
    import numpy as np
    import pyarrow as pa

    offsets = np.asarray(offsets, dtype=np.int32)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.string(), offsets.size - 1, buffers, null_count=0)
