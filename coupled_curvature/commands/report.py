"""``ccurv report``: placeholder until its issue lands (its owner replaces this module)."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    raise SystemExit("ccurv report is not available yet")


def register(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("report", help="(not available yet)").set_defaults(func=run)
