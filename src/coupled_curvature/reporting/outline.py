"""The report as plain data: sections of blocks of inline runs, built once, rendered three times.

:mod:`.sections` builds an :class:`Outline` from the report data; :mod:`.markdown`, :mod:`.html`
and :mod:`.latex` each walk it. Nothing here knows a format: text is Unicode (``Text.maths``
says whether it holds Unicode mathematics that a renderer typesets), formulas carry their LaTeX,
MathML and Unicode forms side by side, and a table's ``widths`` are fractions of the line (or
``"l"``/``"r"`` for a narrow column) that a renderer may use for its layout.

>>> o = Outline("demo", "2000-01-01", (), (Section("One", (Paragraph((Text("D = RQ/‖g‖²"),)),), "one"),))
>>> [s.id for s in o.sections], type(o.sections[0].blocks[0]).__name__
(['one'], 'Paragraph')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = ["Text", "Code", "Strong", "Mark", "Math", "Link", "Inline", "render_inline", "Paragraph", "Bullets", "Table",
           "Figure", "Display", "Statement", "StepItem", "Steps", "ProofStep", "Proof", "References", "Details", "Listing", "Section", "Block",
           "render_block", "Outline"]


@dataclass(frozen=True)
class Text:
    """A run of text; ``maths``: it holds Unicode mathematics (typeset), else it is escaped only."""

    text: str
    maths: bool = True


@dataclass(frozen=True)
class Code:
    """An identifier or command, in a monospace font."""

    text: str


@dataclass(frozen=True)
class Strong:
    parts: tuple["Inline", ...]


@dataclass(frozen=True)
class Mark:
    """A verdict (``kind`` ``proved``, ``failed``, ``evidence``) or a trust label (``kind`` ``label``)."""

    text: str
    kind: str


@dataclass(frozen=True)
class Math:
    """An inline formula: Unicode ``text``, LaTeX ``tex`` (``None``: typeset the text), MathML
    ``mathml`` (a whole ``<math>`` element; ``None``: the text). ``plain``: the Unicode text reads
    well as it is (plain-text formats show it instead of the LaTeX)."""

    text: str
    tex: str | None = None
    mathml: str | None = None
    plain: bool = False


@dataclass(frozen=True)
class Link:
    """Text that links to the section with id ``target`` (where the format has links)."""

    text: str
    target: str


Inline = Union[Text, Code, Strong, Mark, Math, Link]


def render_inline(parts: tuple[Inline, ...], render: Mapping[type, Callable[[Any], str]]) -> str:
    """``parts`` rendered run by run, each by ``render[type(run)]`` (one table per output format).

    >>> render_inline((Text("a"), Code("b")), {Text: lambda p: p.text, Code: lambda p: f"`{p.text}`"})
    'a`b`'
    """
    return "".join(render[type(p)](p) for p in parts)


@dataclass(frozen=True)
class Paragraph:
    parts: tuple[Inline, ...]


@dataclass(frozen=True)
class Bullets:
    items: tuple[tuple[Inline, ...], ...]


@dataclass(frozen=True)
class Table:
    """``head`` and ``rows`` of cells (each a tuple of inline runs); ``short_head`` for narrow
    layouts; ``widths`` per column (fraction of the line, or ``"l"``/``"r"``); ``small`` type."""

    head: tuple[tuple[Inline, ...], ...]
    rows: tuple[tuple[tuple[Inline, ...], ...], ...]
    widths: tuple[float | str, ...]
    short_head: tuple[str, ...] | None = None
    small: bool = False
    row_ids: tuple[str, ...] | None = None  #: an anchor per row (links such as a proof step's evidence land there)


@dataclass(frozen=True)
class Figure:
    """A figure written next to the pages as ``<name>.svg`` and ``<name>.png``."""

    name: str
    caption: tuple[Inline, ...]


@dataclass(frozen=True)
class Display:
    """A displayed formula in its three forms (``mathml``: the inner of ``<math>``)."""

    text: str
    tex: str
    mathml: str


@dataclass(frozen=True)
class Statement:
    """A theorem's statement: catalogue id ``label`` (``T1``), its ``title``, the statement's runs
    (LaTeX sets it as a numbered theorem, the other formats as a paragraph headed "Statement.")."""

    label: str
    title: str
    parts: tuple[Inline, ...]


@dataclass(frozen=True)
class StepItem:
    """One checked step: verdict, trust label, statement (Unicode mathematics), how it was checked,
    an optional formula (LaTeX and MathML), an optional instance note, its Coq theorems."""

    passed: bool
    label: str
    statement: str
    method: str
    verification: str
    tex: str | None = None
    mathml: str | None = None
    instance: str | None = None
    formal: tuple[str, ...] = ()


@dataclass(frozen=True)
class Steps:
    items: tuple[StepItem, ...]


@dataclass(frozen=True)
class ProofStep:
    """One step of a proof: a sentence of reasoning (Unicode mathematics), the formula it arrives at
    (``None``: the sentence alone), the trust labels of the checks behind it (``evidence``, strongest
    first), whether they all passed, and ``target``, the anchor of the row where its check is recorded."""

    reason: str
    formula: Display | None
    evidence: tuple[str, ...]
    target: str
    passed: bool = True
    cites: tuple[tuple[str, str], ...] = ()  #: (key, printed label) of the published results the sentence uses


@dataclass(frozen=True)
class Proof:
    """A theorem's proof: its steps, then a closing sentence (which links to the full list of checks)."""

    steps: tuple[ProofStep, ...]
    closing: tuple["Inline", ...] = ()


@dataclass(frozen=True)
class References:
    """A bibliography: (key, printed label, entry text) per cited result, in order of first citation."""

    items: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class Details:
    """Collapsible where the format allows (HTML), else shown in a smaller type."""

    summary: str
    blocks: tuple["Block", ...]


@dataclass(frozen=True)
class Listing:
    """Source text shown verbatim (``language`` names it, e.g. ``coq``)."""

    text: str
    language: str = ""
    name: str = ""  #: what it lists (a Coq theorem's short name): LaTeX moves it to an appendix under it


@dataclass(frozen=True)
class Section:
    """``level`` 1: a section of the report; 2: a subsection. ``id``: an anchor (level 1)."""

    title: str
    blocks: tuple["Block", ...]
    id: str | None = None
    level: int = 1


Block = Union[Paragraph, Bullets, Table, Figure, Display, Statement, Steps, Proof, References, Details, Listing,
              Section]


def render_block(block: Block, forms: Mapping[type, Callable[[Any, Any], list[str]]], context: Any,
                 name: str) -> list[str]:
    """``block`` as the lines of one output format: ``forms[type(block)](block, context)`` (one table per
    format, ``context`` what its forms share); ``TypeError`` naming the format (``name``) for a block it lacks.

    >>> render_block(Paragraph((Text("a"),)), {Paragraph: lambda b, _: [b.parts[0].text]}, None, "plain")
    ['a']
    >>> render_block(Bullets(()), {}, None, "plain")
    Traceback (most recent call last):
    ...
    TypeError: no plain form for Bullets
    """
    form = forms.get(type(block))
    if form is None:
        raise TypeError(f"no {name} form for {type(block).__name__}")
    return form(block, context)


@dataclass(frozen=True)
class Outline:
    title: str
    generated: str
    intro: tuple[Block, ...]
    sections: tuple[Section, ...] = field(default_factory=tuple)
    appendix: tuple[Section, ...] = field(default_factory=tuple)  #: after the sections (LaTeX: lettered appendices)
