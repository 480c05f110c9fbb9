"""``deviate export mlflow|wandb DIR``: a study's replicas and answers as runs of the tracker the team looks at.

Example:
    >>> import argparse, io
    >>> parser = argparse.ArgumentParser(); commands = parser.add_subparsers()
    >>> add_export(commands)
    >>> args = parser.parse_args(["export", "mlflow", "/nonexistent", "--tracking-uri", "http://127.0.0.1:1"])
    >>> args.tracker, args.mlflow_experiment, args.page
    ('mlflow', None, True)
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from typing import IO, Any

from deviate_cb.cli._common import say
from deviate_cb.errors import DeviateError, UsageError, require

__all__ = ["add_export"]


def add_export(commands: Any) -> None:
    """Declare ``deviate export mlflow`` and ``deviate export wandb`` on the ``deviate`` subparsers."""
    parser = commands.add_parser(
        "export",
        help="send a study to MLflow or Weights & Biases (a run per replica, the answers on a study run)",
        description="Send a study to an experiment tracker: one run per replica (metric histories, configuration, "
        "tags: experiment, variant, replica, seed, determinism, status, fingerprint) and a study run holding the "
        "report's answers and its HTML page. Exporting again leaves unchanged replicas alone.",
    )
    trackers = parser.add_subparsers(dest="tracker", metavar="TRACKER")
    trackers.required = True
    mlflow = trackers.add_parser("mlflow", help="to an MLflow tracking server (or any MLflow tracking URI)")
    _study_arguments(mlflow)
    mlflow.add_argument(
        "--tracking-uri",
        metavar="URI",
        default=None,
        help="MLflow tracking URI (http://host:port, sqlite:///file.db); default: $MLFLOW_TRACKING_URI",
    )
    mlflow.add_argument(
        "--mlflow-experiment",
        metavar="NAME",
        default=None,
        help="the MLflow experiment to write to (default: one per deviate experiment, of the same name)",
    )
    _timeout_argument(mlflow, "each request to the MLflow server")
    mlflow.set_defaults(handler=_run_mlflow)
    wandb = trackers.add_parser("wandb", help="to Weights & Biases (offline by default; `wandb sync` uploads)")
    _study_arguments(wandb)
    wandb.add_argument("--project", default=None, help="W&B project (default: deviate-<first experiment>)")
    wandb.add_argument("--entity", default=None, help="W&B entity (team or user; default: yours)")
    wandb.add_argument(
        "--wandb-dir",
        metavar="FOLDER",
        default=None,
        help="where W&B writes its run folders (default: DIR/.wandb-export; offline runs stay there until synced)",
    )
    wandb.add_argument(
        "--mode",
        choices=("offline", "online"),
        default="offline",
        help="offline (default): write run folders for `wandb sync`; online: upload now (needs `wandb login`)",
    )
    _timeout_argument(wandb, "starting each W&B run online (offline makes no network call)")
    wandb.set_defaults(handler=_run_wandb)


def _timeout_argument(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds,
        default=None,
        help=f"how long {what} may take before the export stops (MLflow default: $MLFLOW_HTTP_REQUEST_TIMEOUT, "
        "else 30; W&B default: its own, 90)",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"expected a number of seconds in (0, 3600], received {text!r}")
    return value


def _study_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="the study: the --out directory of deviate-replicate")
    p.add_argument(
        "--metric", action="append", default=[], metavar="NAME", help="answer for these metrics (repeatable; fnmatch)"
    )
    p.add_argument("--effect", default=None, help="smallest difference worth reporting (default: 1%% of the mean)")
    p.add_argument(
        "--no-page", dest="page", action="store_false", help="do not attach the HTML page (no matplotlib needed)"
    )


def _prepare(args: argparse.Namespace, module: str, err: IO[str]) -> tuple[Any, Any]:
    """Check the extra, matplotlib and the study, and read it: ``(export, page or None)``."""
    require(module, module)
    if args.page:
        from deviate_cb.report.rendering.html.figures import matplotlib_or_error

        matplotlib_or_error()
    from deviate_cb.trackers.export.replicas import read_study

    export = read_study(args.dir, metrics=args.metric or None, effect=args.effect)
    page = export.study.html() if args.page else None
    for line in export.study.warnings:
        say(err, "warning", line)
    return export, page


def _run_mlflow(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.trackers.export.mlflow_runs import connect, export_to_mlflow

    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        raise UsageError(
            "`--tracking-uri` is needed: the MLflow server (http://host:port) or store (sqlite:///file.db) to write "
            "to. Received: no --tracking-uri and no MLFLOW_TRACKING_URI."
        )
    export, page = _prepare(args, "mlflow", err)
    client = connect(uri, timeout_s=args.timeout, err=err)
    with _terminated_as_interrupt():
        summary = export_to_mlflow(
            export, client, experiment_name=args.mlflow_experiment, page=page,
            figures=export.study.figures() if page is not None else None,
            progress=lambda line: _line(out, line), warn=lambda line: say(err, "warning", line),
        )  # fmt: skip
    _notes(summary, err)
    parents = ", ".join(f"{run_id} (experiment {name})" for name, run_id in summary.parents.items())
    _line(out, f"{_counts(summary)} at {uri}; study runs: {parents}.")
    return 0


def _notes(summary: Any, err: IO[str]) -> None:
    """Say once what the tracker could not take as it was: renamed names, cut values."""
    if summary.renamed:
        shown = ", ".join(f"{old!r} -> {new!r}" for old, new in sorted(summary.renamed.items())[:5])
        more = f" and {len(summary.renamed) - 5} more" if len(summary.renamed) > 5 else ""
        say(err, "note", f"{len(summary.renamed)} metric or param name(s) MLflow refuses were renamed: {shown}"
            f"{more}; each run records its own in the tags deviate.metric_names and deviate.param_names (JSON, new: "
            "old)")  # fmt: skip
    if summary.truncated:
        shown = ", ".join(sorted(summary.truncated)[:5])
        say(err, "note", f"{len(summary.truncated)} value(s) longer than a tracker holds were cut, ending "
            f"'... [truncated: N characters]': {shown}")  # fmt: skip


@contextlib.contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM during the export is a KeyboardInterrupt: the run being written is ended KILLED, not left RUNNING."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_wandb(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from deviate_cb.trackers.export.wandb_runs import check_folder, export_to_wandb

    export, page = _prepare(args, "wandb", err)
    folder = check_folder(args.wandb_dir, export.directory, args.mode)
    with _stopped("W&B", str(folder)):
        summary = export_to_wandb(
            export,
            folder=folder,
            project=args.project or f"deviate-{export.experiments[0]}",
            entity=args.entity,
            mode=args.mode,
            page=page,
            progress=lambda line: _line(out, line),
            timeout_s=args.timeout,
        )
    where = (
        f"offline in {folder} (upload with: wandb sync {folder}/wandb/offline-run-*)"
        if args.mode == "offline"
        else "online"
    )
    _line(out, f"{_counts(summary)}, {where}.")
    return 0


@contextlib.contextmanager
def _stopped(tracker: str, where: str) -> Iterator[None]:
    """A tracker that fails in the middle of an export (the server went away, a disk filled up): one line, exit 2.

    The runs written before it stay; running the same command again leaves them alone and finishes the rest (a
    half-written MLflow run has no version tag yet, so it is replaced).
    """
    try:
        yield
    except (DeviateError, KeyboardInterrupt):
        raise
    except Exception as exc:
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise UsageError(
            f"the export to {tracker} ({where}) stopped: {text[:400]}. The runs listed above were written; run the "
            "same command again to finish (what is there already is left alone)."
        ) from None


def _counts(summary: Any) -> str:
    actions = ("exported", "replaced", "unchanged") + (("linked",) if summary.count("linked") else ())
    return ", ".join(f"{summary.count(action)} {action}" for action in actions)


def _line(out: IO[str], text: str) -> None:
    out.write(text + "\n")
    out.flush()
