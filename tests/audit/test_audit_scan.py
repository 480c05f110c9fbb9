""":func:`deviate_cb.launch.target.audit_scan.audit_refusal`: a program that imports none of torch, Lightning and Keras
has nothing to hook and is refused by ``deviate audit`` before it runs, and nothing else is: a plain PyTorch loop is
audited (torch's global hooks), and whenever the source does not tell, the audit goes on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deviate_cb.launch.target import audit_scan
from deviate_cb.launch.target.audit_scan import audit_refusal
from deviate_cb.launch.target.command import Command
from deviate_cb.launch.target.trainer_spec import TrainerSpec

PLAIN = "import time\nimport numpy\n\ndef main():\n    numpy.zeros(2)\n"  # nothing the audit can hook


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def trainer(folder: Path, spec: str = "train.py:main") -> str:
    return audit_refusal(TrainerSpec.parse(str(folder / spec)), folder)


def command(folder: Path, *words: str) -> str:
    return audit_refusal(Command.parse(list(words)), folder)


def test_a_program_without_torch_lightning_or_keras_is_refused(tmp_path: Path) -> None:
    write(tmp_path, {"train.py": PLAIN + "from model import Net\n", "model.py": "import scipy\nNet = None\n"})
    found = trainer(tmp_path)
    assert found.startswith(
        f"cannot audit {tmp_path / 'train.py'}:main: it imports neither Lightning nor Keras nor torch "
        "(train.py and 1 module(s) of its own read), and the audit hooks into a Lightning Trainer's fit, a Keras "
        "Model.fit or torch's modules and optimizers (a plain PyTorch loop)"
    ), found
    assert command(tmp_path, "python", "train.py").startswith("cannot audit `python train.py`: ")
    assert command(tmp_path, sys.executable, "train.py").startswith("cannot audit ")


@pytest.mark.parametrize(
    "files",
    [
        {"train.py": PLAIN + "import torch\n"},  # a plain PyTorch loop: torch's global hooks audit it
        {"train.py": PLAIN + "from model import Net\n", "model.py": "import torch.nn as nn\nNet = nn.Linear\n"},
        {"train.py": PLAIN + "    import torchvision\n"},
        {"train.py": PLAIN + "    import lightning as L\n"},  # inside a function
        {"train.py": PLAIN + "import pytorch_lightning as pl\n"},
        {"train.py": PLAIN + "import tensorflow as tf\n"},  # tf.keras
        {"train.py": PLAIN + "from keras import layers\n"},
        {"train.py": PLAIN + "from deviate_cb.lightning import DeviateCallback\n"},
        # through the project's own packages, deeper than the warm-start scan reads
        {"train.py": PLAIN + "from mypkg.model import train\n", "mypkg/__init__.py": "",
         "mypkg/model.py": "from .nets import deep\n", "mypkg/nets/__init__.py": "from . import deeper\n",
         "mypkg/nets/deeper.py": "from ..core.fit import run\n", "mypkg/core/__init__.py": "",
         "mypkg/core/fit.py": "import lightning\n"},
        # the package's __init__ is what imports it
        {"train.py": PLAIN + "from mypkg import helpers\n", "mypkg/__init__.py": "import keras\n",
         "mypkg/helpers.py": "x = 1\n"},
    ],
)  # fmt: skip
def test_torch_lightning_or_keras_anywhere_in_the_project_is_not_refused(tmp_path: Path, files: dict[str, str]) -> None:
    write(tmp_path, files)
    assert trainer(tmp_path) == ""
    assert command(tmp_path, "python", "train.py") == ""


@pytest.mark.parametrize(
    "extra",
    [
        "import importlib\nimportlib.import_module('lightning')\n",  # imported by name
        "from hydra.utils import instantiate\ninstantiate(cfg)\n",  # a Trainer from a config
        "import subprocess\nsubprocess.run(['python', 'fit.py'])\n",  # another program trains
        "import os\nos.system('python fit.py')\n",
        "import runpy\nrunpy.run_path('fit.py')\n",
        "import no_such_module_anywhere_x\n",  # found nowhere from here
        "from . import sibling\n",  # a relative import that names no file
    ],
)
def test_what_the_source_does_not_tell_is_not_refused(tmp_path: Path, extra: str) -> None:
    write(tmp_path, {"train.py": PLAIN + extra})
    assert trainer(tmp_path) == ""


def test_what_is_not_a_python_file_is_not_refused(tmp_path: Path) -> None:
    write(tmp_path, {"train.py": PLAIN, "run.sh": "python train.py\n", "broken.py": "def main(:\n"})
    assert command(tmp_path, "bash", "run.sh") == ""
    assert command(tmp_path, "python", "-c", "import torch") == ""
    assert command(tmp_path, "python", "-m", "json.tool") == ""  # an installed module: not the project's source
    assert trainer(tmp_path, "broken.py:main") == ""


def test_a_project_larger_than_the_scan_is_not_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, {"train.py": PLAIN + "import a\n", "a.py": "import b\n", "b.py": "import c\n", "c.py": ""})
    assert trainer(tmp_path).startswith("cannot audit ")
    monkeypatch.setattr(audit_scan, "MAX_FILES", 3)
    assert trainer(tmp_path) == ""


def test_an_installed_package_requiring_torch_or_lightning_is_not_refused(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    write(tmp_path, {"train.py": PLAIN + "import yaml\n"})
    assert trainer(tmp_path).startswith("cannot audit ")  # yaml requires none of them
    write(tmp_path, {"train.py": PLAIN + "import lightning_utilities\n"})
    assert trainer(tmp_path).startswith("cannot audit ")  # Lightning's helpers train nothing themselves
    assert audit_scan._requires_audited("pytorch_lightning") is True  # a distribution that requires one
    assert audit_scan._requires_audited("torchmetrics") is True  # requires torch
    assert audit_scan._requires_audited("yaml") is False
