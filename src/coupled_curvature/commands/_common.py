"""Small helpers shared by the sub-commands: status lines, the parser of a command, the flags several
commands share, and argument types.

Every numeric option is checked by its ``type=`` when the command line is parsed, before any
work, so a bad value ends in one ``ccurv: error: …`` line and exit status 2.

>>> seed("7"), count("3"), positive_float("1e-12")
(7, 3, 1e-12)
>>> seed("-1")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be an integer at least 0 and at most 4294967295, got '-1'
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

__all__ = ["say", "add_command", "add_seed", "add_net", "seed", "count", "nonnegative", "positive_float", "bounded_int"]

SEED_MAX = 2**32 - 1


def say(msg: str) -> None:
    """Progress and status lines go to stderr, results to stdout; a line wider than the terminal
    (at most 100 columns) is wrapped, its continuation indented two spaces past its own indent."""
    from coupled_curvature.reporting.terminal import display_width, terminal_width, wrap

    width = terminal_width()
    if "\n" not in msg and display_width(msg) > width:
        indent = msg[:len(msg) - len(msg.lstrip(" "))]
        msg = "\n".join(wrap(msg.lstrip(" "), width, indent=indent, hang=indent + "  "))
    print(msg, file=sys.stderr, flush=True)


def add_command(sub: argparse._SubParsersAction, name: str, run: Callable[[argparse.Namespace], int], help: str,
                description: str | None = None) -> argparse.ArgumentParser:
    """The parser of sub-command ``name``: ``help`` is its line in the list, ``description`` its page,
    ``run(args)`` what it does (its exit status); add its arguments to the parser returned."""
    p = sub.add_parser(name, help=help, description=description)
    p.set_defaults(func=run)
    return p


def add_seed(p: argparse.ArgumentParser, help: str) -> None:
    """Add ``--seed``, an integer in ``[0, 2³² − 1]`` (default 0) that ``help`` says the use of."""
    p.add_argument("--seed", type=seed, default=0, help=help)


def add_net(p: argparse.ArgumentParser, arch: str) -> None:
    """Add ``--dataset`` and ``--arch`` (default ``mlp:64x3``; ``arch`` is its help): the net a command trains."""
    p.add_argument("--dataset", default="digits", choices=("digits", "breast_cancer", "wine"))
    p.add_argument("--arch", default="mlp:64x3", help=arch)


def bounded_int(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``[lo, hi]`` (``hi=None``: no upper bound).

    >>> bounded_int(1, 5)("5")
    5
    """
    what = f"at least {lo} and at most {hi}" if hi is not None else f"≥ {lo}"

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be an integer {what}, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"must be an integer {what}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


seed = bounded_int(0, SEED_MAX)
count = bounded_int(1)
nonnegative = bounded_int(0)


def positive_float(text: str) -> float:
    """An argparse type: a finite float > 0.

    >>> positive_float("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number > 0, got '0'
    """
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


positive_float.__name__ = "number"
