"""Arbitrary-precision (mpmath) diagnostics of small ReLU-type MLPs, from float64 weights taken exactly."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import mpmath
import torch
from torch import nn

from coupled_curvature.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric._inputs import prepare_batches
from coupled_curvature.numeric.blocks import resolve_blocks
from coupled_curvature.numeric.diagnostics import BlockDiagnosis, Diagnosis, derived_quantities

_ACTS = (nn.ReLU, nn.LeakyReLU, nn.Identity)


@dataclass
class _Layer:
    name: str  # module path in the Sequential, e.g. "0"
    W: list[list[mpmath.mpf]]
    b: list[mpmath.mpf] | None
    slope: mpmath.mpf | None  # activation after this layer: None (last), 0 (ReLU), s (LeakyReLU), 1 (Identity)


def _exact(x: float) -> mpmath.mpf:
    return mpmath.mpf(float(x))  # a float64 is a dyadic rational: converted without rounding


def _layers(model: nn.Module) -> list[_Layer]:
    if not isinstance(model, nn.Sequential):
        raise UnsupportedModelError("highprec supports nn.Sequential MLPs of Linear and ReLU/LeakyReLU/Identity")
    layers: list[_Layer] = []
    for name, m in model.named_children():
        if isinstance(m, nn.Linear):
            W = [[_exact(v) for v in row] for row in m.weight.detach().double().tolist()]
            b = None if m.bias is None else [_exact(v) for v in m.bias.detach().double().tolist()]
            layers.append(_Layer(name, W, b, None))
        elif isinstance(m, _ACTS) and layers and layers[-1].slope is None:
            slope = {nn.ReLU: 0, nn.Identity: 1}.get(type(m))
            layers[-1].slope = _exact(m.negative_slope) if isinstance(m, nn.LeakyReLU) else mpmath.mpf(slope)
        elif isinstance(m, nn.Flatten) and not layers:
            continue
        else:
            raise UnsupportedModelError(
                f"module {name!r} ({type(m).__name__}) is not supported by highprec: use "
                "nn.Sequential(Linear, ReLU|LeakyReLU|Identity, ..., Linear)"
            )
    if not layers or layers[-1].slope is not None:
        raise UnsupportedModelError("highprec needs a Sequential that ends with a Linear layer")
    return layers


def _loss_kind(loss_fn: Callable) -> str:
    if isinstance(loss_fn, nn.CrossEntropyLoss) and loss_fn.label_smoothing == 0 and loss_fn.weight is None:
        return "ce"
    if isinstance(loss_fn, nn.MSELoss):  # 'mean' averages over samples and outputs, 'sum' over neither
        return "mse_mean" if loss_fn.reduction == "mean" else "mse_sum"
    raise UnsupportedModelError("highprec supports nn.CrossEntropyLoss (no weights/smoothing) and nn.MSELoss")


def _per_sample(layers: list[_Layer], x: list, y, kind: str):
    """Forward pass; per layer the input ``a``, and ``J = ∂f/∂z``; loss gradient ``u`` and Hessian ``Λ`` in ``f``."""
    acts, zs, slopes = [x], [], []
    a = x
    for layer in layers:
        z = [mpmath.fsum(w * v for w, v in zip(row, a)) + (layer.b[i] if layer.b else 0) for i, row in enumerate(layer.W)]
        zs.append(z)
        if layer.slope is None:
            a = z
        else:
            d = [mpmath.mpf(1) if v > 0 else layer.slope for v in z]
            slopes.append(d)
            a = [v * s for v, s in zip(z, d)]
            acts.append(a)
    f = zs[-1]
    C = len(f)
    if kind == "ce":
        m = max(f)
        e = [mpmath.exp(v - m) for v in f]
        s = mpmath.fsum(e)
        p = [v / s for v in e]
        loss = mpmath.log(s) + m - f[int(y)]
        u = [p[c] - (1 if c == int(y) else 0) for c in range(C)]
        lam = [[(p[c] if c == k else 0) - p[c] * p[k] for k in range(C)] for c in range(C)]
    else:
        t = [_exact(v) for v in y] if isinstance(y, list) else [_exact(y)]
        r = [fv - tv for fv, tv in zip(f, t)]
        per = C if kind == "mse_mean" else 1
        loss = mpmath.fsum(v * v for v in r) / per
        u = [2 * v / per for v in r]
        lam = [[mpmath.mpf(2) / per if c == k else mpmath.mpf(0) for k in range(C)] for c in range(C)]
    # J_L = I; J_l = J_{l+1} W_{l+1} diag(σ'(z_l))
    Js = [None] * len(layers)
    Js[-1] = [[mpmath.mpf(1) if c == k else mpmath.mpf(0) for k in range(C)] for c in range(C)]
    for li in range(len(layers) - 2, -1, -1):
        Wn, d, Jn = layers[li + 1].W, slopes[li], Js[li + 1]
        Js[li] = [[mpmath.fsum(Jn[c][k] * Wn[k][j] for k in range(len(Wn))) * d[j] for j in range(len(d))] for c in range(C)]
    return acts, zs, Js, u, lam, loss


def _gram(J, lam):
    """``JᵀΛJ``."""
    C, d = len(J), len(J[0])
    LJ = [[mpmath.fsum(lam[c][k] * J[k][j] for k in range(C)) for j in range(d)] for c in range(C)]
    return [[mpmath.fsum(J[c][i] * LJ[c][j] for c in range(C)) for j in range(d)] for i in range(d)]


def _diagnose_layers(layers, kind, samples, weights, partition, names, inverse, pinv_rtol):
    """All block quantities at the current ``mp.dps``."""
    acc = {}
    for (x, y), wt in zip(samples, weights):
        acts, zs, Js, u, lam, _ = _per_sample(layers, x, y, kind)
        for li, layer in enumerate(layers):
            J = Js[li]
            delta = [mpmath.fsum(J[c][j] * u[c] for c in range(len(u))) for j in range(len(J[0]))]
            G = _gram(J, lam)
            a = acts[li]
            st = acc.setdefault(li, {"gW": None, "gb": None, "H": None})
            gW = [[wt * dj * ai for ai in a] for dj in delta]
            gb = [wt * dj for dj in delta]
            st["gW"] = gW if st["gW"] is None else [[p + q for p, q in zip(r1, r2)] for r1, r2 in zip(st["gW"], gW)]
            st["gb"] = gb if st["gb"] is None else [p + q for p, q in zip(st["gb"], gb)]
            # Hessian over coordinates (out a, in i) with ã = [a, 1]: H += wt·G[a,b] ã_i ã_j (upper triangle)
            at = a + [mpmath.mpf(1)]
            k, out = len(at), len(delta)
            if st["H"] is None:
                st["H"] = [[mpmath.mpf(0)] * (out * k) for _ in range(out * k)]
            H = st["H"]
            outer = [[ai * aj for aj in at] for ai in at]
            for p in range(out * k):
                Gp, op, row = G[p // k], outer[p % k], H[p]
                for q in range(p, out * k):
                    row[q] += wt * Gp[q // k] * op[q % k]
    records = []
    for block, members in partition.items():
        lis = {names[m][0] for m in members}
        if len(lis) != 1:
            raise InvalidInputError(f"highprec blocks must lie within one Linear layer; {block!r} spans several")
        li = lis.pop()
        layer, st = layers[li], acc[li]
        k = len(layer.W[0]) + 1
        idx, w, g = [], [], []
        for m in members:
            kind_m = names[m][1]
            for r in range(len(layer.W)):
                if kind_m == "weight":
                    for i in range(k - 1):
                        idx.append(r * k + i)
                        w.append(layer.W[r][i])
                        g.append(st["gW"][r][i])
                else:
                    idx.append(r * k + k - 1)
                    w.append(layer.b[r])
                    g.append(st["gb"][r])
        full = st["H"]
        H = [[full[min(p, q)][max(p, q)] for q in idx] for p in idx]
        records.append(_record(block, members, w, g, H, inverse, pinv_rtol))
    return records


def _record(block, members, w, g, H, inverse, pinv_rtol):
    n = len(w)
    w_sq = mpmath.fsum(v * v for v in w)
    g_sq = mpmath.fsum(v * v for v in g)
    Hw = [mpmath.fsum(H[i][j] * w[j] for j in range(n)) for i in range(n)]
    wHw = mpmath.fsum(a * b for a, b in zip(w, Hw))
    notes = []
    wHpw = rank = cutoff = None
    if inverse:
        wHpw, rank, cutoff, method = _pinv_form(H, w, pinv_rtol)
    rq, D, Dp = derived_quantities(w_sq, g_sq, wHw, wHpw, notes)
    if inverse:
        notes.append(f"H⁺ by {method}")
    return BlockDiagnosis(
        name=block, params=tuple(members), size=n, w_sq=w_sq, g_sq=g_sq,
        w_dot_g=mpmath.fsum(a * b for a, b in zip(w, g)), wHw=wHw, rayleigh=rq, coupled=D,
        wHpinvw=wHpw, inverse_coupled=Dp, rank=rank, cutoff=cutoff, notes=tuple(notes),
    )


_EIG_MAX = 40


def _pinv_form(H, w, rtol):
    """``wᵀH⁺w``: by ``mpmath.eigsy`` with cutoff ``rtol·max|λ|`` for blocks up to ``_EIG_MAX``;
    larger blocks (PSD here: piecewise-linear nets have Gauss–Newton Hessian blocks) by
    pivoted Cholesky ``H = RRᵀ`` with pivots ≤ ``rtol·max pivot`` dropped, and
    ``wᵀH⁺w = ‖(RᵀR)⁻¹Rᵀw‖²``. Both keep the same subspace when the spectrum has a gap at
    the cutoff (numerical zeros sit near ``10^{-dps}``)."""
    n = len(w)
    if n <= _EIG_MAX:
        E, Q = mpmath.eigsy(mpmath.matrix(H))
        lam = [E[i] for i in range(n)]
        cutoff = rtol * max(abs(v) for v in lam)
        keep = [i for i in range(n) if abs(lam[i]) > cutoff]
        value = mpmath.fsum((mpmath.fsum(Q[r, i] * w[r] for r in range(n)) ** 2) / lam[i] for i in keep)
        return value, len(keep), cutoff, "eigsy"
    A = [row[:] for row in H]
    perm = list(range(n))
    diag = [A[i][i] for i in range(n)]
    top = max(abs(v) for v in diag)
    cutoff = rtol * top
    cols = []
    for j in range(n):
        piv = max(range(j, n), key=lambda i: diag[perm[i]])
        if diag[perm[piv]] <= cutoff:
            if min(diag[perm[i]] for i in range(j, n)) < -cutoff:
                raise InvalidInputError("block Hessian is indefinite; the Cholesky pseudo-inverse needs PSD")
            break
        perm[j], perm[piv] = perm[piv], perm[j]
        pj = perm[j]
        d = mpmath.sqrt(diag[pj])
        col = [mpmath.mpf(0)] * n
        col[pj] = d
        for i in range(j + 1, n):
            pi = perm[i]
            col[pi] = (A[pi][pj] - mpmath.fsum(c[pi] * c[pj] for c in cols)) / d
            diag[pi] -= col[pi] ** 2
        cols.append(col)
    r = len(cols)
    RtR = mpmath.matrix([[mpmath.fsum(a * b for a, b in zip(ci, cj)) for cj in cols] for ci in cols])
    Rtw = mpmath.matrix([mpmath.fsum(a * b for a, b in zip(ci, w)) for ci in cols])
    y = mpmath.lu_solve(RtR, Rtw) if r else []
    return mpmath.fsum(v * v for v in y), r, cutoff, "pivoted Cholesky"


def _prepare(model, loss_fn, data, blocks):
    layers = _layers(model)
    kind = _loss_kind(loss_fn)
    batches = prepare_batches(data, loss_fn)
    samples = []  # a batch-size-weighted mean over batches is the mean over all samples
    for bt in batches:
        for x, y in zip(bt.X.reshape(bt.X.shape[0], -1).tolist(), bt.y.tolist()):
            samples.append(([_exact(v) for v in x], y))
    n_total = len(samples)
    names = {}
    for li, layer in enumerate(layers):
        names[f"{layer.name}.weight"] = (li, "weight")
        if layer.b is not None:
            names[f"{layer.name}.bias"] = (li, "bias")
    partition = resolve_blocks(list(names), blocks)
    mean = getattr(loss_fn, "reduction", "mean") == "mean"
    return layers, kind, samples, n_total, mean, partition, names


def diagnose(
    model: nn.Module,
    loss_fn: Callable,
    data: object,
    *,
    dps: int = 50,
    blocks: str | Mapping[str, Sequence[str]] = "tensor",
    inverse: bool = True,
    pinv_rtol: object = None,
) -> Diagnosis:
    """``D`` and ``D⁺`` of every block at ``dps`` decimal digits (mpmath), for small MLPs.

    The float64 weights are converted exactly to binary rationals; the loss, gradient and
    dense Hessian blocks are computed at ``dps`` digits (for piecewise-linear networks the
    Hessian block of a Linear layer is exactly ``Σ_n (J_nᵀΛ_nJ_n) ⊗ ã_nã_nᵀ`` away from
    activation kinks), and ``H⁺`` uses ``mpmath.eigsy`` with cutoff
    ``pinv_rtol·max|λ|`` (default ``10^(−2·dps/3)``). Fields hold ``mpmath.mpf``.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(6, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1, 0])
    >>> d = diagnose(net, nn.CrossEntropyLoss(), (X, y), dps=30)
    >>> type(d["0.weight"].coupled).__name__
    'mpf'
    """
    if not isinstance(dps, int) or dps < 15:
        raise InvalidInputError(f"dps must be an int ≥ 15, got {dps!r}")
    layers, kind, samples, n_total, mean, partition, names = _prepare(model, loss_fn, data, blocks)
    with mpmath.workdps(dps):
        rtol = mpmath.mpf(10) ** (-(2 * dps) // 3) if pinv_rtol is None else mpmath.mpf(pinv_rtol)
        weights = [mpmath.mpf(1) / n_total if mean else mpmath.mpf(1)] * n_total
        records = _diagnose_layers(layers, kind, samples, weights, partition, names, inverse, rtol)
    meta = {"dps": dps, "n_samples": n_total, "reduction": "mean" if mean else "sum", "pinv_rtol": str(rtol)}
    return Diagnosis(records, meta)


def invariance_error(
    model: nn.Module, loss_fn: Callable, data: object, *, layer: int, c: object, dps: int = 50
) -> dict[str, mpmath.mpf]:
    """Max over blocks of ``|X' − X|/|X|`` for ``X = D, D⁺`` under ``W_l -> cW_l, b_l -> cb_l,
    W_{l+1} -> W_{l+1}/c`` applied at ``dps`` digits (``c`` any positive number or string).

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(6, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1, 0])
    >>> err = invariance_error(net, nn.CrossEntropyLoss(), (X, y), layer=0, c="0.3", dps=30)
    >>> bool(err["D"] < mpmath.mpf(10) ** -25)
    True
    """
    layers, kind, samples, n_total, mean, partition, names = _prepare(model, loss_fn, data, "tensor")
    if not 0 <= layer < len(layers) - 1:
        raise InvalidInputError(f"layer must be in 0..{len(layers) - 2}")
    with mpmath.workdps(dps):
        cc = mpmath.mpf(c)
        if not cc > 0:
            raise InvalidInputError(f"c must be positive, got {c!r}")
        rtol = mpmath.mpf(10) ** (-(2 * dps) // 3)
        weights = [mpmath.mpf(1) / n_total if mean else mpmath.mpf(1)] * n_total
        before = _diagnose_layers(layers, kind, samples, weights, partition, names, True, rtol)
        moved = [_Layer(lay.name, [row[:] for row in lay.W], None if lay.b is None else lay.b[:], lay.slope) for lay in layers]
        moved[layer].W = [[v * cc for v in row] for row in moved[layer].W]
        if moved[layer].b is not None:
            moved[layer].b = [v * cc for v in moved[layer].b]
        moved[layer + 1].W = [[v / cc for v in row] for row in moved[layer + 1].W]
        after = _diagnose_layers(moved, kind, samples, weights, partition, names, True, rtol)
        out = {}
        for key, field in (("D", "coupled"), ("Dplus", "inverse_coupled")):
            errs = [abs(getattr(a, field) - getattr(b, field)) / abs(getattr(b, field))
                    for a, b in zip(after, before) if getattr(b, field) not in (None, 0)]
            out[key] = max(errs) if errs else mpmath.mpf(0)
    return out
