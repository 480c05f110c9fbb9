"""deviate report warns when the replicas of one group ran on different fingerprints, naming the fields."""

from __future__ import annotations

import json
from pathlib import Path

from deviate_cb.fingerprint.collect import collect_fingerprint
from tests.helpers.report_study import run_cli


def test_report_warns_about_replicas_on_different_fingerprints(capsys, tmp_path: Path, make_run) -> None:
    real = collect_fingerprint()  # this machine's, as a callback writes it
    for k in range(3):
        path = make_run(tmp_path, "mlp", "algo", k, [("val", "val_acc", 0.8 + k / 100)])
        fingerprint = json.loads(json.dumps(real, default=str))
        fingerprint["hostname"] = f"node{k}"  # differs, but says nothing about the numerics
        if k == 2:
            fingerprint["packages"]["torch"] = "2.99.0"
        (path / "fingerprint.json").write_text(json.dumps(fingerprint))
    for k in range(2):  # a second group on one fingerprint: no warning for it
        path = make_run(tmp_path, "mlp", "control", k, [("val", "val_acc", 0.8)])
        (path / "fingerprint.json").write_text(json.dumps(real, default=str))
    code, out, err = run_cli(capsys, "report", str(tmp_path), "--format", "csv")
    assert code == 0 and out
    (line,) = [w for w in err.splitlines() if "fingerprint" in w]
    assert line.startswith("deviate: warning: experiment=mlp variant=algo: replicas ran on different fingerprints")
    assert "packages.torch" in line and "2.99.0" in line and "hostname" not in line
