"""Presentation MathML generated at build time (no JavaScript, no network).

>>> import sympy as sp
>>> to_mathml(sp.Symbol("c") ** -2).startswith('<math xmlns="http://www.w3.org/1998/Math/MathML"')
True
"""

from __future__ import annotations

import html
from typing import Any

import sympy as sp
from sympy.printing.mathml import mathml

__all__ = ["to_mathml", "identity_mathml", "text_mathml", "BRIEF_NODES"]

#: expressions with more tree nodes than this are abbreviated (the text form keeps them in full)
BRIEF_NODES = 250
_NS = 'xmlns="http://www.w3.org/1998/Math/MathML"'


def _too_big(e: Any) -> bool:
    k = 0
    items = list(e) if isinstance(e, sp.MatrixBase) else [e]
    for x in items:
        if not isinstance(x, sp.Basic):
            continue
        for _ in sp.preorder_traversal(x):
            k += 1
            if k > BRIEF_NODES:
                return True
    return False


def _inner(e: Any) -> str:
    if isinstance(e, str) or not isinstance(e, (sp.Basic, sp.MatrixBase)):
        return f"<mtext>{html.escape(str(e))}</mtext>"
    items = list(e) if isinstance(e, sp.MatrixBase) else [e]
    if (items and _too_big(e)
            and all(hasattr(x, "point") and hasattr(x, "variables") and hasattr(x, "expr") for x in items)
            and all(x.variables == items[0].variables and x.point == items[0].point for x in items)):
        # a large expression at a point: abbreviated body, the substitution kept visible
        inner = e.applyfunc(lambda x: x.expr) if isinstance(e, sp.MatrixBase) else e.expr
        pts = "<mo>,</mo>".join(f"{_inner(a)}<mo>=</mo>{_inner(b)}"
                                for a, b in zip(items[0].variables, items[0].point))
        return f"<msub><mrow>{_inner(inner)}<mo>|</mo></mrow><mrow>{pts}</mrow></msub>"
    if isinstance(e, sp.MatrixBase) and len(e) and _too_big(e):
        return (f"<mrow><mtext>⟨large {e.shape[0]}×{e.shape[1]} matrix, &gt; {BRIEF_NODES} nodes; entry (1,1):</mtext>"
                f"{_inner(e[0, 0])}<mtext>⟩</mtext></mrow>")
    if _too_big(e):
        shape = f" {e.shape[0]}×{e.shape[1]} matrix" if isinstance(e, sp.MatrixBase) else ""
        return f"<mtext>⟨large{shape} expression, &gt; {BRIEF_NODES} nodes⟩</mtext>"
    try:
        out = mathml(e, printer="presentation")
        for br in ("[", "]", "(", ")"):  # let brackets grow around matrices (MathML Core stretching)
            out = out.replace(f"<mo>{br}</mo>", f'<mo stretchy="true" symmetric="true">{br}</mo>')
        return out
    except Exception:  # noqa: BLE001 - fall back to text, never fail a report on printing
        return f"<mtext>{html.escape(sp.sstr(e))}</mtext>"


def to_mathml(e: Any, display: str = "inline") -> str:
    """``<math>`` element for a SymPy expression, matrix or plain text."""
    return f'<math {_NS} display="{display}">{_inner(e)}</math>'


def identity_mathml(lhs: Any, rhs: Any) -> str:
    """``lhs = rhs`` as one ``<math>`` element."""
    return f'<math {_NS} display="inline"><mrow>{_inner(lhs)}<mo>=</mo>{_inner(rhs)}</mrow></math>'


def text_mathml(s: str) -> str:
    return f'<math {_NS} display="inline"><mtext>{html.escape(s)}</mtext></math>'
