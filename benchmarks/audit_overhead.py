"""What the audit costs per audited training step, and that the steps after it run at normal speed.

Method. The small CNN of Zhuang et al. 2022 (``deviate_cb.bench.models``: two conv layers, 32x32x3 inputs, 10
classes), batch 32, SGD, trained in a plain torch loop on the GPU when one is there (CUDA synchronised around
each timed step), else on the CPU. Each round times ``--steps`` steps in three phases, all in one process:

* plain: no audit;
* audited: a :class:`deviate_cb.audit.recording.hooks.TorchAudit` attached to every module and parameter, exactly
  what ``DeviateCallback(audit=K)`` does per step: the batch digested, forward hooks on every module, the loss,
  post-accumulate-grad hooks on every parameter, every parameter after the optimizer step, and one transfer of
  the step's digests to the host; after ``--steps`` steps it removes its hooks;
* after: the same loop once the audit has detached itself (no hook left);
* plain-loop audited: the loop as a plain PyTorch script is audited by ``deviate audit`` (issue 28):
  :class:`deviate_cb.audit.recording.plain_loop.PlainLoopAudit` installed, torch's global module and optimizer hooks
  and ``Tensor.backward`` wrapped, nothing called by the loop itself; after ``--steps`` optimizer steps it removes
  every global hook;
* plain-loop after: the same loop once the plain-loop audit has removed itself (the optimizer hook being called
  when it ended goes at the next module call, inside this phase's first step).

The phases alternate by round (plain first in even rounds, last in odd ones), so drift in the speed of a
shared machine hits them alike. Per round: the median step time of each phase; printed: the median over rounds
of each phase's time over plain, with their range, and the digests and bytes one audited step moves to the host.

Goal (issues 16 and 28): the cost per audited step is stated; the steps after the audit at most 1.03x of plain,
for the callbacks' audit and for the plain-loop audit.

Measured 2026-11-24 on the shared 2-core VM (CPU, 2 threads, wall time), 15 rounds of 10 steps, before the plain-loop
phases and the module-input rows:

    plain step: median 10.00 ms
    audited step: 2.779x of plain [1.869, 3.049]; 24 digests per step, 21.2 KiB moved to the host once per step
    after the audit: 1.023x of plain [0.691, 1.462]

Measured 2026-11-26 on the same VM while six other jobs shared its 2 cores (load average 6 to 11): wall time was
useless (plain steps from 87 to 736 ms within one run), so CPU time of this process with one torch thread
(``--clock cpu --threads 1``), 15 rounds of 10 steps:

    plain step: median 14.94 ms
    audited step: 3.843x of plain [3.538, 4.009]; 42 digests per step, 26.7 KiB moved to the host once per step
    after step: 1.005x of plain [0.946, 1.063]
    plain-loop audited step: 3.827x of plain [3.541, 4.056]
    plain-loop after step: 1.005x of plain [0.965, 1.057]

The audited step's cost is the digests of the activations (a 32x32x32x32 float32 output is 1M words: about 2 ms
for the two 64-bit sums and the summaries on this CPU), paid for the K audited steps only. The plain-loop audit
records the same digests through torch's global hooks, at the same cost; once it has removed itself no global hook
is left (checked every round), so its steps after are plain steps.

    python benchmarks/audit_overhead.py [--rounds 10] [--steps 10] [--device auto|cpu|cuda] [--clock wall|cpu]
                                        [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from deviate_cb.audit.recording.hooks import TorchAudit, named_modules, named_parameters
from deviate_cb.audit.recording.plain_loop import PlainLoopAudit
from deviate_cb.bench.models import build_torch_model

GOAL_AFTER = 1.03
_PHASES = ("plain", "audited", "after", "plain-loop audited", "plain-loop after")
_CLOCK: list[Callable[[], float]] = [time.perf_counter]


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
    """The time of each of ``steps`` training steps (device synchronised around each) on :data:`_CLOCK`."""
    clock = _CLOCK[0]
    times = []
    for k in range(steps):
        sync()
        began = clock()
        _step(model, optimizer, x, y, audit, k)
        sync()
        times.append(clock() - began)
    return times


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10, help="steps per phase; the audit records this many")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or this process's CPU time (steadier on a CPU shared with other work)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch's CPU threads (default: torch's own)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    _CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
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
    ratios: dict[str, list[float]] = {phase: [] for phase in _PHASES[1:]}
    plain_medians = []
    hooks_before = _global_hooks()
    for number in range(args.rounds):
        times: dict[str, list[float]] = {}
        if number % 2 == 0:
            times["plain"] = _phase(model, optimizer, x, y, None, args.steps, sync)
        audit = TorchAudit(args.steps)
        audit.attach(named_modules(model), named_parameters(model))
        times["audited"] = _phase(model, optimizer, x, y, audit, args.steps, sync)
        assert not audit.attached, "the audit must remove its hooks after its last step"
        times["after"] = _phase(model, optimizer, x, y, None, args.steps, sync)
        plain_loop = PlainLoopAudit(args.steps, lambda log: None)
        plain_loop.install(torch)
        times["plain-loop audited"] = _phase(model, optimizer, x, y, None, args.steps, sync)
        times["plain-loop after"] = _phase(model, optimizer, x, y, None, args.steps, sync)
        assert not plain_loop.installed and _global_hooks() == hooks_before, "the plain-loop audit must be gone"
        assert plain_loop.log is not None and plain_loop.log.recorded_steps == args.steps
        if number % 2 == 1:
            times["plain"] = _phase(model, optimizer, x, y, None, args.steps, sync)
        medians = {phase: statistics.median(values) for phase, values in times.items()}
        plain_medians.append(medians["plain"])
        for phase in ratios:
            ratios[phase].append(medians[phase] / medians["plain"])
        print(f"round {number + 1}: " + "  ".join(f"{p} {medians[p] * 1e3:7.2f} ms" for p in _PHASES), flush=True)
    where = f"CUDA ({torch.cuda.get_device_name()})" if cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(
        f"\nsmall CNN, batch 32, on {where}, {args.rounds} rounds of {args.steps} steps per phase, {args.clock} time:"
    )
    print(f"  plain step: median {statistics.median(plain_medians) * 1e3:.2f} ms")
    for phase, values in ratios.items():
        extra = ""
        if phase == "audited":
            extra = f"; {rows_per_step} digests per step, {words * 8 / 1024:.1f} KiB moved to the host once per step"
        spread = f"[{min(values):.3f}, {max(values):.3f}]"
        print(f"  {phase} step: {statistics.median(values):.3f}x of plain {spread}{extra}")
    for phase in ("after", "plain-loop after"):
        after = statistics.median(ratios[phase])
        print(f"goal {phase} <= {GOAL_AFTER}x of plain: {'met' if after <= GOAL_AFTER else 'missed'} ({after:.3f}x)")
    return 0


def _global_hooks() -> tuple[int, ...]:
    """How many global module and optimizer hooks torch holds."""
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    return (
        len(nn_module._global_forward_pre_hooks),
        len(nn_module._global_forward_hooks),
        len(optim_module._global_optimizer_pre_hooks),
        len(optim_module._global_optimizer_post_hooks),
    )


if __name__ == "__main__":
    raise SystemExit(main())
