"""The seeding takeover: a project's own global seeding calls get seeds derived from the replica's seed.

Installing the takeover patches global functions, so every check that installs it runs in a fresh subprocess
(a "replica" with seed ``s``) that prints its observations as JSON; the scripts run once per module, two at a
time, and each test reads what it needs. ``derive_seed`` itself is pure and is tested in this process.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from deviate_cb.capture.seed_takeover import derive_seed

M32 = 2**32 - 1


# -- derive_seed against a straightforward reference ------------------------------------------------------------


def reference_fmix32(h: int) -> int:
    h ^= h >> 16
    h = h * 0x85EBCA6B % 2**32
    h ^= h >> 13
    h = h * 0xC2B2AE35 % 2**32
    h ^= h >> 16
    return h


def reference_unfmix32(h: int) -> int:
    """The inverse of the finalizer: it exists, so the finalizer (and derive_seed) is a bijection."""
    h ^= h >> 16
    h = h * pow(0xC2B2AE35, -1, 2**32) % 2**32
    h ^= (h >> 13) ^ (h >> 26)
    h = h * pow(0x85EBCA6B, -1, 2**32) % 2**32
    h ^= h >> 16
    return h


def reference_derive(s: int, asked: int) -> int:
    if asked < 0:
        asked %= 2**64
    low = asked % 2**32
    return asked - low + (s + reference_fmix32((low - s) % 2**32)) % 2**32


def test_derive_seed_matches_the_reference_and_inverts() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        s, asked = rng.randrange(2**32), rng.randrange(2**32)
        applied = derive_seed(s, asked)
        assert applied == reference_derive(s, asked)
        assert 0 <= applied <= M32
        assert (s + reference_unfmix32((applied - s) % 2**32)) % 2**32 == asked
    assert reference_fmix32(0) == 0
    assert all(reference_unfmix32(reference_fmix32(x)) == x for x in (0, 1, 42, M32, 2**31))


def test_derive_seed_keeps_distinct_seeds_distinct() -> None:
    for s in (0, 1, 12345, M32):
        assert len({derive_seed(s, asked) for asked in range(20_000)}) == 20_000


def test_derive_seed_passes_the_replica_seed_through_and_differs_across_replicas() -> None:
    assert all(derive_seed(s, s) == s for s in (0, 1, 7, 2**31, M32, *random.Random(1).sample(range(2**32), 200)))
    assert derive_seed(3, 42) == derive_seed(3, 42)
    assert len({derive_seed(s, 42) for s in range(2000)}) == 2000
    assert len({derive_seed(s, 0) for s in range(2000)}) == 2000


def test_derive_seed_wide_and_negative_seeds() -> None:
    wide = 5 * 2**32 + 42
    assert derive_seed(3, wide) >> 32 == 5
    assert derive_seed(3, wide) & M32 == derive_seed(3, 42)
    assert derive_seed(3, -1) == derive_seed(3, 2**64 - 1) == reference_derive(3, -1)
    assert derive_seed(3, -1) >= 2**32  # still out of range for numpy, as -1 was
    with pytest.raises(ValueError, match="replica_seed"):
        derive_seed(2**32, 1)
    with pytest.raises(TypeError):
        derive_seed(1, "42")  # type: ignore[arg-type]


# -- replicas in subprocesses -------------------------------------------------------------------------------------

PRELUDE = """
import json, os, random, sys
from deviate_cb.capture.seed_takeover import (
    deviate_seeding, expected_seed, install_seed_takeover, last_seeding_call, seeding_record,
)
from deviate_cb.capture.determinism import determinism_record

seed, take_over = int(sys.argv[1]), sys.argv[2] == "1"
if not take_over:  # also covers a takeover installed after the frameworks were imported (re-exports rebound,
    import lightning, pytorch_lightning, lightning.pytorch.cli  # also those in modules like LightningCLI's)
notes = []
install_seed_takeover(seed, take_over=take_over, on_record=lambda record: notes.append(len(record["calls"])))
out = {}
MARK = "__deviate_seed_takeover__"
KINDS = ("python", "numpy", "torch", "keras", "tensorflow")
"""

LIGHTNING = """
import numpy as np
import torch
import lightning as L
import lightning_fabric
import pytorch_lightning
import lightning.pytorch.cli
from lightning.fabric.utilities.seed import reset_seed

def draws():
    return [torch.rand(1).item(), float(np.random.rand()), random.random()]

wrapped = (L.seed_everything, L.pytorch.seed_everything, L.fabric.seed_everything, pytorch_lightning.seed_everything,
           lightning_fabric.seed_everything, torch.manual_seed, torch.random.manual_seed, torch.cuda.manual_seed,
           torch.cuda.manual_seed_all, torch.cuda.random.manual_seed_all, np.random.seed, random.seed,
           lightning.pytorch.cli.seed_everything)
out["marked"] = [getattr(f, MARK, False) for f in wrapped]
out["returned"] = L.seed_everything(42)
out["draws42"] = draws()
out["initial_seed"] = torch.initial_seed()
out["record42"] = seeding_record()
out["problems42"] = determinism_record(seed, None)["problems"]
reset_seed()
out["reset_draws"] = draws()
out["expected"] = {kind: expected_seed(kind) for kind in KINDS}
out["last_torch"] = last_seeding_call("torch")
out["record_after_reset"] = seeding_record()
with deviate_seeding():
    L.seed_everything(42)
out["plain42"] = draws()

L.seed_everything(seed)
out["own_seed"] = draws()
with deviate_seeding():
    random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)
out["plain_own_seed"] = draws()
random.seed(None); np.random.seed(None)
out["entropy"] = draws()[1:]
with deviate_seeding():
    random.seed(seed); np.random.seed(seed)
out["plain_entropy"] = draws()[1:]

torch.manual_seed(7)
out["manual7"] = torch.initial_seed()
torch.cuda.manual_seed_all(5)
random.seed("hello")
np.random.seed([1, 2, 3])
random.seed(2.5)
out["float_draw"] = random.random()
with deviate_seeding():
    random.seed(2.5)
out["plain_float_draw"] = random.random()
out["generators"] = [torch.rand(1, generator=torch.Generator().manual_seed(42)).item(),
                     float(np.random.default_rng(42).random()), random.Random(42).random(),
                     float(np.random.RandomState(42).rand())]

class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 2
    def __getitem__(self, index):
        info = torch.utils.data.get_worker_info()
        return {"worker": info.id, "torch": torch.initial_seed(), "numpy": float(np.random.rand())}

loader = torch.utils.data.DataLoader(Items(), batch_size=1, num_workers=2, collate_fn=lambda batch: batch[0],
                                     worker_init_fn=lambda worker_id: np.random.seed(worker_id),
                                     multiprocessing_context="fork")
items = list(loader)
first = {}
for item in items:
    first.setdefault(item["worker"], item)
out["workers"] = [first[worker_id] for worker_id in sorted(first)]
out["worker_plain_numpy"] = []
for worker_id in (0, 1):
    with deviate_seeding():
        np.random.seed(worker_id)
    out["worker_plain_numpy"].append(float(np.random.rand()))
out["calls_before_cap"] = len(seeding_record()["calls"])
out["notes_before_cap"] = len(notes)
for value in range(60):
    random.seed(1000 + value)
random.seed(1000)
out["record"] = seeding_record()
out["notes"] = notes
install_seed_takeover(seed + 1)
out["reinstalled"] = [seeding_record()["replica_seed"], getattr(random.seed.__wrapped__, MARK, False)]
"""

KERAS = """
import numpy as np
on_torch = os.environ["KERAS_BACKEND"] == "torch"
if on_torch:
    sys.modules["tensorflow"] = None  # Keras would import TensorFlow (seconds) only to seed it
import keras
from keras.src.backend.common import global_state

keras.utils.set_random_seed(42)
out["keras_seed"] = global_state.get_global_attribute("global_random_seed")
out["draws"] = [float(keras.ops.convert_to_numpy(keras.random.uniform((1,)))[0]), float(np.random.rand()),
                random.random()]
if on_torch:
    import torch
    out["torch_seed"] = torch.initial_seed()
out["problems"] = determinism_record(seed, None)["problems"]
out["record_keras"] = seeding_record()
out["marked"] = [getattr(keras.utils.set_random_seed, MARK, False)]
if not on_torch:
    import tensorflow as tf
    out["marked"] += [getattr(f, MARK, False) for f in (tf.random.set_seed, tf.compat.v1.set_random_seed)]
    tf.random.set_seed(42)
    out["tf_draw"] = float(tf.random.uniform([1])[0])
    tf.compat.v1.set_random_seed(43)
    tf.random.set_seed(None)
out["expected"] = {kind: expected_seed(kind) for kind in KINDS}
out["record"] = seeding_record()
"""

SCRIPTS = {
    "lightning0": (LIGHTNING, 0, True, None),
    "lightning0again": (LIGHTNING, 0, True, None),
    "lightning1": (LIGHTNING, 1, True, None),
    "kept3": (LIGHTNING, 3, False, None),
    "keras_tf0": (KERAS, 0, True, "tensorflow"),
    "keras_tf1": (KERAS, 1, True, "tensorflow"),
    "keras_torch0": (KERAS, 0, True, "torch"),
    "keras_torch1": (KERAS, 1, True, "torch"),
}


def run_replica(script: str, seed: int, take_over: bool, keras_backend: str | None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
    if keras_backend is not None:
        env["KERAS_BACKEND"] = keras_backend
    code = PRELUDE + script + '\nprint("RESULT " + json.dumps(out))\n'
    proc = subprocess.run(
        [sys.executable, "-c", code, str(seed), "1" if take_over else "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"replica failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run_replica, *spec) for name, spec in SCRIPTS.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.slow
def test_every_seeding_function_and_reexport_is_wrapped(runs: dict[str, dict[str, Any]]) -> None:
    assert all(runs["lightning0"]["marked"]) and all(runs["kept3"]["marked"])
    assert runs["keras_tf0"]["marked"] == [True] * 3 and runs["keras_torch0"]["marked"] == [True]


def test_lightning_seed_everything_42_differs_across_replicas_and_repeats_within_one(
    runs: dict[str, dict[str, Any]],
) -> None:
    zero, again, one = runs["lightning0"], runs["lightning0again"], runs["lightning1"]
    assert zero["draws42"] == again["draws42"]
    assert all(a != b for a, b in zip(zero["draws42"], one["draws42"], strict=True))
    assert zero["draws42"] != zero["plain42"]
    assert zero["returned"] == zero["initial_seed"] == derive_seed(0, 42)
    assert one["returned"] == derive_seed(1, 42)
    assert zero["record"] == again["record"]


def test_inner_calls_are_not_mapped_twice(runs: dict[str, dict[str, Any]]) -> None:
    zero = runs["lightning0"]
    applied = derive_seed(0, 42)
    assert zero["record42"] == {
        "take_over": True,
        "replica_seed": 0,
        "calls": [{"call": "lightning.seed_everything", "asked": 42, "applied": applied, "count": 1}],
        "more": 0,
    }
    expected = {"python": applied, "numpy": applied, "torch": applied, "keras": None, "tensorflow": None}
    assert zero["expected"] == expected
    assert zero["problems42"] == []


def test_reset_seed_reproduces_the_taken_over_state(runs: dict[str, dict[str, Any]]) -> None:
    zero = runs["lightning0"]
    assert zero["reset_draws"] == zero["draws42"]
    assert zero["record_after_reset"] == zero["record42"]  # the re-application is not a new call
    assert zero["last_torch"] == {"call": "lightning.seed_everything", "asked": 42, "applied": derive_seed(0, 42)}


def test_the_replica_seed_and_entropy_map_to_plain_seeding_by_the_replica_seed(runs: dict[str, dict[str, Any]]) -> None:
    for name in ("lightning0", "lightning1"):
        assert runs[name]["own_seed"] == runs[name]["plain_own_seed"]
        assert runs[name]["entropy"] == runs[name]["plain_entropy"]


def test_other_calls_are_recorded_with_their_mapping(runs: dict[str, dict[str, Any]]) -> None:
    zero = runs["lightning0"]
    calls = {(call["call"], json.dumps(call["asked"])): call for call in zero["record"]["calls"]}
    assert zero["manual7"] == calls[("torch.manual_seed", "7")]["applied"] == derive_seed(0, 7)
    assert calls[("torch.cuda.manual_seed_all", "5")]["applied"] == derive_seed(0, 5)
    assert calls[("random.seed", "null")]["applied"] == 0
    assert calls[("numpy.random.seed", "null")]["applied"] == 0
    assert calls[("numpy.random.seed", "[1, 2, 3]")]["applied"] == [derive_seed(0, v) for v in (1, 2, 3)]
    assert isinstance(calls[("random.seed", '"hello"')]["applied"], int)
    assert calls[("random.seed", "2.5")]["applied"] == 2.5
    assert zero["float_draw"] == zero["plain_float_draw"]
    assert calls[("random.seed", "1000")]["count"] == 2


def test_explicit_generators_are_untouched(runs: dict[str, dict[str, Any]]) -> None:
    assert runs["lightning0"]["generators"] == runs["lightning1"]["generators"] == runs["kept3"]["generators"]


def test_dataloader_workers_keep_their_own_seeds(runs: dict[str, dict[str, Any]]) -> None:
    for name in ("lightning0", "lightning1"):
        first, second = runs[name]["workers"]
        assert (first["worker"], second["worker"]) == (0, 1)
        assert second["torch"] - first["torch"] == 1  # torch's base_seed + worker_id, passed through
        assert [first["numpy"], second["numpy"]] == runs[name]["worker_plain_numpy"]
    asked = [call["asked"] for call in runs["lightning0"]["record"]["calls"] if call["call"] == "numpy.random.seed"]
    assert 0 not in asked and 1 not in asked  # workers never record


def test_the_record_is_capped_and_on_record_follows_new_entries(runs: dict[str, dict[str, Any]]) -> None:
    zero = runs["lightning0"]
    record = zero["record"]
    assert len(record["calls"]) == 50
    assert record["more"] == 60 - (50 - zero["calls_before_cap"])
    assert zero["notes_before_cap"] == zero["calls_before_cap"]
    assert zero["notes"] == [*range(1, 51), 50]  # one write per new entry, one when the cap is first passed
    json.dumps(record)
    assert zero["reinstalled"] == [0, False]


def test_keep_project_seeds_records_without_changing(runs: dict[str, dict[str, Any]]) -> None:
    kept = runs["kept3"]
    assert kept["draws42"] == kept["plain42"] == runs["lightning0"]["plain42"]
    assert kept["record42"]["take_over"] is False
    assert kept["record42"]["calls"] == [{"call": "lightning.seed_everything", "asked": 42, "applied": 42, "count": 1}]
    assert kept["expected"]["torch"] == 42
    torch_problems = [p for p in kept["problems42"] if p.startswith("torch.initial_seed()")]
    assert torch_problems == [
        "torch.initial_seed() is 42, not 3: the project seeded itself (lightning.seed_everything(42)) and "
        "--keep-project-seeds kept its seed"
    ]
    assert kept["reset_draws"] == kept["draws42"]


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_keras_set_random_seed_is_taken_over(runs: dict[str, dict[str, Any]], backend: str) -> None:
    zero, one = runs[f"keras_{backend}0"], runs[f"keras_{backend}1"]
    for run, s in ((zero, 0), (one, 1)):
        applied = derive_seed(s, 42)
        assert run["keras_seed"] == applied
        assert run["record_keras"]["calls"] == [
            {"call": "keras.utils.set_random_seed", "asked": 42, "applied": applied, "count": 1}
        ]
        assert run["problems"] == []
        assert run["expected"]["keras"] == run["expected"]["python"] == run["expected"]["numpy"] == applied
        if backend == "torch":  # TensorFlow hidden: Keras seeds torch and no TensorFlow
            assert run["torch_seed"] == run["expected"]["torch"] == applied
            assert run["expected"]["tensorflow"] is None
            assert run["record"] == run["record_keras"]
        else:
            assert run["expected"]["torch"] is None
            assert run["expected"]["tensorflow"] == derive_seed(s, 43)  # tf.compat.v1.set_random_seed(43) came last
    assert all(a != b for a, b in zip(zero["draws"], one["draws"], strict=True))


def test_tensorflow_seeding_is_taken_over(runs: dict[str, dict[str, Any]]) -> None:
    zero, one = runs["keras_tf0"], runs["keras_tf1"]
    for run, s in ((zero, 0), (one, 1)):
        calls = [(call["call"], call["asked"], call["applied"]) for call in run["record"]["calls"][1:]]
        assert calls == [
            ("tf.random.set_seed", 42, derive_seed(s, 42)),
            ("tf.compat.v1.set_random_seed", 43, derive_seed(s, 43)),
            ("tf.random.set_seed", None, None),
        ]
    assert zero["tf_draw"] != one["tf_draw"]


FAILING_RECORDER = """
import json, os, random, sys
import numpy as np
from deviate_cb.capture.seed_takeover import install_seed_takeover, seeding_record

def broken(record):
    raise RuntimeError("disk full")

install_seed_takeover(5, on_record=broken)
random.seed(1)
random.seed(2)
out = {"names": [random.seed.__name__, np.random.seed.__name__]}
try:
    np.random.seed(-1)
except ValueError as error:
    out["numpy_error"] = str(error)
pid = os.fork()
if pid == 0:
    random.seed(99)
    os._exit(0 if len(seeding_record()["calls"]) == 2 else 1)
out["child_exit"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
out["record"] = seeding_record()
print(json.dumps(out))
"""


def test_a_failing_recorder_warns_once_forked_children_never_record_and_errors_stay_the_originals() -> None:
    proc = subprocess.run([sys.executable, "-c", FAILING_RECORDER], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert proc.stderr.count("could not record the project's seeding calls") == 1
    assert "disk full" in proc.stderr
    assert out["names"] == ["seed", "seed"]
    assert out["numpy_error"].startswith("Seed must be between 0 and 2**32 - 1")
    assert out["child_exit"] == 0
    assert [(call["asked"], call["applied"]) for call in out["record"]["calls"]] == [
        (1, derive_seed(5, 1)),
        (2, derive_seed(5, 2)),
    ]
