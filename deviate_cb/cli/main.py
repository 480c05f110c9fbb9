"""The ``deviate`` command: ``replicate``, ``report``, ``compare``, ``power``, ``status``, ``audit``, ``fingerprint``,
``bench``, ``import`` and ``export``.

Example:
    >>> main(["report", "/nonexistent/runs"])
    2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn, Optional

from deviate_cb.cli._common import PROG, reader_gone, refuse_missing_separator, say
from deviate_cb.cli.audit_command import add_audit
from deviate_cb.cli.bench_command import add_bench
from deviate_cb.cli.compare_command import add_compare
from deviate_cb.cli.export_command import add_export
from deviate_cb.cli.fingerprint_command import add_fingerprint
from deviate_cb.cli.import_command import add_import
from deviate_cb.cli.power_command import add_power
from deviate_cb.cli.report_command import add_report
from deviate_cb.cli.status_command import add_status
from deviate_cb.errors import MissingDependencyError, UsageError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become :class:`UsageError` (one line, exit 2) instead of usage dumps."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{' '.join(message.split())}. See `{self.prog} --help`.")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``deviate`` with one subparser per subcommand."""
    parser = _Parser(prog=PROG, description="Measure the variance of deep-learning training runs.")
    from deviate_cb import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    commands.add_parser(  # run by deviate_cb.cli.replicate, which parses its own words (see main)
        "replicate", help="run a trainer N times under a noise variant (the same as deviate-replicate)", add_help=False
    )
    add_report(commands)
    add_compare(commands)
    add_power(commands)
    add_status(commands)
    add_audit(commands)
    add_fingerprint(commands)
    add_bench(commands)
    add_import(commands)
    add_export(commands)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``deviate`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit status.

    ``deviate replicate ...`` is ``deviate-replicate ...`` (:func:`deviate_cb.cli.replicate.main`), word for word.
    """
    out, err = sys.stdout, sys.stderr
    words = list(sys.argv[1:] if argv is None else argv)
    if _is_replicate(words):
        from deviate_cb.cli.replicate import main as replicate_main

        return replicate_main(words[1:])
    after = None
    if words[:1] == ["audit"] and "--" in words:  # the training's own words: never parsed as ours
        words, after = words[: words.index("--")], words[words.index("--") + 1 :]
    try:
        parser = build_parser()
        if words[:1] == ["audit"] and after is None:
            refuse_missing_separator(parser, words, PROG)
        args = parser.parse_args(words)
        if after is not None:
            args.after = after
        args.argv = list(sys.argv[1:] if argv is None else argv)
        return int(args.handler(args, out, err))
    except (UsageError, MissingDependencyError) as exc:
        say(err, "error", str(exc))
        return 2
    except SystemExit as exc:  # --help and --version; rich's console exits 1 on a broken pipe
        if isinstance(exc.__context__, BrokenPipeError):
            return reader_gone(out, err)
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        say(err, "error", "interrupted.")
        return 130
    except BrokenPipeError:  # `deviate report runs | head`: stop quietly, also at interpreter exit
        return reader_gone(out, err)


def _is_replicate(words: Sequence[str]) -> bool:
    """Whether the command is ``deviate replicate``: its words, ``--`` and after included, are its own.

    Example:
        >>> _is_replicate(["replicate", "-n", "2"]), _is_replicate(["report", "runs"])
        (True, False)
    """
    return words[:1] == ["replicate"]


if __name__ == "__main__":
    raise SystemExit(main())
