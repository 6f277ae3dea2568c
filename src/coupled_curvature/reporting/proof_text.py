"""Each theorem's proof as a reader follows it: a few steps, each a sentence of reasoning and the
formula it arrives at, with the evidence of the checks behind it.

:data:`PROOFS` holds, per theorem, the written steps (:class:`Said`): the sentence, a pattern that
picks the derivation's steps the sentence rests on (matched against their statements), and the
formula shown, which is a piece of one of those steps' own statements (or, with :data:`OWN`,
the step's checked identity ``lhs = rhs``), rendered by :mod:`.umath` (or :mod:`.steps`). The
formula is never written here: a piece that no longer occurs in the derivation is not shown.

:func:`proof` turns a theorem's checked steps into an :class:`.outline.Proof`; each proof step's
evidence is the trust labels of its checks (their ``label`` field, strongest first) and it links
to the first of them in the table of checks (:func:`check_anchor`). A theorem without written
steps (a new one) gets one proof step per distinct formal claim of its derivation.

>>> from types import SimpleNamespace as NS
>>> st = NS(description="D → D/s", label="formal", passed=True, lhs=None, rhs=None)
>>> p = proof("T12", [st])
>>> [(s.formula.text, s.evidence, s.target) for s in p.steps if s.formula]
[('D → D/s', ('formal',), 'check-T12-1')]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coupled_curvature.reporting.outline import Display, Inline, Link, Proof, ProofStep, Text
from coupled_curvature.reporting.references import bibliography
from coupled_curvature.reporting.umath import math_latex, math_mathml, normalise

__all__ = ["Said", "OWN", "PROOFS", "proof", "check_anchor", "matched"]

#: ``Said.show`` for "the step's own checked identity lhs = rhs" (when it is presentable)
OWN = "<own identity>"

_ORDER = ("formal", "exact", "certificate", "rewrite", "numeric")


@dataclass(frozen=True)
class Said:
    """One written proof step: ``reason`` (Unicode mathematics), ``match`` (a regular expression
    searched in the normalised statements of the derivation's steps) and ``show`` (a piece of a
    matched statement to display, :data:`OWN`, or ``None`` for the sentence alone)."""

    reason: str
    match: str
    show: str | None = None
    cite: tuple[str, ...] = ()  #: keys of :data:`.references.REFERENCES` the sentence uses


def check_anchor(theorem: str, index: int) -> str:
    """The anchor of the ``index``-th (1-based) check of ``theorem`` in the table of checks.

    >>> check_anchor("T3", 12)
    'check-T3-12'
    """
    return f"check-{theorem}-{index}"


_S = Said
#: theorem id -> its proof, step by step
PROOFS: dict[str, tuple[Said, ...]] = {
    "T1": (
        _S("By the chain rule, and since T is linear, the gradient of L∘T at θ is the gradient of L at Tθ pulled "
           "back by Tᵀ;", r"chain rule ∇\(L∘T\)", "∇(L∘T)(θ) = Tᵀ(∇L)(Tθ)"),
        _S("differentiating once more pulls the Hessian back on both sides.", r"chain rule ∇²\(L∘T\)",
           "∇²(L∘T)(θ) = Tᵀ(∇²L)(Tθ)T"),
        _S("As L∘T = L, the left side is the gradient g at θ; T is invertible, so solving for the gradient g′ at Tθ "
           "gives the gradient law,", r"^L∘T = L gives", "g' = T⁻ᵀg"),
        _S("and the same argument gives the Hessian law.", r"^and H = TᵀH'T", "H' = T⁻ᵀHT⁻¹"),
        _S("For block-diagonal T the inverse transpose is block-diagonal, so each block transforms by its own "
           "A alone; on a diagonal Hessian block:", r"^T = diag\(A, b\)|^gradient block|^Hessian diagonal block",
           "(T⁻ᵀHT⁻¹)_AA = A⁻ᵀ H_AA A⁻¹"),
        _S("Substituting w → Aw and these laws, A cancels against A⁻¹ in the quadratic form", r"^\(Aw\)ᵀ\(A⁻ᵀHA⁻¹\)",
           "(Aw)ᵀ(A⁻ᵀHA⁻¹)(Aw) = wᵀHw"),
        _S("and in the pairing of w with g.", r"^\(Aw\)ᵀ\(A⁻ᵀg\)", "(Aw)ᵀ(A⁻ᵀg) = wᵀg"),
    ),
    "T2": (
        _S("Under the layer-wise rescaling each pre-activation of layer l is multiplied by c: the factor comes out "
           "of the sum over the layer's inputs; the function is unchanged while raw sharpness measures change.",
           r"^layer-wise: pull c", cite=("dinh2017",)),
        _S("Positive homogeneity moves it out of the activation,", r"^σ\(c z_i\)", "σ(c z_i) = cᵏ σ(z_i)"),
        _S("and the factor c⁻ᵏ of the next layer cancels it, so the output is unchanged.", r"^c⁻ᵏ Σ_i|^instance 2-3-2-1",
           "c⁻ᵏ Σ_i cᵏ(…) = Σ_i (…)"),
        _S("A neuron-wise scaling is the same argument with one factor a_i > 0 per hidden unit.",
           r"^neuron-wise|^σ\(a_i z_i\)", "σ(a_i z_i) = a_iᵏ σ(z_i)"),
        _S("A permutation of hidden units only re-indexes the sum over them.", r"^permutation π"),
        _S("Max-pooling commutes with a positive scale, as max is built from sums and an absolute value.",
           r"^max\(cx, cy\)", "max(cx, cy) = c·max(x, y)"),
    ),
    "T3": (
        _S("By T1 with A = cI on the blocks W_l and b_l, their gradient is divided by c,", r"^W_l, b_l: ‖g'‖²",
           "‖g'‖²/‖g‖² = c⁻²"),
        _S("while the quadratic form and the pairing are invariant (T1);", r"^W_l, b_l: w'ᵀ", "w'ᵀH'w' = wᵀHw"),
        _S("the Rayleigh quotient divides wᵀHw by wᵀw, which gains c², so", r"^W_l, b_l: RQ'/RQ", "RQ'/RQ = c⁻²"),
        _S("and the two factors cancel in D = RQ/‖g‖².", r"^W_l, b_l: D' = D", "D' = D"),
        _S("For D⁺, (H/c²)⁺ = c²H⁺ by the Penrose conditions, and the factors cancel the same way.",
           r"^W_l, b_l: (Penrose|D⁺)", "D⁺' = D⁺", ("penrose1955",)),
        _S("For the block W_{l+1} the factor is c⁻ᵏ in place of c,", r"^W_\{l\+1\}: (‖g'‖²|RQ)", "‖g'‖²/‖g‖² = c²ᵏ"),
        _S("and again D and D⁺ are unchanged.", r"^W_\{l\+1\}: (D|w'|Penrose)", "D⁺' = D⁺"),
        _S("On explicit networks (2-3-2-1 and 3-2-2-2) the rescaling keeps the activation pattern and the output, "
           "and every block, the untouched ones included, follows the law.", r"^(2-3-2-1|3-2-2-2)"),
        _S("With a generic homogeneous σ the rescaled blocks' gradient and Hessian are g/α and H/α².",
           r"^2-2-1 generic σ", "H' = H/α²"),
    ),
    "T4": (
        _S("The numerator wᵀHw is invariant (T1), and both norms in the denominator are quadratic forms in "
           "M = AᵀA:", r"^numerator wᵀHw|^‖Aw‖²|^‖A⁻ᵀg‖²", "‖Aw‖² = wᵀ(AᵀA)w"),
        _S("so D′/D is a ratio of these norms, and H = wwᵀ shows that (i) and (ii) are equivalent.", r"^D'/D = \(",
           "D'/D = (wᵀw·gᵀg)/(wᵀMw·gᵀM⁻¹g)"),
        _S("(ii) ⇒ (iii): (ii) is a polynomial identity in w and g; the off-diagonal entries of M and the differences "
           "of its diagonal entries lie in the ideal of its coefficient equations (explicit cofactors, Gröbner "
           "reduction, and a certificate the independent checker accepts), so",
           r"^n=\d: (M\d\d|-M\d\d|independent checker accepts)|^independent checker re-verifies", "M = M_00 I",
           ("buchberger1965",)),
        _S("(iii) ⇒ (i): for A = cQ the two norms gain c² and c⁻², so", r"^‖cQw‖²|^‖\(cQ\)⁻ᵀg‖²|^hence D'/D = 1",
           "D'/D = 1"),
        _S("For A ∉ CO(n), a basis vector e_1 that is not an eigenvector of M changes D by a factor below 1:",
           r"w = g = e_1", "M_11 (M⁻¹)_11 - 1 = M_12²/det M"),
        _S("otherwise M is diagonal and not scalar, and w = e_i, g = e_j with M_ii ≠ M_jj work;", r"^M diagonal",
           "1/(M_ii (M⁻¹)_jj) = M_jj/M_ii"),
        _S("with eigenvectors of M for its extreme eigenvalues the factor is κ(A)⁻². Explicit witnesses are "
           "re-checked by the independent checker.", r"^w, g eigenvectors|^witness for A|^conformal A",
           "λ_min/λ_max = κ(A)⁻²"),
    ),
    "T5": (
        _S("The neuron-wise scaling acts on vec(W_l) by a Kronecker product of diagonal matrices,", r"^vec\(diag",
           "vec(diag(a) W diag(b)⁻ᵏ) = (diag(b)⁻ᵏ ⊗ diag(a)) vec(W)"),
        _S("so KᵀK is diagonal with the entries a_i² b_j⁻²ᵏ, and by T4 the action is exact iff these entries are "
           "all equal.", r"^KᵀK is diagonal"),
        _S("Entries in one column differ by a_i/a_i′ and entries in one row by (b_j′/b_j)ᵏ, so equal entries force "
           "a and b to be uniform;", r"^ratio of entries"),
        _S("a uniform scaling is conformal,", r"^uniform a = b = c", "KᵀK = c^(2-2k)·I"),
        _S("and permutations act by permutation matrices, which are orthogonal.", r"permutation matrices", "PᵀP = I"),
        _S("Each non-uniform scaling, and the 'layer' partition, has an explicit witness that the independent "
           "checker accepts.", r"^non-uniform|^'layer' partition|^uniform a = b = 2"),
    ),
    "T6": (
        _S("For w = φ(w′) the chain rule gives the new gradient and Hessian:", r"^g' = ∇\(L∘φ\)|^H' = ∇²\(L∘φ\)",
           "H' = ∇²(L∘φ) = JᵀHJ + Σ_k g_k ∇²φ_k"),
        _S("H = 0 gives D = 0, so invariance needs the second-derivative term to vanish for all g and w′; every "
           "quadratic and cubic coefficient of φ then lies in the ideal of these equations, so φ is affine.",
           r"^H = 0|cubic φ: every", "Σ_k g_k w'ᵀ∇²φ_k w' = 0", ("buchberger1965",)),
        _S("For affine φ = Bw′ + a, the identity D′ = D for all (g, H, w′) puts a and the entries of BᵀB − c²I in "
           "its ideal, and the conformal B satisfy it:", r"^affine φ|^sufficiency", "BᵀB = (p²+q²)I"),
        _S("In one dimension the difference is a multiple of φ'', so exactly the affine maps are admissible;",
           r"^n=1", "D' - D = φ''/(φ'² g)"),
        _S("a translation and a cubic map change D on explicit points.", r"^witness:"),
    ),
    "T7": (
        _S("For A = cQ the Hessian maps to a scaled rotation of itself,", r"^H' = A⁻ᵀHA⁻¹",
           "H' = A⁻ᵀHA⁻¹ = c⁻² Q H Qᵀ"),
        _S("and X = AH⁺Aᵀ satisfies the four Penrose conditions for H′, so it is H′⁺ by uniqueness;",
           r"^Penrose [1-4]|^H'X|^X H'", "H'XH' = H'", ("penrose1955",)),
        _S("the three factors of D⁺ then gain c⁴, c² and c⁻²,", r"^w'ᵀH'⁺w'|^‖w'‖²|^‖g'‖²", "w'ᵀH'⁺w' = c⁴ wᵀH⁺w"),
        _S("and they cancel.", r"^D⁺'/D⁺ = 1", "D⁺'/D⁺ = 1"),
        _S("With a relative cutoff, eigenvectors map to eigenvectors and the eigenvalues and the threshold both gain "
           "c⁻² > 0, so the same eigen-indices are kept and the truncated pseudo-inverse maps the same way:",
           r"^H u = λu|^kept-set test|^c⁻² > 0|^each kept term", "c⁻²(|λ_i| - rtol·max|λ|)"),
        _S("Conversely, with H = uuᵀ and g = u the invariance of D⁺ is T4 (ii), which forces AᵀA = c²I;",
           r"^\(uuᵀ\)⁺|^H = uuᵀ|^T4 \(ii\)", "(uuᵀ)⁺ = uuᵀ/(uᵀu)²"),
        _S("and a shear keeps wᵀHw but multiplies wᵀH⁺w by 1/4.", r"^shear"),
    ),
    "T8": (
        _S("Scaling H by t > 0 divides its pseudo-inverse by t (Penrose conditions),", r"^\(tH\)⁺", "(tH)⁺ = H⁺/t",
           ("penrose1955",)),
        _S("so D is linear in t", r"^D\(tH\)", "D(tH) = t·D(H)"),
        _S("and D⁺ proportional to 1/t;", r"^D⁺\(tH\)", "D⁺(tH) = D⁺(H)/t"),
        _S("their derivatives in t have fixed signs: D grows with curvature (when D > 0) and D⁺ shrinks.", r"^dD",
           "dD⁺(tH)/dt = -D⁺(H)/t²"),
        _S("D⁺ is the Laplace posterior variance along w/‖w‖, scaled by ‖g‖²;", r"^D⁺ = \(wᵀH⁺w",
           "D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²", ("mackay1992",)),
        _S("in the eigenbasis the log-determinant term of the PAC-Bayes bound grows with every eigenvalue, while "
           "the trace term shrinks.",
           r"^eigenbasis|^∂/∂λ_1|^\.\.\. > 0|^-\(\.\.\.\) > 0|^d/dt ½log", "∂/∂λ_1 ½log det(H+δI) = 1/(2(λ_1+δ))",
           ("mcallester1999",)),
    ),
    "T9": (
        _S("Along the ray tW_l the activation pattern is fixed, and by induction over the layers each later "
           "pre-activation is homogeneous in t:", r"^induction step|^z_\{j\+1\}|^closed form",
           "z_{j+1}(t) = t^{qk} z_{j+1}"),
        _S("so the output is homogeneous of degree p, and differentiating L(tw) at t = 1 gives wᵀg and wᵀHw;",
           r"^d/dt L\(tw\)|^d²/dt² L\(tw\)", "d²/dt² L(tw)|_{t=1} = wᵀHw"),
        _S("the chain rule through f(tW_l) = t^{p} f gives the Euler identities.", r"^f\(tW_l\)|^wᵀHw = d²/dt²",
           "wᵀHw = d²/dt² L|_{t=1} = p(p-1)P + p²Q"),
        _S("For k = 1, p = 1 in every layer, so wᵀHw = Q and D_l = (Q/P²)·cos²∠(w_l, g_l);", r"^k = 1",
           "wᵀHw = Q"),
        _S("Lagrange's identity gives cos² ≤ 1. Explicit ReLU and ReLU² networks satisfy both identities layer by "
           "layer.", r"^Lagrange identity|relu", "‖u‖²‖v‖² - (uᵀv)² = Σ_{i<j}(u_i v_j - u_j v_i)² ≥ 0"),
    ),
    "T10": (
        _S("Differentiating L(sw) = L(w) in s at s = 1 gives the radial derivative, which vanishes:",
           r"^d/ds L\(sw\)", "d/ds L(sw)|_{s=1} = wᵀg"),
        _S("differentiating ∇_w L(sw) = ∇L(w) in s gives a second identity, which vanishes too:",
           r"^∂/∂s ∇_w", "∂/∂s ∇_w[L(sw)]|_{s=1} = g + Hw"),
        _S("so Hw = −g and wᵀHw = −wᵀg = 0; explicit scale-invariant losses in n = 2, 3, 4 satisfy all three.",
           r"^F\(w_i/w_n\)", "D = wᵀHw/(wᵀw‖g‖²) = 0"),
    ),
    "T11": (
        _S("The numerator of ρ is invariant under every block-diagonal linear symmetry (T1),", r"^numerator of ρ",
           OWN),
        _S("and so is the pairing P = wᵀg, hence ρ:", r"^P = wᵀg invariant", "ρ = wᵀHw/P²"),
        _S("the Newton decrement is invariant because the inverse Hessian maps contragrediently.",
           r"^Newton decrement", "(T⁻ᵀg)ᵀ(T⁻ᵀHT⁻¹)⁻¹(T⁻ᵀg) = gᵀH⁻¹g"),
        _S("On an explicit network a non-uniform neuron scaling leaves ρ unchanged on every block.",
           r"non-uniform neuron scaling", "w'ᵀg' = wᵀg"),
        _S("On a scale-invariant block (wᵀg)² = 0, so ρ is undefined; for bias-free degree-1 nets T9 gives",
           r"^scale-invariant block|^bias-free", "(p(p-1)P + p²Q)/(pP)²"),
    ),
    "T12": (
        _S("Scaling the loss scales its gradient and Hessian,", r"^∇²\(sL\)", "∇²(sL) = s∇²L"),
        _S("and the Penrose conditions divide the pseudo-inverse by s.", r"^\(sH\)⁺", "(sH)⁺ = H⁺/s",
           ("penrose1955",)),
        _S("In D, ‖g‖² gains s² and wᵀHw gains s,", r"^D → D/s|^instance \(singular", "D → D/s"),
        _S("in D⁺, ‖g‖² gains s² and wᵀH⁺w loses s, and ρ loses s, so the product D·D⁺ is invariant.",
           r"^D⁺ → s·D⁺|^ρ → ρ/s|^D·D⁺|^instance: D⁺", "D⁺ → s·D⁺"),
        _S("A sum reduction over N samples is N times the mean reduction.", r"^sum reduction"),
    ),
    "T13": (
        _S("Under W_Q → W_Q·A and W_K → W_K·A⁻ᵀ the factors A and A⁻¹ cancel inside the logits:", r"^logits",
           "(XW_Q·A)(XW_K·A⁻ᵀ)ᵀ = (XW_Q)(XW_K)ᵀ"),
        _S("likewise B cancels between the values and the head's rows of the output map, for any attention "
           "pattern P;", r"^values", "PX(W_V·B)(B⁻¹·W_O^{h}) = PXW_V·W_O^{h}"),
        _S("swapping two heads together with the row blocks of W_O permutes the terms of a sum.", r"^heads",
           "[O_2 O_1]·[W_2; W_1] = [O_1 O_2]·[W_1; W_2]"),
        _S("LayerNorm and RMSNorm remove a positive scale of their input, so the map before them is a "
           "scale-invariant block (T10):", r"^\(cW\)x|^var\(cz\)|^LayerNorm|^mean\(\(cz\)²\)|^RMSNorm",
           "cz/√mean((cz)²) = z/√mean(z²)"),
        _S("Each row of W_Q maps by Aᵀ and each row of W_K by A⁻¹,", r"row action|^A·\(adj", "w → Aᵀw"),
        _S("so by T4 and T7 D of a row block is exact under a conformal A, a shear has a witness, and so has a "
           "fused Q|K|V slice under a per-head cQ with c ≠ 1.", r"^(query|key) row under|^fused", "D' = D"),
    ),
    "T14": (
        _S("Columns of the Cayley map of a skew matrix are orthonormal, so W_Q* = UΣ^{1/2} and W_K* = VΣ^{1/2} have "
           "equal Gram matrices and the SVD product:", r"^Cayley|^balanced:|^product:", "(W_Q*)ᵀ(W_Q*) = Σ"),
        _S("The factors A and A⁻¹ cancel in the product, which is therefore the orbit's own,", r"^orbit:",
           "(W_Q·A)(W_K·A⁻ᵀ)ᵀ = W_Q·W_Kᵀ"),
        _S("and the least-squares balancing map of W_Q = (W_Q*)A is A⁻¹: every point of the orbit is brought back "
           "to the same balanced pair.", r"^Gram of W_Q|^balancing map|^and W_K·A_bal", "(AᵀΣA)⁻¹AᵀΣ = A⁻¹"),
        _S("What freedom is left is orthogonal, conformal on every row block (T4), while A = 2I leaves the "
           "balance;", r"^R = cayley|^residual freedom|^and moves a query row|^control:", "D' = D"),
        _S("so under a shear the raw D of a query row moves (a witness) and the gauge-fixed D does not.",
           r"^raw:|^gauge-fixed:|^so the row at the balanced point", "A·A_bal = I"),
        _S("A ReLU unit is balanced by the positive root of c⁴‖in‖² = ‖out‖², whatever rescaling came before.",
           r"^a unit scaled by s|^balance s²|^so s²|^balanced norms|^after a prior rescaling|^the balanced weights",
           "c' = c/r"),
    ),
}


def matched(said: Said, statements: Sequence[str]) -> list[int]:
    """The (0-based) indices of the statements ``said`` rests on.

    >>> matched(Said("…", r"^D → "), ["D → D/s", "ρ → ρ/s"])
    [0]
    """
    pat = re.compile(said.match)
    return [i for i, s in enumerate(statements) if pat.search(s)]


def _evidence(steps: Sequence[Any]) -> tuple[str, ...]:
    labels = {str(s.label) for s in steps}
    return tuple(sorted(labels, key=lambda x: _ORDER.index(x) if x in _ORDER else len(_ORDER)))


def _formula(show: str | None, steps: Sequence[Any], statements: Sequence[str], idx: list[int]) -> tuple[Display | None, int]:
    """The formula shown and the index of the step it is taken from (the first matched, without one)."""
    from coupled_curvature.reporting.steps import step_view

    if show is None:
        return None, idx[0]
    for i in idx:
        if show == OWN:
            v = step_view(steps[i].description, steps[i].lhs, steps[i].rhs)
            if v.latex and v.mathml:
                return Display(v.statement, v.latex, f"<mrow>{v.mathml}</mrow>"), i
        elif show in statements[i]:
            inner = math_mathml(show, "block").split('display="block">', 1)[1].removesuffix("</math>")
            return Display(show, math_latex(show), inner), i
    return None, idx[0]


def _written(theorem: str, steps: Sequence[Any], statements: list[str]) -> list[ProofStep]:
    out = []
    for said in PROOFS[theorem]:
        idx = matched(said, statements)
        if not idx:  # the derivation no longer has this step: the sentence would rest on nothing
            continue
        formula, at = _formula(said.show, steps, statements, idx)
        cites = tuple((r.key, r.label) for r in bibliography(said.cite))
        out.append(ProofStep(said.reason, formula, _evidence([steps[i] for i in idx]), check_anchor(theorem, at + 1),
                             all(bool(steps[i].passed) for i in idx), cites))
    return out


def _derived(theorem: str, steps: Sequence[Any], statements: list[str]) -> list[ProofStep]:
    """A theorem without written steps: one proof step per distinct formal claim (else per step), up to six."""
    picked = [i for i, s in enumerate(steps) if str(s.label) == "formal"] or list(range(len(steps)))
    seen: set[str] = set()
    out: list[ProofStep] = []
    for i in picked:
        if statements[i] in seen or len(out) == 6:
            continue
        seen.add(statements[i])
        formula, _ = _formula(OWN, steps, statements, [i])
        out.append(ProofStep(statements[i] + ".", formula, _evidence([steps[i]]), check_anchor(theorem, i + 1),
                             bool(steps[i].passed)))
    return out


def proof(theorem: str, steps: Sequence[Any]) -> Proof:
    """The proof of ``theorem`` from its checked steps (each with ``description``, ``label``, ``passed``,
    ``lhs``, ``rhs``), closing with a link to its table of checks."""
    statements = [normalise(s.description) for s in steps]
    body = (_written if theorem in PROOFS else _derived)(theorem, steps, statements)
    n = len(steps)
    closing: tuple[Inline, ...] = (
        Text(f"Each step's label names the evidence of the checks it rests on and links to them; all {n} "
             f"check{'s' if n != 1 else ''} of this proof, with their methods and instance sizes, are listed in ", False),
        Link(f"the checks of {theorem}", f"checks-{theorem}"), Text(".", False))
    return Proof(tuple(body), closing)
