"""A ``--trainer`` whose result depends on its argument (a learning rate) and its seed, as a sweep point would."""

import sys


def main(seed: int) -> dict[str, float]:
    """Return ``acc`` from the learning rate given after ``--`` and the seed, and the learning rate itself."""
    lr = float(sys.argv[1])
    return {"acc": 0.5 + lr + (seed % 7) / 1000, "lr": lr}
