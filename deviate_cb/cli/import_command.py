"""``deviate import mlflow|tensorboard|csv-logs|wandb``: runs you already have, as replicas of the run store.

Example:
    >>> import argparse, io
    >>> parser = argparse.ArgumentParser(); commands = parser.add_subparsers()
    >>> add_import(commands)
    >>> args = parser.parse_args(["import", "csv-logs", "/nonexistent", "--out", "runs"])
    >>> args.handler(args, io.StringIO(), io.StringIO())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    deviate_cb.errors.UsageError: `LOGDIR` must be an existing folder of Lightning logs... Received: /nonexistent.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from deviate_cb.cli._common import say
from deviate_cb.errors import UsageError

if TYPE_CHECKING:
    from deviate_cb.trackers.importing.writing import ImportedStore

__all__ = ["add_import"]

_SOURCES = {
    "mlflow": "an MLflow experiment: a tracking server, a sqlite:/// store or an mlruns/ folder",
    "tensorboard": "TensorBoard event files (Lightning's TensorBoardLogger, Keras' TensorBoard callback)",
    "csv-logs": "Lightning's CSVLogger (metrics.csv and hparams.yaml of each version_N)",
    "wandb": "W&B offline runs (a wandb/ folder of offline-run-* folders: WandbLogger or wandb.init offline, "
    "deviate export wandb)",
}


def add_import(commands: Any) -> None:
    """Declare ``deviate import`` and its sources on the ``deviate`` subparsers."""
    parser = commands.add_parser(
        "import",
        help="turn MLflow, TensorBoard, CSVLogger or W&B offline runs into replicas of a run store",
        description="Import the runs of an experiment tracker into a run store: each run becomes one replica "
        "(its full metric histories, params/hparams, seed, and its source in run.json), grouped by --group-by. "
        "Re-importing updates or skips, never duplicates.",
    )
    sources = parser.add_subparsers(dest="source", metavar="SOURCE", parser_class=type(parser))
    sources.required = True
    for name, help_text in _SOURCES.items():
        aliases = ["csv"] if name == "csv-logs" else []  # what users type first
        p = sources.add_parser(name, aliases=aliases, help=help_text, description=f"Import {help_text}.")
        if name == "mlflow":
            p.add_argument(
                "--tracking-uri",
                metavar="URI",
                default=os.environ.get("MLFLOW_TRACKING_URI"),
                help="http://HOST:PORT, sqlite:///PATH or an mlruns/ folder (default: $MLFLOW_TRACKING_URI)",
            )
            p.add_argument("--experiment", metavar="NAME", required=True, help="the MLflow experiment to import")
            p.add_argument(
                "--filter",
                metavar="EXPR",
                help="only the runs this MLflow search filter keeps, as mlflow.search_runs takes it "
                "(e.g. \"params.lr = '0.1'\", \"tags.team = 'vision'\", \"attributes.run_name LIKE 'bert-%%'\")",
            )
        else:
            p.add_argument("logdir", metavar="LOGDIR", help="the folder of the logs (e.g. lightning_logs/)")
        _common_arguments(p)
        p.set_defaults(handler=_run_import, source=name)


def _common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="the run store to write (created when missing)")
    p.add_argument(
        "--group-by",
        action="append",
        default=[],
        metavar="KEY",
        help="params.NAME, tags.NAME or hparams.NAME: one experiment per value (repeatable, or comma-separated)",
    )
    p.add_argument(
        "--name",
        metavar="NAME",
        help="the experiment name the groups start with (default: a run's deviate.experiment tag, else the "
        "tracker's experiment, or LOGDIR's name)",
    )
    p.add_argument(
        "--variant",
        metavar="NAME",
        help="the variant of the replicas (default: a run's deviate.variant tag, else imported; algo+impl, algo, "
        "impl or control when you know which noise the runs had)",
    )
    p.add_argument(
        "--run-name",
        action="append",
        default=[],
        metavar="GLOB",
        help="only the runs whose name matches (fnmatch; MLflow's run name, a log folder's path; repeatable)",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the runs holding this param, tag or hparam value (e.g. params.optimizer=adam; repeatable: all)",
    )
    p.add_argument(
        "--include-parents",
        action="store_true",
        help="import the runs other runs name as their parent too (a sweep's parent run; left out by default)",
    )
    p.add_argument("--metric", action="append", default=[], metavar="NAME", help="only these metrics (fnmatch)")
    p.add_argument("--seed-key", metavar="KEY", help="the key holding each run's seed (default: params.seed, ...)")
    p.add_argument(
        "--min-step",
        type=int,
        metavar="N",
        help="a run whose logs end before step N is imported incomplete (TensorBoard and CSV logs record no status)",
    )


def _run_import(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.trackers.importing import import_runs
    from deviate_cb.trackers.importing.selection import RunSelection, select_runs
    from deviate_cb.trackers.importing.writing import ImportedStore

    selection = RunSelection.parse(args.run_name, args.where, args.include_parents)
    store = ImportedStore.read(Path(args.out))  # once: the source's reader and the plan both ask it
    notes: list[str] = []
    runs, base = _read_source(args, notes, store)
    for note in notes:  # a file of the logs refused, folders not walked: one line each, before anything else
        say(err, "warning", note)
    chosen: list[str] = []
    runs = select_runs(runs, selection, chosen)
    group_by = [key.strip() for value in args.group_by for key in value.split(",") if key.strip()]
    plan = import_runs(
        runs,
        Path(args.out),
        base=base,
        name=args.name,
        group_by=group_by,
        variant=args.variant,
        metrics=args.metric,
        seed_key=args.seed_key,
        min_step=args.min_step,
        notes=chosen,
        store=store,
    )
    for note in chosen:  # what was left out or placed by its tags, and why
        say(err, "note", note)
    groups: dict[str, Counter[str]] = {}
    for placement in plan:
        where = f"experiment={placement.experiment} variant={placement.variant}"
        groups.setdefault(where, Counter())[placement.action] += 1
    for where, counts in sorted(groups.items()):
        out.write(f"{where}: {counts['new']} new, {counts['updated']} updated, {counts['unchanged']} unchanged\n")
    apart = [p for p in plan if p.run.status != "completed"]
    if apart:
        out.write(f"not completed ({len(apart)}; listed apart, left out of the statistics):\n")
        for p in sorted(apart, key=lambda p: p.path_name):
            said = p.run.tracker_status or "no status"
            out.write(f"  {p.path_name}: {p.run.status} ({p.run.tracker} {said}; run {p.run.label()})\n")
    total = Counter(p.action for p in plan)
    say(
        err,
        "note",
        f"{len(plan)} run(s) of {runs[0].tracker} into {args.out}: {total['new']} new, {total['updated']} updated, "
        f"{total['unchanged']} unchanged (a run is one replica, found again by its run id).",
    )
    return 0


def _read_source(args: argparse.Namespace, notes: list[str], store: ImportedStore) -> tuple[list, str]:
    if args.source == "mlflow":
        from deviate_cb.trackers.importing.mlflow_source import read_mlflow

        if not args.tracking_uri:
            raise UsageError(
                "`--tracking-uri` is required (or $MLFLOW_TRACKING_URI). Received: neither. "
                "Expected: http://HOST:PORT, sqlite:///PATH or an mlruns/ folder."
            )
        from deviate_cb.trackers.importing.writing import options_digest

        options = options_digest(args.metric, args.seed_key, args.min_step)
        runs = read_mlflow(
            args.tracking_uri,
            args.experiment,
            filter_string=args.filter,
            deleted_of=store.run_ids("mlflow"),
            listings=store.listings("mlflow", options),
        )
        return runs, args.experiment
    logdir = Path(args.logdir)
    if not logdir.is_dir():
        raise UsageError(
            f"`LOGDIR` must be an existing folder of Lightning logs (version_N/ folders) or event files. "
            f"Received: {args.logdir}."
        )
    base = logdir.resolve().name or "logs"
    if args.source == "tensorboard":
        from deviate_cb.trackers.importing.tensorboard_source import read_tensorboard

        return read_tensorboard(logdir, notes), base
    if args.source == "wandb":
        from deviate_cb.trackers.importing.wandb_source import read_wandb

        return read_wandb(logdir, notes), base
    from deviate_cb.trackers.importing.csv_source import read_csv_logs

    return read_csv_logs(logdir, notes), base
