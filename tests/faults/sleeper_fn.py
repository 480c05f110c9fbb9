"""``--trainer`` form of :mod:`sleeper`: runs its module code when called."""

import runpy
from pathlib import Path


def main() -> None:
    runpy.run_path(str(Path(__file__).with_name("sleeper.py")), run_name="sleeper")
