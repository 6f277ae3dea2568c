"""One parser for comma-separated lists (``--format md,html``, ``--only T4,T6``, ``--widths 8,32``).

:func:`split_list` splits and trims; :func:`parse_choices` keeps the items of a fixed set of names,
:func:`parse_list` converts each item (to ``int``, say). Lists are parsed here, at the front door,
and the computing layers take plain sequences.

>>> split_list(" md, ,html ")
['md', 'html']
>>> parse_choices("html, md", ("md", "html", "tex"), what="format", example="--format md,html")
['md', 'html']
>>> parse_choices("pdf", ("md", "html"), what="format", example="--format md")
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: unknown format(s) pdf; valid: md, html (e.g. --format md)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["split_list", "parse_choices", "parse_list"]


def split_list(value: str | Iterable[str]) -> list[str]:
    """The non-empty, trimmed items of a comma-separated string (or of an iterable of strings)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    return [s for s in (str(t).strip() for t in items) if s]


def parse_choices(value: str | Iterable[str], valid: Sequence[str], *, what: str, example: str,
                  normalize: Callable[[str], str] = str.lower, valid_text: str | None = None) -> list[str]:
    """``value`` (a comma-separated string or an iterable) as the chosen items of ``valid``, in
    ``valid``'s order; ``InvalidInputError`` naming the unknown items and the valid ones otherwise."""
    chosen = [normalize(t) for t in split_list(value)]
    bad = [c for c in chosen if c not in valid]
    if bad or not chosen:
        raise InvalidInputError(f"unknown {what}(s) {', '.join(bad) or '(none given)'}; "
                                f"{valid_text or 'valid: ' + ', '.join(valid)} (e.g. {example})")
    return [v for v in valid if v in chosen]


def parse_list(text: str, what: str, kind: Callable[[str], Any] = int) -> tuple[Any, ...]:
    """``"8,32,128"`` -> ``(8, 32, 128)`` (each item through ``kind``), with a clear error on anything else.

    >>> parse_list("8, 32", "--widths")
    (8, 32)
    >>> parse_list("8,x", "--widths")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: --widths: expected a comma-separated list, got '8,x'
    """
    try:
        return tuple(kind(t) for t in split_list(text))
    except ValueError:
        raise InvalidInputError(f"{what}: expected a comma-separated list, got {text!r}") from None
