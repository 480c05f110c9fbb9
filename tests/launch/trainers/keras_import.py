"""Trainers for the Keras launcher tests: ``plain`` never imports Keras, ``at_call`` imports it when called."""

from __future__ import annotations

import os
import sys


def plain(ctx):
    """Report what the bootstrap loaded and the replica's KERAS_BACKEND (written to keras_backend.txt)."""
    (ctx.run_dir / "keras_backend.txt").write_text(os.environ.get("KERAS_BACKEND", "<unset>"))
    return {name: float(name in sys.modules) for name in ("keras", "tensorflow", "jax", "torch")}


def at_call():
    import keras

    return {"keras_major": int(keras.__version__.split(".")[0])}
