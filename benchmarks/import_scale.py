"""``deviate import mlflow`` at scale: 1,000 runs x 1,000 steps, beside MLflow's own client reading the same.

Method. A SQLite-backed MLflow store (``sqlite:///<dir>/mlflow.db``) gets ``--runs`` finished runs of one
experiment, each with ``--metrics`` metrics of ``--steps`` steps and a few params, written with the client's
batched ``log_batch`` (1,000 values a call; no server, so generating is not what is measured). Then, in one
process, side by side, in alternating order over ``--rounds``:

* client loop: what reading the histories through MLflow costs, ``MlflowClient.search_runs`` (paged) and one
  ``get_metric_history(run_id, key)`` per run and metric, nothing written;
* deviate import: ``read_mlflow`` (the runs through ``search_runs``, the histories in one read-only SQL query over
  the ``metrics`` table) and ``import_runs`` writing every replica (``metrics.parquet`` with its footer summary,
  ``run.json``) into a fresh store; split into reading and writing.

Printed: each side's median time over the rounds, the import's share spent reading and writing, and the ratio
import / client loop. Goal (issue 29): the import, writing included, no slower than the client's loop, which only
reads.

Measured 2026-11-26 on the shared 2-core VM (other jobs running), 1 round, 1,000 runs x 1 metric x 1,000 steps
(1,000,000 values; generating the store took 611 s):

    client loop (search_runs + get_metric_history per run and metric, read only): 207.04 s
    deviate import (read 9.33 s + write 11.22 s): 20.55 s
    ratio import / client loop: 0.099x (reading alone: 0.045x)

The client's loop pays one SQLAlchemy query and session per history (about 0.2 s each here); the import reads
every history in one query and spends most of its time writing 1,000 Parquet files and manifests. Where there is
no SQL path (a server, an ``mlruns/`` folder) the import calls ``get_metric_history`` itself, 8 at a time: that
path is not measured here.

With ``--server``, the same store is then served by ``mlflow server`` on loopback (one worker, what the test
suite starts) and read through it, where there is no SQL path, side by side: the client's serial loop; the same loop
on 8 threads; ``deviate import`` (``get_metric_history`` 8 at a time; writing included); and ``deviate import``
again with nothing changed (each run's listing equals the one recorded: no history is read). Issue 47 measured the
import at 40-47 s for 200 runs x 2 metrics x 500 steps, 35 s again when nothing changed.

Measured 2026-11-29 on the 2-core VM, ``--server --runs 200 --metrics 2 --steps 500`` (200,000 values):

    server: client loop, serial: 34.71 s; on 8 threads: 18.76 s
    server: deviate import (writing included): 18.16 s (0.97x the 8-thread loop)
    server: deviate import again, nothing changed (200 runs unchanged): 0.36 s (0.020x the first)

The import reads as fast as the client on 8 threads (the one-worker server is the limit), and writes besides; again
with nothing changed it is one ``search_runs`` listing: 0.36 s, where it was 35 s.

    python benchmarks/import_scale.py [--runs 1000] [--steps 1000] [--metrics 1] [--rounds 1] [--dir DIR] [--server]

Needs the mlflow extra (``pip install 'deviate-cb[mlflow]'``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def generate(uri: str, runs: int, steps: int, metrics: int) -> None:
    """``runs`` finished runs of experiment ``scale``, each ``metrics`` metrics x ``steps`` steps."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment("scale")
    now = int(time.time() * 1000)
    for k in range(runs):
        run = client.create_run(experiment_id, run_name=f"run-{k}")
        values = [
            Metric(f"metric_{m}", 1.0 / (s + 1) + k * 1e-4 + m, now + s, s)
            for m in range(metrics)
            for s in range(steps)
        ]
        params = [Param("lr", str((0.1, 0.01)[k % 2])), Param("seed", str(k))]
        for start in range(0, len(values), 1000):
            client.log_batch(run.info.run_id, metrics=values[start : start + 1000], params=params if not start else [])
        client.set_terminated(run.info.run_id)


def client_loop(uri: str, threads: int = 1) -> tuple[float, int]:
    """Seconds to read every history through ``get_metric_history`` (``threads`` calls at once), and the values
    read."""
    from mlflow.tracking import MlflowClient

    started = time.perf_counter()
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("scale")
    listed, token = [], None
    while True:
        page = client.search_runs([experiment.experiment_id], max_results=1000, page_token=token)
        listed.extend(page)
        token = page.token
        if not token:
            break
    pairs = [(run.info.run_id, key) for run in listed for key in run.data.metrics]
    with ThreadPoolExecutor(threads) as pool:
        values = sum(len(history) for history in pool.map(lambda pair: client.get_metric_history(*pair), pairs))
    return time.perf_counter() - started, values


def deviate_import(uri: str, out: Path) -> tuple[float, float, int]:
    """Seconds reading and seconds writing ``deviate import mlflow --group-by params.lr``; the values stored."""
    from deviate_cb.trackers.importing import import_runs
    from deviate_cb.trackers.importing.mlflow_source import read_mlflow

    started = time.perf_counter()
    runs = read_mlflow(uri, "scale")
    read = time.perf_counter() - started
    plan = import_runs(runs, out, base="scale", group_by=["params.lr"])
    written = time.perf_counter() - started - read
    assert all(p.action == "new" for p in plan)
    return read, written, sum(len(run.values) for run in runs)


def deviate_import_again(uri: str, out: Path) -> tuple[float, int]:
    """Seconds for ``deviate import`` over ``out`` again, nothing changed; the runs found unchanged."""
    from deviate_cb.trackers.importing import import_runs
    from deviate_cb.trackers.importing.mlflow_source import read_mlflow
    from deviate_cb.trackers.importing.writing import ImportedStore, options_digest

    started = time.perf_counter()
    store = ImportedStore.read(out)
    runs = read_mlflow(uri, "scale", listings=store.listings("mlflow", options_digest((), None, None)))
    plan = import_runs(runs, out, base="scale", group_by=["params.lr"], store=store)
    return time.perf_counter() - started, sum(p.action == "unchanged" for p in plan)


def serve(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``mlflow server`` over ``work/mlflow.db`` on a free loopback port, answering ``/health``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri",
               f"sqlite:///{work / 'mlflow.db'}", "--default-artifact-root", str(work / "artifacts"), "--host",
               "127.0.0.1", "--port", str(port), "--workers", "1"]  # fmt: skip
    log = (work / "server.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2):
                return process, uri
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"mlflow server did not answer; see {work / 'server.log'}")


def server_side(work: Path, rounds: int) -> None:
    """The server path (see the module docstring), printed."""
    process, uri = serve(work)
    try:
        serial, threaded, first, again = [], [], [], []
        for round_ in range(rounds):
            serial.append(client_loop(uri)[0])
            threaded.append(client_loop(uri, threads=8)[0])
            out = work / f"server-runs-{round_}"
            read, written, _ = deviate_import(uri, out)
            first.append(read + written)
            seconds, unchanged = deviate_import_again(uri, out)
            again.append(seconds)
            shutil.rmtree(out)
        loop, loop8, imported, repeated = (statistics.median(x) for x in (serial, threaded, first, again))
        print(f"server: client loop, serial: {loop:.2f} s; on 8 threads: {loop8:.2f} s")
        ratio = imported / loop8
        print(f"server: deviate import (writing included): {imported:.2f} s ({ratio:.2f}x the 8-thread loop)")
        print(f"server: deviate import again, nothing changed ({unchanged} runs unchanged): {repeated:.2f} s "
              f"({repeated / imported:.3f}x the first)")  # fmt: skip
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--metrics", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--server", action="store_true", help="also read the store through an mlflow server")
    parser.add_argument(
        "--dir", type=Path, help="work folder, kept, its store reused when there (default: a temporary one, removed)"
    )
    args = parser.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="deviate-import-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    try:
        started = time.perf_counter()
        if not (work / "mlflow.db").exists():  # a --dir kept from an earlier run is measured again as it is
            generate(uri, args.runs, args.steps, args.metrics)
        print(
            f"store: {args.runs} runs x {args.metrics} metric(s) x {args.steps} steps "
            f"({time.perf_counter() - started:.1f} s to generate with log_batch)"
        )
        loops, reads, writes = [], [], []
        for round_ in range(args.rounds):
            sides = ["client", "import"] if round_ % 2 == 0 else ["import", "client"]
            for side in sides:
                if side == "client":
                    seconds, n_client = client_loop(uri)
                    loops.append(seconds)
                else:
                    out = work / f"runs-{round_}"
                    read, written, n_import = deviate_import(uri, out)
                    reads.append(read)
                    writes.append(written)
                    shutil.rmtree(out)
        assert n_client == n_import, (n_client, n_import)
        loop, read, write = (statistics.median(x) for x in (loops, reads, writes))
        print(f"values: {n_import:,} (both sides)")
        print(f"client loop (search_runs + get_metric_history per run and metric, read only): {loop:.2f} s")
        print(f"deviate import (read {read:.2f} s + write {write:.2f} s): {read + write:.2f} s")
        print(f"ratio import / client loop: {(read + write) / loop:.3f}x (reading alone: {read / loop:.3f}x)")
        if args.server:
            server_side(work, args.rounds)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
