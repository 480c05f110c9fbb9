"""Per-sample predictions and final weights of a run: the files behind the stability measures (issue 5).

One import for the stability files of a run directory, re-exported from the modules that own them:

- ``predictions.parquet`` (:mod:`deviate_cb.stability_predictions`): one row per sample per snapshot
  (``"final"`` or ``"epoch=<k>"``), written by :func:`write_predictions`, read by :func:`read_predictions`;
  how model outputs are read into it is in :mod:`deviate_cb.stability_validation`.
- ``weights_sketch.npz`` and, optionally, ``weights.npz`` (:mod:`deviate_cb.stability_weights`): a
  Johnson-Lindenstrauss sketch of the final weights and the full arrays, written by :func:`write_weights`, read
  by :func:`read_weight_sketch`, :func:`read_weight_sketches`, :func:`read_full_weights` and
  :func:`iter_full_weights`.

Framework-free (NumPy and pyarrow only); nothing is pickled.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> run = Path(tempfile.mkdtemp())
    >>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    >>> block = write_predictions(run, outputs=probs, labels=[0, 1, 1], groups={"sex": ["f", "m", "f"]})
    >>> block["task"], block["score"], block["num_classes"], block["snapshots"]
    ('classification', 'probability', 2, ['final'])
    >>> read_predictions(run).column("predicted").to_pylist()
    [0, 1, 0]
    >>> w = write_weights(run, [("layer.weight", np.ones((3, 2))), ("layer.bias", np.zeros(3))], sketch_dim=16)
    >>> w["num_params"], read_weight_sketch(run).sketch.shape
    (9, (16,))
"""

from __future__ import annotations

from deviate_cb.stability_predictions import (
    PREDICTIONS_FILE,
    predictions_metadata,
    predictions_schema,
    read_predictions,
    write_predictions,
)
from deviate_cb.stability_validation import TASKS
from deviate_cb.stability_weights import (
    WEIGHTS_FULL_FILE,
    WEIGHTS_SKETCH_FILE,
    WeightSketch,
    iter_full_weights,
    read_full_weights,
    read_weight_sketch,
    read_weight_sketches,
    write_weights,
)

__all__ = [
    "PREDICTIONS_FILE",
    "TASKS",
    "WEIGHTS_FULL_FILE",
    "WEIGHTS_SKETCH_FILE",
    "WeightSketch",
    "iter_full_weights",
    "predictions_metadata",
    "predictions_schema",
    "read_full_weights",
    "read_predictions",
    "read_weight_sketch",
    "read_weight_sketches",
    "write_predictions",
    "write_weights",
]
