"""Bounded reads of run-store files: regular files only, a size cap, a JSON nesting cap, a Parquet row cap.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "run.json")
    >>> with open(path, "w") as handle:
    ...     _ = handle.write("[" * 500 + "]" * 500)
    >>> try:
    ...     load_json(path)
    ... except HostileFileError as exc:
    ...     print(str(exc).replace(folder, "DIR"))
    DIR/run.json: JSON nested more than 100 deep; not read
    >>> os.mkfifo(os.path.join(folder, "fingerprint.json"))
    >>> try:
    ...     read_regular(os.path.join(folder, "fingerprint.json"))
    ... except HostileFileError as exc:
    ...     print(exc.reason)
    a FIFO, not a regular file
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO, Optional, Union

from deviate_cb.errors import UsageError

if TYPE_CHECKING:
    import pyarrow.parquet as pq

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_NPZ_RATIO",
    "MAX_RUN_ROWS",
    "HostileFileError",
    "check_npz",
    "check_parquet",
    "file_kind",
    "json_depth",
    "load_json",
    "loads_json",
    "open_regular",
    "read_at_most",
    "read_regular",
]

PathLike = Union[str, "os.PathLike[str]"]
# The largest JSON file a reader loads (a manifest, a fingerprint): real ones are a few KB.
MAX_JSON_BYTES = 64 * 1024 * 1024
# The deepest JSON nesting a reader accepts: real manifests nest 3 or 4 deep.
MAX_JSON_DEPTH = 100
# The most rows one run's Parquet file may hold before readers call it damaged (a run records one row per
# value: 10 M is 100,000 steps of 100 metrics).
MAX_RUN_ROWS = 10_000_000
# How many times its stored size a member of a weights .npz may expand to (np.savez stores members uncompressed).
MAX_NPZ_RATIO = 64
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}


class HostileFileError(UsageError):
    """A store file refused before it is parsed: not a regular file, too large, too deeply nested, too many rows.

    ``path`` is the file and ``reason`` what was found; ``str()`` is ``"<path>: <reason>; not read"``.
    """

    def __init__(self, path: PathLike, reason: str) -> None:
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}; not read")


def read_regular(path: PathLike, limit: int = MAX_JSON_BYTES, *, tail: bool = False) -> bytes:
    """The bytes of the regular file at ``path``, opened without blocking and read only when at most ``limit``
    (with ``tail``, its last ``limit`` bytes instead: a log, a ledger whose end is what counts).

    Raises:
        FileNotFoundError: There is no file at ``path``.
        HostileFileError: It is not a regular file (a FIFO, a device, a folder) or holds more than ``limit`` bytes.
        OSError: It cannot be read (permissions, I/O).

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "run.json")
        >>> with open(path, "wb") as handle:
        ...     _ = handle.write(b"{}")
        >>> read_regular(path)
        b'{}'
        >>> try:
        ...     read_regular(path, limit=1)
        ... except HostileFileError as exc:
        ...     print(exc.reason)
        2 bytes, more than the 1 a reader loads
        >>> read_regular(path, limit=1, tail=True)
        b'}'
    """
    with open_regular(path) as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        if tail:
            os.lseek(fd, max(0, size - limit), os.SEEK_SET)
            return os.read(fd, limit)
        if size > limit:
            raise HostileFileError(path, f"{size} bytes, more than the {limit} a reader loads")
        data = read_at_most(fd, limit)
    if len(data) > limit:
        raise HostileFileError(path, f"more than the {limit} bytes a reader loads")
    return data


def read_at_most(fd: int, limit: int) -> bytes:
    """What the open file ``fd`` holds from its position, up to ``limit + 1`` bytes: more than ``limit`` means the
    file is larger (or grew while read), for the caller to refuse. Read in chunks of 1 MiB, so a large ``limit``
    costs no buffer of its size up front.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryFile() as handle:
        ...     _ = handle.write(b"abc"); _ = handle.seek(0)
        ...     read_at_most(handle.fileno(), 2)
        b'abc'
    """
    chunks = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def open_regular(path: PathLike, refuse: Callable[[Any, str], Exception] = HostileFileError) -> BinaryIO:
    """``path`` opened for reading in binary once ``fstat`` on the open file shows a regular file; the caller
    closes it (``with``). It is opened without blocking, so a FIFO or a device left in a store never hangs a reader.

    Raises:
        FileNotFoundError: There is no file at ``path``.
        Exception: ``refuse(path, reason)`` (a :class:`HostileFileError` unless given) when it is not a regular
            file (a FIFO, a device, a folder): ``reason`` says what it is.
        OSError: It cannot be opened.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> os.mkfifo(os.path.join(folder, "fifo"))
        >>> try:
        ...     open_regular(os.path.join(folder, "fifo"))
        ... except HostileFileError as exc:
        ...     print(exc.reason)
        a FIFO, not a regular file
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not _is_regular(mode):
            raise refuse(path, f"{file_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def json_depth(data: Union[bytes, str]) -> int:
    """The deepest nesting of JSON arrays and objects in ``data``, found in one linear scan without parsing
    (brackets inside strings do not count), so that it never recurses.

    Example:
        >>> json_depth(b'{"a": [1, [2]], "b": "[[[["}'), json_depth("3"), json_depth(b"[" * 10**5)
        (3, 0, 100000)
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= 1:
        return raw.count(b"[") + raw.count(b"{")
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate((_STEP[b] for b in brackets), initial=0))


def loads_json(data: Union[bytes, str], source: PathLike, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """:func:`json.loads` of ``data`` after checking its nesting depth (``source`` names the file in errors).

    Raises:
        HostileFileError: ``data`` nests deeper than ``max_depth``.
        ValueError: ``data`` is not JSON (:class:`json.JSONDecodeError`, :class:`UnicodeDecodeError`).

    Example:
        >>> loads_json(b'{"a": [1]}', "run.json")
        {'a': [1]}
        >>> try:
        ...     loads_json("[" * 200000 + "]" * 200000, "run.json")
        ... except HostileFileError as exc:
        ...     print(exc)
        run.json: JSON nested more than 100 deep; not read
    """
    if (len(data) > 2 * max_depth) and json_depth(data) > max_depth:
        raise HostileFileError(source, f"JSON nested more than {max_depth} deep")
    return json.loads(data)


def load_json(path: PathLike, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value in the regular file at ``path`` (:func:`read_regular`, then :func:`loads_json`).

    Raises:
        FileNotFoundError: There is no file at ``path``.
        HostileFileError: Not a regular file, larger than ``max_bytes``, or nested deeper than ``max_depth``.
        ValueError: Not JSON.
        OSError: It cannot be read.

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "fingerprint.json")
        >>> with open(path, "w") as handle:
        ...     _ = handle.write('{"os": "Linux"}')
        >>> load_json(path)
        {'os': 'Linux'}
    """
    return loads_json(read_regular(path, max_bytes), path, max_depth)


def check_parquet(path: PathLike, max_rows: int = MAX_RUN_ROWS) -> pq.FileMetaData:
    """The footer of the Parquet file at ``path``, read only after checking that it is a regular file; it holds
    at most ``max_rows`` rows and key-value metadata nested at most :data:`MAX_JSON_DEPTH` deep.

    Raises:
        FileNotFoundError: There is no file at ``path``.
        HostileFileError: Not a regular file, more than ``max_rows`` rows, or metadata nested too deep.
        OSError, pyarrow.ArrowException: Not a readable Parquet file.

    Example:
        >>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "metrics.parquet")
        >>> pq.write_table(pa.table({"seq": [0, 1, 2]}), path)
        >>> check_parquet(path).num_rows
        3
        >>> try:
        ...     check_parquet(path, max_rows=2)
        ... except HostileFileError as exc:
        ...     print(exc.reason)
        3 rows, more than the 2 a run may hold (a damaged file)
    """
    import pyarrow.parquet as pq

    with open_regular(path) as handle:
        metadata = pq.read_metadata(handle)
    if metadata.num_rows > max_rows:
        raise HostileFileError(
            path, f"{metadata.num_rows} rows, more than the {max_rows} a run may hold (a damaged file)"
        )
    for key, value in (metadata.metadata or {}).items():
        if len(value) > 2 * MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:
            name = key.decode("utf-8", "replace")[:40]
            raise HostileFileError(path, f"footer metadata {name!r} nested more than {MAX_JSON_DEPTH} deep")
    return metadata


def check_npz(path: PathLike, max_ratio: int = MAX_NPZ_RATIO) -> None:
    """Check, before ``np.load`` reads it, that the ``.npz`` at ``path`` is a regular file whose members hold what
    they claim: no member expands more than ``max_ratio`` times its stored size (plus 1 MiB; ``np.savez`` stores
    weights uncompressed, and real weights barely compress), and no ``.npy`` header claims more data than its
    member holds (``np.load`` allocates what the header says before it reads). A damaged zip is left to ``np.load``.

    Raises:
        FileNotFoundError: There is no file at ``path``.
        HostileFileError: Not a regular file, a member that would expand too far, or a header claiming too much.

    Example:
        >>> import tempfile
        >>> import numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "weights.npz")
        >>> np.savez(path, a=np.ones(3))
        >>> check_npz(path)
        >>> os.mkfifo(os.path.join(os.path.dirname(path), "fifo.npz"))
        >>> try:
        ...     check_npz(os.path.join(os.path.dirname(path), "fifo.npz"))
        ... except HostileFileError as exc:
        ...     print(exc.reason)
        a FIFO, not a regular file
    """
    import zipfile

    with open_regular(path) as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError):
            return  # np.load says what is wrong with it
        with archive:
            for info in archive.infolist():
                if info.file_size > (1 << 20) + max_ratio * info.compress_size:
                    raise HostileFileError(
                        path, f"member {info.filename[:60]!r} expands {info.compress_size} bytes to {info.file_size}"
                    )
                claimed = _npy_claim(archive, info)
                if claimed is not None and claimed > info.file_size:
                    raise HostileFileError(
                        path, f"member {info.filename[:60]!r} claims {claimed} bytes of data in {info.file_size}"
                    )


def _npy_claim(archive: Any, info: Any) -> Optional[int]:
    """The bytes of data the ``.npy`` header of ``info`` claims; ``None`` where it cannot say (left to np.load)."""
    import numpy as np

    if not info.filename.endswith(".npy"):
        return None
    with archive.open(info) as member:
        try:
            version = np.lib.format.read_magic(member)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(member)
        except Exception:  # a header numpy cannot read: np.load refuses it too
            return None
    count = 1
    for size in shape:
        count *= int(size)
    return count * int(dtype.itemsize)


def file_kind(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, in words, for a line saying why it is not read.

    Example:
        >>> import stat
        >>> file_kind(stat.S_IFIFO | 0o644), file_kind(stat.S_IFREG | 0o644)
        ('a FIFO', 'a regular file')
    """
    if stat.S_ISREG(mode):
        return "a regular file"
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)
