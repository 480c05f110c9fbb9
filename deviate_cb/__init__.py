"""deviate-cb: measure and control the variance of deep-learning training.

Importing this package loads no deep-learning framework, SciPy, matplotlib, Ray or submitit: each is
imported where it is used. The framework adapters are :mod:`deviate_cb.lightning` and :mod:`deviate_cb.keras`
(``DeviateCallback``); the replicator is the ``deviate-replicate`` command; the report is ``deviate report``;
the statistics are :mod:`deviate_cb.stats`. The subpackages, one per concern, and the one way their imports run
are described in ``docs/architecture.md``.

Example:
    >>> import deviate_cb
    >>> deviate_cb.get_variant("algo").deterministic
    True
"""

from deviate_cb.context import RunContext
from deviate_cb.errors import DeviateError, MissingDependencyError, SchemaVersionError, UsageError
from deviate_cb.variants import VARIANTS, Variant, get_variant

__all__ = [
    "VARIANTS",
    "DeviateError",
    "MissingDependencyError",
    "RunContext",
    "SchemaVersionError",
    "UsageError",
    "Variant",
    "__version__",
    "get_variant",
]

__version__ = "0.1.0"
