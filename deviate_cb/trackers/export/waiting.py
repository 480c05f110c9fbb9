"""Every call to a tracker's server is bounded in time and says what it waits for.

Example:
    >>> import io, time
    >>> err = io.StringIO()
    >>> class Slow:
    ...     def create_run(self):
    ...         time.sleep(0.3)
    ...         return "run-1"
    >>> Watched(Slow(), "MLflow", "http://host:5000", err, timeout_s=30, notice_after_s=0.1).create_run()
    'run-1'
    >>> err.getvalue()
    'deviate: waiting for MLflow at http://host:5000 (create run)...\\n'
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import IO, Any, Optional

from deviate_cb.errors import UsageError

__all__ = ["DEFAULT_TIMEOUT_S", "NOTICE_AFTER_S", "TrackerUnreachable", "Watched", "bound_mlflow", "is_network_error"]

DEFAULT_TIMEOUT_S = 30.0
NOTICE_AFTER_S = 5.0
_NETWORK_WORDS = ("timed out", "timeout", "connection", "max retries exceeded", "api request to")


class TrackerUnreachable(UsageError):
    """The tracker's server did not answer a request in time, or the connection failed: a rerun may finish."""


def bound_mlflow(timeout_s: Optional[float]) -> float:
    """Set MLflow's request timeout (``timeout_s``, else ``$MLFLOW_HTTP_REQUEST_TIMEOUT``, else 30 s) and, unless
    the user set them, no retries; return the timeout in seconds."""
    if timeout_s is None:
        try:
            timeout_s = float(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", DEFAULT_TIMEOUT_S))
        except ValueError:
            timeout_s = DEFAULT_TIMEOUT_S
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, math.ceil(timeout_s)))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    return float(timeout_s)


def is_network_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a failed connection or a timeout, not an answer of the server.

    Example:
        >>> is_network_error(TimeoutError()), is_network_error(ValueError("Invalid metric name"))
        (True, False)
    """
    seen: set[int] = set()
    node: Optional[BaseException] = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, (TimeoutError, ConnectionError)) or type(node).__module__.startswith(
            ("requests", "urllib3", "http.client", "socket")
        ):
            return True
        if getattr(node, "get_http_status_code", None) is not None and type(node).__name__ == "RestException":
            return bool(node.get_http_status_code() >= 500)  # type: ignore[attr-defined]  # 4xx: it refused
        if any(word in str(node).lower()[:300] for word in _NETWORK_WORDS) and "MlflowException" in type(node).__name__:
            return True
        node = node.__cause__ or node.__context__
    return False


class Watched:
    """``client`` whose method calls say on ``err`` what they wait for after ``notice_after_s`` seconds, and turn
    a network failure into :class:`TrackerUnreachable`."""

    def __init__(
        self,
        client: Any,
        tracker: str,
        where: str,
        err: IO[str],
        *,
        timeout_s: float,
        notice_after_s: float = NOTICE_AFTER_S,
    ) -> None:
        self._client, self._tracker, self._where, self._err = client, tracker, where, err
        self._timeout_s, self._notice_after_s = timeout_s, notice_after_s

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            what = name.replace("_", " ")
            timer = threading.Timer(self._notice_after_s, self._notice, (what,))
            timer.daemon = True
            started = time.monotonic()
            timer.start()
            try:
                return attribute(*args, **kwargs)
            except Exception as exc:
                if is_network_error(exc):
                    waited = time.monotonic() - started
                    timed_out = waited >= self._timeout_s * 0.9
                    raise TrackerUnreachable(
                        f"{self._tracker} at {self._where} did not answer ({what}) "
                        + (f"within {self._timeout_s:g} s (--timeout)" if timed_out else f"({_first_line(exc)})")
                        + ". Expected: a running server that answers; raise --timeout if it is only slow."
                    ) from None
                raise
            finally:
                timer.cancel()

        return call

    def _notice(self, what: str) -> None:
        self._err.write(f"deviate: waiting for {self._tracker} at {self._where} ({what})...\n")
        self._err.flush()


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
