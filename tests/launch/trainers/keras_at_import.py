"""Imports Keras at module level (so a missing backend is a `--trainer` error, exit status 2)."""

from __future__ import annotations

import keras


def main():
    return {"keras_major": int(keras.__version__.split(".")[0])}
