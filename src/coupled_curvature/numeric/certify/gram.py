"""A block's Gram matrix ``G = scale·BBᵀ`` (``m × m``) and ``v = Bw`` in balls, for blocks too large for
their Hessian ``H_bb = scale·BᵀB`` (``n_b × n_b``) but with few factor rows ``m = N·K``.

``B`` stacks the rows ``A_nJ_n`` of the block (``K = C`` rows of the loss factor ``A_n`` per sample,
:meth:`~.loss.ArbLoss.factor_seed`; ``J_n`` the Jacobian of sample ``n``'s outputs in the block), exact
because the output is affine in a one-module block away from kinks (:mod:`.hessian`). With
``B̃ = √scale·B``, ``H_bb = B̃ᵀB̃`` and ``G = B̃B̃ᵀ`` have the same nonzero eigenvalues (so the same
``max|λ|`` and the same kept set at the relative cutoff), and with the SVD ``B̃ = Σ_i σ_i q_i u_iᵀ``::

    wᵀH⁺_τw = Σ_{σ_i² > τ} (u_iᵀw)²/σ_i² = Σ_{σ_i² > τ} (q_iᵀB̃w)²/σ_i⁴ = scale·vᵀ(G⁺_τ)²v,

since ``q_iᵀB̃w = σ_iu_iᵀw``. ``wᵀHw = scale·‖v‖²`` is a consistency check against the tangent form.

A Linear block needs no ``B``: row ``(k, n)`` of ``B`` is ``a_kn ⊗ x̃_n`` (``a_kn = A_n∂f_n/∂z``, the row
at the layer's output units, ``x̃_n`` the layer's input, and 1 for the bias), so
``G_(kn),(k'n') = scale·(a_knᵀa_k'n')·(x̃_nᵀx̃_n')`` and ``v_kn = a_knᵀ(Wx_n + b)``: an ``m × out``
and an ``N × in`` product. Conv and BatchNorm blocks form ``B`` from the same per-sample rows as
:func:`.hessian.hessian`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from flint import arb_mat

from coupled_curvature.numeric.certify.arrays import Rows, arr, as_array, as_mat
from coupled_curvature.numeric.certify.hessian import sample_jacobian, factor_cotangents
from coupled_curvature.numeric.certify.layers import BatchNorm, Conv, Linear
from coupled_curvature.numeric.certify.loss import ArbLoss
from coupled_curvature.numeric.certify.network import Network

__all__ = ["gram", "gram_rows"]


def gram_rows(loss: ArbLoss) -> int:
    """``m = N·K``: the number of rows of ``B`` (``K = C`` factor rows per sample)."""
    return loss.N * loss.C


def gram(net: Network, loss: ArbLoss, start: int, members: list[str],
         cotangents: Mapping[int, Rows] | None = None) -> tuple[arb_mat, arb_mat]:
    """``(G, v)``: ``G = scale·BBᵀ`` (``m × m``) and ``v = Bw`` (``m × 1``) of the block ``members``
    (parameters of op ``start``; ``w`` their values in the members' flat order), ``cotangents`` from
    :func:`~.hessian.factor_cotangents` (down to ``start`` at least), computed if not given."""
    m = gram_rows(loss)
    layer = net.layers[start]
    cot = (factor_cotangents(net, loss, start) if cotangents is None else cotangents).get(start)
    if cot is None:  # op start does not reach the output: B = 0
        return arb_mat(m, m), arb_mat(m, 1)
    if isinstance(layer, Linear):
        return _linear_gram(arr(cot), loss, net, layer, members)
    assert isinstance(layer, (Conv, BatchNorm)), "op start holds the block's parameters: Linear, Conv or BatchNorm"
    B = as_mat(np.concatenate([sample_jacobian(layer, arr(cot), p, net.N) for p in members], axis=1))
    w = as_mat(np.concatenate([as_array(net.params[p]).reshape(-1) for p in members]).reshape(-1, 1))
    return (B * B.transpose()) * loss.scale, B * w


def _linear_gram(cot: np.ndarray, loss: ArbLoss, net: Network, layer: Linear, members: list[str]
                 ) -> tuple[arb_mat, arb_mat]:
    """``G`` and ``v`` of a Linear block from the rows ``cot`` (``K·N × out``, direction-major) of
    ``A_nJ_n`` at the layer's output units and the layer's input ``x``."""
    N = loss.N
    K = cot.shape[0] // N
    A = as_mat(cot)
    AA = as_array(A * A.transpose())  # a_knᵀa_k'n'
    x = layer.x
    feats = np.zeros((N, N), dtype=object)  # x̃_nᵀx̃_n' (Python int 0: exact)
    z = np.zeros((N, cot.shape[1]), dtype=object)  # the block's part of the pre-activation: Wx_n (+ b)
    if layer.w in members:
        feats = feats + as_array(x * x.transpose())
        z = z + as_array(x * net.params[layer.w].transpose())
    if layer.b is not None and layer.b in members:
        feats = feats + 1
        z = z + as_array(net.params[layer.b])  # b is stored as a row (1 × out)
    G = AA * np.tile(feats, (K, K)) * loss.scale
    v = (cot * np.tile(z, (K, 1))).sum(axis=1)
    return as_mat(G), as_mat(v.reshape(-1, 1))
