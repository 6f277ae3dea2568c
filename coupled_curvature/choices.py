"""One parser for comma-separated choices (``--format md,html``, ``--only T4,T6``).

>>> parse_choices("html, md", ("md", "html", "tex"), what="format", example="--format md,html")
['md', 'html']
>>> parse_choices("pdf", ("md", "html"), what="format", example="--format md")
Traceback (most recent call last):
...
coupled_curvature.errors.InvalidInputError: unknown format(s) pdf; valid: md, html (e.g. --format md)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from coupled_curvature.errors import InvalidInputError

__all__ = ["parse_choices"]


def parse_choices(value: str | Iterable[str], valid: Sequence[str], *, what: str, example: str,
                  normalize: Callable[[str], str] = str.lower, valid_text: str | None = None) -> list[str]:
    """``value`` (a comma-separated string or an iterable) as the chosen items of ``valid``, in
    ``valid``'s order; ``InvalidInputError`` naming the unknown items and the valid ones otherwise."""
    items = value.split(",") if isinstance(value, str) else list(value)
    chosen = [normalize(str(t).strip()) for t in items if str(t).strip()]
    bad = [c for c in chosen if c not in valid]
    if bad or not chosen:
        raise InvalidInputError(f"unknown {what}(s) {', '.join(bad) or '(none given)'}; "
                                f"{valid_text or 'valid: ' + ', '.join(valid)} (e.g. {example})")
    return [v for v in valid if v in chosen]
