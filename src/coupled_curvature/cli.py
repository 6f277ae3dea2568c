"""The ``ccurv`` command line; sub-commands live in :mod:`coupled_curvature.commands`.

Building the parser imports neither torch nor sympy: each command imports its engine when it
runs. Errors of the user's making end in one ``ccurv: error: …`` line and exit status 2; Ctrl-C
and SIGTERM end in one ``ccurv: interrupted`` line (status 130 / 143), with every previous output
left as it was (:mod:`coupled_curvature.base.output`).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from typing import NoReturn

from coupled_curvature.commands import COMMANDS
from coupled_curvature.base.errors import CoupledCurvatureError


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block), the same for every sub-command."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("ccurv").strip()
        print(f"ccurv: error: {where + ': ' if where else ''}{message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt so that every ``finally`` and cleanup runs."""


def _on_sigterm(signum: int, frame: object) -> NoReturn:
    raise _Terminated()


def build_parser() -> argparse.ArgumentParser:
    from coupled_curvature import __version__

    parser = _Parser(
        prog="ccurv",
        description="Reparameterization-invariant curvature diagnostics: checks, reports, explorers.",
    )
    parser.add_argument("--version", action="version", version=f"ccurv (coupled-curvature) {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"coupled_curvature.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``ccurv``; exit 0 on success, 1 when a check fails, 2 on bad input, 130/143 if interrupted."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # a one-line argument error: return its status; --help exits as usual
        if done.code == 2:
            return 2
        raise
    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        return int(args.func(args))
    except CoupledCurvatureError as err:
        print(f"ccurv: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        what = "terminated" if isinstance(err, _Terminated) else "interrupted"
        print(f"ccurv: {what}; earlier output files were left as they were", file=sys.stderr)
        return 143 if isinstance(err, _Terminated) else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # python -m coupled_curvature.cli, like python -m coupled_curvature
    raise SystemExit(main())
