"""What a profiling window costs per training step, outside the window and inside it, measured side by side.

A tiny torch MLP (1 thread, batch 32, the model of ``callback_overhead.py``) is trained in a plain loop in which
two kinds of iteration alternate step by step (parity flips each round), microseconds apart, so drift in the
speed of a shared machine hits both alike (the house method of ``callback_overhead.py``):

* reference: ``StepTimer.start_step`` / train step / ``StepTimer.end_step``;
* subject: the same plus ``profiled=window.profiling`` and ``window.step()`` of a
  :class:`deviate_cb.profiling.torch_profiler.TorchProfileWindow` (``--wait`` steps, 1 warm-up, ``--active``
  recorded steps), i.e. exactly what an adapter with ``DeviateCallback(profile=...)`` adds to each step.

A subject iteration is *outside* the window (waiting, or after it), *inside* it (warm-up and recorded steps, the
torch profiler running), or a *boundary* (its ``window.step()`` starts the profiler or collects its trace:
``key_averages()``; the adapter does this between steps, so no step's wall time includes it, but the training
loop pays it once per window). Reference iterations taken while the profiler runs (it profiles the whole
process) are left out. Per round: median subject time over median reference time, per category; printed: the
median over rounds and the range, as thread CPU time (insensitive to the machine being shared) and wall time.
Goal (issue 6): outside the window at most 1.03x; inside it is reported (the profiler's own cost), as is the
boundary cost in milliseconds.

Measured 2026-11-21 on the shared 2-core machine (other jobs running), 20 rounds, wait=30 active=5:

    reference step: median 567 us wall
    steps                          cpu ratio             range  wall ratio             range
    outside the window                1.004x    [0.934, 1.060]      1.003x    [0.934, 1.059]
    inside (profiler running)         1.487x    [1.013, 2.340]      1.486x    [1.013, 2.335]
    profiler start + trace collection per window: median 122.2 ms wall

    python benchmarks/profile_overhead.py [--rounds 20] [--wait 30] [--active 5] [--after 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from deviate_cb.capture.step_timer import StepTimer
from deviate_cb.profiling.torch_profiler import TorchProfileWindow
from deviate_cb.profiling.window import ProfileWindow


def make_step() -> Any:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 32), torch.randint(0, 4, (32,))

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    return step


def one_round(step: Any, window: ProfileWindow, after: int, parity: int) -> dict[str, dict[str, list[float]]]:
    """Alternate reference and subject iterations until the subject's window is over and ``after`` more steps."""
    driver = TorchProfileWindow(window, cuda=False)
    reference, subject = StepTimer(), StepTimer()
    times: dict[str, dict[str, list[float]]] = {
        kind: {"cpu": [], "wall": []} for kind in ("reference", "outside", "inside", "boundary")
    }
    driver.start()
    subject_steps, index = 0, 0
    total = window.cycle + after
    while subject_steps < total:
        is_subject = (index + parity) % 2 == 0
        index += 1
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        if is_subject:
            was_open = driver._open
            profiled = driver.profiling
            subject.start_step()
            step()
            subject.end_step("train", 0, subject_steps, profiled=profiled)
            driver.step()
            kind = "boundary" if driver._open != was_open else "inside" if profiled else "outside"
            subject_steps += 1
        else:
            running = driver._open
            reference.start_step()
            step()
            reference.end_step("train", 0, index)
            kind = "reference" if not running else ""
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
        if kind:
            times[kind]["cpu"].append(cpu)
            times[kind]["wall"].append(wall)
    driver.stop()
    assert any(row["op"].startswith("aten::") for row in driver.rows()), "the window recorded no aten:: op"
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--wait", type=int, default=30)
    parser.add_argument("--active", type=int, default=5)
    parser.add_argument("--after", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    step = make_step()
    for _ in range(50):  # warm-up: allocator, first-call dispatch
        step()
    window = ProfileWindow(wait=args.wait, warmup=1, active=args.active)
    ratios: dict[str, dict[str, list[float]]] = {k: {"cpu": [], "wall": []} for k in ("outside", "inside")}
    boundary_ms: list[float] = []
    reference_us: list[float] = []
    for round_ in range(args.rounds):
        times = one_round(step, window, args.after, parity=round_ % 2)
        for kind in ratios:
            for clock in ("cpu", "wall"):
                ratios[kind][clock].append(
                    statistics.median(times[kind][clock]) / statistics.median(times["reference"][clock])
                )
        boundary_ms.append(sum(times["boundary"]["wall"]) * 1e3)
        reference_us.append(statistics.median(times["reference"]["wall"]) * 1e6)
    print(f"tiny MLP, 1 thread, {args.rounds} rounds, window wait={args.wait} warmup=1 active={args.active}")
    print(f"reference step: median {statistics.median(reference_us):.0f} us wall")
    print(f"{'steps':<28}{'cpu ratio':>12}{'range':>18}{'wall ratio':>12}{'range':>18}")
    for kind, label in (("outside", "outside the window"), ("inside", "inside (profiler running)")):
        cells = []
        for clock in ("cpu", "wall"):
            values = ratios[kind][clock]
            cells.append(f"{statistics.median(values):>11.3f}x{f'[{min(values):.3f}, {max(values):.3f}]':>18}")
        print(f"{label:<28}{''.join(cells)}")
    print(f"profiler start + trace collection per window: median {statistics.median(boundary_ms):.1f} ms wall")
    print("goal: outside the window at most 1.03x")


if __name__ == "__main__":
    main()
