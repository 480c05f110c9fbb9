"""The determinism takeover: a project that switches determinism itself still runs as its variant says.

Example:
    >>> applied_setting("torch.use_deterministic_algorithms", True, requested=False)
    False
    >>> applied_setting("torch.backends.cudnn.benchmark", True, requested=True)
    False
    >>> applied_setting("torch.backends.cudnn.benchmark", True, requested=False)
    True
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Optional, Union

from deviate_cb.capture.call_log import CallLog
from deviate_cb.capture.import_hooks import when_imported

__all__ = [
    "applied_setting",
    "determinism_calls_record",
    "deviate_switching",
    "install_switch_takeover",
    "last_determinism_call",
    "take_over_flag",
]

_MARK = "__deviate_switch_takeover__"
_XLA_FLAG = "--xla_gpu_deterministic_ops=true"
_TF_ENV = ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC")
_WATCHED_ENV = frozenset((*_TF_ENV, "XLA_FLAGS"))
_LIGHTNING_MODULES = ("lightning.pytorch.", "pytorch_lightning.", "lightning.fabric.", "lightning_fabric.")
_HF_SWITCHING = ("enable_full_determinism", "set_seed")  # transformers' functions that flip torch's switches
# switch -> the value that means "deterministic"
_DETERMINISTIC_VALUE = {
    "torch.use_deterministic_algorithms": True,
    "torch.backends.cudnn.deterministic": True,
    "torch.backends.cudnn.benchmark": False,
    "tf.config.experimental.enable_op_determinism": True,
    "tf.config.experimental.disable_op_determinism": False,
}


@dataclass
class _State:
    requested: Union[bool, str]
    take_over: bool
    log: CallLog
    pid: int = field(default_factory=os.getpid)
    last: dict[str, dict[str, Any]] = field(default_factory=dict)


_state: Optional[_State] = None
_lock = threading.RLock()
_local = threading.local()


@contextlib.contextmanager
def deviate_switching() -> Iterator[None]:
    """Determinism switches flipped inside pass through unchanged and unrecorded (the library's own).

    Example:
        >>> with deviate_switching():
        ...     pass
    """
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


def applied_setting(switch: str, asked: Any, *, requested: Union[bool, str]) -> Any:
    """The value a switch gets when the project asks for ``asked`` in a replica whose variant requested ``requested``.

    Args:
        switch: ``torch.use_deterministic_algorithms``, ``torch.backends.cudnn.deterministic``,
            ``torch.backends.cudnn.benchmark`` or ``tf.config.experimental.enable_op_determinism`` /
            ``disable_op_determinism`` (``True``: the call is made).
        asked: What the project asked (truthy: on).
        requested: The variant's determinism: ``True``/``"warn"`` (on) or ``False`` (off).

    Returns:
        ``asked`` where it agrees with the request (or the request leaves the switch to the project), else the
        value the request needs.
    """
    deterministic_value = _DETERMINISTIC_VALUE[switch]
    makes_deterministic = bool(asked) == deterministic_value
    if requested:
        if switch == "tf.config.experimental.enable_op_determinism" and requested == "warn":
            return asked  # TensorFlow has no warn-only mode: "warn" leaves its op determinism to the project
        return asked if makes_deterministic else deterministic_value
    if switch == "torch.backends.cudnn.benchmark":
        return asked  # autotuning on or off, off-requested replicas keep the project's choice
    return asked if not makes_deterministic else (not deterministic_value)


def install_switch_takeover(
    requested: Union[bool, str],
    *,
    take_over: bool = True,
    on_record: Optional[Callable[[dict[str, Any]], None]] = None,
) -> None:
    """Take over (or only record) the project's determinism switches in this process, now and on later imports.

    Idempotent. Forked children keep the takeover but never record.

    Args:
        requested: The replica's determinism (its variant's): ``True``, ``"warn"`` or ``False``.
        take_over: ``False`` (``--keep-project-determinism``): apply what the project asks for, only record it.
        on_record: Called with :func:`determinism_calls_record` each time a new distinct call is recorded; its
            exceptions are swallowed with one warning on stderr.
    """
    global _state
    with _lock:
        if _state is not None:
            return
        _state = _State(
            requested, bool(take_over), CallLog("determinism switches", determinism_calls_record, on_record)
        )
    _patch_environ()
    when_imported("torch", _patch_torch)
    when_imported("torch.backends.cudnn", _patch_cudnn)
    when_imported("tensorflow.python.framework.config", _patch_tf_config)
    when_imported("tensorflow", _rebind_tf)
    when_imported("tensorflow", _tf_environment)
    when_imported("jax", _xla_flags)


def determinism_calls_record() -> Optional[dict[str, Any]]:
    """The manifest's ``determinism_calls``: the project's determinism switches and what each took effect as.

    Returns:
        ``None`` when the takeover is not installed, else ``{"take_over": bool, "requested": ..., "calls": [...],
        "more": n}``; a call is ``{"call": "torch.use_deterministic_algorithms", "asked": True, "applied": False,
        "count": 1}`` (distinct call and asked value, first-seen order, at most 50).
    """
    state = _state
    if state is None:
        return None
    calls, more = state.log.copy()
    return {"take_over": state.take_over, "requested": state.requested, "calls": calls, "more": more}


def last_determinism_call(kind: str) -> Optional[dict[str, Any]]:
    """The project's last call that switched ``kind``, or ``None``.

    ``kind`` is ``torch`` (deterministic algorithms), ``cudnn.deterministic``, ``cudnn.benchmark``, ``tensorflow``
    or ``jax``.

    Example:
        >>> last_determinism_call("tensorflow") is None or "call" in last_determinism_call("tensorflow")
        True
    """
    state = _state
    found = None if state is None else state.last.get(kind)
    return None if found is None else dict(found)


# -- the switches ---------------------------------------------------------------------------------------------


def _passing() -> bool:
    return _state is None or getattr(_local, "depth", 0) > 0


def _call_name(argument: str, plain: str) -> str:
    """How a switch flipped by the project is recorded: ``Trainer(argument=value)`` when Lightning's Trainer flipped it
    for its ``argument``; ``transformers.<function>: plain`` when transformers' ``enable_full_determinism`` (which a
    Trainer runs for ``TrainingArguments(full_determinism=True)``) or ``set_seed(deterministic=True)`` did; else
    ``plain``. One walk up the few frames between the switch and its caller."""
    frame = sys._getframe(2)
    for _ in range(3):
        if frame is None:
            break
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith(_LIGHTNING_MODULES) and argument in frame.f_locals:
            return f"Trainer({argument}={frame.f_locals[argument]!r})"
        if module.startswith("transformers.") and frame.f_code.co_name in _HF_SWITCHING:
            return f"transformers.{frame.f_code.co_name}: {plain}"
        frame = frame.f_back  # type: ignore[assignment]
    return plain


def take_over_flag(call: str, asked: bool) -> bool:
    """A project's flag that switches determinism on (``TrainingArguments(full_determinism=True)``), as the variant
    has it: on in a deterministic replica, off in one whose variant wants the kernels' own noise (recorded under
    ``call``; ``--keep-project-determinism`` keeps it). A flag left off is the project's, unrecorded: the variant's
    own determinism is applied by the replica anyway.

    Example:
        >>> take_over_flag("transformers.TrainingArguments(full_determinism=True)", False)
        False
    """
    state = _state
    if state is None or not asked or _passing():
        return bool(asked)
    applied = bool(state.requested) if state.take_over else True
    warn_only = state.take_over and applied and state.requested == "warn"  # then torch's switch goes on warn-only
    _record(state, "torch", call, True, "warn" if warn_only else applied)
    return applied


def _patch_torch(torch: ModuleType) -> None:
    original = getattr(torch, "use_deterministic_algorithms", None)
    if original is None or getattr(original, _MARK, False):
        return

    def use_deterministic_algorithms(mode: Any, *args: Any, **kwargs: Any) -> Any:
        if _passing():
            return original(mode, *args, **kwargs)
        state = _state
        assert state is not None
        warn_only = bool(kwargs.get("warn_only", args[0] if args else False))
        applied_mode, applied_warn = mode, warn_only
        if state.take_over:
            applied_mode = applied_setting("torch.use_deterministic_algorithms", mode, requested=state.requested)
            if applied_mode != mode and applied_mode:
                applied_warn = state.requested == "warn"
        asked: Any = bool(mode) if not warn_only else "warn"
        applied: Any = bool(applied_mode) if not (applied_mode and applied_warn) else "warn"
        call = _call_name("deterministic", "torch.use_deterministic_algorithms")
        with deviate_switching():
            result = original(applied_mode, warn_only=applied_warn)
        _record(state, "torch", call, asked, applied)
        return result

    use_deterministic_algorithms.__wrapped__ = original  # type: ignore[attr-defined]
    use_deterministic_algorithms.__doc__ = original.__doc__
    setattr(use_deterministic_algorithms, _MARK, True)
    torch.use_deterministic_algorithms = use_deterministic_algorithms  # type: ignore[attr-defined]


class _TakenOverProp:
    """A ``torch.backends.cudnn`` flag whose assignments go through the takeover (reads are unchanged)."""

    def __init__(self, prop: Any, switch: str, argument: str) -> None:
        self.prop, self.switch, self.argument = prop, switch, argument
        setattr(self, _MARK, True)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self.prop.__get__(obj, objtype)

    def __set__(self, obj: Any, value: Any) -> None:
        if _passing():
            self.prop.__set__(obj, value)
            return
        state = _state
        assert state is not None
        applied = applied_setting(self.switch, value, requested=state.requested) if state.take_over else value
        call = _call_name(self.argument, f"{self.switch} = {bool(value)!r}")
        self.prop.__set__(obj, applied)
        _record(state, self.switch.removeprefix("torch.backends."), call, bool(value), bool(applied))


def _patch_cudnn(cudnn: ModuleType) -> None:
    cls = type(cudnn)
    for attr, argument in (("deterministic", "deterministic"), ("benchmark", "benchmark")):
        prop = vars(cls).get(attr) if cls is not ModuleType else None
        if prop is None or getattr(prop, _MARK, False) or not hasattr(prop, "__set__"):
            continue
        setattr(cls, attr, _TakenOverProp(prop, f"torch.backends.cudnn.{attr}", argument))


_TF_WRAPPERS: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, wrapper)


def _patch_tf_config(config: ModuleType) -> None:
    for attr in ("enable_op_determinism", "disable_op_determinism"):
        original = getattr(config, attr, None)
        if original is None or getattr(original, _MARK, False):
            continue
        wrapper = _tf_wrapper(original, f"tf.config.experimental.{attr}")
        _TF_WRAPPERS[id(original)] = (original, wrapper)
        setattr(config, attr, wrapper)


def _tf_wrapper(original: Callable[..., Any], switch: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _passing():
            return original(*args, **kwargs)
        state = _state
        assert state is not None
        run = applied_setting(switch, True, requested=state.requested) if state.take_over else True
        result = original(*args, **kwargs) if run else None
        _record(state, "tensorflow", f"{switch}()", True, bool(run))
        return result

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper.__doc__ = original.__doc__
    wrapper.__name__ = getattr(original, "__name__", "wrapper")
    setattr(wrapper, _MARK, True)
    return wrapper


def _rebind_tf(_: ModuleType) -> None:
    """Point ``tf.config.experimental.enable_op_determinism`` (TensorFlow's generated re-exports) at the wrappers."""
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("tensorflow._api.", "tensorflow.config")):
            continue
        namespace = getattr(module, "__dict__", {})
        for attr in ("enable_op_determinism", "disable_op_determinism"):
            known = _TF_WRAPPERS.get(id(namespace.get(attr)))
            if known is not None and known[0] is namespace.get(attr):
                setattr(module, attr, known[1])


def _patch_environ() -> None:
    """Let ``os.environ[...] = ...`` for the switches read from the environment go through the takeover.

    TensorFlow reads ``TF_DETERMINISTIC_OPS`` when it first needs it and XLA reads ``XLA_FLAGS`` when JAX's backend
    starts, both possibly after a warm-start template imported the framework: the project's assignment is where
    the switch is flipped.
    """
    cls = type(os.environ)
    original = cls.__setitem__
    if getattr(original, _MARK, False):
        return

    def __setitem__(self: Any, key: Any, value: Any) -> None:
        if self is os.environ and key in _WATCHED_ENV and not _passing():
            with contextlib.suppress(Exception):
                value = _environment_value(key, value)
        original(self, key, value)

    setattr(__setitem__, _MARK, True)
    cls.__setitem__ = __setitem__  # type: ignore[method-assign]


def _environment_value(key: str, value: str) -> str:
    """The value the replica's environment gets when the project sets ``key`` to ``value``, recorded."""
    state = _state
    if state is None or not isinstance(value, str):
        return value
    if key in _TF_ENV:
        on = value.strip().lower() in ("1", "true")
        if on:
            off = state.take_over and not state.requested
            _record(state, "tensorflow", f"os.environ[{key!r}] = {value!r}", True, not off)
            return "0" if off else value
        return value
    has_flag = "xla_gpu_deterministic_ops=true" in value
    if has_flag and not state.requested:
        _record(state, "jax", f"XLA_FLAGS {_XLA_FLAG}", True, not state.take_over)
        if state.take_over:
            return " ".join(word for word in value.split() if "xla_gpu_deterministic_ops" not in word)
    elif "xla_gpu_deterministic_ops" not in value and state.requested:
        _record(state, "jax", f"XLA_FLAGS = {value!r}", False, state.take_over)
        if state.take_over:
            return f"{value} {_XLA_FLAG}".strip()
    return value


def _tf_environment(_: ModuleType) -> None:
    """``TF_DETERMINISTIC_OPS``/``TF_CUDNN_DETERMINISTIC`` as TensorFlow is imported (it reads them later)."""
    state = _state
    if state is None:
        return
    for name in _TF_ENV:
        value = os.environ.get(name)
        if value is not None and value.strip().lower() in ("1", "true"):
            off = state.take_over and not state.requested
            if off:
                os.environ.pop(name, None)
            _record(state, "tensorflow", f"os.environ[{name!r}] = {value!r}", True, not off)


def _xla_flags(_: ModuleType) -> None:
    """``--xla_gpu_deterministic_ops`` in ``XLA_FLAGS`` as JAX is imported (its backend reads it when it starts)."""
    state = _state
    if state is None:
        return
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_deterministic_ops=true" in flags and not state.requested:
        if state.take_over:
            os.environ["XLA_FLAGS"] = " ".join(w for w in flags.split() if "xla_gpu_deterministic_ops" not in w)
        _record(state, "jax", f"XLA_FLAGS {_XLA_FLAG}", True, not state.take_over)
    elif "xla_gpu_deterministic_ops" not in flags and state.requested:
        if state.take_over:  # the project's XLA_FLAGS replaced the replica's, which had the flag
            os.environ["XLA_FLAGS"] = f"{flags} {_XLA_FLAG}".strip()
        _record(state, "jax", f"XLA_FLAGS = {flags!r}", False, state.take_over)


# -- recording ------------------------------------------------------------------------------------------------


def _record(state: _State, kind: str, call: str, asked: Any, applied: Any) -> None:
    """Remember the call as ``kind``'s last and, in the process that installed the takeover, count it."""
    entry = {"call": call, "asked": asked, "applied": applied}
    state.last[kind] = entry
    if os.getpid() == state.pid:  # forked children keep the takeover but never record
        state.log.count((call, repr(asked)), entry, refresh=("applied",))
