"""Wall time and memory to replicate a tiny training N times (default 8): warm and cold start against shell loops.

Method. Each group is a tiny training replicated N times: Lightning (``throughput_lightning.py:tiny``, an MLP, 3
epochs on 64 samples, one thread) and Keras 3 on TensorFlow (``throughput_keras.py:tiny_keras``, Dense 16 ->
Dense 2, 3 epochs on 64 samples, batch 16, ``KERAS_BACKEND=tensorflow``); ``--frameworks`` picks the groups.
Both files import their frameworks at top level: a warm-start template pre-imports what the trainer's module
imports at top level (it reads the file's imports). Four local modes per group, side by side in one run:

- sequential shell loop: ``python replicate_throughput.py --one-run SEED`` (``--one-run-keras``) once per seed,
  the way DEVIATE and the published variance studies replicate;
- ``xargs -P 2``: the same commands, two at a time;
- ``deviate-replicate --parallel 2 --cold``: one fresh interpreter per replica (the behaviour before issue 15);
- ``deviate-replicate --parallel 2``: warm start, the default: replicas forked from a template interpreter that
  imported the frameworks once (its import time is part of the study's wall time).

One untimed run per group first fills the page cache. With ``--rounds R`` the four modes of every group run
again round by round (loop, xargs, cold, warm; Lightning, then Keras) and each mode's median is reported, so the
drift of a shared machine hits all modes alike.

Memory: while each ``deviate-replicate`` run goes on, every 0.2 s (``--sample-every``) a thread of this script
sums the memory of every descendant of the ``deviate-replicate`` process (ppid links read from
``/proc/*/stat``; warm replicas are grandchildren, children of the template; the launcher itself is not
counted): the peak of the sum of RSS (``VmRSS`` of ``/proc/PID/status``, which counts pages shared
copy-on-write with the template once per process) and the peak of the sum of PSS (``Pss`` of
``smaps_rollup``, which divides each shared page among its sharers), with the number of processes at each peak;
the highest over rounds. The sampler's own CPU time is printed with each run (about 4-7% of one core for 2-3
processes: ``smaps_rollup`` walks the page tables), a cost the shell loops do not pay; ``--sample-every 0``
times without it.

First replica start: after each warm run the replicas' manifests (``run.json``) tell how each started
(``start_mode``: ``warm`` or ``cold``, with ``cold_reason`` after a fall-back) and, for a warm replica, its
``warm`` object: ``ready_to_run_s``, the seconds from the template being ready to this replica about to run the
user's code, and the template's import time (``template_import_s``; ``template_ready_s`` is read too). The
minimum ``ready_to_run_s`` over replicas is the first replica start; medians over rounds are reported. A
replica that did not start warm is reported with its reason; fields a deviate-cb without warm start does not
record read "n/a", and without ``--cold`` in its CLI the cold mode is reported as not run.

Then, for the Lightning group, ``deviate-replicate`` with the Slurm backend (a job array; needs a running Slurm,
e.g. ``integrations/slurm/start.sh``) and the Ray backend (a private local cluster, started and stopped by the
study itself: start-up included), each compared with local warm: first one replica per task (cold, a fresh
interpreter per task), then ``--replicas-per-task N/2`` (two tasks, each forking its replicas warm from one
template); a backend whose engine or cluster is missing is reported and skipped (``--backends``).

Goals (issue 15): warm at most 0.35x of the sequential loop, in each group (cold is about 0.56x); the first
replica starts under 2 s after the template is ready. Issue 7: Slurm and Ray within 2x of local, like for like:
one replica per task against local ``--cold`` (both start a fresh interpreter per replica), several per task
against local warm.

    python benchmarks/replicate_throughput.py [--runs 8] [--rounds 1] [--frameworks lightning,keras]
        [--backends local,slurm,ray] [--sample-every 0.2]

Example:
    >>> _ratio(10.0, 20.0)
    '0.50x'
    >>> _ppid(b"4242 (my (odd) name) S 17 4242 4242 0 -1")
    17
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

__all__ = ["GROUPS", "Group", "MemoryPeak", "WarmStarts", "descendants", "main", "read_starts", "tree_memory"]

HERE = Path(__file__).resolve()
BENCH = HERE.parent
REPO = HERE.parents[1]
SAMPLE_EVERY_S = 0.2
GOAL_WARM_RATIO = 0.35
GOAL_FIRST_START_S = 2.0
LOOP = "sequential shell loop"
XARGS = "xargs -P 2"
COLD = "deviate-replicate --cold"
WARM = "deviate-replicate (warm)"
MODES = (LOOP, XARGS, COLD, WARM)


@dataclass(frozen=True)
class Group:
    """One framework's tiny training, replicated by every mode."""

    name: str
    title: str
    one_run_flag: str  # this script's hidden flag that runs one replica (the shell loops' unit)
    trainer: str  # --trainer of deviate-replicate
    shell_prefix: str  # put before the interpreter in the shell loops (environment assignments)
    replicate_args: tuple[str, ...]


GROUPS: dict[str, Group] = {
    "lightning": Group("lightning", "Lightning", "--one-run", f"{BENCH / 'throughput_lightning.py'}:tiny", "", ()),
    "keras": Group(
        "keras",
        "Keras (TensorFlow)",
        "--one-run-keras",
        f"{BENCH / 'throughput_keras.py'}:tiny_keras",
        "KERAS_BACKEND=tensorflow ",
        ("--keras-backend", "tensorflow"),
    ),
}


@dataclass
class MemoryPeak:
    """Peaks of the summed memory of a process's descendants over one run (KiB), and the sampler's own cost."""

    rss_kib: int = 0
    rss_processes: int = 0
    pss_kib: Optional[int] = None  # None: no smaps_rollup could be read
    pss_processes: int = 0
    samples: int = 0
    sampler_cpu_s: float = 0.0


@dataclass
class WarmStarts:
    """How the replicas of one run started, from their manifests."""

    replicas: int = 0
    modes: Counter[str] = field(default_factory=Counter)  # start_mode -> replicas; "n/a" when not recorded
    cold_reasons: list[str] = field(default_factory=list)
    first_start_s: Optional[float] = None  # min warm.ready_to_run_s
    template_s: Optional[float] = None  # warm.template_ready_s (or template_import_s)


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x"


def _ppid(stat: bytes) -> int:
    """The parent pid in the text of ``/proc/PID/stat`` (the command name may hold spaces and parentheses)."""
    return int(stat[stat.rindex(b")") + 2 :].split()[1])


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (children, grandchildren...), from the ppid links in ``/proc``."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                parent = _ppid(stat.read())
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
        children.setdefault(parent, []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _kib(path: str, key: str) -> Optional[int]:
    """The ``key:`` line's value (kB) in a ``/proc`` file; ``None`` when the process is gone or has none."""
    try:
        with open(path) as text:
            for line in text:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_memory(root: int) -> tuple[int, Optional[int], int]:
    """Sum of RSS and sum of PSS (KiB) over the descendants of ``root``, and how many were counted.

    A process whose PSS cannot be read counts its RSS instead (an upper bound); the PSS sum is ``None`` when no
    process's could be read. Processes that end while being read are left out.
    """
    rss_sum, pss_sum, counted, pss_read = 0, 0, 0, False
    for pid in descendants(root):
        rss = _kib(f"/proc/{pid}/status", "VmRSS:")
        if rss is None:  # gone, or a zombie
            continue
        pss = _kib(f"/proc/{pid}/smaps_rollup", "Pss:")
        rss_sum += rss
        pss_sum += rss if pss is None else pss
        pss_read = pss_read or pss is not None
        counted += 1
    return rss_sum, (pss_sum if pss_read else None), counted


class _Sampler(threading.Thread):
    """Samples :func:`tree_memory` of ``root`` every :data:`SAMPLE_EVERY_S` until stopped; keeps the peaks."""

    def __init__(self, root: int, every: float = SAMPLE_EVERY_S) -> None:
        super().__init__(name="memory-sampler", daemon=True)
        self.root = root
        self.every = every
        self.peak = MemoryPeak()
        self._done = threading.Event()

    def run(self) -> None:
        began = time.thread_time()
        peak = self.peak
        while True:
            rss, pss, counted = tree_memory(self.root)
            peak.samples += 1
            if rss > peak.rss_kib:
                peak.rss_kib, peak.rss_processes = rss, counted
            if pss is not None and (peak.pss_kib is None or pss > peak.pss_kib):
                peak.pss_kib, peak.pss_processes = pss, counted
            if self._done.wait(self.every):
                break
        peak.sampler_cpu_s = time.thread_time() - began

    def stop(self) -> MemoryPeak:
        self._done.set()
        self.join()
        return self.peak


def _number(value: object) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_starts(out: Path) -> WarmStarts:
    """What the manifests ``out/experiment=*/variant=*/replica=*/run.json`` say about how each replica started."""
    starts = WarmStarts()
    ready: list[float] = []
    templates: list[float] = []
    for path in sorted(out.glob("experiment=*/variant=*/replica=*/run.json")):
        starts.replicas += 1
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            starts.modes["unreadable run.json"] += 1
            continue
        if not isinstance(manifest, dict):
            starts.modes["unreadable run.json"] += 1
            continue
        mode = manifest.get("start_mode")
        starts.modes[mode if isinstance(mode, str) and mode else "n/a"] += 1
        reason = manifest.get("cold_reason")
        if isinstance(reason, str) and reason and reason not in starts.cold_reasons:
            starts.cold_reasons.append(reason)
        warm = manifest.get("warm")
        if isinstance(warm, dict):
            seconds = _number(warm.get("ready_to_run_s"))
            if seconds is not None:
                ready.append(seconds)
            template = _number(warm.get("template_ready_s"))
            template = _number(warm.get("template_import_s")) if template is None else template
            if template is not None:
                templates.append(template)
    starts.first_start_s = min(ready) if ready else None
    starts.template_s = statistics.median(templates) if templates else None
    return starts


def _seconds(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def _mib(kib: Optional[int]) -> str:
    return "n/a" if kib is None else f"{kib / 1024:,.0f} MiB"


def _describe_starts(starts: WarmStarts) -> str:
    if not starts.replicas:
        return "no run.json found"
    modes = ", ".join(f"{mode} {count}" for mode, count in sorted(starts.modes.items()))
    return f"start_mode of {starts.replicas} replicas: {modes}"


def _tail(log: Path, limit: int = 1500) -> str:
    try:
        return log.read_bytes()[-limit:].decode(errors="replace")
    except OSError:
        return ""


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    began = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - began, proc.returncode, (proc.stdout + proc.stderr)[-1500:]


def _sampled(
    argv: list[str], env: dict[str, str], cwd: Path, log: Path, every: float
) -> tuple[float, int, str, Optional[MemoryPeak]]:
    """Run ``argv`` (output to ``log``) sampling its descendants' memory every ``every`` s (0: not at all).

    Returns the seconds it took, its exit status, the tail of its output and the peaks.
    """
    with open(log, "wb") as out:
        began = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        sampler = _Sampler(proc.pid, every) if every > 0 else None
        if sampler is not None:
            sampler.start()
        try:
            returncode = proc.wait()
            elapsed = time.perf_counter() - began
        finally:
            if proc.poll() is None:  # interrupted: let the launcher stop its replicas
                proc.terminate()
                proc.wait()
            peak = None if sampler is None else sampler.stop()
    return elapsed, returncode, _tail(log), peak


def _skip_reason(backend: str) -> Optional[str]:
    import importlib.util

    if backend == "slurm":
        if importlib.util.find_spec("submitit") is None:
            return "submitit not installed (pip install 'deviate-cb[slurm]')"
        if shutil.which("sinfo") is None or subprocess.run(["sinfo"], capture_output=True).returncode != 0:
            return "no Slurm controller answers `sinfo` (try integrations/slurm/start.sh)"
    if backend == "ray" and importlib.util.find_spec("ray") is None:
        return "Ray not installed (pip install 'deviate-cb[ray]')"
    return None


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _median(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


@dataclass
class _Results:
    """Every round's figures of one group."""

    times: dict[str, list[float]] = field(default_factory=lambda: {mode: [] for mode in MODES})
    memory: dict[str, list[MemoryPeak]] = field(default_factory=lambda: {COLD: [], WARM: []})
    starts: list[WarmStarts] = field(default_factory=list)


def _summarise(group: Group, results: _Results, runs: int, rounds: int, cold_note: Optional[str]) -> Optional[float]:
    """Print one group's medians, ratios, memory, first start and goal lines; return the warm median."""
    medians = {mode: _median(results.times[mode]) for mode in MODES}
    seq = medians[LOOP]
    across = "1 round" if rounds == 1 else f"median of {rounds} rounds"
    base = f"; ratios to the sequential shell loop ({seq:.1f} s)" if seq else ""
    print(f"\n{runs} tiny {group.title} replicas on {os.cpu_count()} cores, {across}{base}:")
    for mode in MODES:
        value = medians[mode]
        if value is None:
            why = cold_note if mode == COLD and cold_note else "failed or not run"
            print(f"  {mode:28s} n/a ({why})")
            continue
        ratio = f"  {_ratio(value, seq)}" if seq else ""
        extra = []
        if mode == WARM:
            for other, label in ((COLD, "--cold"), (XARGS, "xargs -P 2")):
                other_value = medians[other]
                if other_value:
                    extra.append(f"{_ratio(value, other_value)} of {label}")
        spread = f" [{min(results.times[mode]):.1f}-{max(results.times[mode]):.1f}]" if rounds > 1 else ""
        print(f"  {mode:28s} {value:6.1f} s{spread}{ratio}" + (f"  ({', '.join(extra)})" if extra else ""))
    print(f"  peak memory of deviate-replicate's descendants (highest of {rounds} round{'s' * (rounds > 1)}):")
    for mode, label in ((COLD, "--cold"), (WARM, "warm")):
        peaks = results.memory[mode]
        if not peaks:
            print(f"    {label:7s} n/a (not sampled, or not run)")
            continue
        rss = max(peaks, key=lambda peak: peak.rss_kib)
        pss = max(peaks, key=lambda peak: -1 if peak.pss_kib is None else peak.pss_kib)
        print(
            f"    {label:7s} RSS sum {_mib(rss.rss_kib)} ({rss.rss_processes} processes), "
            f"PSS sum {_mib(pss.pss_kib)} ({pss.pss_processes} processes)"
        )
    first = _median([s.first_start_s for s in results.starts if s.first_start_s is not None])
    template = _median([s.template_s for s in results.starts if s.template_s is not None])
    warm_replicas = sum(s.modes.get("warm", 0) for s in results.starts)
    all_replicas = sum(s.replicas for s in results.starts)
    print(
        f"  first replica start after the template is ready: {_seconds(first)} "
        f"(template import {_seconds(template)}); {warm_replicas} of {all_replicas} replicas started warm"
    )
    tag = f"[{group.name}]"
    warm = medians[WARM]
    if warm is None or not seq:
        verdict = "n/a (no figure)"
    else:
        verdict = "met" if warm <= GOAL_WARM_RATIO * seq else "missed"
        verdict += f" ({_ratio(warm, seq)}" + ("; no replica recorded start_mode warm)" if not warm_replicas else ")")
    print(f"{tag} goal warm <= {GOAL_WARM_RATIO}x of the sequential loop: {verdict}")
    verdict = (
        "n/a (no replica recorded warm.ready_to_run_s)"
        if first is None
        else ("met" if first < GOAL_FIRST_START_S else "missed")
    )
    print(f"{tag} goal first replica start < {GOAL_FIRST_START_S:.0f} s after the template is ready: {verdict}")
    return warm


@dataclass
class _Study:
    """One run of this script: where and how replicas run, and what every round measured."""

    groups: list[Group]
    runs: int
    sample_every: float
    work: Path
    env: dict[str, str]
    python: str = sys.executable
    results: dict[str, _Results] = field(default_factory=dict)
    cold_note: Optional[str] = None  # why --cold is not measured (a deviate-replicate without it)
    failed: bool = False

    def one(self, group: Group) -> str:
        """The shell command that runs one replica of ``group`` without deviate-cb (the seed follows)."""
        return f"{group.shell_prefix}{shlex.quote(self.python)} {shlex.quote(str(HERE))} {group.one_run_flag}"

    def replicate(self, trainer: str, out: Path, *options: str) -> list[str]:
        """The ``deviate-replicate`` command line of this study for ``trainer``, writing to ``out``."""
        cli = [self.python, "-m", "deviate_cb.cli.replicate"]
        return [*cli, "--trainer", trainer, "-n", str(self.runs), "--out", str(out), *options]

    def warm_up(self) -> None:
        """One untimed run per group: fills the page cache; a group whose run fails is left out."""
        for group in list(self.groups):
            _, rc, tail = _timed(["bash", "-c", f"{self.one(group)} 0"], self.env, self.work)
            if rc != 0:
                print(f"[{group.name}] skipped: one run failed (exit {rc}):\n{tail}", file=sys.stderr)
                self.groups.remove(group)
                self.failed = True
        self.results = {group.name: _Results() for group in self.groups}

    def round(self, number: int, group: Group) -> None:
        """The four local modes of ``group``, one after the other."""
        got, n, tag = self.results[group.name], self.runs, f"[{group.name}] round {number}:"
        each = shlex.quote(f'{self.one(group)} "$1" >/dev/null 2>&1')  # sh -c SCRIPT _ SEED: the seed is $1
        shell = {
            LOOP: f"for k in $(seq 0 {n - 1}); do {self.one(group)} $k >/dev/null 2>&1 || exit 1; done",
            XARGS: f"seq 0 {n - 1} | xargs -P 2 -I{{}} sh -c {each} _ {{}}",
        }
        for mode, script in shell.items():
            elapsed, rc, _ = _timed(["bash", "-c", script], self.env, self.work)
            if rc != 0:
                print(f"{tag} {mode} failed (exit {rc})", file=sys.stderr)
                self.failed = True
                continue
            got.times[mode].append(elapsed)
            print(f"{tag} {mode:28s} {elapsed:6.1f} s", flush=True)
        for mode in (COLD, WARM):
            if mode == COLD and self.cold_note:
                continue
            out = self.work / f"{group.name}-{'cold' if mode == COLD else 'warm'}-{number}"
            options = ["--backend", "local", "--parallel", "2", *group.replicate_args]
            cmd = self.replicate(group.trainer, out, *options, *(["--cold"] if mode == COLD else []))
            elapsed, rc, tail, peak = _sampled(cmd, self.env, self.work, out.with_suffix(".log"), self.sample_every)
            if rc == 2 and mode == COLD and "--cold" in tail:
                self.cold_note = "this deviate-replicate has no --cold"
                print(f"{tag} {mode:28s} skipped: {self.cold_note}", flush=True)
                continue
            if rc != 0:
                print(f"{tag} {mode} failed (exit {rc}):\n{tail}", file=sys.stderr)
                self.failed = True
                continue
            got.times[mode].append(elapsed)
            line = f"{tag} {mode:28s} {elapsed:6.1f} s"
            if peak is not None:
                got.memory[mode].append(peak)
                line += (
                    f"; peak RSS sum {_mib(peak.rss_kib)} ({peak.rss_processes} processes), PSS sum "
                    f"{_mib(peak.pss_kib)} ({peak.pss_processes}); {peak.samples} samples, sampler CPU "
                    f"{peak.sampler_cpu_s:.2f} s ({peak.sampler_cpu_s / elapsed:.1%} of one core)"
                )
            print(line, flush=True)
            if mode == WARM:
                self.check_starts(read_starts(out), got)

    @staticmethod
    def check_starts(starts: WarmStarts, got: _Results) -> None:
        got.starts.append(starts)
        print(
            f"    {_describe_starts(starts)}; first replica start {_seconds(starts.first_start_s)} after the "
            f"template was ready (template import {_seconds(starts.template_s)})",
            flush=True,
        )
        not_warm = starts.replicas - starts.modes.get("warm", 0)
        if starts.replicas and starts.modes.get("n/a", 0) == starts.replicas:
            print("    no replica recorded start_mode: a deviate-cb without warm start (all ran cold)", flush=True)
        elif not_warm:
            reasons = "; ".join(starts.cold_reasons) or "none recorded"
            print(
                f"    {not_warm} of {starts.replicas} replicas did NOT start warm; cold_reason: {reasons}", flush=True
            )

    def clusters(self, backends: list[str], warm_local: Optional[float], cold_local: Optional[float]) -> None:
        """The cluster backends on the Lightning group: one replica per task (a fresh interpreter each) against
        local ``--cold``, several per task (forked warm on the node) against local warm."""
        if backends and "lightning" not in [group.name for group in self.groups]:
            print(f"\n{', '.join(backends)}: skipped (they replicate the Lightning group, not selected)")
            return
        if backends:
            print(f"\n{self.runs} tiny Lightning replicas on cluster backends, against local:")
        for backend in backends:
            label = f"deviate-replicate {backend}"
            reason = _skip_reason(backend)
            if reason:
                print(f"  {label:28s} skipped: {reason}", flush=True)
                continue
            extra = {"slurm": ["--cpus-per-replica", "1"], "ray": ["--num-cpus", "1"]}.get(backend, [])
            per_task = max(1, self.runs // 2)  # two tasks of several replicas, each forked warm on its node
            for grouped in (False, True):
                name = f"{label} --replicas-per-task {per_task}" if grouped else label
                more = ["--replicas-per-task", str(per_task), "--parallel", str(self.runs)] if grouped else []
                out = self.work / f"runs-{backend}{'-grouped' if grouped else ''}"
                cmd = self.replicate(GROUPS["lightning"].trainer, out, "--backend", backend, *extra, *more)
                elapsed, rc, tail = _timed(cmd, self.env, self.work)
                if rc != 0:
                    print(f"{name} failed (exit {rc}):\n{tail}", file=sys.stderr)
                    self.failed = True
                    continue
                base, base_name = (warm_local, "local warm") if grouped else (cold_local, "local --cold")
                vs_local = f"  {_ratio(elapsed, base)} of {base_name}" if base else ""
                print(f"  {name:28s} {elapsed:6.1f} s{vs_local}", flush=True)
                if grouped:
                    print(f"    {_describe_starts(read_starts(out))}", flush=True)
                if base:
                    verdict = f"{'met' if elapsed <= 2 * base else 'missed'} ({_ratio(elapsed, base)})"
                    print(f"goal {name} within 2x of {base_name}: {verdict}")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="replicas per mode (default 8)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the four local modes; medians reported")
    parser.add_argument("--frameworks", default="lightning,keras", help="groups: lightning, keras (default both)")
    parser.add_argument(
        "--backends",
        default="local,slurm,ray",
        help="slurm, ray or a plug-in: run on the Lightning group after the local modes, which always run "
        "(default local,slurm,ray)",
    )
    parser.add_argument(
        "--sample-every",
        type=float,
        default=SAMPLE_EVERY_S,
        metavar="SECONDS",
        help=f"memory sampling period (default {SAMPLE_EVERY_S}; 0: no sampling, no sampler CPU in the timings)",
    )
    parser.add_argument("--one-run", type=int, metavar="SEED", help=argparse.SUPPRESS)  # a Lightning loop iteration
    parser.add_argument("--one-run-keras", type=int, metavar="SEED", help=argparse.SUPPRESS)  # a Keras one
    args = parser.parse_args(argv)
    if args.one_run is not None or args.one_run_keras is not None:
        sys.path.insert(0, str(BENCH))
        if args.one_run is not None:
            from throughput_lightning import tiny

            print(tiny(args.one_run))
        else:
            from throughput_keras import tiny_keras

            print(tiny_keras(args.one_run_keras))
        return 0
    frameworks = _names(args.frameworks)
    if not frameworks or any(name not in GROUPS for name in frameworks):
        parser.error(f"--frameworks takes {', '.join(GROUPS)}; received {args.frameworks!r}")
    if args.runs < 1 or args.rounds < 1 or args.sample_every < 0:
        parser.error("--runs and --rounds must be at least 1, --sample-every at least 0")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    with tempfile.TemporaryDirectory(prefix="deviate-throughput-") as tmp:
        study = _Study([GROUPS[name] for name in frameworks], args.runs, args.sample_every, Path(tmp), env)
        study.warm_up()
        for number in range(1, args.rounds + 1):
            for group in study.groups:
                study.round(number, group)
        warm_local: Optional[float] = None
        cold_local: Optional[float] = None
        for group in study.groups:
            warm = _summarise(group, study.results[group.name], args.runs, args.rounds, study.cold_note)
            if group.name == "lightning":
                warm_local, cold_local = warm, _median(study.results[group.name].times[COLD])
        study.clusters([name for name in _names(args.backends) if name != "local"], warm_local, cold_local)
    return 1 if study.failed else 0


if __name__ == "__main__":
    sys.exit(main())
