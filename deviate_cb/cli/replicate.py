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
from deviate_cb.launch.arguments import add_replication_arguments, add_rounds_arguments, plugin_options
from deviate_cb.launch.backends.base import BackendOption
from deviate_cb.launch.progress import write_line
from deviate_cb.launch.spec import ReplicationSpec
from deviate_cb.report.text.safe import printable_message

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


def build_parser(plugin: Sequence[BackendOption] = ()) -> argparse.ArgumentParser:
    """The argument parser (values are checked by :class:`~deviate_cb.launch.spec.ReplicationSpec`), with the
    flags of ``plugin``, the options of the plug-in backend the command line names (``--backend NAME``).

    Example:
        >>> ns = build_parser().parse_args(["-n", "3", "--backend", "ray", "--num-gpus", "0.5"])
        >>> ns.runs, ns.backend, ns.num_gpus
        ('3', 'ray', '0.5')
    """
    from deviate_cb import __version__

    parser = _Parser(
        prog=PROG,
        usage="%(prog)s [options] -n N (--trainer SPEC [-- ARGS...] | -- COMMAND [ARGS...])",
        description="Run a training function N times, each in its own process, under a noise variant, "
        "recording metrics and manifests in a Hive-style run directory.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_replication_arguments(parser, plugin=plugin)
    add_rounds_arguments(parser)
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
        parser = build_parser(plugin_options(options))
        if after is None:
            refuse_missing_separator(parser, options, PROG)
        ns = parser.parse_args(options)
        if after is not None and not after and ns.trainer is None:
            raise UsageError("`COMMAND` after `--` is empty: give the command to replicate. Received: --.")
        from deviate_cb.capture.session import flush_interval
        from deviate_cb.launch.runner import run_replication

        flush_interval()  # DEVIATE_FLUSH_INTERVAL_S, which every replica's callback reads: refused before any starts
        for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if signum is not None:
                previous[signum] = signal.signal(signum, _raise_terminated)
        if ns.until_decided or ns.until_precision is not None:
            return _until(ns, after, [PROG, *args])
        result = run_replication(ReplicationSpec.from_args(ns, after, [PROG, *args]))
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


def _until(ns: argparse.Namespace, after: Optional[list[str]], argv: list[str]) -> int:
    """``--until-decided`` / ``--until-precision``: the study in rounds (:mod:`deviate_cb.launch.rounds`)."""
    from deviate_cb.launch.rounds import replicate_until
    from deviate_cb.launch.stopping_rule import StoppingRule

    rule = StoppingRule.from_args(ns)  # the rounds' flags, checked before anything else
    if getattr(ns, "no_wait", False):
        raise UsageError(
            "`--no-wait` cannot be used with --until-decided or --until-precision: each round's results decide "
            "whether another round runs. Received: --no-wait."
        )
    spec = ReplicationSpec.from_args(ns, after, argv)  # checked here: -n, --variant, --seed, ...
    result = replicate_until(spec, rule, yes=ns.yes)
    return result.exit_status


def _raise_terminated(signum: int, frame: Optional[FrameType]) -> None:
    raise _Terminated(signum)


if __name__ == "__main__":
    sys.exit(main())
