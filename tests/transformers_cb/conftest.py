"""The Hugging Face tests need the transformers extra (and datasets, from the dev extra); without them they skip."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="pip install 'deviate-cb[transformers]'")
pytest.importorskip("datasets", reason="pip install 'deviate-cb[dev]'")
