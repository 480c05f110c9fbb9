"""`{run_dir}` works unquoted in `key=value` arguments (issue 26, item 3): a configurator that splits its
arguments on `=` (`--out_dir={run_dir}/out`) and Hydra's override grammar (`hydra.run.dir={run_dir}/...`) get a
path without `=` (a link to the run directory, `<out>/.run-dirs/<experiment>/<variant>/<k>`), and what they
write lands in the replica's own run directory.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from deviate_cb.report.reading.runs import find_runs
from tests.helpers.replicate_helpers import start_cli

CONFIGURATOR = """
import sys
from ast import literal_eval

out_dir = "out"
for arg in sys.argv[1:]:  # as small training scripts parse --key=value
    key, val = arg.split("=")
    key = key[2:]
    try:
        globals()[key] = literal_eval(val)
    except (SyntaxError, ValueError):
        globals()[key] = val
import os

os.makedirs(out_dir, exist_ok=True)
with open(os.path.join(out_dir, "ckpt.txt"), "w") as handle:
    handle.write(out_dir)
print("acc=0.5")
"""

HYDRA_APP = """
import hydra


@hydra.main(version_base=None, config_path=None)
def main(cfg):
    print("acc=0.5")


if __name__ == "__main__":
    main()
"""


def _run(tmp_path: Path, experiment: str, *command: str) -> Path:
    out = tmp_path / "runs"
    args = ["-n", "2", "--experiment", experiment, "--out", str(out), "--metric-regex", r"acc=(?P<acc>[0-9.]+)"]
    proc = start_cli([*args, "--", *command], cwd=tmp_path)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stdout + stderr
    return out / f"experiment={experiment}" / "variant=algo+impl"


def test_a_configurator_that_splits_on_equals_takes_run_dir(tmp_path: Path) -> None:
    (tmp_path / "configurator.py").write_text(CONFIGURATOR)
    variant = _run(tmp_path, "cfg", "python", "configurator.py", "--out_dir={run_dir}/out")
    for k in range(2):
        run_dir = variant / f"replica={k}"
        written = (run_dir / "out" / "ckpt.txt").read_text()
        assert "=" not in written and written.endswith(f"cfg/algo+impl/{k}/out")
        assert Path(written).resolve() == (run_dir / "out").resolve()
        assert json.loads((run_dir / "run.json").read_text())["command_run"][-1] == f"--out_dir={written}"
    # the alias is no run of the store: the report still sees two
    assert len([r for r in find_runs(tmp_path / "runs") if r.completed]) == 2


@pytest.mark.skipif(importlib.util.find_spec("hydra") is None, reason="needs hydra-core")
def test_a_hydra_override_takes_run_dir(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(HYDRA_APP)
    variant = _run(tmp_path, "app", "python", "app.py", "hydra.run.dir={run_dir}/hydra_out")
    for k in range(2):
        assert (variant / f"replica={k}" / "hydra_out" / ".hydra" / "config.yaml").is_file()


def test_words_without_equals_keep_the_real_run_dir(tmp_path: Path) -> None:
    script = "import sys; print('acc=0.5'); print(sys.argv[1])"
    variant = _run(tmp_path, "plain", sys.executable, "-c", script, "{run_dir}")
    manifest = json.loads((variant / "replica=0" / "run.json").read_text())
    assert manifest["command_run"][-1].endswith("experiment=plain/variant=algo+impl/replica=0")
