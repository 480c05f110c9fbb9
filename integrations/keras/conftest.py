"""The ``backend`` fixture every Keras suite is parametrized over: one module-scoped run per selected backend
(``DEVIATE_KERAS_BACKENDS``), skipped with the reason when its package is not installed."""

from __future__ import annotations

import pytest

from tests.helpers.keras_helpers import selected_backends, skip_reason


@pytest.fixture(scope="module", params=selected_backends())
def backend(request: pytest.FixtureRequest) -> str:
    reason = skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    return request.param
