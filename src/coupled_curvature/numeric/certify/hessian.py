"""A block's Hessian ``H_bb = scale·BᵀB`` in balls, ``B`` the factor rows ``A_nJ_n`` of the block's basis
directions (exact: the output is affine in a one-module block away from kinks).

A Linear block uses the Kronecker structure ``∂f_n/∂W_ij = (∂f_n/∂z_i)·x_nj``: with ``u_ik[n] =
scale·Σ_c (A_n∂f_n/∂z_i)_c(A_n∂f_n/∂z_k)_c`` and the features ``x̃_n`` (the layer's input, and 1
for the bias), ``H_(i,j),(k,l) = Σ_n u_ik[n]·x̃_nj·x̃_nl``: one arb
product ``X̃ᵀ·[u_ik ⊙ X̃]`` over the unit pairs ``i ≤ k``, about ``C·out/2`` times fewer operations than
``BᵀB``. Both routes start from the rows of ``A_nJ_n`` at the module's output, from one reverse pass
of the ``C`` rows of every ``A_n`` (:meth:`~.network.Network.cotangents`, shared by all blocks);
Conv and BatchNorm blocks then apply, per sample, the transpose of the parameter Jacobian: ``C``
directions in all instead of one per parameter.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from flint import arb_mat

from coupled_curvature.base.errors import UnsupportedModelError
from coupled_curvature.numeric.certify.arrays import Rows, arr, as_array, as_mat
from coupled_curvature.numeric.certify.layers import BatchNorm, Conv, Linear
from coupled_curvature.numeric.certify.loss import ArbLoss
from coupled_curvature.numeric.certify.network import Network

__all__ = ["factor_cotangents", "hessian", "sample_jacobian"]

#: the most ball entries of one step's temporary arrays in the Linear route (memory, not time)
_CHUNK = 1 << 18


def factor_cotangents(net: Network, loss: ArbLoss, upto: int) -> dict[int, Rows]:
    """The rows of ``A_nJ_n`` at the outputs of ops ``upto`` … last: one reverse pass, shared by blocks."""
    return net.cotangents(loss.factor_seed(), upto)


def hessian(net: Network, loss: ArbLoss, start: int, members: list[str],
            cotangents: Mapping[int, Rows] | None = None) -> arb_mat:
    """``H_bb`` of the block ``members`` (parameters of op ``start``), in the members' flat order;
    ``cotangents`` from :func:`factor_cotangents` (down to ``start`` at least), computed if not given."""
    layer = net.layers[start]
    G = (factor_cotangents(net, loss, start) if cotangents is None else cotangents).get(start)
    if G is None:  # op start does not reach the output
        size = sum(net.params[m].nrows() * net.params[m].ncols() for m in members)
        return arb_mat(size, size)
    if isinstance(layer, Linear):
        return _linear_hessian(arr(G), loss, layer, members)
    if not isinstance(layer, (Conv, BatchNorm)):
        raise UnsupportedModelError(f"op {start} ({type(layer).__name__}) holds no parameters that certify knows "
                                    f"({', '.join(members)}): certify takes Linear, Conv and BatchNorm parameters")
    B = as_mat(np.concatenate([sample_jacobian(layer, arr(G), m, net.N) for m in members], axis=1))
    return (B.transpose() * B) * loss.scale


def sample_jacobian(layer: Conv | BatchNorm, G: np.ndarray, member: str, N: int) -> np.ndarray:
    """``(K·N) × size``: row ``(k, n)`` is ``gᵀ∂y_n/∂θ`` for the output cotangent ``g = G[(k, n)]`` of
    sample ``n`` and the parameter ``member`` of a Conv or BatchNorm layer (per sample, not summed)."""
    K, C = G.shape[0] // N, layer.out_shape[0]
    Ga = G.reshape(K, N, C, -1)
    if member == layer.b:
        return Ga.sum(axis=3).reshape(K * N, C)
    if isinstance(layer, BatchNorm):
        return (Ga * layer.xhat.reshape(1, N, C, -1)).sum(axis=3).reshape(K * N, C)
    cg, out = layer.map.out_per_group, []
    for g, cols in enumerate(layer.cols):  # ∂y_n[co, p]/∂W[co, j] = cols_n[p, j]: one product per sample
        Gg, X = Ga[:, :, g * cg:(g + 1) * cg], as_array(cols).reshape(N, layer.P, -1)
        out.append(np.stack([as_array(as_mat(Gg[:, n].reshape(K * cg, -1)) * as_mat(X[n])).reshape(K, cg, -1)
                             for n in range(N)], axis=1))
    return np.concatenate(out, axis=2).reshape(K * N, -1)


def _linear_hessian(cot: np.ndarray, loss: ArbLoss, layer: Linear, members: list[str]) -> arb_mat:
    """``Σ_n u_ik[n]·x̃_nj·x̃_nl`` from the rows ``cot`` of ``A_nJ_n`` at the layer's output units."""
    out = layer.out_shape[0]
    G = cot.reshape(-1, loss.N, out).transpose(2, 1, 0)  # (out, N, C): A_n ∂f_n/∂z_i
    feats: list[np.ndarray] = []  # the features x̃
    cols: list[tuple[int, int]] = []  # per block column, (unit, feature index) in the members' order
    X = as_array(layer.x)
    if layer.w in members:
        feats.append(X)
    if layer.b in members:
        feats.append(np.full((X.shape[0], 1), 1, dtype=object))
    F = sum(f.shape[1] for f in feats)
    for m in members:
        cols.extend((i, j) for i in range(out) for j in range(X.shape[1])) if m == layer.w else cols.extend(
            (i, F - 1) for i in range(out))
    Xt = np.concatenate(feats, axis=1)
    iu, ku = np.triu_indices(out)
    per = max(1, _CHUNK // (loss.N * G.shape[2]))  # unit pairs per step: the (pairs, N, C) products stay small
    U = np.concatenate([(G[iu[s:s + per]] * G[ku[s:s + per]]).sum(axis=2) for s in range(0, len(iu), per)])
    U = U * loss.scale  # (pairs, N)
    step = max(1, _CHUNK // (len(iu) * F))  # samples per product: the (n, pairs, F) array stays small
    total: arb_mat | None = None
    for s in range(0, loss.N, step):
        P = (U[:, s:s + step, None] * Xt[None, s:s + step, :]).transpose(1, 0, 2)  # (n, pairs, F): u_ik[n]·x̃_nl
        part = as_mat(Xt[s:s + step].T) * as_mat(P)
        total = part if total is None else total + part
    assert total is not None  # loss.N ≥ 1 samples (a batch is never empty), so the loop ran
    Q = as_array(total).reshape(F, len(iu), F)  # Q[j, p, l] = H_(i_p,j),(k_p,l)
    pair = np.zeros((out, out), dtype=np.int64)
    pair[iu, ku] = pair[ku, iu] = np.arange(len(iu))
    unit, feat = (np.array(v)[:, None] for v in zip(*cols))
    upper = unit <= unit.T
    H = Q[np.where(upper, feat, feat.T), pair[unit, unit.T], np.where(upper, feat.T, feat)]
    return as_mat(H)
