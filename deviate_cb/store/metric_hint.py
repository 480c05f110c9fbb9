"""When a launch recorded no metric at all: say so once, and how to capture one, from the script's own printout.

Example:
    >>> printed = ["Train Epoch: 1 [0/240]\\tLoss: 0.69", "Test set: Average loss: 0.0332, Accuracy: 9890/10000 (99%)"]
    >>> for regex, name, value in suggest_metric_regexes(printed):
    ...     print(regex, name, value)
    Average loss: *(?P<average_loss>[-+.0-9eE]+) average_loss 0.0332
    Accuracy: *[0-9]+/[0-9]+ \\((?P<accuracy>[-+.0-9eE]+)%\\) accuracy 99.0
    >>> [name for _, name, _ in suggest_metric_regexes(["iter 100: loss 2.31, time 12.3ms", "Test accuracy: 0.98"])]
    ['test_accuracy', 'loss']
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional

from deviate_cb.store.bounded_read import check_parquet, loads_json, read_regular
from deviate_cb.store.output_metrics import compile_metric_patterns, metrics_in_lines

__all__ = [
    "TAIL_BYTES",
    "TAIL_LINES",
    "nothing_recorded_line",
    "nothing_recorded_text",
    "recorded_nothing",
    "rerun_command",
    "suggest_metric_regexes",
    "tail",
]

TAIL_BYTES = 64 * 1024
TAIL_LINES = 300
_NUMBER = r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
_CAPTURE = "[-+.0-9eE]+"  # what a suggestion captures: short to read; checked to read as the number printed
# A name (words, at most 4) then `:`, `=` or a space, then a number: `Test accuracy: 0.98`, `loss=0.4`, `loss 2.31`.
_PAIR = re.compile(
    r"(?<![\w.])(?P<key>[A-Za-z][A-Za-z0-9_\-]*(?: [A-Za-z][A-Za-z0-9_\-]*){0,3})"
    r"(?P<sep>\s*[:=]\s*|\s+)(?P<value>" + _NUMBER + r")(?P<after>/[0-9]+ \((?P<pct>" + _NUMBER + r")%\))?(?![\w.])"
)
_COUNTERS = {"iter", "iteration", "epoch", "step", "batch", "it", "steps", "epochs", "batches", "time", "lr", "dt"}
_METRIC_WORDS = ("loss", "acc", "accuracy", "error", "err", "f1", "auc", "ppl", "perplexity", "score", "bleu", "mse",
                 "mae", "rmse", "precision", "recall", "top1", "top5", "map", "iou", "dice", "reward")  # fmt: skip
_SPECIAL = set(".^$*+?{}[]\\|()")


def tail(path: Path, max_bytes: int = TAIL_BYTES, max_lines: int = TAIL_LINES) -> list[str]:
    """The last lines of a regular file (``\\r`` redraws split as ``--metric-regex`` splits them); ``[]`` for
    anything else (a link to a FIFO, a device) or an unreadable file."""
    data = _read_regular(path, max_bytes, last=True)
    if data is None:
        return []
    lines = [part for line in data.decode("utf-8", errors="replace").split("\n") for part in line.split("\r")]
    return lines[-max_lines:]


def _read_regular(path: Path, max_bytes: int, *, last: bool = False) -> Optional[bytes]:
    """At most ``max_bytes`` of a regular file (its last ones with ``last``; a larger one is refused otherwise),
    opened without blocking (:func:`~deviate_cb.store.bounded_read.read_regular`); ``None`` for anything else
    (a FIFO, a device) or an unreadable file: a run store is untrusted input."""
    try:
        return read_regular(path, max_bytes, tail=last)
    except (OSError, ValueError):
        return None


def _literal(text: str) -> str:
    return "".join(f"\\{c}" if c in _SPECIAL else c for c in text)


def _group_name(key: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", key.lower()).strip("_")


def suggest_metric_regexes(lines: Sequence[str], limit: int = 2) -> list[tuple[str, str, float]]:
    """Up to ``limit`` ``(--metric-regex, metric name, value it captures)`` built from ``lines`` (the metric-like
    names first, then the later lines), each checked to capture its number as the last match in ``lines``."""
    found: list[tuple[int, int, str, str, float]] = []
    seen: set[str] = set()
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        for match in _PAIR.finditer(line):
            key = match.group("key").strip()
            name = _group_name(key)
            words = key.lower().split()
            if not name or name in seen or words[-1] in _COUNTERS or "'" in key or len(key) > 40:
                continue
            if match.group("pct") is not None:
                joint = f"{match.group('sep').strip() or ' '} *"
                regex = f"{_literal(key)}{joint}[0-9]+/[0-9]+ \\((?P<{name}>{_CAPTURE})%\\)"
            else:
                sep = match.group("sep")
                joint = (" *" if sep[0].isspace() else "") + f"{sep.strip()} *" if sep.strip() else " +"
                regex = f"{_literal(key)}{joint}(?P<{name}>{_CAPTURE})"
            try:
                patterns = compile_metric_patterns([regex])
            except Exception:
                continue
            captured = metrics_in_lines(lines, patterns).get(name)
            if captured is None or captured != metrics_in_lines([line], patterns).get(name):
                continue  # a later line matches it with another number: not this line's
            seen.add(name)
            metric = any(word in _METRIC_WORDS for word in re.split(r"[^a-z0-9]+", key.lower()))
            found.append((0 if metric else 1, -index, regex, name, captured))
    found.sort(key=lambda item: (item[0], item[1]))
    return [(regex, name, value) for _, _, regex, name, value in found[:limit]]


def recorded_nothing(run_dirs: Iterable[Path]) -> bool:
    """Whether none of ``run_dirs`` holds a ``metrics.parquet`` with a row (an unreadable one counts as a row)."""
    for run_dir in run_dirs:
        path = Path(run_dir) / "metrics.parquet"
        try:
            if not path.is_file() or path.is_symlink():
                continue
            if check_parquet(path).num_rows > 0:  # a regular file's footer only
                return False
        except Exception:
            return False
    return True


def nothing_recorded_line(replicas: Sequence[Any], *, metric_regex: Sequence[str] = (), trainer: bool = False) -> str:
    """The launcher's line when the launch's completed replicas (``status``, ``run_dir``) recorded no metric
    (:func:`nothing_recorded_text`); ``""`` when one recorded something or none completed."""
    run_dirs = [Path(r.run_dir) for r in replicas if r.status == "completed"]
    return nothing_recorded_text(run_dirs, regex_given=bool(metric_regex), trainer=trainer)


def nothing_recorded_text(run_dirs: Sequence[Path], *, regex_given: bool = True, trainer: Optional[bool] = None) -> str:
    """What was captured (nothing) and how to capture it, with ``--metric-regex`` options built from the replicas'
    ``stdout.log``, when none of the completed replicas' ``run_dirs`` recorded a metric; ``""`` otherwise.
    ``trainer``: the replicas ran a ``--trainer`` function (``None``: unknown, both ways are named).

    Example:
        >>> import tempfile
        >>> run_dir = Path(tempfile.mkdtemp()) / "replica=0"
        >>> run_dir.mkdir()
        >>> _ = (run_dir / "stdout.log").write_text("iter 9: loss 2.31, time 12.3ms\\n")
        >>> line = nothing_recorded_text([run_dir], trainer=False)
        >>> line.startswith("nothing was recorded"), line.partition("rerun: ")[2].partition("; or")[0]
        (True, "the same deviate-replicate command with --force --metric-regex 'loss +(?P<loss>[-+.0-9eE]+)'")
    """
    if not run_dirs or not recorded_nothing(run_dirs):
        return ""
    returned = ", the --trainer function returned no mapping of metrics" if trainer else ""
    regex = "no --metric-regex matched" if regex_given else "no --metric-regex was given"
    line = (
        f"nothing was recorded: no DeviateCallback reached a Lightning Trainer or a Keras model.fit{returned} and "
        f"{regex}, so there is nothing to analyse"
    )
    for run_dir in run_dirs:
        suggested = suggest_metric_regexes(tail(Path(run_dir) / "stdout.log"))
        if suggested:
            names = ", ".join(f"{name}={value:g}" for _, name, value in suggested)
            command = rerun_command(_launch_argv(Path(run_dir)), [text for text, _, _ in suggested])
            line += f". To record what the script prints ({Path(run_dir).name}/stdout.log: {names}), rerun: {command}"
            break
    else:
        command = rerun_command(_launch_argv(Path(run_dirs[0])), ["NAME: *(?P<NAME>[-+.0-9eE]+)"])
        line += f". To record a value the script prints as `NAME: 0.93`, rerun: {command}"
    if trainer:
        how = "return a dict of metrics from the --trainer function"
    elif trainer is None:
        how = "replicate a --trainer file.py:function that returns a dict of metrics"
    else:
        how = "replicate a --trainer file.py:function that returns a dict of metrics instead of the command"
    return (
        f"{line}; or pass DeviateCallback() (deviate_cb.lightning or deviate_cb.keras) in the Lightning Trainer's "
        f"callbacks or Keras model.fit's, or {how}"
    )


def rerun_command(argv: Optional[Sequence[str]], regexes: Sequence[str]) -> str:
    """The command line that reruns a launch (its ``argv``: ``deviate-replicate`` and its words) with ``--force``
    and ``regexes`` as its ``--metric-regex`` options (in place of those it had), before ``--``; without a usable
    ``argv`` (``None``, not ``deviate-replicate``'s), the options to add.

    Example:
        >>> print(rerun_command(["deviate-replicate", "-n", "2", "--", "python", "train.py"], ["acc=(?P<acc>.+)"]))
        deviate-replicate -n 2 --force --metric-regex 'acc=(?P<acc>.+)' -- python train.py
        >>> print(rerun_command(None, ["acc=(?P<acc>.+)"]))
        the same deviate-replicate command with --force --metric-regex 'acc=(?P<acc>.+)'
    """
    added = ["--metric-regex" if i % 2 == 0 else regexes[i // 2] for i in range(2 * len(regexes))]
    words = [str(word) for word in argv or ()]
    if not words or Path(words[0]).name != "deviate-replicate" or not all(isinstance(w, str) for w in argv or ()):
        return f"the same deviate-replicate command with {shlex.join(['--force', *added])}"
    cut = words.index("--") if "--" in words else len(words)
    options, rest = words[1:cut], words[cut:]
    kept: list[str] = []
    skip = False
    for word in options:
        if skip:
            skip = False
        elif word == "--metric-regex":
            skip = True  # and its value
        elif not word.startswith("--metric-regex="):
            kept.append(word)
    force = [] if "--force" in kept else ["--force"]
    return shlex.join([words[0], *kept, *force, *added, *rest])


def _launch_argv(run_dir: Path) -> Optional[list[str]]:
    """The ``argv`` the replica's launcher recorded in its ``run.json`` (a regular file, read bounded), or ``None``."""
    data = _read_regular(run_dir / "run.json", 4 * 1024 * 1024)
    if data is None:
        return None
    try:
        argv = loads_json(data.decode("utf-8", errors="replace"), run_dir / "run.json").get("argv")
    except (ValueError, AttributeError):
        return None
    return argv if isinstance(argv, list) and argv and all(isinstance(word, str) for word in argv) else None
