"""A ``--trainer`` that returns final metrics computed from its seed, so a test can check every value it left."""


def value_of(seed: int) -> float:
    """The ``acc`` a replica with ``seed`` returns.

    Example:
        >>> value_of(1234)
        0.234
    """
    return (seed % 1000) / 1000


def main(seed: int) -> dict[str, float]:
    """Return ``acc`` (from the seed) and ``seed`` itself, recorded as final metrics by the launcher."""
    return {"acc": value_of(seed), "seed": float(seed)}
