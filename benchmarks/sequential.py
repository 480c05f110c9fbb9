"""Sequential stopping (issue 27): its false-positive rate against naive re-testing, and the runs it saves.

In one run, for the looks ``plan_looks(3, 3, --round, --max-runs)`` (both groups start at 3 runs and grow by
``--round`` runs a round up to ``--max-runs`` each):

1. the rate at which a true "no difference" is decided, over ``--studies`` simulated studies, for the
   group-sequential design (:func:`deviate_cb.stats.plan_sequential`: Welch's t for the mean, Brown-Forsythe for
   the spread, Pocock-type nominal level ``p*`` calibrated by simulation) side by side with naive re-testing at
   ``alpha`` after every look (:func:`deviate_cb.stats.naive_rate`), for normal and unit-variance t(3) runs, with
   the time the calibration took;
2. for true differences of 0.5, 1 and 2 standard deviations: the sequential design's power (the rate of "A
   better", simulated) and the mean runs it used per group, against the fixed-n design with the same power (the
   pooled t-test at ``alpha``, exact power from the noncentral t: the fewest runs per group reaching the
   sequential power, or ``1 - 1/--studies`` when every simulated study decided; ``--max-runs`` caps the
   sequential design, so its power at small effects is below 1);
3. a larger null check: ``--null-studies`` (default 100,000) studies for the mean and the spread (normal runs).

Since issue 42 the default plan is O'Brien-Fleming-type with a skewness-widened Welch test (its false decisions on
skewed, unequal, diverged and tied runs: ``benchmarks/sequential_robustness.py``); the ``p*`` column shows the last
look's nominal level. The figures below were measured with the Pocock-type design before that change.

Measured 2026-11-26, 2-core VM, defaults (``--round 1 --max-runs 50 --studies 20000 --null-studies 100000``,
48 looks)::

    1. a true 'no difference' decided (rate +- Monte-Carlo s.e.)
    on      dist    looks       p* calib s        sequential    naive
    mean    normal     48  0.00605    0.97  0.0490 +- 0.0015   0.2878
    mean    t3         48  0.00605    0.97  0.0354 +- 0.0013   0.2546
    spread  normal     48  0.00614    1.42  0.0520 +- 0.0016   0.2728
    spread  t3         48  0.00614    1.42  0.0400 +- 0.0014   0.2534

    2. a true difference of d standard deviations: sequential design vs fixed n with the same power
       d  power seq runs/group fixed n/group seq / fixed  wrong sign
     0.5  0.521          37.98            34        1.12  0.0011
     1.0  0.991          17.25            39        0.44  0.0001
     2.0  1.000           6.79            19        0.36  0.0000

    3. larger null check: 100000 studies, normal runs
    mean    decided 0.0499 +- 0.0007 (alpha + 3 s.e. = 0.0521: ok), simultaneous coverage 0.9501, 1.7 s
    spread  decided 0.0515 +- 0.0007 (alpha + 3 s.e. = 0.0521: ok), simultaneous coverage 0.9485, 1.7 s

Naive re-testing decides a true "no difference" in 25-29% of the studies; the design in 4.9% (mean) and 5.2%
(spread) of normal ones, fewer under t(3) (heavy tails make both tests conservative). The spread's 5.15% over
100,000 studies is the calibration's own Monte-Carlo error (100,000 paths, s.e. 0.07 points): calibrated with
seed 1 the same looks give 5.03%, with 200,000 paths 5.09% (but 4 s instead of 1.4 s). Where a difference is
clear (d = 1, 2) the design stops after 0.36-0.44 of the runs a fixed design of the same power needs; where
the study is too short for the effect (d = 0.5: power 52% at 50 runs each) it uses 12% more than a fixed design
of that low power would: the price of 48 looks (Pocock's constant level spends alpha evenly over them). With
``--round 5`` (11 looks): 0.45x at d = 1 and 2, 1.04x at d = 0.5, null rates 5.1% (mean) and 5.2% (spread).
"""

from __future__ import annotations

import argparse
import math
import time

from deviate_cb.stats import naive_rate, plan_looks, plan_sequential, simulate_sequential


def fixed_n_for_power(power: float, effect: float, alpha: float, cap: int = 100_000) -> int:
    """The fewest runs per group for which the two-sided pooled t-test reaches ``power`` (normal runs)."""
    from scipy.stats import nct
    from scipy.stats import t as student

    def power_at(n: int) -> float:
        df, nc = 2 * n - 2, effect * math.sqrt(n / 2)
        crit = student.ppf(1 - alpha / 2, df)
        return float(nct.sf(crit, df, nc) + nct.cdf(-crit, df, nc))

    low, high = 1, 2
    while power_at(high) < power and high < cap:
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if power_at(mid) >= power else (mid, high)
    return high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--round", type=int, default=1, help="runs added per group and round")
    parser.add_argument("--max-runs", type=int, default=50, help="runs per group at the last look")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--studies", type=int, default=20_000, help="simulated studies per cell")
    parser.add_argument("--null-studies", type=int, default=100_000, help="studies of the larger null check")
    args = parser.parse_args()
    alpha = args.alpha

    plans = {}
    print(f"looks: plan_looks(3, 3, {args.round}, {args.max_runs}), alpha {alpha}")
    print("\n1. a true 'no difference' decided (rate +- Monte-Carlo s.e.)")
    print(f"{'on':7} {'dist':7} {'looks':>5} {'p*':>8} {'calib s':>7}  {'sequential':>16}  {'naive':>7}")
    for on in ("mean", "spread"):
        looks = plan_looks(3, 3, args.round, args.max_runs, on=on)
        start = time.perf_counter()
        plans[on] = plan = plan_sequential(looks, alpha=alpha, on=on)
        seconds = time.perf_counter() - start
        for dist in ("normal", "t3"):
            sim = simulate_sequential(plan, dist=dist, studies=args.studies, seed=101)
            naive = naive_rate(looks, alpha=alpha, on=on, dist=dist, studies=args.studies, seed=101)
            print(
                f"{on:7} {dist:7} {len(looks):5d} {plan.nominal:8.5f} {seconds:7.2f}  "
                f"{sim.decided:.4f} +- {sim.decided_se:.4f}  {naive:7.4f}"
            )

    print("\n2. a true difference of d standard deviations: sequential design vs fixed n with the same power")
    print(f"{'d':>4} {'power':>6} {'seq runs/group':>14} {'fixed n/group':>13} {'seq / fixed':>11}  wrong sign")
    for effect in (0.5, 1.0, 2.0):
        sim = simulate_sequential(plans["mean"], effect_sd=effect, studies=args.studies, seed=102)
        # a simulated power of 1 is "at least 1 - 1/studies": the fixed design is sized to that
        fixed = fixed_n_for_power(min(sim.a_better, 1.0 - 1.0 / args.studies), effect, alpha)
        print(
            f"{effect:4.1f} {sim.a_better:6.3f} {sim.mean_runs_a:14.2f} {fixed:13d} {sim.mean_runs_a / fixed:11.2f}  "
            f"{sim.b_better:.4f}"
        )

    print(f"\n3. larger null check: {args.null_studies} studies, normal runs")
    for on in ("mean", "spread"):
        start = time.perf_counter()
        sim = simulate_sequential(plans[on], studies=args.null_studies, seed=103)
        bound = alpha + 3 * math.sqrt(alpha * (1 - alpha) / args.null_studies)
        verdict = "ok" if sim.decided <= bound else "ABOVE"
        print(
            f"{on:7} decided {sim.decided:.4f} +- {sim.decided_se:.4f} (alpha + 3 s.e. = {bound:.4f}: {verdict}), "
            f"simultaneous coverage {sim.simultaneous_coverage:.4f}, {time.perf_counter() - start:.1f} s"
        )


if __name__ == "__main__":
    main()
