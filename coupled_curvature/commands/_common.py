"""Small helpers shared by the sub-commands."""

from __future__ import annotations

import sys


def say(msg: str) -> None:
    """Progress and status lines go to stderr, results to stdout."""
    print(msg, file=sys.stderr, flush=True)
