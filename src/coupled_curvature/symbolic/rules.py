"""Named rewrite rules.  Each is a *declared hypothesis*; a derivation step that uses one is
labelled ``rewrite:<rule>`` and passes iff applying the rule to ``lhs`` gives ``rhs`` exactly.

* :func:`homogeneity` -- ``σ(s z) = s^k σ(z)``, ``σ′(s z) = s^{k-1} σ′(z)``,
  ``σ″(s z) = s^{k-2} σ″(z)`` for ``s`` a product of powers of declared-positive atoms.
* :data:`sum_linearity` -- ``Σ_j c·a_j = c·Σ_j a_j`` (``c`` free of ``j``).
* :func:`sum_reindex` -- ``Σ_i F(π(i)) = Σ_i F(i)`` for a bijection ``π`` of the index range.
* :func:`word_rule` -- rewriting of products of matrix symbols (``QᵀQ = I``, Penrose, ...).
* :func:`positivity` -- maps an expression built from declared-positive atoms by ``+``, ``×``
  and powers to ``True``.

>>> import sympy as sp
>>> c = sp.Symbol("c", positive=True); z, k = sp.symbols("z k")
>>> from coupled_curvature.symbolic.functions import activation
>>> s, ds, dds = activation()
>>> homogeneity(k, {c})(s(c * z) + ds(c**2 * z))
c**k*sigma(z) + c**(2*k - 2)*Dsigma(z)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple

import sympy as sp
from sympy.matrices.expressions import MatMul, MatrixExpr

from coupled_curvature.symbolic.functions import activation

__all__ = [
    "RewriteRule", "rebuild", "homogeneity", "sum_linearity", "sum_reindex", "word_rule", "positivity", "PenroseBlock",
    "generic_block", "penrose_block",
]


@dataclass(frozen=True)
class RewriteRule:
    """A named rule: ``rule(expr)`` returns the rewritten expression."""

    name: str
    statement: str
    fn: Callable[[Any], Any]

    def __call__(self, expr: Any) -> Any:
        return self.fn(expr)

    def __str__(self) -> str:
        return f"{self.name}: {self.statement}"


def rebuild(e: Any, f: Callable[[Any], Any]) -> Any:
    """Bottom-up rebuild of ``e`` applying ``f`` at every node."""
    if isinstance(e, sp.MatrixBase):
        return e.applyfunc(lambda x: rebuild(x, f))
    if not isinstance(e, sp.Basic) or not e.args or isinstance(e, (sp.Symbol, sp.Indexed, sp.Idx)):
        return f(e) if isinstance(e, sp.Basic) else e
    args = [rebuild(a, f) for a in e.args]
    if any(a is not b for a, b in zip(args, e.args)):
        e = e.func(*args)
    return f(e)


def _is_pos_atom(b: Any, positive: set) -> bool:
    if b in positive:
        return True
    return isinstance(b, sp.Indexed) and b.base in positive


def _positive_factor(arg: Any, positive: set) -> Any:
    """Largest product of declared-positive atom powers dividing every term of ``arg``."""
    terms = sp.Add.make_args(sp.expand(arg))
    per_term = []
    for t in terms:
        d: dict = {}
        for f in sp.Mul.make_args(t):
            b, e = f.as_base_exp()
            if _is_pos_atom(b, positive):
                d[b] = d.get(b, 0) + e
        per_term.append(d)
    s = sp.Integer(1)
    for b in set(per_term[0]):
        found = [d.get(b) for d in per_term]
        exps = [x for x in found if x is not None]
        if len(exps) < len(found):
            continue
        if all(x == exps[0] for x in exps):
            s *= b ** exps[0]
        elif all(x.is_number for x in exps):
            s *= b ** min(exps)
    return s


def homogeneity(k: Any, positive: Iterable[Any], name: str = "sigma") -> RewriteRule:
    """Rule ``σ(s z) -> s^k σ(z)`` (and ``σ′``: ``k-1``, ``σ″``: ``k-2``), ``s > 0`` declared.

    >>> import sympy as sp
    >>> a = sp.IndexedBase("a"); i = sp.Idx("i"); z = sp.Symbol("z")
    >>> from coupled_curvature.symbolic.functions import activation
    >>> s, _, _ = activation()
    >>> homogeneity(2, {a})(s(a[i] * z))
    sigma(z)*a[i]**2
    """
    s0, s1, s2 = activation(name)
    deg = {s0: k, s1: k - 1, s2: k - 2}
    pos = set(positive)

    def f(e: Any) -> Any:
        if isinstance(e, sp.Function) and e.func in deg:
            s = _positive_factor(e.args[0], pos)
            if s != 1:
                return s ** deg[e.func] * e.func(sp.expand(e.args[0] / s))
        return e

    return RewriteRule(
        f"{name}_homogeneity",
        f"{name}(s z) = s^k {name}(z), {name}'(s z) = s^(k-1) {name}'(z), "
        f"{name}''(s z) = s^(k-2) {name}''(z) for s > 0 (k = {k})",
        lambda e: rebuild(e, f),
    )


def _sum_lin(e: Any) -> Any:
    if isinstance(e, sp.Sum):
        body, limits = e.function, e.limits
        idx = [lim[0] for lim in limits]
        body = sp.expand(body)
        if body.is_Add:
            return sp.Add(*[_sum_lin(sp.Sum(t, *limits)) for t in body.args])
        const, dep = body.as_independent(*idx, as_Add=False)
        if const != 1:
            return const * (sp.Sum(dep, *limits) if dep != 1 else sp.Sum(1, *limits).doit())
    return e


sum_linearity = RewriteRule(
    "sum_linearity",
    "finite sums are linear: sum_j (c a_j + b_j) = c sum_j a_j + sum_j b_j, c free of j",
    lambda e: rebuild(e, _sum_lin),
)


def sum_reindex(pi: Any) -> RewriteRule:
    """``Σ_i F(π(i)) -> Σ_i F(i)`` for a bijection ``π`` (an undefined function) of the range.

    Applies only when the summand depends on the index solely through ``π(i)``.
    """

    def f(e: Any) -> Any:
        if isinstance(e, sp.Sum) and len(e.limits) == 1:
            i = e.limits[0][0]
            d = sp.Dummy("d")
            body = e.function.subs(pi(i), d)
            if not body.has(i):
                return sp.Sum(body.subs(d, i), *e.limits)
        return e

    return RewriteRule(
        "sum_reindex", f"sum_i F({pi}(i)) = sum_i F(i) for a bijection {pi} of the index range",
        lambda e: rebuild(e, f),
    )


def _words(e: Any, patterns: list[tuple[tuple, tuple]]) -> Any:
    """Rewrite factor sequences inside every ``MatMul`` of ``e`` (to a fixed point)."""
    if isinstance(e, MatMul):
        coeff, mm = e.as_coeff_mmul()
        fac = list(mm.args) if isinstance(mm, MatMul) else [mm]
        changed = True
        while changed:
            changed = False
            for pat, rep in patterns:
                L = len(pat)
                for s in range(len(fac) - L + 1):
                    if tuple(fac[s:s + L]) == pat:
                        fac = fac[:s] + list(rep) + fac[s + L:]
                        changed = True
                        break
                if changed:
                    break
        if not fac:
            return coeff * sp.Identity(e.rows)
        return (coeff * MatMul(*fac)).doit() if len(fac) > 1 else coeff * fac[0]
    if isinstance(e, MatrixExpr) and e.args:
        return e.func(*[_words(a, patterns) for a in e.args]).doit()
    return e


def word_rule(name: str, statement: str, patterns: list[tuple[tuple, tuple]]) -> RewriteRule:
    """Rule rewriting factor words of matrix products, e.g. ``[(Q.T, Q), ()]`` for ``QᵀQ = I``.

    >>> import sympy as sp
    >>> n = sp.Symbol("n", integer=True, positive=True)
    >>> Q = sp.MatrixSymbol("Q", n, n); w = sp.MatrixSymbol("w", n, 1)
    >>> word_rule("orth", "QᵀQ = I", [((Q.T, Q), ())])(w.T * Q.T * Q * w)
    w.T*w
    """
    pats = [(tuple(p), tuple(r)) for p, r in patterns]
    return RewriteRule(name, statement, lambda e: _words(e.doit() if hasattr(e, "doit") else e, pats))


def positivity(positive: Iterable[Any]) -> RewriteRule:
    """Maps ``e`` to ``True`` when ``e`` is built from declared-positive atoms and positive
    rationals by ``+``, ``×`` and real powers; otherwise leaves ``e`` unchanged.

    >>> import sympy as sp
    >>> l, d = sp.symbols("lambda delta")
    >>> positivity({l, d})(1 / (l + d) ** 2)
    True
    """
    pos = set(positive)

    def is_pos(e: Any) -> bool:
        if e.is_Rational:
            return bool(e > 0)
        if _is_pos_atom(e, pos):
            return True
        if isinstance(e, (sp.Add, sp.Mul)):
            return all(is_pos(a) for a in e.args)
        if isinstance(e, sp.Pow):
            return is_pos(e.base) and (e.exp.is_real is True or e.exp.is_Rational)
        return False

    return RewriteRule(
        "positivity", "sums, products and real powers of positive quantities are positive",
        lambda e: sp.true if is_pos(sp.sympify(e)) else e,
    )


class PenroseBlock(NamedTuple):
    """A block of generic size ``n``: ``w``, ``g`` (n×1) and ``H``, ``H⁺`` (n×n) as matrix symbols,
    with the rule ``penrose`` (``HH⁺H = H``, ``H⁺HH⁺ = H⁺``) on them."""

    n: sp.Symbol
    w: sp.MatrixSymbol
    g: sp.MatrixSymbol
    H: sp.MatrixSymbol
    Hp: sp.MatrixSymbol
    penrose: RewriteRule


def generic_block(*maps: str) -> tuple[sp.Symbol, sp.MatrixSymbol, sp.MatrixSymbol, sp.MatrixSymbol,
                                       tuple[sp.MatrixSymbol, ...]]:
    """A block of generic size ``n``: ``n``, ``w``, ``g`` (n×1), ``H`` (n×n) and an n×n symbol per name in ``maps``.

    >>> n, w, g, H, (A,) = generic_block("A")
    >>> (A * w).shape, H.shape == A.shape
    ((n, 1), True)
    """
    n = sp.Symbol("n", integer=True, positive=True)
    square = tuple(sp.MatrixSymbol(name, n, n) for name in maps)
    return n, sp.MatrixSymbol("w", n, 1), sp.MatrixSymbol("g", n, 1), sp.MatrixSymbol("H", n, n), square


def penrose_block() -> PenroseBlock:
    """The generic block of the pseudo-inverse derivations (T3, T8, T12).

    >>> n, w, g, H, Hp, pen = penrose_block()
    >>> pen(H * Hp * H), pen(Hp * H * Hp)
    (H, H^+)
    """
    n, w, g, H, (Hp,) = generic_block("H^+")
    pen = word_rule("penrose", "HH⁺H = H, H⁺HH⁺ = H⁺", [((H, Hp, H), (H,)), ((Hp, H, Hp), (Hp,))])
    return PenroseBlock(n, w, g, H, Hp, pen)
