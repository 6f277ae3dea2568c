"""Terminal text that fits the terminal: width, wrapped notes, tables split into panels.

Every command prints through these helpers so that no line is wider than :func:`terminal_width`
(the ``COLUMNS`` of the terminal, capped at :data:`MAX_COLUMNS` = 100). Widths are display
widths: a combining mark counts 0 columns, a wide East Asian character 2, anything else 1.
Standard library only, so every layer can use it.

>>> display_width("D⁺ = wᵀH⁺w"), display_width("e\\u0301"), display_width("表")
(10, 1, 2)
>>> print(table(["measure", "value"], [["D", "1.0e+00"], ["Dplus", "2.5e+01"]], align="lr"))
measure    value
D        1.0e+00
Dplus    2.5e+01
"""

from __future__ import annotations

import re
import shutil
import textwrap
import unicodedata
from collections.abc import Iterable, Sequence

__all__ = ["MAX_COLUMNS", "terminal_width", "display_width", "too_wide", "pad", "wrap", "bullets",
           "table", "number", "footnote_repeats"]

#: the widest line any command prints, whatever the terminal
MAX_COLUMNS = 100
#: below this, wrapping is pointless: narrower terminals get lines of this width
MIN_COLUMNS = 40


def terminal_width() -> int:
    """Columns to print into: ``COLUMNS`` (or the terminal's size, 100 when neither is known),
    clamped to ``[40, 100]``.

    >>> 40 <= terminal_width() <= 100
    True
    """
    columns = shutil.get_terminal_size((MAX_COLUMNS, 24)).columns
    return max(MIN_COLUMNS, min(MAX_COLUMNS, columns))


def display_width(text: str) -> int:
    """Columns ``text`` (one line) takes: Σ over characters of 0 (combining mark, format or
    control character), 2 (East Asian wide or fullwidth) or 1.

    >>> display_width("ε₆₄·κ_b"), display_width("")
    (7, 0)
    """
    total = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf", "Cc"):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def too_wide(text: str, width: int = MAX_COLUMNS) -> list[tuple[int, int, str]]:
    """``(line number, display width, line)`` of every line of ``text`` wider than ``width``.

    >>> too_wide("ok\\n" + "x" * 101)
    [(2, 101, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')]
    >>> too_wide("y" * 100)
    []
    """
    return [(i, w, line) for i, line in enumerate(text.splitlines(), 1) if (w := display_width(line)) > width]


def pad(text: str, width: int, align: str = "l") -> str:
    """``text`` padded with spaces to ``width`` display columns, left (``"l"``) or right (``"r"``).

    >>> pad("D⁺", 4, "r") + "|"
    '  D⁺|'
    """
    fill = " " * max(0, width - display_width(text))
    return fill + text if align == "r" else text + fill


#: spans a line never breaks inside: a bracketed interval ``[-0.33, +0.00]`` and ``name = value``
_KEEP = re.compile(r"\S+ = \S+(?: \[[^\[\]\n]{1,40}\])?|\[[^\[\]\n]{1,40}\]")
_GLUE = "\x00"  # stands for a space inside a kept span while wrapping (textwrap never breaks at it)


def wrap(text: str, width: int | None = None, *, indent: str = "", hang: str | None = None) -> list[str]:
    """``text`` wrapped at word boundaries to ``width`` (default :func:`terminal_width`): the first
    line starts with ``indent``, the others with ``hang`` (default: as many spaces as ``indent``).
    Words are never split, nor a bracketed interval or a ``name = value``; a single word longer than
    the line stays whole.

    >>> wrap("the pseudo-inverse cutoff decides which eigenvalues count", 24, indent="- ")
    ['- the pseudo-inverse', '  cutoff decides which', '  eigenvalues count']
    >>> wrap("with the loss gap τ = +0.64 [+0.64, +0.67]", 20)
    ['with the loss gap', 'τ = +0.64 [+0.64, +0.67]']
    """
    width = terminal_width() if width is None else width
    hang = " " * len(indent) if hang is None else hang
    glued = _KEEP.sub(lambda m: m.group(0).replace(" ", _GLUE), text)
    lines = textwrap.wrap(glued, width=width, initial_indent=indent, subsequent_indent=hang,
                          break_long_words=False, break_on_hyphens=False)
    return [line.replace(_GLUE, " ") for line in lines] or [indent.rstrip()]


def bullets(items: Iterable[str], width: int | None = None, *, indent: str = "  ") -> list[str]:
    """One wrapped ``- item`` per item, continuation lines aligned under the item's text.

    >>> bullets(["one note", "another note, a longer one"], 20)
    ['  - one note', '  - another note, a', '    longer one']
    """
    return [line for item in items for line in wrap(item, width, indent=indent + "- ")]


def number(x: float | None, spec: str = ".3e") -> str:
    """A table cell: ``x`` formatted by ``spec``, ``-`` when there is none.

    >>> number(0.25), number(None), number(1 / 3, ".2e")
    ('2.500e-01', '-', '3.33e-01')
    """
    return "-" if x is None else format(x, spec)


def table(head: Sequence[str], rows: Sequence[Sequence[str]], *, align: str | None = None,
          width: int | None = None, sep: str = "  ", keep: int = 1, rule: bool = False) -> str:
    """An aligned table. ``align`` has one letter per column (``l``/``r``; default: first left, the
    rest right). When it is wider than ``width`` (default :func:`terminal_width`), the columns
    after the first ``keep`` are split into panels that each fit, each panel repeating the
    ``keep`` key columns, separated by a blank line. ``rule`` draws a dashed line under the head.

    >>> print(table(["id", "a", "b", "c"], [["T1", "1", "22", "333"]], width=12))
    id  a   b
    T1  1  22
    <BLANKLINE>
    id    c
    T1  333
    """
    width = terminal_width() if width is None else width
    n = len(head)
    align = align or "l" + "r" * (n - 1)
    cells = [list(head)] + [list(r) for r in rows]
    widths = [max(display_width(c[i]) for c in cells) for i in range(n)]
    key = list(range(min(keep, n)))
    key_width = sum(widths[i] + len(sep) for i in key)
    panels: list[list[int]] = []
    for i in range(len(key), n):
        if panels and key_width + sum(widths[j] + len(sep) for j in panels[-1]) + widths[i] <= width:
            panels[-1].append(i)
        else:
            panels.append([i])
    blocks = []
    for cols in panels or [[]]:
        shown = key + cols
        lines = [sep.join(pad(c[i], widths[i], align[i]) for i in shown).rstrip() for c in cells]
        if rule:
            lines.insert(1, "-" * max(display_width(line) for line in lines))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


_PAREN = re.compile(r" \(([^()]{20,})\)")


def footnote_repeats(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """Say each repeated parenthetical remark once: every ``" (remark)"`` of 20 characters or more
    that occurs more than once across ``texts`` becomes a marker ``[k]``; returns the texts and
    the footnotes ``"[k] remark"``.

    >>> footnote_repeats(["D moves (under a neuron-wise scaling only)",
    ...                   "D⁺ moves (under a neuron-wise scaling only)", "ρ stays (once)"])
    (['D moves [1]', 'D⁺ moves [1]', 'ρ stays (once)'], ['[1] under a neuron-wise scaling only'])
    """
    counts: dict[str, int] = {}
    for t in texts:
        for remark in _PAREN.findall(t):
            counts[remark] = counts.get(remark, 0) + 1
    marks: dict[str, int] = {}
    for t in texts:
        for remark in _PAREN.findall(t):
            if counts[remark] > 1 and remark not in marks:
                marks[remark] = len(marks) + 1
    out = [_PAREN.sub(lambda m: f" [{marks[m.group(1)]}]" if m.group(1) in marks else m.group(0), t)
           for t in texts]
    return out, [f"[{k}] {remark}" for remark, k in marks.items()]
