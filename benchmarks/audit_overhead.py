"""What the audit costs per audited training step, and that the steps after it run at normal speed.

Method. The small CNN of Zhuang et al. 2022 (``deviate_cb.bench.models``: two conv layers, 32x32x3 inputs, 10
classes), batch 32, SGD, trained in a plain torch loop on the GPU when one is there (CUDA synchronised around
each timed step), else on the CPU. Each round times ``--steps`` steps in three phases, all in one process:

* plain: no audit;
* audited: a :class:`deviate_cb.capture.audit.hooks.TorchAudit` attached to every module and parameter, exactly
  what ``DeviateCallback(audit=K)`` does per step: the batch digested, forward hooks on every module, the loss,
  post-accumulate-grad hooks on every parameter, every parameter after the optimizer step, and one transfer of
  the step's digests to the host; after ``--steps`` steps it removes its hooks;
* after: the same loop once the audit has detached itself (no hook left).

The phases alternate by round (plain first in even rounds, last in odd ones), so drift in the speed of a
shared machine hits them alike. Per round: the median step time of each phase; printed: the median over rounds
of audited/plain and after/plain, with their range, and the digests and bytes one audited step moves to the host.

Goal (issue 16): the cost per audited step is stated; the steps after the audit at most 1.03x of plain.

Measured 2026-11-24 on the shared 2-core VM (CPU, 2 threads), 15 rounds of 10 steps:

    plain step: median 10.00 ms
    audited step: 2.779x of plain [1.869, 3.049]; 24 digests per step, 21.2 KiB moved to the host once per step
    after the audit: 1.023x of plain [0.691, 1.462]

The audited step's cost is the digests of the activations (a 32x32x32x32 float32 output is 1M words: about 2 ms
for the two 64-bit sums and the summaries on this CPU), paid for the K audited steps only.

    python benchmarks/audit_overhead.py [--rounds 10] [--steps 10] [--device auto|cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from deviate_cb.bench.models import build_torch_model
from deviate_cb.capture.audit.hooks import TorchAudit, named_modules, named_parameters

GOAL_AFTER = 1.03


def _step(model: nn.Module, optimizer: Any, x: torch.Tensor, y: torch.Tensor, audit: Any, k: int) -> None:
    if audit is not None:
        audit.begin_step(k, (x, y))
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    if audit is not None:
        audit.record_loss(loss)
    loss.backward()
    optimizer.step()
    if audit is not None:
        audit.end_step()


def _phase(
    model: nn.Module, optimizer: Any, x: torch.Tensor, y: torch.Tensor, audit: Any, steps: int, sync: Callable[[], Any]
) -> list[float]:
    """The wall time of each of ``steps`` training steps (device synchronised around each)."""
    times = []
    for k in range(steps):
        sync()
        began = time.perf_counter()
        _step(model, optimizer, x, y, audit, k)
        sync()
        times.append(time.perf_counter() - began)
    return times


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10, help="steps per phase; the audit records this many")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be at least 1")
    cuda = torch.cuda.is_available() and args.device != "cpu"
    if args.device == "cuda" and not cuda:
        parser.error("--device cuda: no CUDA device here")
    device = torch.device("cuda" if cuda else "cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(0)
    model = build_torch_model("small_cnn").to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    for k in range(5):  # warm-up: allocator, kernels, the audit's weight cache
        _step(model, optimizer, x, y, None, k)
    warm = TorchAudit(2)
    warm.attach(named_modules(model), named_parameters(model))
    for k in range(2):
        _step(model, optimizer, x, y, warm, k)
    rows_per_step = len(warm.log.rows) // 2
    words = sum(len(row["values"] or ()) + 4 for row in warm.log.rows) // 2
    audited_ratio, after_ratio, plain_medians = [], [], []
    for number in range(args.rounds):
        times: dict[str, list[float]] = {}
        if number % 2 == 0:
            times["plain"] = _phase(model, optimizer, x, y, None, args.steps, sync)
        audit = TorchAudit(args.steps)
        audit.attach(named_modules(model), named_parameters(model))
        times["audited"] = _phase(model, optimizer, x, y, audit, args.steps, sync)
        assert not audit.attached, "the audit must remove its hooks after its last step"
        times["after"] = _phase(model, optimizer, x, y, None, args.steps, sync)
        if number % 2 == 1:
            times["plain"] = _phase(model, optimizer, x, y, None, args.steps, sync)
        medians = {phase: statistics.median(values) for phase, values in times.items()}
        plain_medians.append(medians["plain"])
        audited_ratio.append(medians["audited"] / medians["plain"])
        after_ratio.append(medians["after"] / medians["plain"])
        print(
            f"round {number + 1}: plain {medians['plain'] * 1e3:7.2f} ms  audited {medians['audited'] * 1e3:7.2f} ms"
            f"  after {medians['after'] * 1e3:7.2f} ms",
            flush=True,
        )
    where = f"CUDA ({torch.cuda.get_device_name()})" if cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(f"\nsmall CNN, batch 32, on {where}, {args.rounds} rounds of {args.steps} steps per phase:")
    print(f"  plain step: median {statistics.median(plain_medians) * 1e3:.2f} ms")
    print(
        f"  audited step: {statistics.median(audited_ratio):.3f}x of plain "
        f"[{min(audited_ratio):.3f}, {max(audited_ratio):.3f}]; {rows_per_step} digests per step, "
        f"{words * 8 / 1024:.1f} KiB moved to the host once per step"
    )
    after = statistics.median(after_ratio)
    print(f"  after the audit: {after:.3f}x of plain [{min(after_ratio):.3f}, {max(after_ratio):.3f}]")
    print(f"goal after the audit <= {GOAL_AFTER}x of plain: {'met' if after <= GOAL_AFTER else 'missed'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
