"""A weights file in a run store is read only as far as it holds what it claims (issue 45, item 5).

``weights.npz`` (full weights) is a zip of ``.npy`` members that ``np.load`` decompresses and allocates as their
headers say. A hostile file of a few MB can hold a deflated member of a gigabyte of zeros, or a header claiming
terabytes: each reader (``read_full_weights``, ``iter_full_weights``, the stability report's layout check) refuses
it in one line naming the file, before anything is allocated. Each case runs in a subprocess whose address space
is capped, so that the old behaviour (decompress it all) fails the test instead of the machine.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the memory cap uses RLIMIT_AS")

READ = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (900 * 2**20, 900 * 2**20))
from deviate_cb.errors import UsageError
from deviate_cb.store.weights import iter_full_weights, read_full_weights
run = sys.argv[2]
try:
    if sys.argv[1] == "read":
        read_full_weights(run)
    else:
        list(iter_full_weights([run, run]))
except UsageError as exc:
    print("refused:", exc)
else:
    print("read it all")
"""


def _member_header(shape: tuple[int, ...]) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buffer.getvalue()  # the magic, the header and its padding


def _weights(run: Path, big: str) -> Path:
    """A ``weights.npz`` whose parameter ``w`` is a deflate bomb (``deflate``) or claims 10**11 values (``claim``)."""
    run.mkdir(parents=True, exist_ok=True)
    path = run / "weights.npz"
    n = 2**27  # 1 GiB of float64 zeros, about 1 MB deflated
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("__names__.npy", _npy(np.array(["w"])))
        archive.writestr("__sizes__.npy", _npy(np.array([n])))
        if big == "deflate":
            info = zipfile.ZipInfo("w.npy")
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as member:
                member.write(_member_header((n,)))
                zeros = bytes(1 << 24)
                for _ in range(n * 8 // len(zeros)):
                    member.write(zeros)
        else:
            archive.writestr("w.npy", _member_header((10**11,)) + bytes(64))
    return path


def _npy(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("big", ["deflate", "claim"])
@pytest.mark.parametrize("reader", ["read", "iter"])
def test_a_weights_bomb_is_refused_before_it_is_allocated(tmp_path: Path, big: str, reader: str) -> None:
    path = _weights(tmp_path / "replica=0", big)
    assert path.stat().st_size < 16 * 2**20
    done = subprocess.run([sys.executable, "-c", READ, reader, str(path.parent)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout.strip()
    assert said.startswith("refused:") and str(path) in said, said
    assert ("expands" if big == "deflate" else "claims") in said and "MemoryError" not in said, said
