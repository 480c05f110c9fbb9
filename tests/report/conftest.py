"""Fixtures that write real run directories (manifest + Parquet) through deviate_cb.store.run_directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.report_study import MORIN_FILES, morin_data, write_run


@pytest.fixture
def make_run() -> Callable[..., Path]:
    return write_run


@pytest.fixture(scope="session")
def morin_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Morin 2020 replicate results as a study: one run per CSV row, test_loss and test_acc at stage test."""
    root = tmp_path_factory.mktemp("morin")
    for variant in MORIN_FILES:
        for k, (loss, acc) in enumerate(morin_data(variant)):
            write_run(root, "resnet_cifar10", variant, k, [("test", "test_loss", loss), ("test", "test_acc", acc)])
    return root
