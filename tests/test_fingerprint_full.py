"""The full fingerprint of docs/architecture.md on this machine, `deviate fingerprint`, and fingerprint warnings."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deviate_cb.cli.main import main
from deviate_cb.fingerprint.collect import GPU_FIELDS, REQUIRED_FIELDS, collect_fingerprint, missing_fields
from deviate_cb.report.reading.fingerprints import fingerprint_differences, fingerprint_warnings
from deviate_cb.store.run_directory import RunDirectory, run_path

torch = pytest.importorskip("torch")


def test_every_required_field_is_present_and_gpu_fields_are_marked_absent_without_a_driver() -> None:
    fp = collect_fingerprint(seed=5, dataloader_workers=2)
    assert missing_fields(fp) == []
    assert set(REQUIRED_FIELDS) <= set(fp["flat"])
    assert fp["torch"]["present"] is True and fp["torch"]["version"] == torch.__version__
    assert fp["threads"]["torch_intra_op"] == torch.get_num_threads()
    assert fp["seed"] == 5 and fp["dataloader_workers"] == 2 and fp["cpu"]["model"]
    if fp["nvml"]["present"]:  # a machine with an NVIDIA driver: every GPU has every per-GPU field
        assert fp["gpus"]["present"] is bool(fp["gpus"]["devices"])
        assert all(set(GPU_FIELDS) <= set(d) for d in fp["gpus"]["devices"])
        assert fp["cuda"]["driver"] is not None
    else:
        assert fp["nvml"]["reason"].startswith("no NVIDIA driver") or "not installed" in fp["nvml"]["reason"]
        assert fp["cuda"]["driver"] is None and fp["cuda"]["cuda_driver"] is None
        if not torch.cuda.is_initialized():  # torch adds the GPUs it initialised, even without NVML
            assert fp["gpus"] == {"present": False, "reason": fp["nvml"]["reason"], "count": 0, "devices": []}


def test_cuda_present_means_a_cuda_build_and_a_gpu_whatever_this_machine_has() -> None:
    # Holds on a CPU machine with CPU wheels, with CUDA wheels (torch's, `tensorflow`'s: CUDA libraries but no
    # driver), and on a GPU machine: `present` is "usable", the versions found are kept either way.
    fp = collect_fingerprint()
    cuda, tf_build = fp["cuda"], fp["tensorflow"].get("build") or {}
    assert cuda["runtime"] == (torch.version.cuda or tf_build.get("cuda_version"))
    gpu_seen = (
        bool(fp["gpus"]["devices"])
        or torch.cuda.is_available()
        or any(d["type"] == "GPU" for d in fp["tensorflow"].get("devices") or [])
    )
    assert cuda["present"] is (cuda["runtime"] is not None and gpu_seen), cuda
    if not cuda["present"]:
        assert cuda["reason"].startswith("no CUDA"), cuda
    if torch.version.cuda is None and "tensorflow" not in sys.modules:  # no CUDA build imported
        assert cuda["present"] is False and cuda["runtime"] is None and cuda["cudnn"] is None


def test_frameworks_not_imported_keep_their_fields_and_installed_versions() -> None:
    code = (
        "import json, sys; from deviate_cb.fingerprint.collect import collect_fingerprint, missing_fields; "
        "fp = collect_fingerprint(); print(json.dumps([missing_fields(fp), fp['tensorflow'], fp['keras'], "
        "'torch' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    missing, tf, keras, torch_loaded = json.loads(out)
    assert missing == [] and torch_loaded is False
    assert tf["present"] is False and tf["reason"] == "tensorflow is not imported by this process"
    assert set(tf) >= {"version", "git_version"} and set(keras) >= {"version", "backend"}


def test_collection_is_fast_and_adapter_facts_merge_into_their_section() -> None:
    collect_fingerprint()
    started = time.perf_counter()
    fp = collect_fingerprint(extra={"lightning": {"accelerator": "CPUAccelerator"}})
    assert time.perf_counter() - started < 1.0  # measured: under 1 ms once warm, about 13 ms cold
    assert fp["lightning"]["accelerator"] == "CPUAccelerator" and "version" in fp["lightning"]
    assert fp["flat"]["lightning.accelerator"] == "CPUAccelerator"


def record_runs(root: Path, n: int) -> list[Path]:
    """Runs of one group whose fingerprint.json the session's own code path wrote."""
    paths = []
    for replica in range(n):
        run = RunDirectory(run_path(root, "cnn", "algo", replica))
        run.update_manifest(status="completed", seed=replica)
        run.write_fingerprint(collect_fingerprint(seed=replica, dataloader_workers=0))
        paths.append(run.path)
    return paths


def edit(path: Path, change: dict) -> None:
    fp = json.loads((path / "fingerprint.json").read_text())
    for dotted, value in change.items():
        *parents, leaf = dotted.split(".")
        node = fp
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[leaf] = value
    (path / "fingerprint.json").write_text(json.dumps(fp))


def test_identical_machines_give_no_warning_even_with_other_hosts_seeds_and_times(tmp_path: Path) -> None:
    runs = record_runs(tmp_path, 3)
    edit(runs[1], {"hostname": "node7", "collected_at": "2030-01-01", "seed": 99, "python.executable": "/x"})
    assert fingerprint_differences(runs) == [] and fingerprint_warnings(runs) == []


def test_warning_lists_the_differing_fields_and_values(tmp_path: Path) -> None:
    runs = record_runs(tmp_path, 3)
    gpu = {
        "name": "NVIDIA A100-SXM4-40GB",
        "compute_capability": "8.0",
        "sm_count": 108,
        "uuid_sha256": "a",
        "mig_mode": 0,
    }
    for run in runs:
        edit(run, {"gpus": {"present": True, "count": 1, "devices": [dict(gpu)]}})
    edit(runs[2], {"gpus.devices.0.sm_count": 98, "gpus.devices.0.uuid_sha256": "b", "torch.version": "2.12.0"})
    edit(runs[1], {"threads.torch_intra_op": 16, "hostname": "other"})
    fields = [d.field for d in fingerprint_differences(runs)]
    assert fields == ["gpus.devices.0.sm_count", "threads.torch_intra_op", "torch.version"]
    (line,) = fingerprint_warnings(runs)
    assert "\n" not in line and line.startswith("experiment=cnn variant=algo: replicas ran on different fingerprints")
    assert "gpus.devices.0.sm_count = 108 (replicas 0, 1) | 98 (replica 2)" in line
    assert f'torch.version = "{torch.__version__}" (replicas 0, 1) | "2.12.0" (replica 2)' in line
    assert "threads.torch_intra_op = " in line and "16 (replica 1)" in line and "hostname" not in line


def test_groups_are_compared_apart_and_runs_without_a_fingerprint_are_skipped(tmp_path: Path) -> None:
    runs = record_runs(tmp_path, 2)
    other = RunDirectory(run_path(tmp_path, "cnn", "control", 0))
    other.write_fingerprint({**json.loads((runs[0] / "fingerprint.json").read_text()), "dataloader_workers": 4})
    bare = RunDirectory(run_path(tmp_path, "cnn", "algo", 2))
    bare.update_manifest(status="failed")
    assert fingerprint_warnings([*runs, other.path, bare.path]) == []


def test_deviate_fingerprint_prints_json_and_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fingerprint", "--format", "json", "--import", "torch"]) == 0
    fp = json.loads(capsys.readouterr().out)
    assert fp["torch"]["present"] is True and missing_fields(fp) == []
    assert main(["fingerprint"]) == 0
    table = capsys.readouterr().out
    assert "torch.version" in table and "cpu.model" in table
    assert main(["fingerprint", "--format", "json", "--no-import"]) == 0
    assert missing_fields(json.loads(capsys.readouterr().out)) == []


@pytest.mark.parametrize("argv", [["fingerprint", "--format", "xml"], ["fingerprint", "--import", "numpy"]])
def test_deviate_fingerprint_bad_input_is_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("deviate: error: ")
