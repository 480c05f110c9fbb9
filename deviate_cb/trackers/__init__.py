"""Runs you already have, and runs you share: the bridges between the run store and experiment trackers.

Example:
    >>> import deviate_cb.trackers
    >>> deviate_cb.trackers.__all__
    []
"""

__all__: list[str] = []
