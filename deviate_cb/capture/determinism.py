"""Seeds and determinism switches: apply what was requested, and report what is verifiably in effect."""

from __future__ import annotations

import os
import random
import sys
from types import ModuleType
from typing import Any, Optional

from deviate_cb.capture.import_hooks import when_imported
from deviate_cb.capture.seed_takeover import deviate_seeding, expected_seed, last_seeding_call, seeding_record
from deviate_cb.capture.switch_takeover import determinism_calls_record, deviate_switching, last_determinism_call
from deviate_cb.context import Deterministic, parse_deterministic
from deviate_cb.fingerprint.switches import determinism_in_effect

__all__ = [
    "apply_determinism",
    "determinism_record",
    "seed_everything",
    "seed_set_before",
    "verify_determinism",
]

_CUBLAS_CONFIG = ":4096:8"
_SEED_SOURCES = ("PL_GLOBAL_SEED", "torch.initial_seed", "keras.utils.set_random_seed", "tf.random.set_seed")
_XLA_DETERMINISTIC = "--xla_gpu_deterministic_ops=true"


def seed_everything(seed: int, *, workers: bool = True) -> None:
    """Seed ``random``, NumPy and (now, or as soon as each is imported) torch, TensorFlow and Keras.

    With ``workers=True`` Lightning seeds each DataLoader worker from this seed (its
    ``seed_everything(seed, workers=True)`` semantics, through ``PL_GLOBAL_SEED``/``PL_SEED_WORKERS``).

    Example:
        >>> seed_everything(7); a = random.random(); seed_everything(7); a == random.random()
        True
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"`seed` must be an integer in [0, 2**32). Received: seed={seed!r}.")
    with deviate_seeding():
        random.seed(seed)
        try:
            import numpy as np

            np.random.seed(seed)
        except ImportError:  # pragma: no cover - numpy is a dependency
            pass
    os.environ["PL_GLOBAL_SEED"] = str(seed)
    os.environ["PL_SEED_WORKERS"] = "1" if workers else "0"
    when_imported("torch", lambda torch: _quietly(torch.manual_seed, seed))
    when_imported("tensorflow", lambda tf: _quietly(tf.random.set_seed, seed))
    when_imported("keras", lambda keras: _quietly(_seed_keras, seed))


def _quietly(seeding: Any, seed: int) -> None:
    """Call ``seeding(seed)`` as the library's own seeding: the takeover neither remaps nor records it."""
    with deviate_seeding():
        seeding(seed)


def _seed_keras(seed: int) -> None:
    """Keras' global seed, as ``keras.utils.set_random_seed`` sets it, without importing TensorFlow."""
    try:
        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator
    except ImportError:  # Keras 2 or a layout this version does not know: Python/NumPy seeds still hold
        return
    global_state.set_global_attribute("global_random_seed", seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)


def apply_determinism(deterministic: Optional[Deterministic]) -> None:
    """Turn deterministic tooling on (``True``), on with warnings only (``"warn"``), or leave it alone.

    ``False`` and ``None`` leave the framework defaults in place (nothing is switched off that the user
    switched on). Switches are applied now to frameworks already imported, otherwise when they are.
    TensorFlow has no warn-only mode, so ``"warn"`` leaves TensorFlow's op determinism off.
    """
    deterministic = parse_deterministic(deterministic)
    if not deterministic:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", _CUBLAS_CONFIG)
    xla_flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_deterministic_ops" not in xla_flags:
        os.environ["XLA_FLAGS"] = f"{xla_flags} {_XLA_DETERMINISTIC}".strip()
    warn_only = deterministic == "warn"

    def _torch_switches(torch: ModuleType) -> None:
        with deviate_switching():  # the library's own switches: the determinism takeover lets them pass
            torch.use_deterministic_algorithms(True, warn_only=warn_only)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False

    def _tf_switch(tf: ModuleType) -> None:
        with deviate_switching():
            tf.config.experimental.enable_op_determinism()

    when_imported("torch", _torch_switches)
    if not warn_only:
        when_imported("tensorflow", _tf_switch)


def verify_determinism(
    seed: Optional[int], deterministic: Optional[Deterministic], in_effect: dict[str, Any]
) -> list[str]:
    """Compare a request with :func:`determinism_in_effect`; return the problems found (empty: verified).

    Example:
        >>> verify_determinism(None, None, determinism_in_effect())
        []
    """
    problems: list[str] = []
    env = in_effect.get("env", {})
    torch_state = in_effect.get("torch")
    if seed is not None:
        hash_seed = env.get("DEVIATE_HASH_SEED") or str(seed)  # deviate-replicate: the study's base seed
        if env.get("PYTHONHASHSEED") != hash_seed:
            problems.append(
                f"PYTHONHASHSEED is {env.get('PYTHONHASHSEED')!r}, not {hash_seed!r}: str/bytes hashing (set "
                "iteration order) is not seeded; it only takes effect when set before Python starts"
            )
        if torch_state is not None:
            problem = _seed_problem("torch.initial_seed()", torch_state["initial_seed"], seed, "torch")
            problems += [problem] if problem else []
    if deterministic and torch_state is not None:
        warn_only = deterministic == "warn"
        if not torch_state["deterministic_algorithms"]:
            problems.append("torch.are_deterministic_algorithms_enabled() is False")
        elif torch_state["deterministic_warn_only"] != warn_only:
            problems.append(f"torch deterministic warn_only is {torch_state['deterministic_warn_only']}")
        if not torch_state["cudnn_deterministic"]:
            problems.append("torch.backends.cudnn.deterministic is False")
        if torch_state["cudnn_benchmark"]:
            problems.append("torch.backends.cudnn.benchmark is True")
        if env.get("CUBLAS_WORKSPACE_CONFIG") not in (":4096:8", ":16:8"):
            problems.append(f"CUBLAS_WORKSPACE_CONFIG is {env.get('CUBLAS_WORKSPACE_CONFIG')!r}")
    tf_state = in_effect.get("tensorflow")
    if deterministic is True and tf_state is not None and tf_state["op_determinism"] is False:
        problems.append("tf.config.experimental.is_op_determinism_enabled() is False")
    if deterministic and "jax" in in_effect and not in_effect["jax"]["xla_deterministic_ops"]:
        problems.append("XLA_FLAGS lacks --xla_gpu_deterministic_ops=true (it must be set before JAX starts)")
    keras_state = in_effect.get("keras")
    if seed is not None and keras_state is not None:
        problem = _seed_problem("Keras' global random seed", keras_state["global_random_seed"], seed, "keras")
        problems += [problem] if problem else []
    if deterministic is False:
        problems += _on_although_off(in_effect)
    return [_with_project_call(text) for text in problems]


def _on_although_off(in_effect: dict[str, Any]) -> list[str]:
    """Determinism switches on in a replica whose variant requested determinism off (``impl``, ``algo+impl``)."""
    found = []
    torch_state = in_effect.get("torch")
    if torch_state is not None and torch_state["deterministic_algorithms"]:
        found.append("deterministic tooling was requested off, but torch deterministic algorithms are on")
    if torch_state is not None and torch_state["cudnn_deterministic"]:
        found.append("deterministic tooling was requested off, but torch.backends.cudnn.deterministic is True")
    tf_state = in_effect.get("tensorflow")
    if tf_state is not None and tf_state["op_determinism"]:
        found.append("deterministic tooling was requested off, but TensorFlow's op determinism is on")
    env = in_effect.get("env", {})
    if tf_state is not None:
        for name in ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC"):
            if str(env.get(name) or "").strip().lower() in ("1", "true"):
                found.append(f"deterministic tooling was requested off, but {name} is {env.get(name)!r}")
    if "jax" in in_effect and in_effect["jax"]["xla_deterministic_ops"]:
        found.append("deterministic tooling was requested off, but XLA_FLAGS has --xla_gpu_deterministic_ops=true")
    return found


_SWITCH_KINDS = (
    ("cudnn.deterministic", "cudnn.deterministic"),
    ("cudnn.benchmark", "cudnn.benchmark"),
    ("tensorflow", "tensorflow"),
    ("tf_", "tensorflow"),
    ("tf.", "tensorflow"),
    ("xla", "jax"),
)


def _with_project_call(text: str) -> str:
    """``text``, naming the project's own call kept by ``--keep-project-determinism`` where one set the switch."""
    record = determinism_calls_record()
    if record is None or record["take_over"] or "seed" in text.lower():
        return text
    lowered = text.lower()
    kind = next((k for key, k in _SWITCH_KINDS if key in lowered), "torch")
    call = last_determinism_call(kind)
    if call is None:
        return text
    asked = f"({call['asked']!r})" if call["call"] == "torch.use_deterministic_algorithms" else ""
    return f"{text}: the project switched it itself ({call['call']}{asked}) and --keep-project-determinism kept it"


def _seed_problem(what: str, actual: Any, seed: int, kind: str) -> Optional[str]:
    """Whether ``actual`` is the seed expected for ``kind``: the one the seeding takeover applied, or ``seed``.

    Under ``--keep-project-seeds`` (takeover installed, ``take_over=False``) a project's own seed in effect is
    still a problem, and the message names the project's call.
    """
    takeover = seeding_record()
    taken_over = expected_seed(kind) if takeover is not None and takeover["take_over"] else None
    expected = seed if taken_over is None else taken_over
    if actual == expected:
        return None
    message = f"{what} is {actual!r}, not {expected}"
    call = last_seeding_call(kind)
    if takeover is not None and not takeover["take_over"] and call is not None and call["applied"] == actual:
        message += (
            f": the project seeded itself ({call['call']}({call['asked']!r})) and --keep-project-seeds kept its seed"
        )
    return message


def determinism_record(seed: Optional[int], deterministic: Optional[Deterministic]) -> dict[str, Any]:
    """The manifest's ``determinism`` section: what was requested, what is in effect now, what disagrees.

    Example:
        >>> record = determinism_record(None, None)
        >>> record["verified"], record["requested"]
        (True, {'seed': None, 'deterministic': None})
    """
    in_effect = determinism_in_effect()
    problems = verify_determinism(seed, deterministic, in_effect)
    return {
        "requested": {"seed": seed, "deterministic": deterministic},
        "in_effect": in_effect,
        "problems": problems,
        "verified": not problems,
    }


def seed_set_before(*, prefer: str = "torch") -> dict[str, Any]:
    """The seed the process was seeded with before a standalone callback was given none, where it can be read back.

    Read back, never guessed: Keras' global seed (set only by ``keras.utils.set_random_seed``), TensorFlow's global
    seed (``tf.random.set_seed``), and ``torch.initial_seed()`` below ``2**32``. Torch starts from a random 64-bit
    seed of its own (an older torch from a fixed one above ``2**32``), which falls below ``2**32`` by chance once in
    about four billion processes; a seed of ``2**32`` or more asked of ``torch.manual_seed`` is not recorded either.
    Torch's seed is credited to Lightning's ``seed_everything`` when ``PL_GLOBAL_SEED`` (which it sets) agrees with
    it; ``PL_GLOBAL_SEED`` alone (inherited, or torch seeded since with another seed) is not trusted. ``random`` and
    NumPy seeds cannot be read back. Nothing is imported: a framework not imported yet was not seeded.

    Args:
        prefer: ``"torch"`` (Lightning) or ``"keras"``: whose seed wins where several were set and disagree.

    Returns:
        ``{"seed", "source", "note"}``: the seed (``None``: none found), where it was read (one of
        ``PL_GLOBAL_SEED``, ``torch.initial_seed``, ``keras.utils.set_random_seed``, ``tf.random.set_seed``), and a
        note on what else was seen (``None`` when there is nothing to say).

    Example:
        >>> sorted(seed_set_before())
        ['note', 'seed', 'source']
    """
    env = os.environ.get("PL_GLOBAL_SEED")
    found: dict[str, int] = {}
    torch = sys.modules.get("torch")
    torch_seed = _read_seed(lambda: torch.initial_seed()) if torch is not None else None
    if torch_seed is not None and torch_seed < 2**32:
        found["PL_GLOBAL_SEED" if env is not None and env.strip() == str(torch_seed) else "torch.initial_seed"] = (
            torch_seed
        )
    if "keras" in sys.modules:
        keras_seed = _read_seed(_keras_seed)
        if keras_seed is not None:
            found["keras.utils.set_random_seed"] = keras_seed
    if "tensorflow" in sys.modules:
        tf_seed = _read_seed(_tf_seed)
        if tf_seed is not None:
            found["tf.random.set_seed"] = tf_seed
    order = [s for s in _SEED_SOURCES if s.startswith("keras")] if prefer == "keras" else []
    order += [s for s in _SEED_SOURCES if s not in order]
    sources = [s for s in order if s in found]
    notes: list[str] = []
    if sources:
        source = sources[0]
        seed: Optional[int] = found[source]
        others = [f"{s} gives {found[s]}" for s in sources[1:] if found[s] != seed]
        if others:
            notes.append(f"seeds disagree ({'; '.join(others)}): {source}'s is recorded")
    else:
        source, seed = None, None
        if env is not None:
            notes.append(
                f"PL_GLOBAL_SEED is {env!r} but torch was not seeded with it (inherited, or torch seeded since): "
                "not recorded"
            )
        if torch_seed is not None and torch_seed >= 2**32:
            notes.append(
                "torch.initial_seed() is not below 2**32: torch's own random seed (or a seed of 2**32 or more), "
                "not recorded"
            )
        notes.append("no seed was given to the callback and none could be read back (random and NumPy seeds cannot be)")
    return {"seed": seed, "source": source, "note": "; ".join(notes) or None}


def _read_seed(read: Any) -> Optional[int]:
    try:
        value = read()
    except Exception:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _keras_seed() -> Any:
    from keras.src.backend.common import global_state

    return global_state.get_global_attribute("global_random_seed")


def _tf_seed() -> Any:
    from tensorflow.python.eager import context

    return context.global_seed()
