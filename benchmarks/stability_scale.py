"""How long the stability measures of issue 5 take at scale, and what the weight sketch of a ResNet-18 costs.

Synthetic predictions (seeded): ``runs x samples`` predicted classes, each run right on about 85% of the
samples (``--classes`` classes, 4 sub-groups). Timed, best of ``--repeat`` rounds, in this process:

* ``churn``: :func:`deviate_cb.stats.prediction_churn`: every pair of runs (1,225 pairs for 50 runs) and each
  run's agreement with the majority vote;
* ``majority``: :func:`deviate_cb.stats.majority_vote` alone;
* ``per-class``: :func:`deviate_cb.stats.per_class_accuracy`;
* ``sub-groups``: :func:`deviate_cb.stats.subgroup_rates` (accuracy, FPR, FNR per group and run);
* ``per-sample``: :func:`deviate_cb.stats.sample_instability` (flip rate, entropy, ranking);
* ``loop``: the plain Python loop over samples, for one pair of runs, times the number of pairs (an estimate
  of what a loop implementation would take; only for the smaller size).

Then the weight sketch (:func:`deviate_cb.store.weights.write_weights`, ``k = 256``) of the 11,689,512
float32 parameters of ResNet-18 (its 62 parameter shapes, random values), with the peak memory the sketch
allocates (``tracemalloc``), ``write_predictions`` of 50,000 samples x 10 class probabilities, and the whole
stability section of ``deviate report`` (:func:`deviate_cb.report.answers.stability.build.build_stability`: read every
run's ``predictions.parquet``, align, every measure) on a study of the largest size.

Measured 2026-11-21 on the shared 2-core machine (load average about 1), best of 3, 10 classes:

    size               churn  majority  per-class  sub-groups  per-sample   loop (one pair timed x pairs)
    10,000 x 20       0.010s    0.007s     0.002s      0.017s      0.013s   0.122s
    50,000 x 50       0.114s    0.057s     0.029s      0.096s      0.088s        -

    sketch of 11,689,512 float32 weights (ResNet-18 shapes), k=256: 2.40 s, peak 1.6 MiB allocated beyond
        the weights (2.1-5.6 s over the session, with other jobs on the machine)
    write_predictions, 50,000 x 10 probabilities: 0.08 s
    build_stability, 50 runs x 50,000 samples (read 50 files, align, every measure): 0.74 s

    python benchmarks/stability_scale.py [--classes 10] [--repeat 3] [--sizes 10000x20,50000x50]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from deviate_cb.stats import majority_vote, per_class_accuracy, prediction_churn, sample_instability, subgroup_rates
from deviate_cb.store.predictions import write_predictions
from deviate_cb.store.weights import write_weights

SEED = 20261121


def resnet18_shapes() -> list[tuple[int, ...]]:
    """The parameter shapes of torchvision's ResNet-18 (11,689,512 weights), in ``named_parameters`` order."""
    shapes: list[tuple[int, ...]] = [(64, 3, 7, 7), (64,), (64,)]
    inplanes = 64
    for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            first_in = inplanes if block == 0 else planes
            shapes += [(planes, first_in, 3, 3), (planes,), (planes,), (planes, planes, 3, 3), (planes,), (planes,)]
            if block == 0 and (stride != 1 or inplanes != planes):
                shapes += [(planes, inplanes, 1, 1), (planes,), (planes,)]
        inplanes = planes
    return [*shapes, (1000, 512), (1000,)]


def best_of(repeat: int, fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def loop_churn_estimate(preds: np.ndarray) -> float:
    """Seconds a Python loop over samples would take for all pairs (one pair timed, times the pair count)."""
    a, b = preds[0].tolist(), preds[1].tolist()
    start = time.perf_counter()
    _ = sum(1 for s in range(len(a)) if a[s] != b[s]) / len(a)
    runs = preds.shape[0]
    return (time.perf_counter() - start) * runs * (runs - 1) / 2


def measures(samples: int, runs: int, classes: int, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(SEED)
    labels = rng.integers(0, classes, samples)
    preds = np.where(rng.random((runs, samples)) < 0.85, labels, rng.integers(0, classes, (runs, samples)))
    groups = rng.integers(0, 4, samples)
    out = {
        "churn": best_of(repeat, lambda: prediction_churn(preds)),
        "majority": best_of(repeat, lambda: majority_vote(preds)),
        "per-class": best_of(repeat, lambda: per_class_accuracy(preds, labels)),
        "sub-groups": best_of(repeat, lambda: subgroup_rates(preds, labels, groups)),
        "per-sample": best_of(repeat, lambda: sample_instability(preds, labels)),
    }
    if samples * runs <= 200_000:
        out["loop"] = loop_churn_estimate(preds)
    return out


def sketch_cost(repeat: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(SEED)
    params = [(f"p{i}", rng.standard_normal(shape, dtype=np.float32)) for i, shape in enumerate(resnet18_shapes())]
    assert sum(p.size for _, p in params) == 11_689_512
    with tempfile.TemporaryDirectory() as tmp:
        tracemalloc.start()
        write_weights(Path(tmp), params, sketch_dim=256, update_manifest=False)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        best = best_of(repeat, lambda: write_weights(Path(tmp), params, sketch_dim=256, update_manifest=False))
        probs = rng.dirichlet(np.ones(10), 50_000)
        write_time = best_of(repeat, lambda: write_predictions(Path(tmp), outputs=probs, labels=probs.argmax(1)))
    return best, peak, write_time


def report_cost(samples: int, runs: int, classes: int, repeat: int) -> float:
    """Seconds :func:`deviate_cb.report.answers.stability.build.build_stability` takes on a study of ``runs`` saved
    runs."""
    from deviate_cb.report.answers.stability.build import build_stability
    from deviate_cb.store.run_directory import RunDirectory, run_path

    rng = np.random.default_rng(SEED)
    labels = rng.integers(0, classes, samples)
    groups = {"band": rng.integers(0, 4, samples)}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(runs):
            path = run_path(Path(tmp), "scale", "algo", k)
            RunDirectory(path).update_manifest(status="completed")
            preds = np.where(rng.random(samples) < 0.85, labels, rng.integers(0, classes, samples))
            write_predictions(path, outputs=preds, labels=labels, groups=groups, num_classes=classes)
        return best_of(repeat, lambda: build_stability(tmp))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", default="10000x20,50000x50", help="SAMPLESxRUNS,... (default 10000x20,50000x50)")
    args = parser.parse_args()
    header = ("churn", "majority", "per-class", "sub-groups", "per-sample", "loop")
    print(f"{'size':<14}" + "".join(f"{h:>12}" for h in header))
    for size in args.sizes.split(","):
        samples, runs = (int(x) for x in size.split("x"))
        result = measures(samples, runs, args.classes, args.repeat)
        cells = [f"{result[h]:.3f}s" if h in result else "-" for h in header]
        print(f"{samples:,} x {runs:<6}" + "".join(f"{c:>12}" for c in cells), flush=True)
    seconds, peak, write_time = sketch_cost(args.repeat)
    print(f"\nsketch of 11,689,512 float32 weights (ResNet-18 shapes), k=256: {seconds:.2f} s, peak {peak:.1f} MiB")
    print(f"write_predictions, 50,000 x 10 probabilities: {write_time:.2f} s")
    samples, runs = (int(x) for x in args.sizes.split(",")[-1].split("x"))
    seconds = report_cost(samples, runs, args.classes, args.repeat)
    print(f"build_stability (the report section: read {runs} predictions files, every measure): {seconds:.2f} s")


if __name__ == "__main__":
    main()
