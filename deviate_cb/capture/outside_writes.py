"""Writes outside the run directory: the project's own fixed paths, which parallel replicas share.

Example:
    >>> is_write_open("w", 0), is_write_open(None, os.O_WRONLY | os.O_CREAT), is_write_open("rb", 0)
    (True, True, False)
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from deviate_cb.capture.import_hooks import when_imported
from deviate_cb.capture.temp_files import TemporaryPaths, creating, watch_tempfile
from deviate_cb.store.ledger import append_write, ledger_file, writer_name, writes_of
from deviate_cb.store.manifest import ReplicaRecord
from deviate_cb.store.safe_paths import PlantedLinkError

__all__ = [
    "LAUNCH_DIR_ENV",
    "MAX_PATHS",
    "OutsideWrites",
    "install_outside_writes",
    "is_write_open",
    "note_outside_write",
]

LAUNCH_DIR_ENV = "DEVIATE_LAUNCH_DIR"  # the replica's launch directory, for every process of it

MAX_PATHS = 50  # paths listed in run.json (the rest counted as "more")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_LEDGER_EVERY_S = 1.0  # a path this process writes again and again: appended at most once a second, unless
# another process appended meanwhile
_WORKDIR = ".workdir"  # deviate_cb.launch.replica.isolation.WORKDIR (a lower layer cannot import it)
_MARKER = "__deviate_outside_writes__"
_LINK_WARNED: list[str] = []  # the planted link this process warned about (once)
_state: dict[str, Optional[OutsideWrites]] = {"watch": None}


def is_write_open(mode: Any, flags: Any) -> bool:
    """Whether an ``open`` audit event's ``mode``/``flags`` open the file for writing."""
    if isinstance(flags, int) and flags & _WRITE_FLAGS:
        return True
    return isinstance(mode, str) and any(c in mode for c in "wax+")


class OutsideWrites:
    """What one process of a replica wrote, and read of another replica's writes, outside its run directory.

    Args:
        run_dir: The replica's run directory (``<out>/experiment=<e>/variant=<v>/replica=<k>``).
        experiment, variant, replica: The replica, as the ledger names it.
        on_record: Called with the manifest's record (``outside_writes``, ``outside_reads``) when it changes;
            ``None`` in processes that do not write the manifest.
        launch_dir: The replica's launch directory (default: the working directory): its tree is watched even
            inside the temporary directory.
        script: The script being run (default: ``sys.argv[0]`` when it is a file): its folder's tree too.
    """

    def __init__(
        self,
        run_dir: Path,
        experiment: str,
        variant: str,
        replica: int,
        on_record: Optional[Callable[[ReplicaRecord], None]] = None,
        *,
        launch_dir: Optional[str] = None,
        script: Optional[str] = None,
    ) -> None:
        run_dir = Path(os.path.abspath(run_dir))
        self.root = run_dir.parents[2]
        self.identity = {"experiment": experiment, "variant": variant, "replica": replica}
        self.on_record = on_record
        self.pid = os.getpid()
        self.workdir = str(run_dir / _WORKDIR) + os.sep
        self.ignored = _ignored_prefixes(run_dir, self.root)
        self.temporary, self.kept = _temporary_prefixes(launch_dir or os.getcwd(), script)
        self.made = TemporaryPaths()  # what tempfile made in this process (install_outside_writes fills it)
        self._ledger_prefix = str(ledger_file(self.root, "")).rsplit(os.sep, 1)[0] + os.sep
        self.written: dict[str, float] = {}  # path -> last write time (this process)
        self.ledgered: dict[str, float] = {}  # path -> last ledger append
        self.appended: dict[str, Optional[tuple[int, int]]] = {}  # path -> its ledger file right after that append
        self.reads: dict[str, str] = {}  # path -> the replica that wrote what this one read
        self.checked: dict[str, tuple[int, int]] = {}  # path -> its ledger file's size and mtime when last read
        self.attempt: Optional[int] = None
        self._local = threading.local()

    # -- the audit hook --------------------------------------------------------------------------------------

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """The audit hook: ``open`` and ``os.rename`` (``os.replace``) events; every other event returns at once."""
        if event == "open":
            if len(args) >= 3:
                self._seen(args[0], is_write_open(args[1], args[2]))
        elif event == "os.rename" and len(args) >= 2:
            self._seen(args[1], True)

    def _seen(self, target: Any, writing: bool) -> None:
        if isinstance(target, int) or getattr(self._local, "busy", False) or creating():
            return
        self._local.busy = True
        try:
            path = self.outside_path(target, writing)
            if path is not None:
                if writing:
                    self.wrote(path)
                else:
                    self.read(path)
        except Exception:  # never fail the project's open for a record
            pass
        finally:
            self._local.busy = False

    def outside_path(self, target: Any, writing: bool = True) -> Optional[str]:
        """``target`` as an absolute path when it is outside everything ignored, else ``None``."""
        if isinstance(target, bytes):
            target = os.fsdecode(target)
        elif not isinstance(target, str):
            target = os.fspath(target)
        if not writing and target.endswith((".py", ".pyc", ".so")):
            return None  # code the interpreter imports
        path = os.path.abspath(target)
        if path.startswith(self.workdir):
            path = os.path.realpath(path)  # the --isolate working directory: its links lead into the project
        if path.startswith(self.ignored) or "__pycache__" in path:
            return None
        if path.startswith(self.temporary) and not path.startswith(self.kept):
            return None  # the temporary directory, but for the project's own trees there
        if self.made.holds(path):
            return None
        return path

    # -- what is recorded ------------------------------------------------------------------------------------

    def wrote(self, path: str) -> None:
        """Record a write of ``path`` (absolute, outside)."""
        now = time.time()
        new = path not in self.written
        self.written[path] = now
        if now - self.ledgered.get(path, -_LEDGER_EVERY_S) >= _LEDGER_EVERY_S or self._ledger_changed(path):
            self.ledgered[path] = now
            self._append({"op": "write", "path": path})
            self.appended[path] = _stat(self._ledger(path))
        if new and len(self.written) <= MAX_PATHS + 1:
            self._record()

    def _ledger_changed(self, path: str) -> bool:
        """Whether another process appended to the path's ledger since this one last did: a write within
        :data:`_LEDGER_EVERY_S` of the last one is then appended too, so the ledger's last writer is right."""
        return _stat(self._ledger(path)) != self.appended.get(path)

    def read(self, path: str) -> None:
        """Check a read of ``path`` (absolute, outside) against the ledger: another replica's file is recorded."""
        seen = _stat(self._ledger(path))
        if seen is None or self.checked.get(path) == seen:
            return  # no replica wrote it, or nothing was written since this process last looked
        self.checked[path] = seen
        entries = [e for e in writes_of(self.root, path) if e.get("op", "write") == "write"]
        mine = [e["time"] for e in entries if self._is_mine(e) and isinstance(e.get("time"), (int, float))]
        since = max(mine, default=float("-inf"))
        since = max(since, self.written.get(path, float("-inf")))
        others = [
            e for e in entries if not self._is_mine(e) and isinstance(e.get("time"), (int, float)) and e["time"] > since
        ]
        if not others:
            return
        writer = writer_name(max(others, key=lambda e: e["time"]))
        if self.reads.get(path) == writer:
            return
        self.reads[path] = writer
        self._append({"op": "read", "path": path, "written_by": writer})
        if len(self.reads) <= MAX_PATHS:
            self._record()

    def section(self) -> ReplicaRecord:
        """The manifest's record: ``outside_writes`` (and ``outside_reads`` when there are any)."""
        paths = sorted(self.written)
        section = ReplicaRecord(outside_writes={"paths": paths[:MAX_PATHS], "more": max(0, len(paths) - MAX_PATHS)})
        if self.reads:
            section = section.with_changes(
                outside_reads=[
                    {"path": path, "written_by": writer} for path, writer in sorted(self.reads.items())[:MAX_PATHS]
                ]
            )
        return section

    def flush(self) -> None:
        """Write the manifest fields now (at exit), when this process writes the manifest and saw anything."""
        if self.written or self.reads:
            self._record()

    def _record(self) -> None:
        if self.on_record is None or os.getpid() != self.pid:
            return  # a forked worker (DataLoader) or another rank: the ledger has it
        was = getattr(self._local, "busy", False)
        self._local.busy = True
        try:
            self.on_record(self.section())
        except Exception:
            pass
        finally:
            self._local.busy = was

    def _append(self, entry: dict[str, Any]) -> None:
        if self.attempt is None:
            self.attempt = _attempt(self.root, self.identity)
        record = {**entry, **self.identity, "attempt": self.attempt, "pid": os.getpid(), "time": time.time()}
        try:
            append_write(self.root, record)
        except PlantedLinkError as exc:  # one line per process, straight to stderr (no import, no open in a hook)
            if not _LINK_WARNED:
                _LINK_WARNED.append(str(exc))
                with contextlib.suppress(Exception):
                    sys.stderr.write(f"deviate-cb: warning: outside writes not recorded: {exc}\n")
        except OSError:
            pass

    def _ledger(self, path: str) -> str:
        """:func:`~deviate_cb.store.ledger.ledger_file` of ``path``, as a string made cheaply (every read outside)."""
        return self._ledger_prefix + hashlib.sha1(path.encode("utf-8", "surrogateescape")).hexdigest() + ".jsonl"

    def _is_mine(self, entry: dict[str, Any]) -> bool:
        return all(entry.get(key) == value for key, value in self.identity.items())


def install_outside_writes(
    run_dir: Path,
    experiment: str,
    variant: str,
    replica: int,
    on_record: Optional[Callable[[ReplicaRecord], None]] = None,
    *,
    launch_dir: Optional[str] = None,
    script: Optional[str] = None,
) -> OutsideWrites:
    """Watch this process's writes outside ``run_dir`` (once per process): the audit hook, ``torch.save`` and
    ``torch.load`` once torch is imported, the paths ``tempfile`` makes, and the manifest fields written at exit.

    ``launch_dir`` (and ``script``) as for :class:`OutsideWrites`; the launch directory a parent process of the
    replica recorded in :data:`LAUNCH_DIR_ENV` comes first, and this process's is recorded there for its children.
    """
    watch = _state["watch"]
    if watch is not None:
        return watch
    launch_dir = os.environ.get(LAUNCH_DIR_ENV) or launch_dir or os.getcwd()
    os.environ[LAUNCH_DIR_ENV] = launch_dir
    watch = OutsideWrites(run_dir, experiment, variant, replica, on_record, launch_dir=launch_dir, script=script)
    _state["watch"] = watch
    watch_tempfile(watch.made)
    sys.addaudithook(watch.audit)
    when_imported("torch", _patch_torch)
    atexit.register(watch.flush)
    return watch


def _patch_torch(module: ModuleType) -> None:
    """``torch.save``/``torch.load`` given a path: recorded (the file is opened by C++, without an audit event)."""
    for owner in (module, getattr(module, "serialization", None)):
        if owner is None:
            continue
        for name, writing in (("save", True), ("load", False)):
            original = getattr(owner, name, None)
            if original is None or getattr(original, _MARKER, False):
                continue
            setattr(owner, name, _watched(original, writing, 1 if writing else 0))


def _watched(original: Callable[..., Any], writing: bool, position: int) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        target = args[position] if len(args) > position else kwargs.get("f")
        watch = _state["watch"]
        if watch is not None and isinstance(target, (str, bytes, os.PathLike)):
            watch._seen(target, writing)
        return original(*args, **kwargs)

    call.__wrapped__ = original  # type: ignore[attr-defined]
    call.__doc__, call.__name__ = original.__doc__, getattr(original, "__name__", "call")
    setattr(call, _MARKER, True)
    return call


def _stat(file: str) -> Optional[tuple[int, int]]:
    try:
        stat = os.stat(file)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _attempt(root: Path, identity: dict[str, Any]) -> int:
    """The replica's attempt, from its manifest (1 when it cannot be read)."""
    from deviate_cb.store.run_directory import RunDirectory, run_path

    try:
        return RunDirectory(run_path(root, identity["experiment"], identity["variant"], identity["replica"])).attempt()
    except Exception:
        return 1


def _ignored_prefixes(run_dir: Path, root: Path) -> tuple[str, ...]:
    """The folders whose files are never outside writes (each ending with the path separator)."""
    home = os.path.expanduser("~")
    folders = [
        str(root),
        str(run_dir),
        "/dev",
        "/proc",
        "/sys",
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"),
        os.path.join(home, ".keras"),
        os.environ.get("KERAS_HOME") or "",
        os.environ.get("TORCH_HOME") or "",
        os.environ.get("HF_HOME") or "",
        os.environ.get("MPLCONFIGDIR") or os.path.join(home, ".config", "matplotlib"),
    ]
    try:
        import site

        folders += [*site.getsitepackages(), site.getusersitepackages()]
    except Exception:
        pass
    return _prefixes(folders)


def _temporary_prefixes(launch_dir: str, script: Optional[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The temporary directory's prefixes, and those of the trees watched inside it: the launch directory's and
    the script's folder's, where they are inside the temporary directory or are it (a launch directory that holds
    the temporary directory leaves it out, as it does ``--out``).

    Example:
        >>> temp = tempfile.gettempdir()
        >>> project = os.path.join(temp, "proj")
        >>> temporary, kept = _temporary_prefixes(project, "")
        >>> temp + os.sep in temporary, project + os.sep in kept
        (True, True)
        >>> _temporary_prefixes(os.path.dirname(temp) or "/", "")[1]  # the launch directory holds it
        ()
    """
    temporary = _prefixes([tempfile.gettempdir()])
    trees = [launch_dir]
    if script is None:
        script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else None
    if script and os.path.isfile(script):
        trees.append(os.path.dirname(os.path.abspath(script)))
    kept = [tree for tree in _prefixes(trees) if tree.startswith(temporary)]
    return temporary, tuple(kept)


def _prefixes(folders: list[str]) -> tuple[str, ...]:
    """Each folder as it is written and resolved, ending with the path separator, without repeats."""
    found = []
    for folder in folders:
        if folder:
            found.append(os.path.join(os.path.abspath(folder), ""))
            real = os.path.realpath(folder)
            if real != os.path.abspath(folder):
                found.append(os.path.join(real, ""))
    return tuple(dict.fromkeys(found))


def note_outside_write(path: str | os.PathLike[str]) -> Optional[str]:
    """Record a write of ``path`` through this process's watch, for a folder or file written where the audit hook
    cannot see it (a logger's version folder, whose files compiled code writes); returns the absolute path
    recorded, or ``None`` when the watch ignores it or is not installed (outside a replica).

    Example:
        >>> note_outside_write("/dev/null") is None  # ignored, or no watch in this process
        True
    """
    watch = _state["watch"]
    found = watch.outside_path(path) if watch is not None else None
    if watch is not None and found is not None:
        watch.wrote(found)
    return found
