"""The ``ccurv`` command line; sub-commands live in :mod:`coupled_curvature.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys

from coupled_curvature.commands import COMMANDS
from coupled_curvature.errors import CoupledCurvatureError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ccurv",
        description="Reparameterization-invariant curvature diagnostics: checks, reports, explorers.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"coupled_curvature.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``ccurv``; exit 0 on success, 1 when a check fails, 2 on bad input."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CoupledCurvatureError as err:
        print(f"ccurv: error: {err}", file=sys.stderr)
        return 2
