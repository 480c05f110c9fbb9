"""The Morin & Willetts (2020) replicate results the project ships in tests/data/morin2020 (see its README).

One loader for every suite: 50 runs per setting, columns test loss and test accuracy, no header.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "morin2020"
FILES = {"impl": "resnet_same_seed.csv", "algo+impl": "resnet_different_seeds.csv"}


def morin(setting: str) -> np.ndarray:
    """The 50 x 2 array (test loss, test accuracy) of ``impl`` (one seed) or ``algo+impl`` (50 seeds)."""
    return np.loadtxt(DATA / FILES[setting], delimiter=",")
