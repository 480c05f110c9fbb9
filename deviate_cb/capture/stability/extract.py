"""Values taken out of what the frameworks hand the callbacks: a batch's labels, sample ids and groups,
framework arrays as NumPy, and named weights as float64 arrays.

Example:
    >>> batch = {"x": [[0.0], [1.0]], "target": [1, 0], "sex": ["F", "M"]}
    >>> batch_field(batch, None, "labels", default=True), batch_field((batch["x"], [3, 4]), 1, "labels")
    ([1, 0], [3, 4])
    >>> batch_groups(batch, "sex"), as_numpy(batch["target"]).tolist()
    ({'sex': ['F', 'M']}, [1, 0])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

import numpy as np

from deviate_cb.capture.stability.settings import Extractor
from deviate_cb.errors import UsageError

__all__ = ["LABEL_KEYS", "as_numpy", "batch_field", "batch_groups", "weight_arrays"]

LABEL_KEYS = ("label", "labels", "y", "target", "targets")
"""Keys tried, in order, for the true label of a dict batch when ``labels`` is not set."""


def as_numpy(value: Any) -> np.ndarray:
    """A framework array (torch, TensorFlow, JAX, Keras) or sequence as a NumPy array, without importing any.

    torch half-precision values become float32 (NumPy has no bfloat16).

    Example:
        >>> as_numpy([1, 2]).tolist()
        [1, 2]
    """
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor
        tensor = value.detach()
        if str(tensor.dtype) in ("torch.bfloat16", "torch.float16"):
            tensor = tensor.float()
        return tensor.cpu().numpy()
    if hasattr(value, "numpy") and callable(value.numpy):  # TensorFlow eager tensors, Keras variables
        return np.asarray(value.numpy())
    return np.asarray(value)


def batch_field(batch: Any, spec: Optional[Extractor], name: str, *, default: bool = False) -> Any:
    """The value ``spec`` points at in ``batch``: an index, a key, or a function of the batch.

    Args:
        batch: One batch, as the data loader or dataset yields it.
        spec: Where the value is (``Predictions(labels=...)`` or ``Predictions(sample_ids=...)``).
        name: The ``Predictions`` argument ``spec`` came from, for the message.
        default: With ``spec=None``, look for the true label (``batch[1]`` of a tuple/list batch, else the
            first of :data:`LABEL_KEYS` in a dict batch); without it, ``spec=None`` gives ``None``.

    Raises:
        UsageError: ``spec`` names an index or key the batch does not have.
    """
    if spec is None:
        if not default:
            return None
        if isinstance(batch, (tuple, list)):
            return batch[1] if len(batch) >= 2 else None
        if isinstance(batch, Mapping):
            return next((batch[k] for k in LABEL_KEYS if k in batch), None)
        return None
    if callable(spec):
        return spec(batch)
    try:
        return batch[spec]
    except (KeyError, IndexError, TypeError) as exc:
        kind = f"keys {sorted(map(str, batch))}" if isinstance(batch, Mapping) else type(batch).__name__
        raise UsageError(f"Predictions({name}={spec!r}): not found in the batch ({kind}).") from exc


def batch_groups(batch: Any, spec: Any) -> dict[str, Any]:
    """The group labels of one batch: ``Predictions(groups=...)`` as a field name, names or a function.

    Raises:
        UsageError: Field names are given but the batch is not a dict, or lacks one of them.
    """
    if callable(spec):
        found = spec(batch)
        return dict(found) if isinstance(found, Mapping) else {"group": found}
    names = [spec] if isinstance(spec, str) else list(spec)
    if not isinstance(batch, Mapping):
        raise UsageError(
            f"Predictions(groups={spec!r}) names batch fields, but the batches are {type(batch).__name__}, "
            "not dicts: pass a function of the batch or arrays aligned with the sample order."
        )
    missing = [n for n in names if n not in batch]
    if missing:
        raise UsageError(f"Predictions(groups={spec!r}): {missing} not in the batch (keys {sorted(map(str, batch))}).")
    return {n: batch[n] for n in names}


def weight_arrays(
    named: Iterable[tuple[str, Any]], to_numpy: Callable[[Any], np.ndarray] = as_numpy
) -> dict[str, np.ndarray]:
    """Named weights as float64 arrays, in the given order; repeated names get ``#1``, ``#2`` suffixes.

    Example:
        >>> arrays = weight_arrays([("dense/kernel", [[1, 2]]), ("dense/kernel", [3])])
        >>> {k: v.dtype.name for k, v in arrays.items()}
        {'dense/kernel': 'float64', 'dense/kernel#1': 'float64'}
    """
    arrays: dict[str, np.ndarray] = {}
    for name, value in named:
        key, k = name, 0
        while key in arrays:
            k += 1
            key = f"{name}#{k}"
        arrays[key] = np.asarray(to_numpy(value), dtype=np.float64)
    return arrays
