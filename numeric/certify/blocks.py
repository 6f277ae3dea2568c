"""Per-block certified quantities: ``‖g‖²``, ``wᵀHw`` (tangent form), ``RQ``, ``D``, and ``D⁺`` (dense ``H``)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from flint import arb, arb_mat

from coupled_curvature.numeric.certify.ball import Ball, from_arb
from coupled_curvature.numeric.certify.layers import Kink, Linear
from coupled_curvature.numeric.certify.loss import ArbLoss
from coupled_curvature.numeric.certify.network import Network
from coupled_curvature.numeric.certify.spectrum import pinv_form

__all__ = ["BlockCertificate", "MAX_PINV_DIM", "certify_block"]

#: the largest block whose Hessian is assembled for a certified ``D⁺``
MAX_PINV_DIM = 512
_CHUNK = 32  # basis directions per tangent pass when H is assembled


@dataclass(frozen=True)
class BlockCertificate:
    """Balls that contain the exact values of one block's quantities for the exact float64 weights.

    ``D = (wᵀHw / wᵀw) / ‖g‖²`` (``coupled``) and ``D⁺ = (wᵀH⁺_τw / wᵀw)·‖g‖²`` (``inverse_coupled``,
    ``τ = pinv_rtol·max|λ(H)|``). A field is ``None`` only with a reason: ``reason`` for the ``D``
    fields (``kink`` holds the undecided ReLU/max-pool that caused a refusal), ``inverse_reason`` for
    ``D⁺`` (``straddling`` holds an eigenvalue ball that meets the cutoff).
    """

    name: str
    params: tuple[str, ...]
    size: int
    w_sq: Ball | None = None
    sqnorm_grad: Ball | None = None
    w_dot_g: Ball | None = None
    wHw: Ball | None = None
    rayleigh: Ball | None = None
    coupled: Ball | None = None
    wHpinvw: Ball | None = None
    inverse_coupled: Ball | None = None
    rank: int | None = None
    reason: str | None = None
    inverse_reason: str | None = None
    kink: Kink | None = None
    straddling: Ball | None = None


@dataclass(frozen=True)
class BlockArbs:
    """The arb values behind a :class:`BlockCertificate` (kept for differences of two certificates)."""

    w_sq: arb | None = None
    g_sq: arb | None = None
    wHw: arb | None = None
    rayleigh: arb | None = None
    coupled: arb | None = None
    inverse_coupled: arb | None = None


def _dot(entries_a: list[arb], entries_b: list[arb]) -> arb:
    return sum((a * b for a, b in zip(entries_a, entries_b)), arb(0))


def _ball(x: arb | None) -> Ball | None:
    return None if x is None else from_arb(x)


def certify_block(name: str, members: list[str], net: Network, loss: ArbLoss, grads: dict[str, arb_mat],
                  inverse: bool, rtol: Fraction) -> tuple[BlockCertificate, BlockArbs]:
    """One block's certificate on an evaluated network (``net``), loss and gradient."""
    size = sum(net.params[m].nrows() * net.params[m].ncols() for m in members)
    base = BlockCertificate(name, tuple(members), size)
    owners = {m: [i for i, layer in enumerate(net.layers) if layer is not None and m in layer.params] for m in members}
    for m, where in owners.items():
        if not where:
            return _refused(base, f"parameter {m!r} is not used by the traced forward: its gradient is 0"), BlockArbs()
        if len(where) > 1:
            return _refused(base, f"parameter {m!r} is used by {len(where)} calls (shared): the output is not "
                                  "affine in the block, so the tangent form of wᵀHw does not apply"), BlockArbs()
    ops = {where[0] for where in owners.values()}
    if len(ops) != 1:
        return _refused(base, "the block spans several modules: the output is not affine in it, so the tangent "
                              "form of wᵀHw does not apply; use blocks='tensor' or 'layer'"), BlockArbs()
    start = ops.pop()
    for i, k in net.kinks:
        if any(m in net.upstream[i] for m in members):
            return _refused(base, f"undecided kink at sample {k.sample}, module {k.layer!r}, unit {k.unit} "
                                  f"(ball {k.value}) upstream of the block: its derivatives are not determined",
                            kink=k), BlockArbs()
    w = [e for m in members for e in net.params[m].entries()]
    g = [e for m in members for e in grads[m].entries()]
    w_sq, g_sq, w_dot_g = _dot(w, w), _dot(g, g), _dot(w, g)
    df = net.tangent(start, [{m: net.params[m] for m in members}])
    wHw = loss.curvature(df)[0]
    rayleigh = coupled = dplus = wHpinvw = None
    reason = inverse_reason = None
    straddling, rank = None, None
    if not w_sq > 0:
        reason = "w = 0: the Rayleigh quotient is undefined"
    else:
        rayleigh = wHw / w_sq
        if g_sq > 0:
            coupled = rayleigh / g_sq
        else:
            reason = f"‖g‖² ∈ {from_arb(g_sq)} is not certified positive: D is undefined or uncertified"
    if not inverse:
        inverse_reason = "not asked for (inverse=False)"
    elif size > MAX_PINV_DIM:
        inverse_reason = (f"block of {size} parameters > {MAX_PINV_DIM}: its Hessian is not assembled for a certified "
                          "eigenvalue enclosure (the Gram route is not certified yet)")
    elif rayleigh is not None:
        form = pinv_form(_hessian(net, loss, start, members, size), arb_mat(size, 1, w), rtol)
        rank = form.rank
        if form.value is None:
            inverse_reason, straddling = form.reason, _ball(form.straddling)
        else:
            wHpinvw = form.value
            dplus = wHpinvw / w_sq * g_sq
    elif inverse:
        inverse_reason = reason
    cert = BlockCertificate(name, tuple(members), size, _ball(w_sq), _ball(g_sq), _ball(w_dot_g), _ball(wHw),
                            _ball(rayleigh), _ball(coupled), _ball(wHpinvw), _ball(dplus), rank, reason,
                            inverse_reason, None, straddling)
    return cert, BlockArbs(w_sq, g_sq, wHw, rayleigh, coupled, dplus)


def _linear_hessian(net: Network, loss: ArbLoss, start: int, layer: Linear, members: list[str]) -> arb_mat:
    """A Linear block: ``∂f_n/∂W_ij = (∂f_n/∂z_i)·x_nj``, so ``B_(n,c),(i,j) = (A_n∂f_n/∂z_i)_c·x_nj`` and
    ``B_(n,c),i = (A_n∂f_n/∂z_i)_c`` for the bias: one tangent per output unit instead of one per weight."""
    N, out = net.N, layer.out_shape[0]
    G: list[list[arb]] = []  # G[i]: the factor rows (n, c) of unit i
    for s in range(0, out, _CHUNK):
        units = list(range(s, min(out, s + _CHUNK)))
        seed = arb_mat(len(units) * N, out)
        for k, i in enumerate(units):
            for n in range(N):
                seed[k * N + n, i] = 1
        rows = loss.factor_rows(net.tangent(start, None, seed=seed)).entries()
        per = len(rows) // len(units)
        G.extend(rows[k * per:(k + 1) * per] for k in range(len(units)))
    C = len(G[0]) // N
    x = layer.x.entries()
    fan_in = layer.x.ncols()
    cols: list[tuple[int, int | None]] = []  # (unit, input index or None for the bias)
    for m in members:
        cols.extend((i, j) for i in range(out) for j in range(fan_in)) if m == layer.w else cols.extend(
            (i, None) for i in range(out))
    entries = []
    for n in range(N):
        xn = x[n * fan_in:(n + 1) * fan_in]
        for c in range(C):
            r = n * C + c
            entries.extend(G[i][r] if j is None else G[i][r] * xn[j] for i, j in cols)
    B = arb_mat(N * C, len(cols), entries)
    return (B.transpose() * B) * loss.scale


def _refused(base: BlockCertificate, why: str, kink: Kink | None = None) -> BlockCertificate:
    return BlockCertificate(base.name, base.params, base.size, reason=why, inverse_reason=why, kink=kink)


def _hessian(net: Network, loss: ArbLoss, start: int, members: list[str], size: int) -> arb_mat:
    """``H_bb = scale·BᵀB``, ``B`` the factor rows ``A_nJ_n`` of the block's basis directions (exact: the
    output is affine in a one-module block away from kinks)."""
    layer = net.layers[start]
    if isinstance(layer, Linear):
        return _linear_hessian(net, loss, start, layer, members)
    basis = [(m, r, c) for m in members for r in range(net.params[m].nrows()) for c in range(net.params[m].ncols())]
    cols: list[list[arb]] = []
    for s in range(0, size, _CHUNK):
        dirs = []
        for m, r, c in basis[s:s + _CHUNK]:
            p = net.params[m]
            e = arb_mat(p.nrows(), p.ncols())
            e[r, c] = 1
            dirs.append({m: e})
        rows = loss.factor_rows(net.tangent(start, dirs)).entries()
        per = len(rows) // len(dirs)
        cols.extend(rows[k * per:(k + 1) * per] for k in range(len(dirs)))
    m = len(cols[0])
    B = arb_mat(m, size, [cols[j][i] for i in range(m) for j in range(size)])
    return (B.transpose() * B) * loss.scale
