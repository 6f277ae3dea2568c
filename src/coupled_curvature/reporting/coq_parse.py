r"""The parser of pinned Coq statements: text -> nested tuples ``(kind, …)``, for :mod:`.coq_math`.

It knows the notation the statements in ``proofs/coq/statements`` use (see :mod:`.coq_math`)
with Coq's levels (``<->`` 95 binds tighter than ``->`` 99, ``/\\`` 80, relations 70, ``+`` 50,
products 40, powers 29, application tighter than all) and refuses anything else.

>>> parse("a -> b /\\ c")
('bin', '->', ('id', 'a'), ('and', [('id', 'b'), ('id', 'c')]))
"""

from __future__ import annotations

import re
from typing import Any

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["parse"]

_TOKEN = re.compile(r"""\s*(?:
    (?P<ty>'(?:M|cV|rV|I)(?:\[\w+\])?_)
  | (?P<tr>\\tr(?![A-Za-z]))
  | (?P<op>'D_|\\forall|\\near|<->|<>|->|=>|\[/\\|/\\|\\/|!=|<=|:=|\*m|\*:|\*\+|\^\+|\^-1(?![0-9])|\^-|\^T|\^o|\^(?=\s)|%:M|%:R|%N|\.\+1|\\in|\\notin
          |\\o|\\sum_|\\row_|\\col_|\[eta|[(),:<=+\-*/~&\[\]])
  | (?P<id>[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*)
  | (?P<num>\d+))""", re.X)
_KEYWORDS = {"forall", "exists", "let", "in", "fun"}
#: infix operators: level (Coq's, lower binds tighter), right-associative
_INFIX = {"^+": (29, False), "^-": (29, False), "^": (30, True), "*": (40, False), "/": (40, False), "*m": (40, False),
          "*:": (40, True), "*+": (40, False), "+": (50, False), "-": (50, False), "\\o": (50, False), "=": (70, False),
          "!=": (70, False), "<>": (70, False), "<": (70, False), "<=": (70, False), "\\in": (70, False), "\\notin": (70, False),
          "/\\": (80, True), "\\/": (85, True), "<->": (95, False), "->": (99, True)}
_POSTFIX = {"^T", "%:M", "%:R", "^-1", "^o", "%N", ".+1"}


def _tokens(s: str) -> list[tuple[str, str]]:
    out, at = [], 0
    s = s.rstrip()
    while at < len(s):
        m = _TOKEN.match(s, at)
        if not m or m.end() == at:
            raise InvalidInputError(f"cannot read the Coq statement at {s[at:at + 30]!r}; "
                                    "only the notation of proofs/coq/statements is known")
        kind = m.lastgroup or "op"
        if kind == "tr":  # \tr M, the trace: a function applied like any other
            out.append(("id", "tr"))
        else:
            out.append((kind, m.group(kind).strip()))
        at = m.end()
    return out


def _kind(token: str) -> str:
    """``M``, ``cV``, ``rV`` or ``I`` from a type token ``'cV_`` or ``'cV[R]_``."""
    return token[1:].split("[", 1)[0].rstrip("_")


class _Parser:
    def __init__(self, s: str) -> None:
        self.t, self.i = _tokens(s), 0

    def peek(self, k: int = 0) -> tuple[str, str]:
        return self.t[self.i + k] if self.i + k < len(self.t) else ("end", "")

    def take(self, want: str | None = None) -> str:
        kind, v = self.peek()
        if want is not None and v != want:
            raise InvalidInputError(f"expected {want!r} in the Coq statement, found {v!r}")
        self.i += 1
        return v

    def binders(self) -> list[tuple[list[str], Any]]:
        groups = []
        if self.peek()[1] == "(":
            while self.peek()[1] == "(":
                self.take("(")
                names = []
                while self.peek()[1] != ":":
                    names.append(self.take())
                self.take(":")
                groups.append((names, self.term(200)))
                self.take(")")
        else:
            names = []
            while self.peek()[0] == "id" and self.peek()[1] not in _KEYWORDS:
                names.append(self.take())
            ty = None
            if self.peek()[1] == ":":
                self.take(":")
                ty = self.term(200)
            groups.append((names, ty))
        self.take(",")
        return groups

    def atom_start(self) -> bool:
        kind, v = self.peek()
        return (kind in ("id", "num", "ty") and v not in _KEYWORDS) or v in ("(", "[eta")

    def atom(self) -> Any:
        kind, v = self.peek()
        if kind == "ty":
            self.take()
            if self.peek()[1] == "(":  # 'M_(h, i) or 'cV_(n1 + n2)
                self.take("(")
                dims = [self.term(200)]
                while self.peek()[1] == ",":
                    self.take(",")
                    dims.append(self.term(200))
                self.take(")")
                node: Any = ("type", _kind(v), dims[0] if len(dims) == 1 else ("dims", dims))
            else:
                node = ("type", _kind(v), self.atom())
        elif v == "(" and self.peek(1)[0] == "id" and self.peek(2)[1] == ":=":  # (R:=R), an explicit argument
            self.take("(")
            name = self.take()
            self.take(":=")
            node = ("named", name, self.term(200))
            self.take(")")
            return node
        elif v == "(":
            self.take("(")
            node = ("paren", self.term(200))
            self.take(")")
        elif v == "[eta":
            self.take()
            node = self.term(200)
            self.take("]")
        elif kind in ("id", "num"):
            self.take()
            node = (kind, v)
        else:
            raise InvalidInputError(f"unexpected {v!r} in the Coq statement")
        while self.peek()[1] in _POSTFIX:
            node = ("post", self.take(), node)
        return node

    def term(self, limit: int) -> Any:
        kind, v = self.peek()
        if v in ("forall", "exists"):
            self.take()
            left: Any = (v, self.binders(), self.term(200))
        elif v == "let":
            self.take()
            name = self.take()
            self.take(":=")
            val = self.term(200)
            self.take("in")
            left = ("let", name, val, self.term(200))
        elif v in ("\\forall", "\\near"):  # \forall y \near x, P y;  \near x, P x (the point named as the variable)
            self.take()
            names = []
            while v == "\\forall" and self.peek()[0] == "id" and self.peek()[1] not in _KEYWORDS:
                names.append(self.take())
            if v == "\\forall":
                self.take("\\near")
            point = self.atom()
            self.take(",")
            body = self.term(200)
            left = ("app", ("id", "prop_near1"), [point, ("forall", [(names, None)], body) if names else body])
        elif v == "'D_":  # 'D_v f x: the derivative of f at x along v
            self.take()
            direction = self.atom()
            f, x = self.atom(), self.atom()
            left = ("app", ("id", "derive"), [f, x, direction])
        elif v == "~":
            self.take()
            left = ("not", self.term(75))
        elif v == "-":
            self.take()
            left = ("neg", self.term(35))
        elif v == "\\sum_":
            self.take()
            if self.peek()[1] == "(":  # \sum_(s < m) body
                self.take("(")
                idx = self.take()
                self.take("<")
                bound = self.term(60)
                self.take(")")
                left = ("sum", idx, self.term(40), bound)
            else:
                idx = self.take()
                left = ("sum", idx, self.term(40))
        elif v in ("\\row_", "\\col_"):  # \row_j e, \col_j e: the row (column) vector of the e(j)
            self.take()
            idx = self.take()
            left = ("row" if v == "\\row_" else "col", idx, self.atom())
        elif v == "fun":  # fun v : T => body, fun y => body
            self.take()
            names = []
            while self.peek()[0] == "id" and self.peek()[1] not in _KEYWORDS:
                names.append(self.take())
            if self.peek()[1] == ":":
                self.take(":")
                self.term(200)  # the binder's type: the function's domain, not printed
            self.take("=>")
            left = ("fun", names, self.term(200))
        elif v == "[/\\":
            self.take()
            parts = [self.term(200)]
            while self.peek()[1] in (",", "&"):
                self.take()
                parts.append(self.term(200))
            self.take("]")
            left = ("and", parts)
        else:
            left = self.atom()
            args = []
            while self.atom_start():
                arg = self.atom()
                if arg[0] != "named":  # an explicit implicit argument, (R:=R): not part of the mathematics
                    args.append(arg)
            if args:
                left = ("app", left, args)
        while True:
            op = self.peek()[1]
            if op not in _INFIX or _INFIX[op][0] > limit:
                return left
            level, right = _INFIX[op]
            self.take()
            rhs = self.term(level if right else level - 1)
            if op in ("<", "<=") and left[0] == "rel" and left[1][-1] in ("<", "<="):
                left = ("rel", left[1] + [op], left[2] + [rhs])  # 0 < f < 1
            elif level == 70:
                left = ("rel", [op], [left, rhs])
            elif op == "/\\":
                left = ("and", [left, *(rhs[1] if rhs[0] == "and" and rhs is not left else [rhs])])
            else:
                left = ("bin", op, left, rhs)


def parse(s: str) -> Any:
    """The statement as a nested tuple ``(kind, …)`` (raises :class:`InvalidInputError` on
    notation it does not know).

    >>> parse("a ^- 2 * b")
    ('bin', '*', ('bin', '^-', ('id', 'a'), ('num', '2')), ('id', 'b'))
    """
    p = _Parser(s)
    node = p.term(200)
    if p.peek()[0] != "end":
        raise InvalidInputError(f"unread rest of the Coq statement: {p.peek()[1]!r}")
    return node
