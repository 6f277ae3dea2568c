"""Pinned Coq statements as mathematics: a small parser for the notation they use, three printers.

The statements in ``proofs/coq/statements`` are Coq's printed types (MathComp notation):
``forall``/``exists`` binders, ``->``, ``<->``, ``/\\``, ``[/\\ … & …]``, ``~``, ``let … in``,
``=``, ``!=``, ``<``, ``\\in``, ``*m`` (matrix product), ``*:`` (scalar action), ``^+``/``^-``
(powers; ``^`` a natural number's power), ``^-1``, ``^T``, ``%:M`` (scalar matrix), ``\\sum_k``, ``\\o``, application, the
types ``'M_n``, ``'cV_n``, ``'rV_n``, ``'I_n`` and the package's definitions of ``Defs.v``
(``dot``, ``sqnorm``, ``quad``, ``RQ``, ``coupledD``, ``act_w``/``act_g``/``act_H``,
``conformal``, …). :func:`coq_math` gives the statement as pieces, each with a Unicode, a
LaTeX and a MathML form; a long statement is split at its top-level connectives so that a page
can break the line between pieces.

>>> [p.text for p in coq_math("forall (n : nat) (A H : 'M_n) (w : 'cV_n), "
...                           "A \\\\in unitmx -> quad (act_H A H) (act_w A w) = quad H w")]
['∀ n ∈ ℕ,', 'A, H ∈ R^(n×n),', 'w ∈ Rⁿ:', 'A ∈ GL', '⇒', '(Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw']
>>> coq_math("coupledD w (s *: g) (s *: H) = coupledD w g H / s")[0].tex
'D ( w , s \\\\, g , s \\\\, H ) = D ( w , g , H ) / s'
"""

from __future__ import annotations

from typing import Any

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.reporting.coq_parse import parse
from coupled_curvature.reporting.coq_pieces import (INV_T, Piece, call, identifier, join, number, operator,
                                                    parenthesized, subscript, superscript, words)

__all__ = ["Piece", "coq_math", "parse"]

_WRAPPERS = {"NormedModule.sort", "numFieldType", "Real.sort", "Filtered.sort", "filteredType", "topologicalType",
             "rcfType"}
_FUNCS = {"RQ": ("RQ", r"\mathrm{RQ}"), "coupledD": ("D", "D"), "coupledDplus": ("D⁺", "D^{+}"),
          "radial_ratio": ("ρ", r"\rho"), "penrose": ("Penrose", r"\mathrm{Penrose}"),
          "diag_mx": ("diag", r"\mathrm{diag}"), "mxvec": ("vec", r"\mathrm{vec}")}


def _kind_of(ty: Any) -> str:
    """What a binder's type makes of a variable: a matrix, column, row, index, function or other."""
    if ty is None:
        return "other"
    if ty[0] == "type":
        return ty[1]
    if ty[0] == "bin" and ty[1] == "->":
        dom = ty[2]
        return "fun_I" if dom[0] == "type" and dom[1] == "I" else "fun"
    return "other"


def _strip(node: Any) -> Any:
    while node[0] == "paren" or (node[0] == "post" and node[1] in ("%N", "^o")):
        node = node[1] if node[0] == "paren" else node[2]
    return node


def _compound(node: Any) -> bool:
    """Whether the rendering of ``node`` needs parentheses as an operand of a product or power."""
    node = _strip(node)
    if node[0] in ("id", "num", "type"):
        return False
    if node[0] == "post":
        return (node[1] == "%:M" and node[2] != ("num", "1")) or node[1] == ".+1"
    if node[0] == "app":
        head = node[1]
        name = head[1].rsplit(".", 1)[-1] if head[0] == "id" else None
        return name in ("act_w", "act_g", "act_H", "mulV", "dot", "quad", "newton_decrement", "d1", "d2",
                        "conformal", "differentiable_def", "differentiable", "scale_invariant", "is_derive")
    return True


class _Printer:
    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}

    def wrap(self, node: Any) -> Piece:
        p = self.emit(_strip(node))
        return parenthesized(p) if _compound(node) else p

    def arg(self, node: Any) -> Piece:
        return self.emit(_strip(node))

    def dims(self, node: Any) -> Piece:
        return self.wrap(node)

    def typ(self, node: Any) -> Piece:
        node = _strip(node)
        if node[0] == "type":
            kind, d = node[1], node[2]
            if kind == "I":
                top = self.arg(d[2]) if d[0] == "post" and d[1] == ".+1" else self.arg(("bin", "-", d, ("num", "1")))
                return join(operator("{", False), number("0"), operator(",", False), Piece("…", r"\dots", "<mi>…</mi>"), operator(",", False), top,
                            operator("}", False))
            if d[0] == "dims":
                return superscript(identifier("R"), join(self.dims(d[1][0]), operator("×", False), self.dims(d[1][1])))
            size = self.dims(d)
            if kind == "M":
                return superscript(identifier("R"), join(size, operator("×", False), size))
            if kind == "rV":
                return superscript(identifier("R"), join(number("1"), operator("×", False), size))
            return superscript(identifier("R"), size)
        if node[0] == "bin" and node[1] == "->":
            return join(self.typ(node[2]), operator("→"), self.typ(node[3]))
        if node[0] == "id" and node[1] == "nat":
            return Piece("ℕ", r"\mathbb{N}", "<mi mathvariant='double-struck'>N</mi>")
        if node[0] == "id" and node[1] in ("rcfType", "Real.type", "reals.Real.type", "realType"):
            return words("real closed field" if node[1] == "rcfType" else "real numbers")
        return self.emit(node)

    def binders(self, q: str, groups: list[tuple[list[str], Any]]) -> Piece:
        return join(*self.binder_pieces(q, groups))

    def binder_pieces(self, q: str, groups: list[tuple[list[str], Any]]) -> list[Piece]:
        """``∀ x ∈ X,`` … ``z ∈ Z:``, one piece per group of names."""
        out = []
        for gi, (names, ty) in enumerate(groups):
            for n in names:
                self.kinds[n] = _kind_of(ty)
            parts: list[Piece] = [] if gi else [operator(q, False), Piece(" ", "", "")]
            for i, n in enumerate(names):
                parts += ([operator(",", False), Piece(" ", "", "")] if i else []) + [identifier(n)]
            if ty is not None:
                fn = ty[0] == "bin" and ty[1] == "->"
                word = ty[0] == "id" and ty[1] in ("rcfType", "Real.type", "reals.Real.type", "realType")
                parts += [operator(":", False), Piece(" ", r"\ ", "")] if word else [operator(":" if fn else "∈")]
                parts.append(self.typ(ty))
            last = gi == len(groups) - 1
            out.append(join(*parts, operator(":" if last else ",", False)))
        return out

    def app(self, head: Any, args: list[Any]) -> Piece:
        name = head[1].rsplit(".", 1)[-1] if head[0] == "id" else None
        e = self.emit
        if name in _WRAPPERS or (head[0] == "id" and head[1].endswith(tuple("." + w for w in _WRAPPERS))):
            return e(args[0]) if len(args) == 1 else self.app(args[0], args[1:])
        if name == "matrix_normedModType" and len(args) == 3:
            m, p = args[1], args[2]
            rows = e(("bin", "+", m, ("num", "1")))
            return superscript(identifier("R"), rows if p == ("num", "0") else join(rows, operator("×", False),
                                                                          e(("bin", "+", p, ("num", "1")))))
        if name == "differentiable_near" and len(args) == 2:
            return join(self.arg(args[0]), words(" differentiable near "), self.arg(args[1]))
        if name == "differentiable" and len(args) == 2:
            return join(self.arg(args[0]), words(" differentiable at "), self.arg(args[1]))
        if name == "differentiable_def" and len(args) == 2:
            return join(self.arg(args[0]), words(" differentiable at "), self.arg(_point(args[1])))
        if name == "is_derive" and len(args) == 4:
            x, f, v = args[0], args[2], args[3]
            return join(words("d/d"), self.arg(x), Piece(" ", r"\,", ""), self.arg(f), parenthesized(self.arg(x)), operator("="),
                        self.arg(v))
        if name == "perm_of":
            ty = _strip(args[0])
            ty = ty[2][0] if ty[0] == "app" else ty
            return subscript(identifier("S"), self.arg(ty[2]))
        if name == "dot" and len(args) == 2:
            return join(superscript(self.wrap(args[0]), Piece("T", r"\top", "<mi>T</mi>")), self.wrap(args[1]))
        if name == "sqnorm" and len(args) == 1:
            return superscript(join(operator("‖", False), self.arg(args[0]), operator("‖", False)), number("2"))
        if name == "quad" and len(args) == 2:
            w = self.wrap(args[1])
            return join(superscript(w, Piece("T", r"\top", "<mi>T</mi>")), self.wrap(args[0]), w)
        if name == "newton_decrement" and len(args) == 2:
            return self.app(("id", "quad"), [("post", "^-1", args[1]), args[0]])
        if name == "act_w" and len(args) == 2:
            return join(self.wrap(args[0]), self.wrap(args[1]))
        if name == "act_g" and len(args) == 2:
            return join(superscript(self.wrap(args[0]), INV_T), self.wrap(args[1]))
        if name == "act_H" and len(args) == 2:
            a = self.wrap(args[0])
            return join(superscript(a, INV_T), self.wrap(args[1]), superscript(a, number("−1")))
        if name == "conformal" and len(args) == 1:
            return join(self.arg(args[0]), operator("∈"), words("CO"))
        if name == "invmx":
            inv = superscript(self.wrap(args[0]), number("−1"))
            return inv if len(args) == 1 else subscript(parenthesized(inv), join(*(self.arg(a) for a in args[1:])))
        if name == "pinv" and len(args) == 1:
            return superscript(self.wrap(args[0]), Piece("+", "+", "<mo>+</mo>"))
        if name == "mulV":
            return join(*(self.wrap(a) for a in args))
        if name == "grad" and len(args) == 2:
            return join(operator("∇", False), self.wrap(args[0]), parenthesized(self.arg(args[1])))
        if name == "hess" and len(args) == 2:
            return join(superscript(operator("∇", False), number("2")), self.wrap(args[0]), parenthesized(self.arg(args[1])))
        if name == "d1" and len(args) in (2, 3):
            d = join(subscript(operator("∂", False), self.arg(args[1])), self.wrap(args[0]))
            return d if len(args) == 2 else join(d, parenthesized(self.arg(args[2])))
        if name == "d2" and len(args) == 4:
            return join(subscript(operator("∂", False), self.arg(args[1])), subscript(operator("∂", False), self.arg(args[2])),
                        self.wrap(args[0]), parenthesized(self.arg(args[3])))
        if name == "scale_invariant" and len(args) == 1:
            return join(e(args[0]), words(" scale-invariant"))
        if name == "e":
            idx = [a for a in args if a != ("id", "R")]
            return subscript(identifier("e"), self.arg(idx[0])) if len(idx) == 1 else call("e", [self.arg(a) for a in args])
        if name == "map_mx" and len(args) == 2:  # f applied entrywise
            return join(self.wrap(args[0]), parenthesized(self.arg(args[1])))
        if name == "perm_mx" and len(args) == 1:
            return subscript(identifier("P"), e(args[0]))
        if name == "prop_near1" and len(args) == 2:  # \forall y \near x, P y
            inner = _strip(args[1])
            inner = inner[2][-1] if inner[0] == "app" and inner[1] == ("id", "inPhantom") else inner
            inner = _strip(inner)
            if inner[0] == "forall":
                names = [identifier(n) for group, _ in inner[1] for n in group]
                bound = join(*[q for i, n in enumerate(names) for q in ([operator(",", False)] if i else []) + [n]])
                return join(operator("∀", False), bound, words(" near "), self.arg(args[0]),
                            operator(":", False), Piece(" ", r"\;", ""), e(inner[2]))
            return join(words("near "), self.arg(args[0]), operator(":", False), Piece(" ", r"\;", ""), e(inner))
        if name == "Phantom" or name == "filter_of":
            return e(args[-1])
        if args == [("id", "R")] and name is not None:  # a constant of the development, e.g. Ashear R
            return identifier(name)
        if name is not None and self.kinds.get(name) == "fun_I" and len(args) > 1:  # F i x: F_i(x)
            rest = [p for k, a in enumerate(args[1:]) for p in ([operator(",", False)] if k else []) + [self.arg(a)]]
            return join(subscript(identifier(name), self.arg(args[0])), parenthesized(join(*rest)))
        if name is not None and self.kinds.get(name) in ("M", "cV", "rV", "fun_I"):
            kind = self.kinds[name]
            idx = args[1:] if kind == "rV" and args[0] == ("num", "0") else \
                args[:-1] if kind == "cV" and args[-1] == ("num", "0") else args
            return subscript(identifier(name), join(*(self.arg(a) for a in idx)))
        if head[0] == "paren" and all(a[0] in ("id", "num") for a in args):
            return subscript(e(head), join(*(e(a) for a in args)))
        if name in _FUNCS:
            u, t = _FUNCS[name]
            return call(u, [self.arg(a) for a in args], t)
        if name is not None and self.kinds.get(name) == "fun" or name in ("eval", "plug", "Layer", "rmul_first",
                                                                           "vec_action", "neuron_map",
                                                                           "scale_entries", "perm_map",
                                                                           "layer_block_map", "pow_inv", "block_mx",
                                                                           "ulsubmx", "usubmx", "drsubmx", "dsubmx",
                                                                           "ctx", "net"):
            return call(name or "", [self.arg(a) for a in args])
        return call(name or e(head).text, [self.arg(a) for a in args], None if name else e(head).tex)

    def conjunct(self, node: Any) -> Piece:
        """A conjunct; a quantifier, ``let`` or implication in parentheses (its scope ends there)."""
        p = self.emit(node)
        return parenthesized(p) if node[0] in ("forall", "exists", "let") or (node[0] == "bin" and node[1] in (
            "->", "<->", "\\/")) else p

    def emit(self, node: Any) -> Piece:
        k = node[0]
        e = self.emit
        if k == "id":
            if node[1] == "unitmx":
                return words("GL")
            return identifier(node[1])
        if k == "num":
            return number(node[1])
        if k == "type":
            return self.typ(node)
        if k == "paren":
            return self.wrap(node[1])
        if k == "post":
            op, x = node[1], node[2]
            if op == "^T" and x[0] == "paren" and x[1][0] == "app" and x[1][1] == ("id", "invmx"):
                return superscript(self.wrap(x[1][2][0]), INV_T)
            if op == "^T":
                return superscript(e(x), Piece("T", r"\top", "<mi>T</mi>"))
            if op == "^-1":
                return superscript(e(x), number("−1"))
            if op == "%:M":
                return identifier("I") if x == ("num", "1") else join(e(x), identifier("I"))
            if op == ".+1":
                return join(e(x), operator("+", False), number("1"))
            return e(x)  # ^o, %N: scope and type annotations
        if k == "app":
            return self.app(node[1], node[2])
        if k == "rel":
            sym = {"=": "=", "!=": "≠", "<>": "≠", "<": "<", "<=": "≤", "\\in": "∈", "\\notin": "∉"}
            parts = [e(node[2][0])]
            for op, x in zip(node[1], node[2][1:]):
                parts += [operator(sym[op]), e(x)]
            return join(*parts)
        if k == "bin":
            op, a, b = node[1], node[2], node[3]
            if op in ("^+", "^-", "^"):                     # ^: a natural number's power (expn)
                exp = self.arg(b) if op != "^-" else join(operator("−", False), self.arg(b))
                return superscript(self.wrap(a) if a[0] != "num" else e(a), exp)
            if op in ("*m", "*:"):
                return join(e(a), Piece("", r"\,", ""), e(b))
            symbol = {"*": "·", "*+": "·", "/": "/", "+": "+", "-": "−", "\\o": "∘", "/\\": "∧", "\\/": "∨", "<->": "⇔",
                   "->": "⇒"}[op]
            if op in ("*", "*+", "/", "-"):  # n.+1 binds tighter than these in Coq: (h+1)·(i+1), not h+1·i+1
                a_, b_ = (self.wrap(x) if _strip(x)[:2] == ("post", ".+1") else e(x) for x in (a, b))
                return join(a_, operator(symbol), b_)
            return join(e(a), operator(symbol), e(b))
        if k == "and":
            parts = [self.conjunct(node[1][0])]
            for x in node[1][1:]:
                parts += [operator("∧"), self.conjunct(x)]
            return join(*parts)
        if k == "not":
            return join(operator("¬", False), self.wrap(node[1]))
        if k == "neg":
            return join(operator("−", False), e(node[1]))
        if k == "sum":
            idx = identifier(node[1]) if len(node) == 3 else join(identifier(node[1]), operator("<", False),
                                                                  self.arg(node[3]))
            return join(subscript(Piece("Σ", r"\sum", "<mo>∑</mo>"), idx), e(node[2]))
        if k == "fun":
            names = [identifier(n) for n in node[1]] or [identifier("x")]
            bound = join(*[q for i, n in enumerate(names) for q in ([operator(",", False)] if i else []) + [n]])
            return parenthesized(join(bound, operator("↦"), e(node[2])))
        if k in ("row", "col"):
            return join(words("row" if k == "row" else "column"),
                        parenthesized(join(identifier(node[1]), operator("↦"), e(node[2]))))
        if k in ("forall", "exists"):
            return join(self.binders("∀" if k == "forall" else "∃", node[1]), Piece(" ", r"\;", ""), e(node[2]))
        if k == "let":
            return join(words("let "), identifier(node[1]), operator(":="), e(node[2]), words(" in "), e(node[3]))
        raise InvalidInputError(f"no mathematical form for Coq node {k!r}")

    def pieces(self, node: Any) -> list[Piece]:
        """Top-level binders and connectives split the statement into pieces."""
        k = node[0]
        if k == "forall":
            return [*self.binder_pieces("∀", node[1]), *self.pieces(node[2])]
        if k == "let":
            return [join(words("let "), identifier(node[1]), operator(":="), self.emit(node[2]), words(" in")),
                    *self.pieces(node[3])]
        if k == "bin" and node[1] in ("->", "<->"):
            return [*self.pieces(node[2]), operator("⇒" if node[1] == "->" else "⇔", False), *self.pieces(node[3])]
        if k == "and" and len(node[1]) > 1:
            out: list[Piece] = []
            for i, x in enumerate(node[1]):
                out += ([operator("∧", False)] if i else []) + [self.conjunct(x)]
            return out
        if k == "paren" and node[1][0] in ("forall", "bin", "and"):
            inner = self.pieces(node[1])
            if len(inner) > 1:
                return [join(operator("(", False), inner[0]), *inner[1:-1], join(inner[-1], operator(")", False))]
        return [self.emit(node)]


def _point(phantom: Any) -> Any:
    """The point ``x`` of ``Phantom _ (filter_of (Phantom _ x))`` (differentiability at ``x``)."""
    node = phantom
    while node[0] in ("paren", "app"):
        node = node[1] if node[0] == "paren" else node[2][-1]
    return node


def coq_math(statement: str) -> list[Piece]:
    """A pinned Coq statement as mathematics, in pieces a line may break between (see the module
    docstring); raises :class:`InvalidInputError` for notation it does not know."""
    pieces = _Printer().pieces(parse(statement))
    for p in pieces:
        if not p.tex.isascii():
            raise InvalidInputError(f"no LaTeX form for {p.text!r} (non-ASCII in {p.tex!r})")
    return pieces
