"""The package's definitions next to the Coq development's: the rows of the report's
"Definitions" section, and each pinned Coq statement as mathematics.

The Coq side is read from the sources in ``proofs/coq`` (``Defs.v``, which holds RQ, D, D⁺ and
the pseudo-inverse, and the forward pass ``eval`` in ``T02_homogeneous_rescaling.v``) and
translated by :func:`.coq_math.coq_math`; without the sources the Coq column says so.

>>> rows = definition_rows()
>>> [r.quantity for r in rows][:3]
['Rayleigh quotient RQ', 'coupled diagnostic D', 'inverse-coupled D⁺']
>>> rows[0].coq is None or rows[0].coq[0][0] == "RQ H w"
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from coupled_curvature.reporting.coq_math import Piece, coq_math

__all__ = ["Definition", "DEFINITIONS", "definition_rows", "coq_definition"]


@dataclass(frozen=True)
class Definition:
    """One row: the quantity, the package's definition (Unicode mathematics) and the Coq
    definitions ``(file, name)`` that state it."""

    quantity: str
    package: str
    coq_names: tuple[tuple[str, str], ...]


#: the package's definitions (the notation of the theorem registry) and their Coq counterparts
DEFINITIONS = (
    Definition("Rayleigh quotient RQ", "RQ = wᵀHw / wᵀw", (("Defs.v", "RQ"), ("Defs.v", "quad"))),
    Definition("coupled diagnostic D", "D = RQ / ‖g‖² = (wᵀHw / wᵀw) / ‖g‖²", (("Defs.v", "coupledD"),)),
    Definition("inverse-coupled D⁺", "D⁺ = (wᵀH⁺w / wᵀw)·‖g‖², H⁺ the Moore–Penrose pseudo-inverse "
               "(numerically with a relative cutoff)", (("Defs.v", "coupledDplus"),)),
    Definition("block action of an invertible A (T1)", "w → Aw, g → A⁻ᵀg, H → A⁻ᵀHA⁻¹",
               (("Defs.v", "act_w"), ("Defs.v", "act_g"), ("Defs.v", "act_H"))),
    Definition("conformal group CO(n)", "CO(n) = {cQ : c > 0, QᵀQ = I}, i.e. AᵀA = c²I",
               (("Defs.v", "conformal"),)),
    Definition("network evaluation (T2)", "f(x) = W_m σ(… σ(W_1x + b_1) …) + b_m, σ entrywise after every "
               "hidden layer, affine output layer", (("T02_homogeneous_rescaling.v", "eval"),)),
)


@dataclass(frozen=True)
class Row:
    quantity: str
    package: str
    coq: tuple[tuple[str, list[Piece], str], ...] | None  # (left side, right side as maths, source)


def _source(d: Path, file: str) -> str | None:
    f = d / file
    return f.read_text(encoding="utf-8") if f.is_file() else None


def coq_definition(src: str, name: str) -> list[tuple[str, str, str]]:
    """``[(left side, right side, source text)]`` of ``Definition name …`` (one entry) or of the
    match arms of ``Fixpoint name …`` (one per arm) in the Coq source ``src``.

    >>> coq_definition("Definition sq (u : V) : R := dot u u.", "sq")
    [('sq u', 'dot u u', 'Definition sq (u : V) : R := dot u u.')]
    """
    m = re.search(rf"^(Definition|Fixpoint)\s+{re.escape(name)}\b(.*?)\.\s*$", src, re.M | re.S)
    if m is None:
        return []
    text = m.group(0).strip()
    head, _, body = m.group(2).partition(":=")
    args = re.findall(r"\(([^():]+):", head) or [head.split(":")[0]]
    names = " ".join(" ".join(a.split()) for a in args)
    if m.group(1) == "Definition":
        return [(f"{name} {names}".strip(), " ".join(body.split()), text)]
    out = []
    for arm in re.finditer(r"\|\s*(\w+)((?:\s+[\w']+)*)\s*=>\s*fun\s+(\w+)\s*=>\s*([^|]*?)\s*(?=\||end)", body):
        ctor, fields, x, rhs = arm.groups()
        fields = " ".join(f for f in fields.split() if f != "_")
        out.append((f"{name} ({ctor} {fields}) {x}", " ".join(rhs.split()), text))
    return out


def definition_rows(d: Path | None = None) -> list[Row]:
    """The rows of the "Definitions" section (the Coq column ``None`` without the sources)."""
    from coupled_curvature.proofs.formal import coq_dir

    d = d or coq_dir()
    rows = []
    for item in DEFINITIONS:
        coq: list[tuple[str, list[Piece], str]] = []
        for file, name in item.coq_names:
            src = None if d is None else _source(d, file)
            for lhs, rhs, text in ([] if src is None else coq_definition(src, name)):
                coq.append((lhs, coq_math(rhs), text))
        rows.append(Row(item.quantity, item.package, tuple(coq) if coq else None))
    return rows
