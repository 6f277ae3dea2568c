"""The hypotheses of a pinned Coq theorem, read off its printed statement and said in words.

:func:`premises` splits a statement as ``coqc`` prints it into its top-level premises and its conclusion
(``forall`` binders and ``let`` definitions are skipped; a premise is what stands before a top-level
``->``); :func:`in_words` says one premise in words, or gives ``None`` for a premise it does not know.
The report lists each formal theorem's hypotheses this way, and a test requires words for every premise
of every pinned theorem, so a new hypothesis shape cannot reach the report unexplained.

>>> premises("forall (R : rcfType) (n : nat) (A H : 'M_n), conformal A -> pinv (act_H A H) = A *m pinv H *m A^T")
(['conformal A'], 'pinv (act_H A H) = A *m pinv H *m A^T')
>>> in_words("conformal A")
'A is conformal: AᵀA = c²I for some c > 0'
>>> in_words("A *m A = A") is None
True
"""

from __future__ import annotations

import re

from coupled_curvature.proofs.formal_evidence import GLOBAL_PINS, differentiability_point

__all__ = ["hypotheses_in_words", "in_words", "pin_kind", "premises"]


def _top_level(s: str, token: str, start: int = 0) -> int:
    """Index of the first ``token`` at bracket depth 0 in ``s`` from ``start`` (``-1``: none); ``->``
    inside ``<->`` does not count."""
    depth = 0
    for i in range(start, len(s)):
        ch = s[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and s.startswith(token, i) and not (token == "->" and i and s[i - 1] == "<"):
            return i
    return -1


def _unwrap(p: str) -> str:
    """``p`` without one pair of outer parentheses that enclose all of it."""
    if p.startswith("(") and p.endswith(")") and _top_level(p[1:-1], ")") == -1:
        depth = 0
        for ch in p[1:-1]:
            depth += ch in "(["
            depth -= ch in ")]"
            if depth < 0:
                return p
        return p[1:-1].strip()
    return p


#: a binder a statement may open with, and what ends it: ``forall x, …`` and ``let x := … in …``
_BINDERS = (("forall ", ","), ("let ", " in "))


def premises(statement: str) -> tuple[list[str], str]:
    """The top-level premises of a printed statement, in order, and its conclusion (whitespace normalised)."""
    s = " ".join(statement.split())
    out: list[str] = []
    while True:
        s = s.strip()
        end = next((end for opening, end in _BINDERS if s.startswith(opening)), None)
        if end is not None:  # skip the binder
            at = _top_level(s, end)
            s = s[at + len(end):] if at >= 0 else ""
            continue
        cut = _top_level(s, "->")
        if cut < 0:
            return out, s
        out.append(_unwrap(s[:cut].strip()))
        s = s[cut + 2:]


_NAMES = {"th": "θ", "sigma": "σ", "mulV M th": "Mθ", "(mulV M th)": "Mθ", "phi": "φ", "dphi": "φ′", "d2phi": "φ''"}


def _name(v: str) -> str:
    return _NAMES.get(v.strip(), v.strip().strip("()"))


#: (pattern of a whole premise, words with {1}, {2}… for the groups)
_WORDS: tuple[tuple[str, str], ...] = (
    (r"\(0 < (\w+)\)%N", "{1} ≥ 1 (a natural number)"),
    (r"0 < (\w+)", "{1} > 0"),
    (r"0 <= (\w+)", "{1} ≥ 0"),
    (r"(\w+'?(?: 0 0)?) != 0", "{1} ≠ 0"),
    (r"(\w+) < (\w+)", "{1} < {2}"),
    (r"(\w+) \\in unitmx", "{1} is invertible"),
    (r"row_free (\w+)\^T", "{1} has full column rank"),
    (r"(\w+)\^T \*m \1 = (\w+)\^T \*m \2", "({1}, {2}) is balanced: {1}ᵀ{1} = {2}ᵀ{2}"),
    (r"\((\w+) \*m (\w+)\)\^T \*m \(\1 \*m \2\) = \((\w+) \*m \(invmx \2\)\^T\)\^T \*m \(\3 \*m \(invmx \2\)\^T\)",
     "({1}{2}, {3}{2}⁻ᵀ) is still balanced"),
    (r"\\tr \((\w+)\^T \*m \1\) = 0", "tr({1}ᵀ{1}) = 0"),
    (r"(\w+)\^T \*m \1 = 1%:M", "{1} is orthogonal: {1}ᵀ{1} = I"),
    (r"(\w+)\^T = \1", "{1} is symmetric"),
    (r"(\w+) \*m diag_mx (\w+) \*m \1\^T = (\w+) \*m diag_mx (\w+'?) \*m \3\^T",
     "{1} diag({2}) {1}ᵀ = {3} diag({4}) {3}ᵀ: two eigendecompositions of the same matrix"),
    (r"(?:\w+\.)?unbiased (\w+)", "every bias of the network {1} is zero"),
    (r"injective (\w+)", "{1} is injective: a permutation of the indices"),
    (r"conformal (\w+)", "{1} is conformal: {1}ᵀ{1} = c²I for some c > 0"),
    (r"~ conformal (\w+)", "{1} is not conformal"),
    (r"(\w+) \^\+ (\w+) != 1", "{1}^{2} ≠ 1"),
    (r"(\w+) \^\+ (\w+) = 1", "{1}^{2} = 1"),
    (r"(\w+)\^T \*m \1 \*m e (\w+) = (\w+) \*: e \2",
     "the basis vector e_{2} is an eigenvector of {1}ᵀ{1}, with eigenvalue {3}"),
    (r"~ \(exists t : \w+, (\w+)\^T \*m \1 \*m e (\w+) = t \*: e \2\)",
     "the basis vector e_{2} is not an eigenvector of {1}ᵀ{1}"),
    (r"penrose (\w+) (\w+)", "{2} satisfies the four Penrose equations for {1}"),
    (r"0 < (?:\w+\.)?coupledDplus w g H", "D⁺(w, g, H) > 0"),
    (r"0 < coupledD w g H", "D(w, g, H) > 0"),
    (r"L \\o mulV (\w+) = L", "L∘{1} = L: the linear map {1} is a symmetry of the loss"),
    (r"homogeneous (\w+) L", "L is positively homogeneous of degree {1}: L(s·x) = s^{1}·L(x) for every s > 0"),
    (r"scale_invariant L", "L is scale invariant: L(s·x) = L(x) for every s > 0"),
    (r"(?:\w+\.)?differentiable_near L (.+)",
     "L is differentiable at every point of a neighbourhood of {1} (local)"),
    (r"forall c z : [^,]+, 0 < c -> sigma \(c \* z\) = c \^\+ k \* sigma z",
     "σ is positively homogeneous of degree k: σ(cz) = cᵏσ(z) for every c > 0"),
    (r"forall c z : [^,]+, 0 < c -> sigma \(c \* z\) = c \^\+ 1 \* sigma z",
     "σ is positively homogeneous of degree 1: σ(cz) = c·σ(z) for every c > 0"),
    (r"forall (\w) : 'I_\w+, (?:\w+\.)?differentiable_near \(ell \1\) \(f \1\)",
     ("every per-sample loss ℓ_s is differentiable at every point of a neighbourhood of the network's output "
      "f_s at w (local)")),
    (r"forall \((\w) : 'I_\w+\) \((\w) : 'I_[\w.+]+\), differentiable \[eta d1 \(ell \1\) \(e \2\)\] \(f \1\)",
     ("every partial derivative ∂_jℓ_s of every per-sample loss is differentiable at the network's output f_s "
      "at w (local)")),
    (r"forall (\w) : 'I_\w+, 0 < (\w+) 0 \1", "every entry of {2} is positive"),
    (r"forall v : [^,]+, F' \(c \*: v\) = F v", "F'(c·v) = F(v) for every v: the block rescaled by c"),
    (r"forall v : [^,]+, F' \((\w+) \*m v\) = F v", "F'({1}v) = F(v) for every v: the block moved by the matrix {1}"),
    (r"forall (\w) : 'I_[\w.+]+, exists (\w) : 'I_[\w.+]+, (\w+)\^T \*m e \1 = e \2",
     "{3}ᵀ sends every basis vector to a basis vector (with {3}ᵀ{3} = I: {3} permutes the coordinates)"),
    (r"\\near (\w+), f \1 = g \1",
     "f = g on a neighbourhood of {1} (local)"),
    (r"(?:\w+\.)?differentiable_near g (\w+)",
     "g is differentiable at every point of a neighbourhood of {1} (local)"),
    (r"(\w+) @ (\w+) --> \1 \2",
     "{1} is continuous at {2}: {1}(y) → {1}({2}) as y → {2} (local)"),
    (r"0 < (\w+) (\w+)", "{1}({2}) > 0"),
    (r"(\w+) (\w+) < 0", "{1}({2}) < 0"),
    (r"forall \(w g : 'cV_n\) \(H : 'M_n\), w != 0 -> g != 0 -> H\^T = H -> coupledDplus \(act_w A w\) "
     r"\(act_g A g\) \(act_H A H\) = coupledDplus w g H",
     "D⁺ is invariant under A for every w ≠ 0, g ≠ 0 and symmetric H"),
    (r"forall \(g : 'cV_n\) \(H : 'M_n\), g != 0 -> H\^T = H -> coupledD w' \(J\^T \*m g\) "
     r"\(J\^T \*m H \*m J \+ \\sum_k g k 0 \*: K k\) = coupledD p g H",
     "D at (w', Jᵀg, JᵀHJ + Σ_k g_k K_k) equals D at (p, g, H) for every g ≠ 0 and symmetric H: the "
     "pull-back through a map with Jacobian J and second derivatives K_k preserves D"),
    (r"forall i : 'I_\w+, \\forall t \\near 1, F i \(t \*: w\) = t \^\+ (\w+) \*: F i w",
     "every sample's output F_i is positively homogeneous of degree {1} along the ray through w, for t near 1: "
     "F_i(t·w) = t^{1}·F_i(w) (local)"),
    (r"forall i : 'I_\w+, \\forall s \\near 1, derivable \(ell i\) \(s \*: F i w\) \(F i w\)",
     "every per-sample loss ℓ_i is derivable along f_i = F_i(w) at s·f_i for every s near 1 (local)"),
    (r"forall i : 'I_\w+, derivable \[eta d1 \(ell i\) \(F i w\)\] \(F i w\) \(F i w\)",
     "every per-sample directional derivative ∂ℓ_i(y)[f_i], as a function of y, is derivable at f_i = F_i(w) along "
     "f_i (local)"),
    (r"forall i j : 'I_[\w.+]+, derivable \[eta d1 L \(e j\)\] (\w+) \(e i\)",
     "every partial derivative ∂_jL is derivable at {1} along every coordinate direction (local)"),
    (r"forall i : 'I_\w+, (?:\w+\.)?differentiable_near \(ell i\) \(F i w\)",
     "every per-sample loss ℓ_i is differentiable at every point of a neighbourhood of f_i = F_i(w) (local)"),
    (r"\\near (\w+), is_derive \1 1 (\w+) \((\w+) \1\)",
     "{2} is derivable at every point y near {1}, with derivative {3}(y) there (local)"),
    (r"forall (\w+) : R\^o, is_derive \1 1 (\w+) \((\w+) \1\)",
     "{2} is derivable at every point {1} of R, with derivative {3}({1}) there (global: everywhere, not local)"),
    (r"(\w+) <= (\w+)", "{1} ≤ {2}"),
    (r"forall t : \w+, (\w+) <= t <= (\w+) -> forall \(k : 'I_[\w.+]+\) \(d : .+?\), is_derive \(t \*: (\w+)\) d "
     r"\(fun y : [^=]+=> (\w+) y k 0\) \(\((\w+) \(t \*: \3\) \*m d\) k 0\)",
     "on the radial segment {{t·{3} : {1} ≤ t ≤ {2}}}, every coordinate {4}_k has the directional derivative "
     "({5}(t{3})·d)_k along every d: {5} is the Jacobian of {4} there (local)"),
    (r"forall t : \w+, (\w+) <= t <= (\w+) -> forall \(k : 'I_[\w.+]+\) \(d d' : .+?\), is_derive \(t \*: (\w+)\) d "
     r"\(fun y : [^=]+=> \((\w+) y \*m d'\) k 0\) \(dot d \((\w+) \(t \*: \3\) k \*m d'\)\)",
     "on the radial segment {{t·{3} : {1} ≤ t ≤ {2}}}, the k-th coordinate of {4}(y)·d', as a function of y, has "
     "the directional derivative dᵀ{5}(t{3})_k d' along every d: {5}_k is the Hessian of the k-th coordinate there "
     "(local)"),
    (r"forall t : \w+, (\w+) <= t <= (\w+) -> (\w+) \(t \*: (\w+)\) \\in unitmx",
     "{3}(t·{4}) is invertible for {1} ≤ t ≤ {2}"),
    (r"forall t : \w+, (\w+) <= t <= (\w+) -> (\w+) \(t \*: (\w+)\) != 0",
     "{3}(t·{4}) ≠ 0 for {1} ≤ t ≤ {2}, so D is defined at the image"),
    (r"forall t : \w+, (\w+) <= t <= (\w+) -> forall \(g : 'cV_[\w.+]+\) \(H : 'M_[\w.+]+\), g != 0 -> H\^T = H -> "
     r"coupledD \(t \*: (\w+)\) \(\((\w+) \(t \*: \3\)\)\^T \*m g\) \(\(\4 \(t \*: \3\)\)\^T \*m H \*m \4 \(t \*: \3\) \+ "
     r"\\sum_k g k 0 \*: (\w+) \(t \*: \3\) k\) = coupledD \((\w+) \(t \*: \3\)\) g H",
     "at every point w' = t·{3} of the segment ({1} ≤ t ≤ {2}), D at (w', Jᵀg, JᵀHJ + Σ_k g_k K_k) with J = {4}(w'), "
     "K = {5}(w') equals D at ({6}(w'), g, H) for every g ≠ 0 and symmetric H: D(L∘{6}, w') = D(L, {6}(w')) for "
     "every loss, by the chain rule"),
    (r"(?:\w+\.)?differentiable_near ell (\w+)",
     "ℓ is differentiable at every point of a neighbourhood of {1} (local)"),
)


def in_words(premise: str) -> str | None:
    """One premise (as :func:`premises` gives it) in words, or ``None`` for a shape not known here."""
    p = " ".join(premise.split())
    for pattern, words in _WORDS:
        m = re.fullmatch(pattern, p)
        if m:
            return words.format(None, *(_name(g) for g in m.groups()))
    m = re.match(r"differentiable (L|f) ", p)
    if m:
        point = differentiability_point(p)
        return None if point is None else f"{m.group(1)} is differentiable at {_name(point)} (local)"
    m = re.fullmatch(r"forall (\w) : 'I_(?:[\w.+]+|\([\w.+* ]+\)[\w.+]*), (differentiable \[eta d1 L \(e \1\)\] .+)", p)
    if m:
        point = differentiability_point(re.sub(r"\[eta d1 L \(e \w\)\]", "f", m.group(2)))
        return None if point is None else f"every partial derivative ∂_jL is differentiable at {_name(point)} (local)"
    m = re.fullmatch(r"forall j : 'I_[\w.+]+, (differentiable \[eta d1 g \(e j\)\] .+)", p)
    if m:                                                              # ∂_jg of a function g equal to L near the point
        point = differentiability_point(re.sub(r"\[eta d1 g \(e j\)\]", "f", m.group(1)))
        return None if point is None else f"every partial derivative ∂_jg is differentiable at {_name(point)} (local)"
    m = re.fullmatch(r"forall (\(i : 'I_\w+\) \(j : 'I_[\w.+]+\)|j : 'I_[\w.+]+), "
                     r"(differentiable \[eta d1 (\(ell i\)|ell) \(e j\)\] .+)", p)
    if m and (m.group(3) == "ell") == m.group(1).startswith("j"):     # ∂_jℓ_i of every sample's loss, or ∂_jℓ
        point = differentiability_point(re.sub(r"\[eta d1 (?:\(ell i\)|ell) \(e j\)\]", "f", m.group(2)))
        if point is None or (m.group(3) != "ell" and _name(point) != "F i w"):
            return None
        who, at = ("ℓ", _name(point)) if m.group(3) == "ell" else ("ℓ_i of every per-sample loss", "f_i = F_i(w)")
        return f"every partial derivative ∂_j{who} is differentiable at {at} (local)"
    return None


def hypotheses_in_words(statement: str) -> list[tuple[str, str | None]]:
    """Each premise of ``statement`` with its words (``None`` where :func:`in_words` has none)."""
    return [(p, in_words(p)) for p in premises(statement)[0]]


def pin_kind(name: str, statement: str) -> str:
    """What a pinned theorem is: ``global hypotheses`` or ``global statement, no hypotheses`` (declared in
    :data:`~coupled_curvature.proofs.formal_evidence.GLOBAL_PINS`), else ``local hypotheses`` or ``no hypotheses``.

    >>> pin_kind("T06_n1_classification.n1_affine_iff", "forall x : R^o, P x -> Q x")
    'global hypotheses'
    >>> pin_kind("X.y", "forall a : R, a != 0 -> a = a"), pin_kind("X.z", "forall a : R, a = a")
    ('local hypotheses', 'no hypotheses')
    """
    has = bool(premises(statement)[0])
    if name.removeprefix("CoupledCurvature.") in GLOBAL_PINS:
        return "global hypotheses" if has else "global statement, no hypotheses"
    return "local hypotheses" if has else "no hypotheses"
