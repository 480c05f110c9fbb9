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
