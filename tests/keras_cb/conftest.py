"""Keras picks its backend once per process, at import: these in-process tests use torch (installed with the
Lightning extra). The TensorFlow and JAX backends run end to end in integrations/keras."""

from __future__ import annotations

import os
import sys

import pytest

if "keras" not in sys.modules:
    os.environ["KERAS_BACKEND"] = "torch"
keras = pytest.importorskip("keras")
if keras.backend.backend() != "torch":
    pytest.skip(f"Keras was imported with backend {keras.backend.backend()!r} first", allow_module_level=True)
