"""``deviate-replicate``: run a trainer N times under a noise variant and record every run.

Example:
    deviate-replicate --trainer mypkg.train:main -n 8 --variant algo+impl --out runs/ --experiment resnet
    deviate-replicate -n 5 --parallel 2 -- python src/train.py model=small trainer.max_epochs=3
    deviate-replicate -n 4 --variant algo -- python train.py --seed {seed} --out {run_dir}/ckpt
    deviate-replicate --trainer examples/lightning_mlp.py:main -n 3 --variant control --parallel 2
    deviate-replicate --trainer examples/keras_mlp.py:main -n 3 --variant control --keras-backend jax
    deviate-replicate --trainer mypkg.train:main -n 20 --backend slurm --partition gpu --gpus-per-replica 1 --no-wait
    deviate-replicate --trainer mypkg.train:main -n 20 --backend ray --address head:6379 --num-gpus 1
    deviate-replicate --trainer mypkg.train:main -n 64 --backend slurm --gpus-per-replica 1 --replicas-per-task 8

Exit status: 0 every replica completed, 1 some replica failed (or timed out), or the study stopped because the
run directory could not be written (the disk is full, an I/O error: one line on stderr naming the file; rerun
the same command to resume), 2 usage error or a backend whose engine is not installed (one line on stderr),
130 interrupted with Ctrl-C (running replicas terminated and recorded ``killed``; 143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any, NoReturn, Optional

from deviate_cb.cli._common import refuse_missing_separator
from deviate_cb.errors import MissingDependencyError, UsageError
from deviate_cb.launch.progress import write_line
from deviate_cb.report.text import printable_message

__all__ = ["build_parser", "main"]

PROG = "deviate-replicate"

_EPILOG = """\
variants (seed of replica k; deterministic tooling):
  algo+impl   base seed + k; off   everything users normally see (default)
  algo        base seed + k; on    algorithmic (seed) noise only
  impl        base seed;     off   implementation noise only
  control     base seed;     on    nothing: replicas must be bit-identical

The function may take no argument, `seed` (int), or `ctx`/`context`/`run_context` (RunContext); a returned
mapping of numbers is recorded as final metrics. Or give the command you train with after `--` (`python
train.py ...`, `python -m pkg.train ...`, a console script); {seed}, {replica}, {run_dir}, {variant} and
{experiment} in it are filled per replica. Lightning Trainers and Keras Model.fit/evaluate calls get a
DeviateCallback when they have none; the project's own seed_everything(42)-style calls are taken over so that
replicas differ as the variant says (--keep-project-seeds leaves them alone).
Re-running the same command skips completed replicas (and, on Slurm, replicas still queued or running under
an earlier job); --force reruns them. The run directory must be on storage every node sees (slurm, ray).
exit status: 0 all completed (or submitted with --no-wait), 1 some failed or the study stopped because the
run directory could not be written (disk full: free space, rerun to resume), 2 usage error, 130 interrupted."""


class _Parser(argparse.ArgumentParser):
    """argparse, but its errors become one-line usage errors instead of a usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message[:1].upper()}{message[1:]}. See `{PROG} --help`.")


class _Terminated(KeyboardInterrupt):
    """SIGTERM/SIGHUP received: handled like Ctrl-C (replicas terminated and recorded killed)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (values are validated by :func:`deviate_cb.launch.runner.replicate`)."""
    from deviate_cb import __version__

    parser = _Parser(
        prog=PROG,
        usage="%(prog)s [options] -n N (--trainer SPEC [-- ARGS...] | -- COMMAND [ARGS...])",
        description="Run a training function N times, each in its own process, under a noise variant, "
        "recording metrics and manifests in a Hive-style run directory.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--trainer",
        metavar="SPEC",
        help="module:function or path/to/file.py:function (or give a command after --)",
    )
    parser.add_argument("-n", "--runs", required=True, metavar="N", help="number of replicas")
    parser.add_argument("--variant", default="algo+impl", help="algo+impl (default), algo, impl or control")
    parser.add_argument("--seed", default="0", metavar="SEED", help="base seed (default 0)")
    parser.add_argument("--out", default="deviate_runs", metavar="DIR", help="output directory (default deviate_runs)")
    parser.add_argument("--experiment", metavar="NAME", help="experiment name (default: module name or file stem)")
    parser.add_argument(
        "--parallel",
        metavar="K",
        help="replicas run at once (default: 1 locally, all on slurm/ray: the cluster queues); each gets cores // K "
        "CPU threads unless OMP_NUM_THREADS is set",
    )
    parser.add_argument("--timeout", metavar="SECONDS", help="terminate a replica after this long (marked timeout)")
    parser.add_argument("--force", action="store_true", help="rerun replicas that already completed")
    parser.add_argument(
        "--max-replicas",
        metavar="N",
        help="the most replicas -n may ask for (default 10000, a guard against a typo); raise it to launch more",
    )
    parser.add_argument(
        "--keep-project-seeds",
        action="store_true",
        help="leave the project's own seeding calls (seed_everything(42), ...) alone; suppresses seed variance",
    )
    parser.add_argument(
        "--keep-project-determinism",
        action="store_true",
        help="leave the project's own determinism switches (torch.use_deterministic_algorithms, "
        "enable_op_determinism, Trainer(deterministic=...)) in effect; the variant may then not measure what it says",
    )
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="run each replica in its own working directory <run_dir>/.workdir/<this directory's name>, which links "
        "every top-level entry of this directory (and .. those of its parent), so files the project writes to "
        "relative paths (history.json, ./out/ckpt.pt, a linked file it rewrites) are its own",
    )
    rounds = parser.add_argument_group("replicate until the answer is known (rounds of --parallel replicas, or one)")
    rounds.add_argument(
        "--until-decided",
        action="store_true",
        help="run this group and the --against group in rounds until a group-sequential test decides which is "
        "better on --metric (or, with --effect, that no difference that large exists), or --max-runs",
    )
    rounds.add_argument("--against", action="append", default=[], metavar="KEY=VALUE",
                        help="the group to compare with, e.g. experiment=baseline (repeatable, ANDed)")  # fmt: skip
    rounds.add_argument(
        "--until-precision",
        metavar="REL",
        help="run this group in rounds until its std of --metric is known to +-REL (half-width of the interval over "
        "the std, e.g. 0.25), or --max-runs",
    )
    rounds.add_argument("--metric", metavar="NAME", help="the metric the rounds decide on, e.g. val_acc")
    rounds.add_argument("--max-runs", metavar="N", help="the most runs per group")
    rounds.add_argument("--direction", metavar="max|min", help="whether higher is better (default: from the name)")
    rounds.add_argument("--effect", metavar="X", help="a difference that matters, in the metric's units")
    rounds.add_argument("--alpha", default="0.05", metavar="A", help="error rate over the whole sequence (0.05)")
    rounds.add_argument(
        "--on",
        default="mean",
        choices=("mean", "spread", "improvement"),
        help="decide on the mean, the spread, or improvement: P(A>B) (a run of A beats a run of B, ties half) "
        "against --threshold",
    )
    rounds.add_argument(
        "--threshold",
        metavar="P",
        help="with --on improvement: A better when P(A>B)'s repeated interval is above P, B better below 1 - P, "
        "no improvement either way inside (1 - P, P); in (0.5, 1) (default 0.75, Bouthillier et al. 2021)",
    )
    rounds.add_argument(
        "--boundary",
        metavar="B",
        help="--until-decided: obf (the default: O'Brien-Fleming-type, early looks decide only on a large "
        "difference) or pocock (one level at every look); a sequence under way keeps the one it was planned with",
    )
    rounds.add_argument("--level", default="0.95", metavar="L", help="--until-precision: the std interval's level")
    rounds.add_argument("--yes", action="store_true",
                        help="--until-decided: relaunch the --against group even when its run.json records another "
                        "program or directory than this command's (shown; asked on a terminal otherwise)")  # fmt: skip
    parser.add_argument(
        "--cold",
        action="store_true",
        help="start every replica as a fresh interpreter (default: fork them from a template that has imported "
        "the frameworks once; the numbers are the same)",
    )
    parser.add_argument(
        "--metric-regex",
        action="append",
        default=[],
        metavar="REGEX",
        help="record the last match of each named group in a replica's output as a final metric, "
        "e.g. 'acc=(?P<acc>[0-9.]+)' (repeatable)",
    )
    parser.add_argument(
        "--gpus",
        metavar="IDS",
        help="GPU ids to spread slots over, e.g. 0,1, or 'none' (default: CUDA_VISIBLE_DEVICES, else NVML)",
    )
    parser.add_argument(
        "--keras-backend",
        metavar="NAME",
        help="tensorflow, torch or jax: KERAS_BACKEND of every replica (default: the environment's)",
    )
    parser.add_argument(
        "--backend", default="local", metavar="NAME", help="local (default), slurm, ray, or an installed plug-in"
    )
    slurm = parser.add_argument_group("slurm backend (submitit job array; needs pip install 'deviate-cb[slurm]')")
    ray = parser.add_argument_group("ray backend (needs pip install 'deviate-cb[ray]')")
    cluster = parser.add_argument_group("slurm and ray backends")
    backend_options = [  # handed to the backend by name; the backend refuses those that are not its own
        slurm.add_argument("--partition", metavar="NAME", help="Slurm partition"),
        slurm.add_argument("--gpus-per-replica", metavar="N", help="GPUs per replica (--gpus-per-node of each task)"),
        slurm.add_argument("--cpus-per-replica", metavar="N", help="CPUs per replica (--cpus-per-task)"),
        slurm.add_argument("--mem", metavar="SIZE", help="memory per replica, e.g. 8G"),
        slurm.add_argument(
            "--time", metavar="LIMIT", help="time limit per replica, e.g. 90 or 1:30:00 (default 60 min)"
        ),
        slurm.add_argument("--account", metavar="NAME", help="Slurm account to charge"),
        slurm.add_argument("--qos", metavar="NAME", help="Slurm quality of service"),
        slurm.add_argument(
            "--slurm-opt", action="append", metavar="KEY=VALUE", help="any other sbatch option (repeatable)"
        ),
        slurm.add_argument(
            "--no-wait", action="store_true", help="submit and return; follow with `deviate status DIR`"
        ),
        ray.add_argument("--address", metavar="ADDR", help="Ray cluster address (default: start a local one)"),
        ray.add_argument("--num-gpus", metavar="X", help="GPUs per replica task (fractions allowed)"),
        ray.add_argument("--num-cpus", metavar="X", help="CPUs per replica task (default 1)"),
        cluster.add_argument(
            "--replicas-per-task",
            metavar="K",
            help="replicas each cluster task runs one after another, forked warm from one template per task "
            "(default 1: a task per replica); the resources asked are then a task's",
        ),
    ]
    parser.set_defaults(backend_option_names=tuple(action.dest for action in backend_options))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``deviate-replicate`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    A reader that closes the output early (``deviate-replicate ... | head -1``) stops no replica: the launcher's
    lines go to ``/dev/null`` from then on and the study runs to its end (its exit status as ever); the same
    when ``--help`` is cut short, quietly, with status 0.
    """
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # --help or --version cut short: no traceback, nothing at exit
        from deviate_cb.cli._common import reader_gone

        return reader_gone(sys.stdout, sys.stderr)


def _main(args: list[str]) -> int:
    options, after = (args[: args.index("--")], args[args.index("--") + 1 :]) if "--" in args else (args, None)
    previous: dict[int, Any] = {}
    try:
        parser = build_parser()
        if after is None:
            refuse_missing_separator(parser, options, PROG)
        ns = parser.parse_args(options)
        if after is not None and not after and ns.trainer is None:
            raise UsageError("`COMMAND` after `--` is empty: give the command to replicate. Received: --.")
        from deviate_cb.capture.session import flush_interval
        from deviate_cb.launch.runner import replicate

        flush_interval()  # DEVIATE_FLUSH_INTERVAL_S, which every replica's callback reads: refused before any starts
        for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if signum is not None:
                previous[signum] = signal.signal(signum, _raise_terminated)
        launch: dict[str, Any] = dict(
            trainer=ns.trainer,
            command=after if ns.trainer is None else None,
            trainer_args=(after or ()) if ns.trainer is not None else (),
            keep_project_seeds=ns.keep_project_seeds,
            keep_project_determinism=ns.keep_project_determinism,
            cold=ns.cold,
            isolate=ns.isolate,
            metric_regex=ns.metric_regex,
            runs=_number(ns.runs, int),
            variant=ns.variant,
            seed=_number(ns.seed, int),
            out=ns.out,
            experiment=ns.experiment,
            parallel=None if ns.parallel is None else _number(ns.parallel, int),
            timeout=None if ns.timeout is None else _number(ns.timeout, int, float),
            force=ns.force,
            gpus=ns.gpus,
            keras_backend=ns.keras_backend,
            backend=ns.backend,
            backend_options={name: getattr(ns, name) for name in ns.backend_option_names},
            argv=[PROG, *args],
            **({} if ns.max_replicas is None else {"max_replicas": _number(ns.max_replicas, int)}),
        )
        if ns.until_decided or ns.until_precision is not None:
            return _until(ns, launch)
        result = replicate(**launch)
    except (UsageError, MissingDependencyError) as exc:  # may quote a replica's trainer_error: printable
        write_line(sys.stderr, f"{PROG}: error: {printable_message(' '.join(str(exc).split()))}")
        return 2
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, _Terminated) else signal.SIGINT
        write_line(sys.stderr, f"{PROG}: interrupted ({signal.Signals(signum).name}); running replicas were killed.")
        return 128 + signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if result.stopped:  # the run directory could not be written (disk full): the study stopped early
        write_line(sys.stderr, f"{PROG}: error: {printable_message(' '.join(result.stopped.split()))}")
    return result.exit_status


def _until(ns: argparse.Namespace, launch: dict[str, Any]) -> int:
    """``--until-decided`` / ``--until-precision``: the study in rounds (:mod:`deviate_cb.launch.rounds`)."""
    from deviate_cb.launch.rounds import replicate_until

    if ns.until_decided and ns.until_precision is not None:
        raise UsageError("give `--until-decided` or `--until-precision`, not both. Received: both.")
    if ns.max_runs is None:
        raise UsageError("`--max-runs` is required with --until-decided and --until-precision. Received: none.")
    if getattr(ns, "no_wait", False):
        raise UsageError(
            "`--no-wait` cannot be used with --until-decided or --until-precision: each round's results decide "
            "whether another round runs. Received: --no-wait."
        )
    if ns.direction is not None and ns.direction not in ("max", "min"):
        raise UsageError(f"`--direction` must be max or min. Received: --direction={ns.direction}.")
    numbers = {
        "--max-runs": _number(ns.max_runs, int),
        "--alpha": _number(ns.alpha, float),
        "--effect": None if ns.effect is None else _number(ns.effect, float),
        "--until-precision": None if ns.until_precision is None else _number(ns.until_precision, float),
        "--level": _number(ns.level, float),
        "--threshold": None if ns.threshold is None else _number(ns.threshold, float),
    }
    for option, value in numbers.items():
        if isinstance(value, str):
            raise UsageError(f"`{option}` must be a number. Received: {option}={value}.")
    if not isinstance(launch.get("runs"), int):
        raise UsageError(f"`--runs` must be a positive integer. Received: --runs={launch.get('runs')!r}.")
    if ns.metric is None:
        raise UsageError("`--metric` is required with --until-decided and --until-precision. Received: none.")
    from deviate_cb.stats.directions import infer_direction

    direction = ns.direction or infer_direction(ns.metric)
    if direction is None and ns.until_decided:
        raise UsageError(
            f"cannot tell whether a higher or a lower {ns.metric} is better: pass --direction max or --direction min. "
            f"Received: --metric {ns.metric}."
        )
    result = replicate_until(
        launch=launch,
        metric=ns.metric,
        max_runs=numbers["--max-runs"],
        against=ns.against,
        precision=numbers["--until-precision"],
        direction=direction,
        effect=numbers["--effect"],
        alpha=numbers["--alpha"],
        on=ns.on,
        level=numbers["--level"],
        boundary=ns.boundary,
        threshold=numbers["--threshold"],
        yes=ns.yes,
    )
    return result.exit_status


def _number(raw: str, *kinds: type) -> Any:
    """``raw`` as the first of ``kinds`` that parses it; the raw text when none does (validation then names it).

    Example:
        >>> _number("3", int), _number("2.5", int, float), _number("x", int)
        (3, 2.5, 'x')
    """
    for kind in kinds:
        try:
            return kind(raw.strip())
        except ValueError:
            continue
    return raw


def _raise_terminated(signum: int, frame: Optional[FrameType]) -> None:
    raise _Terminated(signum)


if __name__ == "__main__":
    sys.exit(main())
