"""deviate-cb: measure and control the variance of deep-learning training.

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
