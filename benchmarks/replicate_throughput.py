"""Wall time to replicate a tiny Lightning training N times (default 8): each backend against shell loops.

Baselines, the way DEVIATE and the published variance studies replicate: a sequential shell loop running the
training script once per seed, and the same runs through ``xargs -P 2``. Then ``deviate-replicate`` with the
local backend (``--parallel 2``), the Slurm backend (a job array; needs a running Slurm, e.g.
``integrations/slurm/start.sh``) and the Ray backend (a private local cluster, started and stopped by the
study itself: start-up included). A backend whose engine or cluster is missing is reported and skipped.

Goals (issue 7): local ``--parallel 2`` no slower than ``xargs -P 2`` (at most 0.55x the sequential loop);
Slurm and Ray within 2x of local for the same study.

    python benchmarks/replicate_throughput.py [--runs 8] [--backends local,slurm,ray]

Example:
    >>> _ratio(10.0, 20.0)
    '0.50x'
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

__all__ = ["main", "tiny"]

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]


def tiny(seed: int = 0) -> dict[str, float]:
    """Train a tiny MLP for 3 epochs on 64 fixed samples (the replicated unit of work)."""
    import lightning as L
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    L.seed_everything(seed, workers=True, verbose=False)

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            loss = F.cross_entropy(self.net(x), y)
            self.log("train_loss", loss, on_epoch=True)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(64, 8, generator=gen)
    y = (x[:, 0] > 0).long()
    trainer = L.Trainer(
        max_epochs=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(Tiny(), DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True))
    return {"train_loss": float(trainer.callback_metrics["train_loss"])}


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x"


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    began = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - began, proc.returncode, (proc.stdout + proc.stderr)[-600:]


def _skip_reason(backend: str) -> Optional[str]:
    import importlib.util

    if backend == "slurm":
        if importlib.util.find_spec("submitit") is None:
            return "submitit not installed (pip install 'deviate-cb[slurm]')"
        if shutil.which("sinfo") is None or subprocess.run(["sinfo"], capture_output=True).returncode != 0:
            return "no Slurm controller answers `sinfo` (try integrations/slurm/start.sh)"
    if backend == "ray" and importlib.util.find_spec("ray") is None:
        return "Ray not installed (pip install 'deviate-cb[ray]')"
    return None


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--backends", default="local,slurm,ray")
    parser.add_argument("--one-run", type=int, metavar="SEED", help=argparse.SUPPRESS)  # a shell-loop iteration
    args = parser.parse_args(argv)
    if args.one_run is not None:
        print(tiny(args.one_run))
        return 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    n, python = args.runs, sys.executable
    one = f"{python} {HERE} --one-run"
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="deviate-throughput-") as tmp:
        work = Path(tmp)
        shell = {
            "sequential shell loop": f"for k in $(seq 0 {n - 1}); do {one} $k >/dev/null 2>&1; done",
            "xargs -P 2": f"seq 0 {n - 1} | xargs -P 2 -I{{}} sh -c '{one} {{}} >/dev/null 2>&1'",
        }
        for label, script in shell.items():
            times[label], _, _ = _timed(["bash", "-c", script], env, work)
            print(f"{label:28s} {times[label]:6.1f} s", flush=True)
        base = [python, "-m", "deviate_cb.cli.replicate", "--trainer", f"{HERE}:tiny", "-n", str(n)]
        extra = {
            "local": ["--parallel", "2"],
            "slurm": ["--cpus-per-replica", "1"],
            "ray": ["--num-cpus", "1"],
        }
        for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
            reason = _skip_reason(backend)
            if reason:
                print(f"{'deviate-replicate ' + backend:28s} skipped: {reason}", flush=True)
                continue
            out = work / f"runs-{backend}"
            cmd = [*base, "--backend", backend, "--out", str(out), *extra.get(backend, [])]
            elapsed, rc, tail = _timed(cmd, env, work)
            if rc != 0:
                print(f"deviate-replicate {backend} failed (exit {rc}):\n{tail}", file=sys.stderr)
                return 1
            times[backend] = elapsed
            print(f"{'deviate-replicate ' + backend:28s} {elapsed:6.1f} s", flush=True)
    seq = times["sequential shell loop"]
    print(f"\n{n} tiny Lightning replicas; ratios to the sequential shell loop ({seq:.1f} s):")
    for label, value in times.items():
        vs_local = (
            f", {_ratio(value, times['local'])} of local" if label in ("slurm", "ray") and "local" in times else ""
        )
        print(f"  {label:26s} {_ratio(value, seq)}{vs_local}")
    if "local" in times:
        verdict = "met" if times["local"] <= times["xargs -P 2"] * 1.05 else "missed"
        print(f"goal local --parallel 2 <= xargs -P 2: {verdict}")
    for backend in ("slurm", "ray"):
        if backend in times and "local" in times:
            verdict = "met" if times[backend] <= 2 * times["local"] else "missed"
            print(f"goal {backend} within 2x of local: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
