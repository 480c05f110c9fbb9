"""The Morin & Willetts (2020) replicate results shipped in tests/data/morin2020, as run tables and a run store."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.morin_data import FILES
from tests.helpers.morin_data import morin as load
from tests.helpers.report_study import write_run


def write_tables(root: Path) -> dict[str, Path]:
    """``all.csv`` (column ``setting``), ``impl.csv`` and ``algo+impl.csv``, each with a header row."""
    paths = {"all": root / "all.csv"}
    lines = ["setting,test_loss,test_acc"]
    for setting in FILES:
        data = load(setting)
        lines += [f"{setting},{loss!r},{acc!r}" for loss, acc in data.tolist()]
        path = root / f"{setting}.csv"
        path.write_text("test_loss,test_acc\n" + "".join(f"{a!r},{b!r}\n" for a, b in data.tolist()))
        paths[setting] = path
    paths["all"].write_text("\n".join(lines) + "\n")
    return paths


def write_store(root: Path) -> Path:
    """A run store: experiment=resnet, variant=impl / algo+impl, one run per CSV row."""
    for setting in FILES:
        for k, (loss, acc) in enumerate(load(setting).tolist()):
            write_run(root, "resnet", setting, k, [("test", "test_loss", loss), ("test", "test_acc", acc)])
    return root
