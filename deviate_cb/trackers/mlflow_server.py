"""Whether an MLflow tracking server answers, asked in seconds: the one check ``deviate import`` and ``export`` share.

Example:
    >>> check_server("http://127.0.0.1:1", timeout_s=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `--tracking-uri` does not answer (...). Received: --tracking-uri=http://127.0.0.1:1...
"""

from __future__ import annotations

import urllib.error
import urllib.request

from deviate_cb.errors import UsageError

__all__ = ["HEALTH_TIMEOUT_S", "check_server"]

HEALTH_TIMEOUT_S = 10.0


def check_server(uri: str, *, timeout_s: float = HEALTH_TIMEOUT_S) -> None:
    """Return when the server at ``uri`` (``http(s)://``) answers ``/health`` within ``timeout_s`` seconds.

    Raises:
        UsageError: Nothing answers, or ``/health`` answers with an HTTP error other than 404.
    """
    health = f"{uri.rstrip('/')}/health"
    try:
        with urllib.request.urlopen(health, timeout=timeout_s) as answer:
            answer.read(64)
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise UsageError(
                f"`--tracking-uri` answered HTTP {exc.code} at {health}. Received: --tracking-uri={uri}. "
                "Expected: a running MLflow tracking server."
            ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        why = getattr(exc, "reason", exc)
        raise UsageError(
            f"`--tracking-uri` does not answer ({why}). Received: --tracking-uri={uri}. "
            "Expected: a running MLflow tracking server (mlflow server ...); start it, or check the address."
        ) from None
