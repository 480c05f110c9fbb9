"""The four noise variants: which seed each replica gets and whether deterministic tooling is on.

See ``docs/architecture.md``, "Noise variants". ``algo+impl`` is what users normally see; ``algo`` isolates seed noise;
``impl`` isolates implementation (kernel, library) noise; ``control`` must produce bit-identical replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["VARIANTS", "Variant", "get_variant"]


@dataclass(frozen=True)
class Variant:
    """One row of the variant table.

    Attributes:
        name: The variant's name as used on the command line and in run directories.
        seed_per_replica: ``True`` if replica ``k`` gets ``base_seed + k``; ``False`` if all get ``base_seed``.
        deterministic: Whether deterministic tooling (determinism switches) is turned on.
        measures: What the spread across replicas measures, for help texts and reports.
    """

    name: str
    seed_per_replica: bool
    deterministic: bool
    measures: str

    def seed_for(self, base_seed: int, replica: int) -> int:
        """Return the seed of replica ``replica`` for this variant.

        Example:
            >>> get_variant("algo").seed_for(100, 3), get_variant("control").seed_for(100, 3)
            (103, 100)
        """
        return base_seed + replica if self.seed_per_replica else base_seed


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("algo+impl", seed_per_replica=True, deterministic=False, measures="all training noise"),
        Variant("algo", seed_per_replica=True, deterministic=True, measures="algorithmic (seed) noise only"),
        Variant("impl", seed_per_replica=False, deterministic=False, measures="implementation noise only"),
        Variant("control", seed_per_replica=False, deterministic=True, measures="nothing: replicas must be identical"),
    )
}


def get_variant(name: str) -> Variant:
    """Look up a variant by name, with a clear error for an unknown one.

    Example:
        >>> get_variant("impl").deterministic
        False
    """
    from deviate_cb.errors import UsageError

    try:
        return VARIANTS[name]
    except KeyError:
        raise UsageError(f"`variant` must be one of {', '.join(VARIANTS)}. Received: variant={name!r}.") from None
