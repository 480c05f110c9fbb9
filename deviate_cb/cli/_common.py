"""Pieces every ``deviate`` subcommand shares: the program name, one-line messages, argument types."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Optional

__all__ = [
    "PROG",
    "add_output_arguments",
    "add_per_run_arguments",
    "direction_argument",
    "output_to",
    "per_run_options",
    "reader_gone",
    "refuse_missing_separator",
    "say",
]

PROG = "deviate"


def direction_argument(text: str) -> tuple[str, str]:
    """Parse ``--direction NAME=max|min``.

    Example:
        >>> direction_argument("val/loss=min")
        ('val/loss', 'min')
    """
    name, sep, direction = text.rpartition("=")
    if not sep or not name or direction not in ("max", "min"):
        raise argparse.ArgumentTypeError(f"expected NAME=max or NAME=min. Received: --direction={text!r}")
    return name, direction


def say(stream: IO[str], kind: str, message: str) -> None:
    """Write ``deviate: <kind>: <message>`` as one printable line (a message quoting what a run wrote keeps no
    colour or control character: :func:`~deviate_cb.report.text.safe.printable_message`)."""
    from deviate_cb.report.text.safe import printable_message

    stream.write(f"{PROG}: {kind}: {printable_message(' '.join(message.split()))}\n")
    stream.flush()


def reader_gone(out: IO[str], err: IO[str]) -> int:
    """The exit status when the reader of the output closed it early (``deviate report DIR | head -1``): 0, the
    output pointed at ``/dev/null`` (and standard error too, when its reader is gone as well), so that nothing
    fails again when Python flushes them at exit.

    Example:
        >>> reader_gone(io.StringIO(), io.StringIO())
        0
    """
    from deviate_cb.launch.progress import quiet_if_closed

    quiet_if_closed(out, force=True)
    quiet_if_closed(err)
    return 0


def refuse_missing_separator(parser: argparse.ArgumentParser, words: list[str], program: str) -> None:
    """Words that are not options, given without ``--`` (``deviate-replicate -n 2 python train.py``, ``deviate audit
    python train.py``): one line saying to put them after ``--``, with the command line that does. ``parser``'s
    errors must be :class:`~deviate_cb.errors.UsageError` s; ``program``: what the command line starts with.

    Example:
        >>> from deviate_cb.cli.replicate import build_parser
        >>> try:
        ...     refuse_missing_separator(build_parser(), ["-n", "2", "python", "train.py"], "deviate-replicate")
        ... except Exception as exc:
        ...     print(str(exc).partition("Expected: ")[2])
        deviate-replicate -n 2 -- python train.py
    """
    import shlex

    from deviate_cb.errors import UsageError

    try:
        ns, extra = parser.parse_known_args(words)
    except UsageError:
        return  # parse_args says what is wrong first
    if not extra or extra[0].startswith("-"):
        return  # no words, or one of our options mistyped: argparse's line names it
    fixed = None
    for start in [i for i, word in enumerate(words) if word == extra[0]]:
        if _parses(parser, words[:start]):  # everything from the first word of the command on is the command
            fixed = [*words[:start], "--", *words[start:]]
            break
    if fixed is None:  # the command's words among ours (`python train.py -n 2`): ours first, then the command
        ours = list(words)
        for word in extra:
            ours.remove(word)
        fixed = [*ours, "--", *extra] if _parses(parser, ours) else None
    if getattr(ns, "trainer", None) is not None:
        what = "the --trainer function's arguments go after `--` (they become its sys.argv[1:])"
    else:
        what = "the command to replicate goes after `--`"
    expected = shlex.join([program, *fixed]) if fixed else f"{program} [options] -- {shlex.join(extra)}"
    raise UsageError(
        f"{what}; without it they are read as options. Received: {shlex.join(extra)} before any "
        f"`--`. Expected: {expected}"
    )


def _parses(parser: argparse.ArgumentParser, words: list[str]) -> bool:
    """Whether ``words`` parse as the parser's own, with no word left over."""
    from deviate_cb.errors import UsageError

    try:
        return not parser.parse_known_args(words)[1]
    except UsageError:
        return False


def add_per_run_arguments(p: argparse.ArgumentParser) -> None:
    """``--metric``, ``--aggregate`` and ``--direction``: which metrics, and how a run's series becomes one number
    (report, compare and power; :func:`per_run_options` checks them against ``--table``)."""
    from deviate_cb.stats.aggregation.spec import AGGREGATES

    p.add_argument(
        "--metric", action="append", default=[], metavar="NAME", help="only these metrics (repeatable; fnmatch)"
    )
    p.add_argument("--aggregate", choices=AGGREGATES, default=None, help="per-run reduction (default: last)")
    p.add_argument(
        "--direction",
        action="append",
        default=[],
        type=direction_argument,
        metavar="NAME=max|min",
        help="whether larger is better for a metric, for --aggregate best (repeatable; inferred from the name)",
    )


def per_run_options(args: argparse.Namespace) -> None:
    """Refuse ``--aggregate``/``--direction``/``--stage`` with ``--table``, then fill in ``--aggregate``'s default.

    They say how a run's long metrics become one number per run; the rows of a ``--table`` already are one
    number per run, so the options would be silently ignored.

    Example:
        >>> args = argparse.Namespace(table=None, aggregate=None, direction=[], stage=None)
        >>> per_run_options(args); args.aggregate
        'last'
    """
    from deviate_cb.errors import UsageError

    if args.table:
        given = [f"--aggregate={args.aggregate}"] if args.aggregate is not None else []
        given += [f"--direction={name}={how}" for name, how in getattr(args, "direction", [])]
        given += [f"--stage={args.stage}"] if getattr(args, "stage", None) is not None else []
        if given:
            raise UsageError(
                f"`{given[0].split('=')[0]}` does not apply to `--table`, whose rows already hold one value per run. "
                f"Received: {given[0]} with --table. Reduce the runs before writing the table, or give DIR instead."
            )
    if args.aggregate is None:
        args.aggregate = "last"


@contextlib.contextmanager
def output_to(path: Optional[str], default: IO[str]) -> Iterator[IO[str]]:
    """Where a command writes its result: ``default`` (standard output), or with ``-o FILE`` a buffer written to
    FILE (atomically) when the command succeeds; a FILE that cannot be written is a one-line usage error.

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "report.txt"
        >>> with output_to(str(target), io.StringIO()) as out:
        ...     _ = out.write("hello")
        >>> target.read_text()
        'hello'
    """
    if path is None:
        yield default
        return
    from deviate_cb.errors import UsageError
    from deviate_cb.store.atomic import atomic_write_bytes

    target = Path(path)
    if target.is_dir() or not target.parent.is_dir():
        why = "is a directory" if target.is_dir() else "is in a folder that does not exist"
        raise UsageError(f"`-o` must be a file that can be written, but {path} {why}. Received: -o {path}.")
    buffer = io.StringIO()
    yield buffer
    try:
        atomic_write_bytes(target, buffer.getvalue().encode("utf-8"))
    except OSError as exc:
        raise UsageError(
            f"`-o` must be a file that can be written: {os.strerror(exc.errno or 0) or exc}. Received: -o {path}."
        ) from None


def add_output_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """``--format`` (the report formats and ``html``) and ``-o FILE``, as ``report`` and ``compare`` take them."""
    from deviate_cb.report.rendering.formats import FORMATS

    p.add_argument(
        "--format",
        choices=(*FORMATS, "html"),
        default="table",
        help="output format (default: table); html: one self-contained page with plots (needs the report extra)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help=f"write the {what} to FILE instead of standard output")


def check_html(args: argparse.Namespace) -> None:
    """With ``--format html``, matplotlib must be there: one line naming the extra, before anything is read."""
    if args.format == "html":
        from deviate_cb.report.rendering.html.figures import matplotlib_or_error

        matplotlib_or_error()
