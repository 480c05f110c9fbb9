"""The seeding takeover: a project that seeds itself with a fixed seed still gets the replica's seed."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import operator
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Optional

from deviate_cb.capture.call_log import CallLog
from deviate_cb.capture.import_hooks import when_imported

__all__ = [
    "derive_seed",
    "deviate_seeding",
    "expected_seed",
    "install_seed_takeover",
    "last_seeding_call",
    "seeding_record",
    "take_over_seed",
]

_MASK32 = 0xFFFF_FFFF
_MARK = "__deviate_seed_takeover__"
_TF = ("tensorflow",)
_KERAS = ("python", "numpy", "keras")  # and TensorFlow when installed, torch on the torch backend (_keras_kinds)


def _fmix32(value: int) -> int:
    """MurmurHash3's 32-bit finalizer: a bijection of ``[0, 2**32)`` that keeps 0 at 0."""
    value ^= value >> 16
    value = (value * 0x85EBCA6B) & _MASK32
    value ^= value >> 13
    value = (value * 0xC2B2AE35) & _MASK32
    return value ^ (value >> 16)


def derive_seed(replica_seed: int, asked: int) -> int:
    """The seed applied when a project asks for ``asked`` in the replica seeded with ``replica_seed``.

    ``applied = s + mix(asked - s)``, all modulo ``2**32``, where ``s`` is the replica seed and ``mix`` is
    MurmurHash3's 32-bit finalizer (a fixed scrambling of 32-bit numbers that keeps 0 at 0 and never sends two
    numbers to one). So distinct asked values stay distinct, asking for ``s`` gives ``s``, and each replica seed
    gives its own mapping. Of a seed of 64 bits or more (torch takes them), the bits above the low 32 are kept and
    the low 32 mapped; a negative seed is first taken modulo ``2**64``, as torch does.

    Args:
        replica_seed: The replica's seed, in ``[0, 2**32)``.
        asked: The seed the project asked for (any integer).

    Returns:
        The seed to apply instead.

    Raises:
        TypeError: ``asked`` or ``replica_seed`` is not an integer.
        ValueError: ``replica_seed`` is outside ``[0, 2**32)``.

    Example:
        >>> derive_seed(7, 7), derive_seed(0, 0)
        (7, 0)
        >>> derive_seed(0, 42) != derive_seed(1, 42), derive_seed(3, 42) == derive_seed(3, 42)
        (True, True)
        >>> derive_seed(5, 2**40 + 42) >> 32 == 2**8
        True
    """
    seed = operator.index(replica_seed)
    if not 0 <= seed <= _MASK32:
        raise ValueError(f"`replica_seed` must be in [0, 2**32). Received: replica_seed={replica_seed!r}.")
    value = operator.index(asked)
    if value < 0:
        value %= 2**64
    low = value & _MASK32
    return value - low + ((seed + _fmix32((low - seed) & _MASK32)) & _MASK32)


@dataclass
class _Call:
    """One taken-over function: its user-facing name, seed parameter, how a seed maps, what it seeds."""

    name: str
    param: str
    convert: Callable[[Any, int], Any]
    kinds: tuple[str, ...] = ()
    # Lightning's seed_everything: it returns the seed it used, and its reset_seed() calls it again with the seed
    # applied before (read back from PL_GLOBAL_SEED): such a seed passes through, so the state is reproduced.
    reapplies: bool = False


@dataclass
class _State:
    replica_seed: int
    take_over: bool
    log: CallLog
    pid: int = field(default_factory=os.getpid)
    expected: dict[str, int] = field(default_factory=dict)
    last: dict[str, dict[str, Any]] = field(default_factory=dict)
    applied: set[int] = field(default_factory=set)


_state: Optional[_State] = None
_lock = threading.RLock()
_local = threading.local()
_wrappers: dict[int, tuple[Callable[..., Any], Callable[..., Any], _Call]] = {}  # id: original, wrapper, call


@contextlib.contextmanager
def deviate_seeding() -> Iterator[None]:
    """Seeding calls made inside pass through unchanged and unrecorded (the library's own seeding).

    Example:
        >>> import random
        >>> with deviate_seeding():
        ...     random.seed(3)
    """
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def install_seed_takeover(
    replica_seed: int, *, take_over: bool = True, on_record: Optional[Callable[[dict[str, Any]], None]] = None
) -> None:
    """Take over (or only record) the project's global seeding calls in this process, now and on later imports.

    Idempotent: a second call in the same process changes nothing. Forked children keep the takeover but never
    record; DataLoader workers pass everything through.

    Args:
        replica_seed: The replica's seed ``s``, in ``[0, 2**32)``.
        take_over: ``False`` (``--keep-project-seeds``): apply the seeds the project asks for, only record them.
        on_record: Called with :func:`seeding_record` each time a new distinct call is recorded (and once when the
            record first passes its 50 entries); its exceptions are swallowed with one warning on stderr.

    Raises:
        ValueError: ``replica_seed`` is outside ``[0, 2**32)``.
    """
    global _state
    seed = operator.index(replica_seed)
    if not 0 <= seed <= _MASK32:
        raise ValueError(f"`replica_seed` must be in [0, 2**32). Received: replica_seed={replica_seed!r}.")
    with _lock:
        if _state is not None:
            return
        _state = _State(seed, bool(take_over), CallLog("seeding calls", seeding_record, on_record))
    for module, attr, call in _SOURCES:
        when_imported(module, _patcher(attr, call))
    for module, attrs in _REEXPORTS:
        when_imported(module, _rebinder(attrs))
    when_imported("tensorflow", lambda m: _rebind_tf())
    _rebind_loaded()


def seeding_record() -> Optional[dict[str, Any]]:
    """The manifest's ``seeding`` record of the project's seeding calls in the installing process.

    Returns:
        ``None`` when the takeover is not installed, else ``{"take_over": bool, "replica_seed": s, "calls": [...],
        "more": n}``: each call is ``{"call": "lightning.seed_everything", "asked": 42, "applied": 123,
        "count": 1}`` (distinct call and asked value, in first-seen order, at most 50; values JSON-safe: arrays
        as lists, bytes as hex, ``None`` kept), and ``more`` counts the calls whose pair was left out.
    """
    state = _state
    if state is None:
        return None
    calls, more = state.log.copy()
    return {"take_over": state.take_over, "replica_seed": state.replica_seed, "calls": calls, "more": more}


def expected_seed(kind: str) -> Optional[int]:
    """The seed the project's calls last applied for one kind of random state, in this process.

    Args:
        kind: ``python``, ``numpy``, ``torch``, ``keras`` or ``tensorflow`` (Lightning's ``seed_everything`` sets
            the first three, ``keras.utils.set_random_seed`` Python, NumPy, Keras and the backend's).

    Returns:
        The applied seed (the asked one with ``take_over=False``); ``None`` if the project never seeded ``kind``
        with an integer, or the takeover is not installed.
    """
    state = _state
    return None if state is None else state.expected.get(kind)


def last_seeding_call(kind: str) -> Optional[dict[str, Any]]:
    """The project's last call that seeded ``kind`` (as for :func:`expected_seed`).

    Returns:
        ``{"call", "asked", "applied"}`` as in :func:`seeding_record` (re-applications by Lightning's
        ``reset_seed`` aside), or ``None``.
    """
    state = _state
    last = None if state is None else state.last.get(kind)
    return None if last is None else dict(last)


def take_over_seed(call: str, asked: Any) -> Any:
    """The seed a project's configuration value gets in this replica (``TrainingArguments.seed``, ``data_seed``).

    Unlike a seeding call, the value seeds nothing itself: it is handed on (to ``set_seed``, a sampler's generator).
    It is mapped as :func:`derive_seed` maps an asked seed (not at all with ``--keep-project-seeds``), recorded under
    ``call``, and remembered as applied, so that the project's later ``set_seed(args.seed)`` passes through unchanged.

    Args:
        call: The name recorded, e.g. ``transformers.TrainingArguments.seed``.
        asked: The value the project set (a non-integer, ``None`` included, passes through unrecorded).

    Returns:
        The value to use instead (``asked`` where the takeover is not installed).

    Example:
        >>> take_over_seed("transformers.TrainingArguments.seed", 42) == 42 or _state is not None
        True
    """
    state = _state
    number = _int_like(asked)
    if state is None or number is None or getattr(_local, "depth", 0) > 0 or _in_worker():
        return asked
    reapplied = number in state.applied
    applied = derive_seed(state.replica_seed, number) if state.take_over and not reapplied else number
    with _lock:
        state.applied.add(applied)
    if os.getpid() == state.pid:
        _record(state, {"call": call, "asked": number, "applied": applied}, new=not reapplied)
    return applied


# -- how a seed maps ------------------------------------------------------------------------------------------


def _int_like(value: Any) -> Optional[int]:
    if isinstance(value, (bool, str, bytes, bytearray, float)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _int_seed(asked: Any, seed: int) -> Any:
    number = _int_like(asked)
    return asked if number is None else derive_seed(seed, number)


def _optional_int_seed(asked: Any, seed: int) -> Any:
    return None if asked is None else _int_seed(asked, seed)


def _python_seed(asked: Any, seed: int) -> Any:
    if asked is None:
        return seed
    if isinstance(asked, (str, bytes, bytearray)):
        data = asked.encode() if isinstance(asked, str) else bytes(asked)
        return derive_seed(seed, int.from_bytes(hashlib.sha256(data).digest()[:8], "big"))
    return _int_seed(asked, seed)


def _numpy_seed(asked: Any, seed: int) -> Any:
    if asked is None:
        return seed
    if _int_like(asked) is not None or not (isinstance(asked, (list, tuple)) or hasattr(asked, "__array__")):
        return _int_seed(asked, seed)
    values = [operator.index(value) for value in asked]
    if not values or not all(0 <= value <= _MASK32 for value in values):
        return asked  # numpy raises its own error
    return [derive_seed(seed, value) for value in values]


_TORCH_TRIO = ("python", "numpy", "torch")
# transformers' and Accelerate's own seeding: set_seed and enable_full_determinism seed Python, NumPy and torch; a
# seed the takeover already applied (TrainingArguments.seed taken over, then handed to set_seed) passes through.
_HF_SET_SEED = _Call("transformers.set_seed", "seed", _int_seed, _TORCH_TRIO, True)
_HF_FULL = _Call("transformers.enable_full_determinism", "seed", _int_seed, _TORCH_TRIO, True)
_ACCELERATE = _Call("accelerate.utils.set_seed", "seed", _int_seed, _TORCH_TRIO, True)
_LIGHTNING = _Call("lightning.seed_everything", "seed", _optional_int_seed, _TORCH_TRIO, True)
# (module, function, call): each function is wrapped in its defining module right after that module executes,
# so every later ``from module import function`` (the re-exports of Lightning, Keras and TensorFlow's generated
# API) binds the wrapper.
_SOURCES: tuple[tuple[str, str, _Call], ...] = (
    ("random", "seed", _Call("random.seed", "a", _python_seed, ("python",))),
    ("numpy.random", "seed", _Call("numpy.random.seed", "seed", _numpy_seed, ("numpy",))),
    ("torch.random", "manual_seed", _Call("torch.manual_seed", "seed", _int_seed, ("torch",))),
    ("torch.cuda.random", "manual_seed", _Call("torch.cuda.manual_seed", "seed", _int_seed)),
    ("torch.cuda.random", "manual_seed_all", _Call("torch.cuda.manual_seed_all", "seed", _int_seed)),
    ("lightning.fabric.utilities.seed", "seed_everything", _LIGHTNING),
    ("lightning_fabric.utilities.seed", "seed_everything", _LIGHTNING),
    ("transformers.trainer_utils", "set_seed", _HF_SET_SEED),
    ("transformers.trainer_utils", "enable_full_determinism", _HF_FULL),
    ("accelerate.utils.random", "set_seed", _ACCELERATE),
    ("keras.src.utils.rng_utils", "set_random_seed", _Call("keras.utils.set_random_seed", "seed", _int_seed, _KERAS)),
    (
        "tensorflow.python.framework.random_seed",
        "set_seed",
        _Call("tf.random.set_seed", "seed", _optional_int_seed, _TF),
    ),
    (
        "tensorflow.python.framework.random_seed",
        "set_random_seed",
        _Call("tf.compat.v1.set_random_seed", "seed", _optional_int_seed, _TF),
    ),
)
# Re-exports bound before the takeover was installed (a framework imported first) are pointed at the wrappers.
_REEXPORTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch", ("manual_seed",)),
    ("torch.cuda", ("manual_seed", "manual_seed_all")),
    *((name, ("seed_everything",)) for name in ("lightning", "lightning.pytorch", "lightning.fabric")),
    *((name, ("seed_everything",)) for name in ("lightning_fabric", "pytorch_lightning")),
    *((name, ("set_random_seed",)) for name in ("keras", "keras.utils", "keras.src.utils", "keras.api.utils")),
    ("keras._tf_keras.keras.utils", ("set_random_seed",)),
    *((name, ("set_seed", "enable_full_determinism")) for name in ("transformers", "transformers.trainer")),
    *((name, ("set_seed",)) for name in ("accelerate", "accelerate.utils")),
)


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if hasattr(value, "tolist"):
        with contextlib.suppress(Exception):
            return _json_safe(value.tolist())
    return repr(value)


# -- wrapping -------------------------------------------------------------------------------------------------


def _patch(module: ModuleType, attr: str, call: _Call) -> None:
    original = getattr(module, attr, None)
    if original is not None and not getattr(original, _MARK, False):
        setattr(module, attr, _wrapper(original, call))


def _rebinder(attrs: tuple[str, ...]) -> Callable[[ModuleType], None]:
    """The import hook that points ``module.attr`` for each of ``attrs`` at its wrapper."""
    return lambda module: _rebind([module], attrs)


def _rebind(modules: list[Optional[ModuleType]], attrs: tuple[str, ...]) -> None:
    """Point re-exports of a wrapped function (``lightning.seed_everything``) at its wrapper.

    A re-export that wraps the original itself (``torch._dynamo`` replaces ``torch.manual_seed`` with a wrapper
    of ``torch.random.manual_seed``) is wrapped in turn.
    """
    for module in modules:
        for attr in attrs:
            current = getattr(module, attr, None)
            if module is None or current is None or getattr(current, _MARK, False):
                continue
            for candidate in (current, getattr(current, "__wrapped__", None)):
                known = _wrappers.get(id(candidate))
                if known is not None and known[0] is candidate:
                    setattr(module, attr, known[1] if candidate is current else _wrapper(current, known[2]))
                    break


def _patcher(attr: str, call: _Call) -> Callable[[ModuleType], None]:
    """The import hook that wraps ``module.attr`` for ``call``."""
    return lambda module: _patch(module, attr, call)


def _rebind_loaded() -> None:
    """Point every re-export already bound in a loaded module at its wrapper.

    A framework imported before the takeover (the warm-start template and :func:`~deviate_cb.launch.replica.bootstrap.
    preimport` import Lightning first) bound the originals in its own modules: ``lightning.pytorch.cli`` calls the
    ``seed_everything`` it imported. Rebinding them all gives the calls a project makes through any of them the
    wrapper, as when the framework is imported after the takeover.
    """
    names = {attr for _, attr, _ in _SOURCES}
    for module in list(sys.modules.values()):
        # The module's own dict, never getattr: a lazy module's __getattr__ would import (or raise) on a miss.
        found = tuple(name for name in names if id(_module_dict(module).get(name)) in _wrappers)
        if found:
            _rebind([module], found)


def _module_dict(module: Any) -> dict[str, Any]:
    try:
        found = vars(module)
    except TypeError:
        return {}
    return found if isinstance(found, dict) else {}


def _rebind_tf() -> None:
    modules = [module for name, module in list(sys.modules.items()) if name.startswith("tensorflow._api.")]
    _rebind([sys.modules.get("tensorflow"), *modules], ("set_seed", "set_random_seed"))


def _wrapper(original: Callable[..., Any], call: _Call) -> Callable[..., Any]:
    with _lock:
        known = _wrappers.get(id(original))
        if known is not None and known[0] is original:
            return known[1]

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            plan = _plan(call, args, kwargs)
            if plan is None:
                return original(*args, **kwargs)
            asked, applied, reapplied, args, kwargs = plan
            with deviate_seeding():
                result = original(*args, **kwargs)
            with contextlib.suppress(Exception):
                _after(call, asked, applied, reapplied, result)
            return result

        setattr(wrapper, _MARK, True)
        _wrappers[id(original)] = (original, wrapper, call)
        return wrapper


def _plan(call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[tuple[Any, ...]]:
    """``(asked, applied, reapplied, args, kwargs)`` for a call to take over; ``None`` to pass it through."""
    try:
        state = _state
        if state is None or getattr(_local, "depth", 0) > 0 or _in_worker():
            return None
        asked = args[0] if args else kwargs.get(call.param)
        reapplied = call.reapplies and _int_like(asked) in state.applied
        applied = call.convert(asked, state.replica_seed) if state.take_over and not reapplied else asked
        if args:
            args = (applied, *args[1:])
        elif call.param in kwargs:
            kwargs = {**kwargs, call.param: applied}
        elif applied is not None:
            args = (applied,)
        return asked, applied, reapplied, args, kwargs
    except Exception:  # never fail the project's call on the takeover's account
        return None


def _in_worker() -> bool:
    """Inside a torch DataLoader worker (or torch's own seeding of one, before its worker info exists)."""
    worker = sys.modules.get("torch.utils.data._utils.worker")
    if worker is None:
        return False
    if worker.get_worker_info() is not None:
        return True
    frame = sys._getframe(1)
    for _ in range(4):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return False
        if frame.f_code.co_name == "_worker_loop" and frame.f_globals.get("__name__") == worker.__name__:
            return True
    return False


def _after(call: _Call, asked: Any, applied: Any, reapplied: bool, result: Any) -> None:
    state = _state
    if state is None:
        return
    seeded = _int_like(result) if call.reapplies else None  # Lightning returns the seed it used
    seeded = _int_like(applied) if seeded is None else seeded
    if state.take_over and call.reapplies and seeded is not None:
        state.applied.add(seeded)
    kinds = call.kinds + (_keras_kinds() if call.name.startswith("keras.") else ())
    entry = {"call": call.name, "asked": _json_safe(asked), "applied": _json_safe(applied)}
    if seeded is not None:
        for kind in kinds:
            state.expected[kind] = seeded
            if not reapplied:
                state.last[kind] = entry
    if os.getpid() == state.pid:
        _record(state, entry, new=not reapplied)


def _keras_kinds() -> tuple[str, ...]:
    """What ``keras.utils.set_random_seed`` seeded besides Python, NumPy and Keras."""
    backend = sys.modules.get("keras.src.backend")
    extra = ("tensorflow",) if sys.modules.get("tensorflow") is not None else ()
    return extra + (("torch",) if backend is not None and backend.backend() == "torch" else ())


def _record(state: _State, entry: dict[str, Any], *, new: bool) -> None:
    """Count ``entry`` (a re-application, ``new=False``, only counts where its pair is already recorded)."""
    state.log.count((entry["call"], json.dumps(entry["asked"])), entry, new=new)
