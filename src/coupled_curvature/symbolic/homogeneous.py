"""T2, T3, T9: homogeneous networks (generic width via ``Indexed``/``Sum``; explicit instances).

* T2: ``W_l -> cW_l, b_l -> cb_l, W_{l+1} -> c^{-k}W_{l+1}`` preserves
  ``z^{(l+1)}_r = Σ_i W_{l+1}[r,i] σ(Σ_j W_l[i,j] h_j + b_l[i]) + b_{l+1}[r]`` for every input
  ``h`` and symbolic widths; likewise neuron-wise scalings ``a_i > 0`` and permutations.
* T3: per block ``w -> αw`` (``α = c`` on ``W_l, b_l``; ``α = c^{-k}`` on ``W_{l+1}``):
  ``‖g‖² -> α⁻²‖g‖²``, ``RQ -> α⁻²RQ``, ``wᵀHw``, ``wᵀg``, ``D``, ``D⁺`` unchanged.
* T9: bias-free, degree-``k`` activation: ``f(tW_l) = t^p f(W_l)`` with ``p = k^{m-l}``;
  ``wᵀg = pP``, ``wᵀHw = p(p-1)P + p²Q``; for ``k = 1``: ``D_l = (Q/P²)cos²∠(w_l, g_l)``.

>>> derive_T2().ok
True
"""
from __future__ import annotations

from typing import Any

import sympy as sp

from coupled_curvature.symbolic.derivation import Derivation, derivation
from coupled_curvature.symbolic.functions import activation, smooth_function
from coupled_curvature.symbolic.instances import at, block_grad_hess, layer_scaling, mlp
from coupled_curvature.symbolic.rules import RewriteRule, homogeneity, penrose_block, sum_linearity, sum_reindex
from coupled_curvature.symbolic.unevaluated import Form, TexSymbol, frac, matmul, prod, quadratic_scalar
from coupled_curvature.symbolic.evaluation import at as at_point

__all__ = ["derive_T2", "derive_T3", "derive_T9", "two_layer_generic", "quadratic_scalar"]

_k = sp.Symbol("k", positive=True)
_c = sp.Symbol("c", positive=True)


def two_layer_generic():
    """Symbols of the generic-width layer pair ``l, l+1`` (``h`` = arbitrary input of layer ``l``)."""
    n0, n1 = sp.symbols("n_{l-1} n_l", integer=True, positive=True)
    i, j = sp.symbols("i j", integer=True)
    r = sp.Symbol("r", integer=True)
    W1, b1, W2, b2, h = (sp.IndexedBase(s) for s in ("W_l", "b_l", "W_{l+1}", "b_{l+1}", "h"))
    sig = activation()[0]

    def out(w1=lambda i, j: W1[i, j], bb=lambda i: b1[i], w2=lambda r, i: W2[r, i]):
        z = sp.Sum(w1(i, j) * h[j], (j, 0, n0 - 1)) + bb(i)
        return sp.Sum(w2(r, i) * sig(z), (i, 0, n1 - 1)) + b2[r]

    return dict(n0=n0, n1=n1, i=i, j=j, r=r, W1=W1, b1=b1, W2=W2, b2=b2, h=h, sig=sig, out=out)


@derivation("T2")
def derive_T2(d: Derivation) -> None:
    """Derive T2 at symbolic widths (layer-wise, neuron-wise, permutation) and max-pooling."""
    d.assume("σ positively homogeneous of degree k (rule 'sigma_homogeneity')",
             "finite sums are linear (rule 'sum_linearity'); re-indexing by a bijection (rule 'sum_reindex')",
             "network = composition of layers: only layers l, l+1 are changed and h (the input of layer l) is an "
             "arbitrary symbol, so equality of z^(l+1) for all h gives equality of the output at any depth")
    G = two_layer_generic()
    i, j, W1, b1, W2, h, sig, out = (G[s] for s in ("i", "j", "W1", "b1", "W2", "h", "sig", "out"))
    n0, n1, r, b2 = G["n0"], G["n1"], G["r"], G["b2"]
    c, k = _c, _k
    z = sp.Sum(W1[i, j] * h[j], (j, 0, n0 - 1)) + b1[i]
    orig = out()
    # layer-wise
    lay = out(lambda i, j: c * W1[i, j], lambda i: c * b1[i], lambda r, i: c ** (-k) * W2[r, i])
    s1 = c ** (-k) * sp.Sum(W2[r, i] * sig(c * sp.Sum(W1[i, j] * h[j], (j, 0, n0 - 1)) + c * b1[i]), (i, 0, n1 - 1)) + b2[r]
    d.rewrite(sum_linearity, "layer-wise: pull c out of Σ_j and c^-k out of Σ_i", lay, s1)
    s2 = c ** (-k) * sp.Sum(c**k * W2[r, i] * sig(z), (i, 0, n1 - 1)) + b2[r]
    hom = homogeneity(k, {c})
    d.rewrite(hom, "σ(c z_i) = c^k σ(z_i)", s1, s2)
    d.rewrite(sum_linearity, "c^-k Σ_i c^k(…) = Σ_i (…): output unchanged", s2, orig)
    # neuron-wise
    a = sp.IndexedBase("a")
    neu = out(lambda i, j: a[i] * W1[i, j], lambda i: a[i] * b1[i], lambda r, i: a[i] ** (-k) * W2[r, i])
    t1 = sp.Sum(a[i] ** (-k) * W2[r, i] * sig(a[i] * sp.Sum(W1[i, j] * h[j], (j, 0, n0 - 1)) + a[i] * b1[i]),
                (i, 0, n1 - 1)) + b2[r]
    d.rewrite(sum_linearity, "neuron-wise: pull a_i out of Σ_j (a_i is free of j)", neu, t1)
    homa = homogeneity(k, {a})
    d.rewrite(homa, "σ(a_i z_i) = a_i^k σ(z_i) (a_i > 0), and a_i^-k a_i^k = 1: output unchanged", t1, orig)
    # permutation
    pi = sp.Function("pi")
    per = out(lambda i, j: W1[pi(i), j], lambda i: b1[pi(i)], lambda r, i: W2[r, pi(i)])
    d.rewrite(sum_reindex(pi), "permutation π of hidden units: re-index Σ_i by the bijection π", per, orig)
    # max pooling
    x, y = sp.symbols("x y", real=True)
    mx = lambda u, v: (u + v + sp.Abs(u - v)) / 2
    abs_rule = RewriteRule("abs_positive_scale", "|s u| = s|u| for s > 0",
                           lambda e: e.replace(lambda q: isinstance(q, sp.Abs), lambda q: _abs_pull(q, c)))
    d.rewrite(abs_rule, "max(cx, cy) = c·max(x, y) with max(u, v) = (u + v + |u - v|)/2", mx(c * x, c * y), c * mx(x, y))
    # explicit instance: the output of a 2-3-2-1 network with the generic activation
    net = mlp([2, 3, 2, 1], "sigma")
    sub = layer_scaling(net, 1, c, k)
    d.rewrite(homogeneity(k, {c}), "instance 2-3-2-1, generic σ: f(Tθ) = f(θ) after σ(c z) = c^k σ(z)",
              at(net.outputs[0], sub), net.outputs[0])


def _abs_pull(q: Any, c: Any) -> Any:
    arg = sp.factor_terms(q.args[0])
    s = sp.Integer(1)
    for f in sp.Mul.make_args(arg):
        b, _e = f.as_base_exp()
        if b == c:
            s *= f
    return s * sp.Abs(sp.expand(arg / s)) if s != 1 else q


@derivation("T3")
def derive_T3(d: Derivation) -> None:
    """Derive the c⁻² law per block (generic dimension) and on explicit instances."""
    d.assume("T2: the layer-wise map is a linear symmetry acting on each block as αI (α = c on W_l, b_l; "
             "α = c^-k on W_{l+1}; α = 1 elsewhere), so T1 gives w -> αw, g -> g/α, H -> H/α²",
             "H⁺ is the Moore–Penrose pseudo-inverse (rule 'penrose')",
             "instances: ReLU with a fixed activation pattern (preserved by c > 0), generic C² loss ℓ")
    n, w, g, H, Hp, pen = penrose_block()
    form = lambda *fs: Form(matmul(*fs))
    gg0, ww0 = quadratic_scalar(g.T * g), quadratic_scalar(w.T * w)
    q0, p0, qp0 = quadratic_scalar(w.T * H * w), quadratic_scalar(w.T * g), quadratic_scalar(w.T * Hp * w)
    for blk, al, law in (("W_l, b_l", _c, _c**-2), ("W_{l+1}", _c ** (-_k), _c ** (2 * _k))):
        # the transformed block, shown unevaluated: w' = αw, g' = α⁻¹g, H' = α⁻²H, H'⁺ = α²H⁺
        wq, gq, Hq, Hpq = matmul(al, w), matmul(1 / al, g), matmul(al**-2, H), matmul(al**2, Hp)
        gg, ww = form(sp.Transpose(gq), gq), form(sp.Transpose(wq), wq)
        q, p, qp = form(sp.Transpose(wq), Hq, wq), form(sp.Transpose(wq), gq), form(sp.Transpose(wq), Hpq, wq)
        d.exact(f"{blk}: ‖g'‖²/‖g‖² = {sp.sstr(law)}", frac(gg, gg0), law)
        d.exact(f"{blk}: RQ'/RQ = {sp.sstr(law)}", frac(frac(q, ww), frac(q0, ww0)), law)
        d.exact(f"{blk}: w'ᵀH'w' = wᵀHw", q, q0)
        d.exact(f"{blk}: w'ᵀg' = wᵀg", p, p0)
        d.exact(f"{blk}: D' = D", frac(frac(q, ww), gg), q0 / ww0 / gg0)
        d.rewrite(pen, f"{blk}: Penrose 1 for (H/α²)⁺ = α²H⁺", matmul(Hq, Hpq, Hq), Hq.doit())
        d.rewrite(pen, f"{blk}: Penrose 2 for (H/α²)⁺ = α²H⁺ (3, 4: symmetric since scalar multiples)",
                  matmul(Hpq, Hq, Hpq), Hpq.doit())
        d.exact(f"{blk}: D⁺' = D⁺", prod(frac(qp, ww), gg), qp0 / ww0 * gg0)
    # explicit instances: SymPy differentiates everything; a primed quantity is the unprimed one
    # evaluated at the rescaled parameters, Subs(·, θ, Tθ)
    c = _c
    for widths, pattern, l in (([2, 3, 2, 1], [[1, 0, 1], [1, 1]], 1), ([3, 2, 2, 2], [[1, 1], [0, 1]], 2)):
        net = mlp(widths, "relu", pattern)
        sub = layer_scaling(net, l, c)
        tag = "-".join(map(str, widths))
        d.exact(f"{tag}: pre-activations of layer {l} scale by c > 0 (pattern preserved)",
                at_point(sp.Matrix(net.pre[l - 1]), sub), c * sp.Matrix(net.pre[l - 1]))
        d.exact(f"{tag}: output unchanged", at_point(sp.Matrix(net.outputs), sub), sp.Matrix(net.outputs))
        L = net.L
        for name, params in net.blocks.items():
            lay = int(name[1:])
            al = c if lay == l else (1 / c if (lay == l + 1 and name[0] == "W") else sp.Integer(1))
            gb, Hb = block_grad_hess(L, params)
            wv = sp.Matrix(params)
            gg, q, p = (gb.T * gb)[0], (wv.T * Hb * wv)[0], (wv.T * gb)[0]
            d.exact(f"{tag} block {name}: ‖g'‖² = {sp.sstr(al**-2)}·‖g‖²", at_point(gg, sub), al**-2 * gg)
            d.exact(f"{tag} block {name}: w'ᵀH'w' = wᵀHw", at_point(q, sub), q)
            d.exact(f"{tag} block {name}: w'ᵀg' = wᵀg", at_point(p, sub), p)
    # generic homogeneous activation with the c^{2k} law on W_{l+1} (rules for σ, σ′, σ″)
    net = mlp([2, 2, 1], "sigma")
    sub = layer_scaling(net, 1, c, _k)
    hom = homogeneity(_k, {c})
    for name, al in (("W1", c), ("W2", c ** (-_k))):
        gb, Hb = block_grad_hess(net.L, net.blocks[name])
        # g', H' = the block gradient and Hessian at the rescaled parameters, Subs(·, θ, Tθ)
        d.rewrite(hom, f"2-2-1 generic σ, block {name}: g' = g/α (α = {sp.sstr(al)})", at_point(gb, sub), gb / al)
        d.rewrite(hom, f"2-2-1 generic σ, block {name}: H' = H/α²", at_point(Hb, sub), Hb / al**2)


@derivation("T9")
def derive_T9(d: Derivation) -> None:
    """Euler identities for bias-free homogeneous nets, generic and on instances."""
    d.assume("σ positively homogeneous of degree k (rule 'sigma_homogeneity'); finite sums linear (rule 'sum_linearity')",
             "fixed activation pattern along the ray t -> tW_l",
             "E is a finite average over samples (shown for two samples, two outputs)",
             "for the bound: cos² <= 1 (Cauchy–Schwarz; Lagrange identity checked for n = 3) and Q >= 0 (ℓ convex in f)")
    t = sp.Symbol("t", positive=True)
    k = _k
    q = sp.Symbol("q", positive=True)
    i, rr = sp.symbols("i r", integer=True)
    nw = sp.Symbol("n_j", integer=True, positive=True)
    W, z = sp.IndexedBase("W_{j+1}"), sp.IndexedBase("z_j")
    sig = activation()[0]
    # induction: if z_j scales by t^q then z_{j+1} scales by t^(qk)
    zn = sp.Sum(W[rr, i] * sig(t**q * z[i]), (i, 0, nw - 1))
    mid = sp.Sum(t ** (q * k) * W[rr, i] * sig(z[i]), (i, 0, nw - 1))
    d.rewrite(homogeneity(k, {t}), "induction step: σ(t^q z_i) = t^(qk) σ(z_i)", zn, mid)
    d.rewrite(sum_linearity, "z_{j+1}(t) = t^(qk) z_{j+1}", mid, t ** (q * k) * sp.Sum(W[rr, i] * sig(z[i]), (i, 0, nw - 1)))
    jj, l, m = sp.symbols("j l m", integer=True)
    qj = k ** (jj - l)  # closed form q_j
    d.exact("closed form q_j = k^(j-l): q_l = 1", at_point(qj, {jj: l}), 1)
    d.exact("closed form: q_{j+1} = k·q_j", at_point(qj, {jj: jj + 1}), k * qj)
    p = sp.Symbol("p", positive=True)
    # Euler identities via the ray t -> t w: d/dt L(tw) = wᵀ∇L(tw), d²/dt² = wᵀ∇²L(tw)w
    L2 = smooth_function("L2", 2)
    w1, w2 = sp.symbols("w1 w2")
    ray = L2(t * w1, t * w2)
    gL = sp.Matrix([L2(w1, w2).diff(w1), L2(w1, w2).diff(w2)])
    HL = sp.hessian(L2(w1, w2), (w1, w2))
    wv = sp.Matrix([w1, w2])
    d.exact("d/dt L(tw)|_{t=1} = wᵀg (SymPy diff)", sp.Subs(sp.Derivative(ray, t), t, 1), (wv.T * gL)[0])
    d.exact("d²/dt² L(tw)|_{t=1} = wᵀHw (SymPy diff)", sp.Subs(sp.Derivative(ray, (t, 2)), t, 1), (wv.T * HL * wv)[0])
    ell = smooth_function("ell", 2)
    F = [sp.symbols("f1_1 f1_2"), sp.symbols("f2_1 f2_2")]  # two samples, two outputs
    Lt = sum(ell(t**p * a, t**p * b) for a, b in F) / 2
    P = sum(ell(a, b).diff(a) * a + ell(a, b).diff(b) * b for a, b in F) / 2
    Qv = sum((sp.Matrix([a, b]).T * sp.hessian(ell(a, b), (a, b)) * sp.Matrix([a, b]))[0] for a, b in F) / 2
    d.exact("f(tW_l) = t^p f: wᵀg = d/dt L|_{t=1} = pP", sp.Subs(sp.Derivative(Lt, t), t, 1), p * P)
    d.exact("wᵀHw = d²/dt² L|_{t=1} = p(p-1)P + p²Q", sp.Subs(sp.Derivative(Lt, (t, 2)), t, 1),
            p * (p - 1) * P + p**2 * Qv)
    Ps, Qs = sp.symbols("P Q", positive=True)
    nn = sp.Symbol("n", integer=True, positive=True)
    wm, gm = sp.MatrixSymbol("w", nn, 1), sp.MatrixSymbol("g", nn, 1)
    ww, gg = TexSymbol("w^Tw", wm.T * wm, positive=True), TexSymbol("g^Tg", gm.T * gm, positive=True)
    d.exact("k = 1 (p = 1): wᵀHw = Q for every layer", at_point(p * (p - 1) * Ps + p**2 * Qs, {p: 1}), Qs)
    cos2 = frac(Ps**2, prod(ww, gg))  # (wᵀg)² / (‖w‖²‖g‖²) with wᵀg = P
    d.exact("k = 1: D_l = (wᵀHw/‖w‖²)/‖g‖² with wᵀHw = Q: = (Q/P²)·cos²∠(w_l, g_l)", frac(frac(Qs, ww), gg),
            prod(frac(Qs, Ps**2), cos2))
    a3, b3 = sp.Matrix(sp.symbols("u1:4")), sp.Matrix(sp.symbols("v1:4"))
    lag = sum((a3[x] * b3[y] - a3[y] * b3[x]) ** 2 for x in range(3) for y in range(x + 1, 3))
    d.exact("Lagrange identity (n=3): ‖u‖²‖v‖² - (uᵀv)² = Σ_{i<j}(u_i v_j - u_j v_i)² >= 0, so cos² <= 1",
            (a3.T * a3)[0] * (b3.T * b3)[0] - (a3.T * b3)[0] ** 2, lag)
    # instances: SymPy differentiates everything
    for act, widths, pattern, kk in (("relu", [2, 3, 2, 1], [[1, 0, 1], [1, 1]], 1), ("relu2", [1, 2, 2, 1], [[1, 1], [1, 0]], 2)):
        net = mlp(widths, act, pattern, bias=False)
        f = net.outputs[0]
        l1 = net.loss
        y = sp.Symbol("y")
        Pe = (l1(y).diff(y) * y).subs(y, f)
        Qe = (l1(y).diff(y, 2) * y**2).subs(y, f)
        mm = len(widths) - 1
        Lf = l1(f)
        for lay in range(1, mm + 1):
            pp = kk ** (mm - lay)
            gb, Hb = block_grad_hess(Lf, net.blocks[f"W{lay}"])
            wv = sp.Matrix(net.blocks[f"W{lay}"])
            tag = f"{'-'.join(map(str, widths))} {act}, W{lay} (p = {pp})"
            d.exact(f"{tag}: wᵀg = pP", (wv.T * gb)[0], pp * Pe)
            d.exact(f"{tag}: wᵀHw = p(p-1)P + p²Q", (wv.T * Hb * wv)[0], pp * (pp - 1) * Pe + pp**2 * Qe)
