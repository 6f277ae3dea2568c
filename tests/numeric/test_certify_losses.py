"""certify's losses (issue 34): every accepted CrossEntropyLoss/MSELoss configuration against an
independent mpmath reference at 60 digits, written here from the formulas (forward pass, the loss as
torch defines it, the block's gradient and Hessian from the exact Jacobian of a piecewise-affine
net), never from the code under test; and the negative controls: references that drop an option
fall outside the balls."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mpmath import mp
from torch import nn

from coupled_curvature.numeric.certify.api import certify

#: a reference value's own error (60 digits) is far below this, and the balls (128 bits) far wider
REF_TOL = Fraction(1, 10**50)


def _mp(x: float):
    return mp.mpf(x)  # a float64 is a dyadic rational: exact at 60 digits


def _mat(t: torch.Tensor):
    return mp.matrix([[_mp(v) for v in row] for row in t.detach().double().tolist()])


def make_net(widths: list[int], slope: float, seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1], dtype=torch.float64))
        if i < len(widths) - 2:
            layers.append(nn.ReLU() if slope == 0 else nn.LeakyReLU(slope))
    return nn.Sequential(*layers)


def make_loss(cfg: dict, C: int) -> nn.Module:
    if cfg["kind"] == "mse":
        return nn.MSELoss(reduction=cfg["reduction"])
    weight = torch.tensor(cfg["weight"][:C], dtype=torch.float64) if cfg["weight"] else None
    return nn.CrossEntropyLoss(weight=weight, ignore_index=cfg["ignore"], label_smoothing=cfg["eps"],
                               reduction=cfg["reduction"])


def forward(net: nn.Sequential, x, slope: float):
    """The output of sample ``x`` (an mpmath column), and per Linear layer its input and ``∂f/∂z``."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    h, inputs, slopes = x, [], []
    for i, m in enumerate(linears):
        inputs.append(h)
        z = _mat(m.weight) * h + _mat(m.bias.reshape(-1, 1))
        if i < len(linears) - 1:
            d = [mp.mpf(1) if v > 0 else _mp(slope) for v in z]
            slopes.append(d)
            h = mp.matrix([d[k] * z[k] for k in range(z.rows)])
        else:
            h = z
    dz = [None] * len(linears)  # ∂f/∂z_l: C × width_l
    J = mp.eye(h.rows)
    for i in range(len(linears) - 1, -1, -1):
        dz[i] = J
        if i:
            JW = J * _mat(linears[i].weight)
            J = mp.matrix([[JW[r, k] * slopes[i - 1][k] for k in range(JW.cols)] for r in range(JW.rows)])
    return h, inputs, dz


def block_jacobian(inputs, dz, layer: int, member: str):
    """``∂f/∂θ`` of one sample for the Linear ``layer``'s weight (row-major) or bias."""
    D, h = dz[layer], inputs[layer]
    if member == "bias":
        return D
    return mp.matrix([[D[r, i] * h[j] for i in range(D.cols) for j in range(h.rows)] for r in range(D.rows)])


def reference_terms(cfg: dict, f_rows, y: list, batches: list[int], C: int, *, drop: str | None = None):
    """Per sample ``(ℓ_n, ∇ℓ_n, ∇²ℓ_n)`` of ``L = Σ_batches β·torch_loss(batch)`` (β = n_b/N for a mean),
    written from torch's definitions; ``drop`` names an option to leave out (a negative control)."""
    N, out, start = sum(batches), [], 0
    for size in batches:
        beta = mp.mpf(size) / N if cfg["reduction"] == "mean" else mp.mpf(1)
        for n in range(start, start + size):
            f = f_rows[n]
            if cfg["kind"] == "mse":
                scale = beta / (size * C) if cfg["reduction"] == "mean" else beta
                t = [_mp(v) for v in y[n]]
                out.append((scale * sum((f[c] - t[c]) ** 2 for c in range(C)),
                            [2 * scale * (f[c] - t[c]) for c in range(C)],
                            mp.matrix([[2 * scale if i == j else 0 for j in range(C)] for i in range(C)])))
                continue
            ignore = cfg["ignore"] if drop != "ignore_index" else None
            w = [_mp(v) for v in cfg["weight"][:C]] if cfg["weight"] and drop != "weight" else [mp.mpf(1)] * C
            eps = _mp(cfg["eps"]) if drop != "label_smoothing" else mp.mpf(0)
            kept = [m for m in range(start, start + size) if y[m] != ignore]
            den = sum(w[y[m]] for m in kept) if cfg["reduction"] == "mean" else mp.mpf(1)
            if y[n] == ignore:
                out.append((mp.mpf(0), [mp.mpf(0)] * C, mp.zeros(C, C)))
                continue
            t = [beta * ((1 - eps) * w[c] * (c == y[n]) + eps / C * w[c]) / den for c in range(C)]
            top = max(f)
            lse = top + mp.log(sum(mp.exp(v - top) for v in f))
            p = [mp.exp(v - lse) for v in f]
            mass = sum(t)
            out.append((sum(t[c] * (lse - f[c]) for c in range(C)), [mass * p[c] - t[c] for c in range(C)],
                        mp.matrix([[mass * ((i == j) * p[i] - p[i] * p[j]) for j in range(C)] for i in range(C)])))
        start += size
    return out


def reference(net, cfg, X, y, batches, slope, *, drop=None, dps=60):
    """Loss and per block ``(w_sq, g_sq, wHw, D, D⁺)`` at ``dps`` digits (``D⁺``: eigen-decomposition of
    ``H``, cutoff ``10^-10·max|λ|`` as certify's default ``pinv_rtol``)."""
    with mp.workdps(dps):
        rows = [forward(net, mp.matrix([_mp(v) for v in x]), slope) for x in X.tolist()]
        C = rows[0][0].rows
        terms = reference_terms(cfg, [r[0] for r in rows], y.tolist(), batches, C, drop=drop)
        linears = [(name, m) for name, m in net.named_children() if isinstance(m, nn.Linear)]
        out = {"loss": sum(t[0] for t in terms)}
        for layer, (name, module) in enumerate(linears):
            for member in ("weight", "bias"):
                w = _mat(getattr(module, member).reshape(-1, 1))
                g, H = mp.zeros(w.rows, 1), mp.zeros(w.rows, w.rows)
                for (f, inputs, dz), (_, dl, d2l) in zip(rows, terms):
                    J = block_jacobian(inputs, dz, layer, member)
                    g += J.T * mp.matrix(dl)
                    H += J.T * d2l * J
                w_sq, g_sq = (w.T * w)[0], (g.T * g)[0]
                wHw = (w.T * H * w)[0]
                lam, Q = mp.eigsy(H)
                cut = mp.mpf(10) ** -10 * max(abs(v) for v in lam)
                wHpw = sum((((Q[:, k].T * w)[0]) ** 2 / lam[k] for k in range(len(lam)) if abs(lam[k]) > cut),
                           mp.mpf(0))
                D = wHw / w_sq / g_sq if g_sq else None  # a dead block: certify says why it has no D
                out[f"{name}.{member}"] = (w_sq, g_sq, wHw, D, wHpw / w_sq * g_sq)
        return out


def exact(x) -> Fraction:
    m, e = x.man_exp
    return Fraction(int(m) * 2 ** int(e)) if e >= 0 else Fraction(int(m), 2 ** -int(e))


def near(ball, x) -> bool:
    """``x`` (an mpf at 60 digits) in the ball, up to the reference's own rounding."""
    v = exact(x)
    tol = REF_TOL * abs(v)
    return ball.lower - tol <= v <= ball.upper + tol


def case(seed: int, hidden: list[int], slope: float, n: int, cfg: dict, split: bool):
    g = torch.Generator().manual_seed(seed)
    C = 3
    net = make_net([3, *hidden, C], slope, seed)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    if cfg["kind"] == "mse":
        y = torch.randn(n, C, generator=g, dtype=torch.float64)
    else:
        y = torch.randint(0, C, (n,), generator=g)
        y[0] = y[-1] = 2  # a kept sample of positive weight in each batch
    batches = [n // 2, n - n // 2] if split else [n]
    data = [(X[:batches[0]], y[:batches[0]]), (X[batches[0]:], y[batches[0]:])] if split else (X, y)
    return net, make_loss(cfg, C), X, y, batches, data


CE_CONFIGS = st.fixed_dictionaries({
    "kind": st.just("ce"), "reduction": st.sampled_from(["mean", "sum"]), "ignore": st.sampled_from([-100, 0, 1]),
    "weight": st.sampled_from([None, [0.5, 2.0, 1.25], [3.0, 0.0, 0.7]]), "eps": st.sampled_from([0.0, 0.1, 0.35])})
MSE_CONFIGS = st.fixed_dictionaries({"kind": st.just("mse"), "reduction": st.sampled_from(["mean", "sum"])})


@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), hidden=st.lists(st.integers(2, 6), min_size=1, max_size=2),
       slope=st.sampled_from([0.0, 0.1]), n=st.integers(4, 10), cfg=st.one_of(CE_CONFIGS, MSE_CONFIGS),
       split=st.booleans())
def test_balls_contain_the_mpmath_reference(seed, hidden, slope, n, cfg, split):
    net, loss_fn, X, y, batches, data = case(seed, hidden, slope, n, cfg, split)
    ref = reference(net, cfg, X, y, batches, slope)
    with torch.no_grad():  # the reference's loss is torch's (so it is the right target for the balls)
        torch_loss = sum(float(loss_fn(net(Xb), yb)) * (len(Xb) / n if cfg["reduction"] == "mean" else 1.0)
                         for Xb, yb in (data if split else [data]))
    assert abs(float(ref["loss"]) - torch_loss) <= 1e-12 * (1 + abs(torch_loss))
    cert = certify(net, loss_fn, data, prec=128)
    assert near(cert.loss, ref["loss"])
    for b in cert:
        if b.kink is not None:
            continue  # an undecided ReLU: refused, with the reason (not expected with random data)
        w_sq, g_sq, wHw, D, Dp = ref[b.name]
        assert near(b.w_sq, w_sq) and near(b.sqnorm_grad, g_sq) and near(b.wHw, wHw), b.name
        if b.coupled is not None:
            assert near(b.coupled, D) and b.coupled.relative_width < 1e-30, b.name
        if b.inverse_coupled is not None:
            assert near(b.inverse_coupled, Dp), (b.name, b.inverse_coupled, Dp)


@pytest.mark.parametrize("drop, cfg", [
    ("ignore_index", {"kind": "ce", "reduction": "mean", "ignore": 1, "weight": None, "eps": 0.0}),
    ("weight", {"kind": "ce", "reduction": "mean", "ignore": -100, "weight": [0.5, 2.0, 1.25], "eps": 0.0}),
    ("label_smoothing", {"kind": "ce", "reduction": "sum", "ignore": -100, "weight": None, "eps": 0.35}),
])
def test_a_reference_without_the_option_falls_outside_the_balls(drop, cfg):
    """Negative control: the reference that ignores one option (what certify did before for
    ignore_index) is outside the certified balls, while the full reference is inside."""
    net, loss_fn, X, y, batches, data = case(3, [5], 0.0, 8, cfg, False)
    cert = certify(net, loss_fn, data, prec=128)
    right, wrong = reference(net, cfg, X, y, batches, 0.0), reference(net, cfg, X, y, batches, 0.0, drop=drop)
    assert near(cert.loss, right["loss"]) and not near(cert.loss, wrong["loss"])
    assert near(cert["0.weight"].coupled, right["0.weight"][3])
    assert not near(cert["0.weight"].coupled, wrong["0.weight"][3])


def test_reference_is_independent_of_mpmath_precision():
    """The reference's 60 digits are real: at 80 digits it moves by less than REF_TOL."""
    cfg = {"kind": "ce", "reduction": "mean", "ignore": 1, "weight": [0.5, 2.0, 1.25], "eps": 0.1}
    net, _, X, y, batches, _ = case(5, [4, 3], 0.1, 6, cfg, True)
    a = reference(net, cfg, X, y, batches, 0.1)["0.weight"][3]
    b = reference(net, cfg, X, y, batches, 0.1, dps=80)["0.weight"][3]
    assert abs(exact(mpmath.mpf(a)) - exact(mpmath.mpf(b))) <= REF_TOL * abs(exact(mpmath.mpf(b)))
