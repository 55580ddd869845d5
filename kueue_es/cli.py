"""The ``kueue-es`` command line: kubectl-like subcommands, human output by default, ``-o json|yaml`` for machines.

Subcommands live in their own modules, listed in :data:`kueue_es.commands.COMMAND_MODULES`; each exposes
``register(subparsers)`` and sets ``func(args) -> int`` on its parser. Errors are one line on stderr:
CLI misuse and bad input exit with 2, other kueue-es errors with their ``exit_code``, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from events.errors import InvalidInput, KueueEsError
from kueue_es.commands import COMMAND_MODULES

PROG = "kueue-es"


class UsageError(InvalidInput):
    """Wrong flags or arguments (what argparse would complain about). Exit code 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting, so errors stay one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message} (see '{self.prog} --help')")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def,override]
        """A subcommand refuses what it does not know itself, so the error names it and its own help (argparse
        would hand the leftovers up to ``kueue-es``, whose help does not list the subcommand's flags)."""
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and self.prog != PROG:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def build_parser(modules: Sequence[str] = COMMAND_MODULES) -> Parser:
    parser = Parser(
        prog=PROG,
        description="Kueue's batch admission control plane, event-sourced: import, replay and audit an event log.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        func = getattr(args, "func", None)
        if func is None:
            raise UsageError(f"{PROG}: error: a command is required (see '{PROG} --help')")
        return int(func(args) or 0)
    except KueueEsError as exc:
        _error(str(exc))
        return exc.exit_code
    except SystemExit as exc:  # --help and --version exit through argparse
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (``| head``); stop quietly without a second error when Python flushes stdout.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror or exc}")
        return 1


def _error(message: str) -> None:
    text = " ".join(message.split())
    if not text.startswith(PROG):
        text = f"{PROG}: error: {text}"
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class _Version(argparse.Action):
    """``--version``, reading the package metadata only when asked (it is slow to import)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[no-untyped-def]
        sys.stdout.write(f"{PROG} {_version()}\n")
        parser.exit(0)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("kueue-es")
    except Exception:  # pragma: no cover - running from a source tree without metadata
        return "unknown"
