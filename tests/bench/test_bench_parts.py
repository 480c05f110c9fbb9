"""The built-in models, the ratio CI and the Keras-on-TensorFlow runner (alternating fresh processes)."""

from __future__ import annotations

import pytest

from deviate_cb.bench import run_bench
from deviate_cb.bench.models import TORCH_MODELS, build_torch_model
from deviate_cb.bench.stats import median_ratio_ci, op_differences
from deviate_cb.profiling.ops import canonical_op

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", sorted(TORCH_MODELS))
def test_builtin_models_map_cifar_batches_to_ten_logits(name: str) -> None:
    model = build_torch_model(name)
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    if name.startswith("medium_cnn_k"):
        kernel = int(name[-1])
        convs = [m for m in model if isinstance(m, torch.nn.Conv2d)]
        linears = [m for m in model if isinstance(m, torch.nn.Linear)]
        assert len(convs) + len(linears) == 6 and {c.kernel_size for c in convs} == {(kernel, kernel)}
    if name == "resnet18":
        assert 11.0e6 < sum(p.numel() for p in model.parameters()) < 11.3e6  # ResNet-18 (CIFAR): 11.17M


def test_ratio_ci_reaches_the_level_or_says_which_it_reaches() -> None:
    ci = median_ratio_ci([1.0 + i / 100 for i in range(20)])
    assert ci.level >= 0.95 and ci.low < ci.median < ci.high and ci.n == 20
    small = median_ratio_ci([1.1, 1.3, 0.9])
    assert (small.low, small.high) == (0.9, 1.3) and small.level == pytest.approx(0.75)
    with pytest.raises(ValueError, match=r"^`ratios` must hold at least one ratio"):
        median_ratio_ci([])


@pytest.mark.parametrize("n", [8, 25, 40])
def test_the_ratio_ci_covers_the_true_median_at_least_at_the_level_it_reports(n: int) -> None:
    """Simulated pairs of fits, ratios skewed as timings are (lognormal around a true median of 1.02): the
    order-statistic interval holds the true median in at least the share of samples it says it does (the level
    it reaches, 95% or more with 25 and 40 pairs; with 8 pairs the widest interval, 99%)."""
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(n)
    true_median, trials = 1.02, 1500
    samples = true_median * np.exp(rng.normal(0.0, 0.01, size=(trials, n)))
    cis = [median_ratio_ci(list(sample)) for sample in samples]
    covered = sum(ci.low <= true_median <= ci.high for ci in cis) / trials
    level = cis[0].level
    assert all(ci.level == level for ci in cis) and level >= 0.95
    assert covered >= level - 3 * (level * (1 - level) / trials) ** 0.5, (covered, level)


def test_the_goal_verdict_says_meets_or_misses_only_when_the_whole_interval_does() -> None:
    """The benchmark's first line for the worst case: an answer, from the same interval it prints."""
    from benchmarks.hook_timing import goal_verdict

    below = [1.000 + i / 1000 for i in range(25)]  # 1.000 .. 1.024: median 1.012
    assert goal_verdict([r - 0.010 for r in below], 1.02).startswith("meets the goal of <= 1.02x: median 1.002x")
    assert goal_verdict([r + 0.015 for r in below], 1.02).startswith("misses the goal of <= 1.02x: median 1.027x")
    assert goal_verdict(below, 1.02).endswith("96% CI [1.007, 1.017] (order statistics, 25 pairs)")
    middle = goal_verdict([r + 0.008 for r in below], 1.02)
    assert middle.startswith("cannot tell at this noise whether it meets the goal") and "[1.015, 1.025]" in middle
    assert goal_verdict([1.0, 1.01, 1.005], 1.02).startswith("too few pairs to tell")  # 75% at most


def test_op_differences_are_signed_shares_of_the_total_change() -> None:
    off = [
        {"op": "a", "device_type": "cpu", "self_us_per_step": 10.0},
        {"op": "b", "device_type": "cpu", "self_us_per_step": 5.0},
    ]
    on = [
        {"op": "a", "device_type": "cpu", "self_us_per_step": 40.0},
        {"op": "b", "device_type": "cpu", "self_us_per_step": 5.0},
    ]
    (first, second) = op_differences(off, on)
    assert (first["op"], first["delta_us"], first["share"]) == ("a", 30.0, 1.0) and second["delta_us"] == 0.0


@pytest.mark.slow
def test_keras_small_cnn_runs_in_alternating_tensorflow_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the workers run on CPU, whatever this machine has
    (result,) = run_bench(["keras_small_cnn"], windows=1, steps_per_window=2, warmup=1, batch_size=8, profile_steps=1)
    assert result.framework == "keras-tensorflow" and result.device == "cpu" and result.settings["processes"] == 2
    assert [w["mode"] for w in result.windows] == ["off", "on"] and result.ci.n == 1
    # TensorFlow's kernel names depend on the CPU (oneDNN: _MklNativeConv2DBackpropFilterWithBias, _MklMatMul):
    # the ops are compared under their portable names, as `deviate bench` compares them
    ops = {(o["mode"], canonical_op(o["op"], "tensorflow")) for o in result.ops}
    for mode in ("off", "on"):
        assert {(mode, "Conv2D"), (mode, "Conv2DBackpropFilter"), (mode, "MatMul")} <= ops, sorted(ops)
    differences = result.op_differences(n=len(result.ops))
    assert {"Conv2DBackpropFilter", "MatMul"} <= {d["op"] for d in differences}
    assert all(d["raw_ops"] and d["op"] == canonical_op(d["raw_ops"][0], "tensorflow") for d in differences)
