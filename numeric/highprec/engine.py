"""Arbitrary-precision diagnostics of small ReLU-type MLPs, from float64 weights taken exactly.

Engine. A float64 (and any mpmath number) is a dyadic rational ``m·2^e``, so arrays are held as
Python integers with one binary exponent per array (``_Dy``). The forward pass, the activation
pattern, the back-propagated Jacobians and the gradients are integer arithmetic, exact while
they fit in ``F + 32`` bits (``F = mp.prec + 64``; beyond that rounded blockwise to that many
bits). The softmax of ``CrossEntropyLoss`` is the only transcendental step (``F`` bits); the
curvature of ``MSELoss`` is exact. Integer matrix products above a small size run through float64
BLAS on 16-bit digit slices, which is exact (every partial sum is an integer below ``2^53``). The
block ``H = Σ_n (J_nᵀΛ_nJ_n) ⊗ ã_nã_nᵀ`` (the Hessian of a Linear tensor of a piecewise-linear
net away from kinks: the output is affine in that tensor) is assembled in ``F``-bit block
floating point. Results are rounded to ``dps`` digits at the end.

Pseudo-inverse: the semantics of the float64 path (``numeric/linalg/pinv.py``), keep the eigenvalues
``|λ| > τ = rtol·max|λ|``. A blocked pivoted Cholesky in ``F``-bit fixed point runs until the
remaining diagonal is rounding noise, ``Σ|S_ii| ≤ min(rtol/2, 2^-(F-24))·max H_ii``, so
``H = LLᵀ + S`` with ``λ_{r+1}(H) ≤ tr S ≤ τ/2``. It is used when also
``λ_r(H) ≥ 1/‖L₁₁⁻¹‖_F² > 2·rtol·tr H ≥ 2τ``: then its kept set provably is the eigenvalue
cutoff's, and ``wᵀ(LLᵀ)⁺w`` is the value for ``H − S`` (``S`` is noise). Otherwise (an
eigenvalue above the noise floor but within about a factor ``n`` of ``τ`` or below it, or an
indefinite block) ``mpmath.eigsy`` decides; that is slow beyond ~100 parameters. The default
``rtol = 10^-⌈2·dps/3⌉`` keeps every eigenvalue above the noise floor in practice; the float64
path's ``1e-10`` may cut inside the spectrum of a trained net and send large blocks to eigsy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import mpmath
import numpy as np
import torch
from torch import nn

from coupled_curvature.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.core.inputs import check_loss_fn, check_targets, prepare_batches
from coupled_curvature.numeric.core.blocks import resolve_blocks
from coupled_curvature.numeric.core.diagnostics import BlockDiagnosis, Diagnosis, derived_quantities
from coupled_curvature.numeric.vocabulary import MAX_DPS, MIN_DPS

_ACTS = (nn.ReLU, nn.LeakyReLU, nn.Identity)
_GUARD = 64  # working bits beyond mp.prec
_EIG_MAX = 0  # blocks up to this size always use mpmath.eigsy (tests raise it to compare the routes)
_NOISE_MARGIN = 24  # Cholesky stops once the remainder is below 2^-(F-24)·max H_ii: rounding noise
_SMALL_PRODUCT = 20_000  # multiply-adds below which _imatmul uses plain Python integers
_PANEL = 32  # Cholesky panel width: columns factorised with integer matvecs, then one BLAS update


# --------------------------------------------------------------------------- dyadic integer arrays


@dataclass
class _Dy:
    """An array of dyadic rationals ``M·2^e``: ``M`` an object array of Python ints."""

    M: np.ndarray
    e: int


def _bits(M: np.ndarray) -> int:
    return max(map(int.bit_length, M.ravel().tolist()), default=0)


def _from_pairs(pairs: list[tuple[int, int]], shape: tuple[int, ...]) -> _Dy:
    """Exact array from ``(m, e)`` pairs (value ``m·2^e``), one common exponent."""
    nz = [(m, e) for m, e in pairs if m]
    if not nz:
        return _Dy(np.zeros(shape, dtype=object), 0)
    e0 = min(e + ((m & -m).bit_length() - 1) for m, e in nz)  # drop common trailing zeros
    M = np.array([(m << (e - e0)) if e >= e0 else (m >> (e0 - e)) for m, e in pairs], dtype=object)
    return _Dy(M.reshape(shape), e0)


def _from_floats(a: np.ndarray) -> _Dy:
    """float64 array -> exact dyadic array (no rounding)."""
    a = np.asarray(a, dtype=np.float64)
    if not np.isfinite(a).all():
        raise InvalidInputError("highprec needs finite weights and data (found NaN or inf)")
    man, ex = np.frexp(a)
    ints = (man * 2.0**53).astype(np.int64).ravel().tolist()  # exact: 53-bit mantissas
    return _from_pairs([(m, int(e) - 53) for m, e in zip(ints, ex.ravel().tolist())], a.shape)


def _from_mpfs(values: Sequence[mpmath.mpf], shape: tuple[int, ...]) -> _Dy:
    pairs = []
    for v in values:
        s, m, e, _ = (v if isinstance(v, mpmath.mpf) else mpmath.mpf(v))._mpf_  # mpf(v) would re-round
        pairs.append((-m if s else m, e))
    return _from_pairs(pairs, shape)


def _round(d: _Dy, bits: int) -> _Dy:
    """Round to at most ``bits`` bits relative to the largest entry (block floating point)."""
    sh = _bits(d.M) - bits
    if sh <= 0:
        return d
    return _Dy((d.M + (1 << (sh - 1))) >> sh, d.e + sh)


def _shift_to(d: _Dy, e: int) -> np.ndarray:
    """Integers of ``d`` at exponent ``e ≤ d.e`` (exact)."""
    return d.M << (d.e - e) if d.e > e else d.M


def _to_mpf(m: int, e: int) -> mpmath.mpf:
    return mpmath.mpf((m, e)) if m else mpmath.mpf(0)


def _rshift(M: np.ndarray, sh: int) -> np.ndarray:
    """``round(M / 2^sh)`` elementwise."""
    return (M + (1 << (sh - 1))) >> sh if sh > 0 else M


def _rdiv(M: np.ndarray, d: int) -> np.ndarray:
    """``round(M / d)`` elementwise for a positive int ``d``."""
    return (2 * M + d) // (2 * d)


# --------------------------------------------------------------------------- exact integer matmul


def _digits(M: np.ndarray) -> tuple[np.ndarray, int]:
    """Signed 16-bit digits as float64: ``M = Σ_s D[s]·2^(16s)``, ``D`` of shape ``(K, *M.shape)``."""
    flat = M.ravel().tolist()
    K = max(1, -(-max(map(int.bit_length, flat), default=0) // 16))
    buf = b"".join(abs(x).to_bytes(2 * K, "little") for x in flat)
    D = np.frombuffer(buf, dtype="<u2").reshape(len(flat), K).T.astype(np.float64)
    neg = np.fromiter((x < 0 for x in flat), dtype=bool, count=len(flat))
    D[:, neg] *= -1.0
    return D.reshape((K, *M.shape)), K


def _imatmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Exact ``A @ B`` for object arrays of Python ints, through float64 BLAS on digit slices.

    Each digit product sum is an integer of magnitude ``≤ k·(2^16−1)² < 2^53`` (``k ≤ 2^20``), so
    BLAS computes it exactly; digit groups are summed in int64, carried, and reassembled.

    >>> A = np.array([[3**80, -1], [2, 5**40]] * 20, dtype=object).reshape(40, 2)
    >>> B = np.array([[7**90, -(2**200)] * 300, [1, 0] * 300], dtype=object)
    >>> bool((_imatmul(A, B) == A.dot(B)).all())
    True
    """
    m, k = A.shape
    n = B.shape[1]
    if m * n == 0 or k == 0:
        return np.zeros((m, n), dtype=object)
    if m * n * k <= _SMALL_PRODUCT:
        return A.dot(B)  # Python integer arithmetic beats the slicing overhead here
    if k > 1 << 20:
        raise InvalidInputError("highprec: inner dimension too large for the exact product")
    Da, Ka = _digits(A)
    Db, Kb = _digits(B)
    Bs = np.ascontiguousarray(Db.transpose(1, 0, 2)).reshape(k, Kb * n)
    T = Ka + Kb + 3  # digit groups plus room for carries
    C = np.zeros((T, m, n), dtype=np.int64)
    for s in range(Ka):
        R = (Da[s] @ Bs).reshape(m, Kb, n).transpose(1, 0, 2)
        C[s:s + Kb] += R.astype(np.int64)
    for u in range(T - 1):
        carry = C[u] >> 16
        C[u] -= carry << 16
        C[u + 1] += carry
    low = np.ascontiguousarray(C[:T - 1].reshape(T - 1, -1).T.astype("<u2"))
    view, step, sh = memoryview(low.tobytes()), 2 * (T - 1), 16 * (T - 1)
    out = [int.from_bytes(view[i * step:(i + 1) * step], "little") + (t << sh)
           for i, t in enumerate(C[T - 1].ravel().tolist())]
    return np.array(out, dtype=object).reshape(m, n)


def _dymatmul(a: _Dy, b: _Dy) -> _Dy:
    return _Dy(_imatmul(a.M, b.M), a.e + b.e)


# --------------------------------------------------------------------------- model and data


@dataclass
class _Layer:
    name: str  # module path in the Sequential, e.g. "0"
    W: _Dy
    b: _Dy | None
    slope: _Dy | None  # activation after this layer: None (last), 0 (ReLU), s (LeakyReLU), 1 (Identity)


def _layers(model: nn.Module) -> list[_Layer]:
    if not isinstance(model, nn.Sequential):
        raise UnsupportedModelError("highprec supports nn.Sequential MLPs of Linear and ReLU/LeakyReLU/Identity")
    layers: list[_Layer] = []
    for name, m in model.named_children():
        if isinstance(m, nn.Linear):
            W = _from_floats(m.weight.detach().double().cpu().numpy())
            b = None if m.bias is None else _from_floats(m.bias.detach().double().cpu().numpy())
            layers.append(_Layer(name, W, b, None))
        elif isinstance(m, _ACTS) and layers and layers[-1].slope is None:
            s = {nn.ReLU: 0.0, nn.Identity: 1.0}.get(type(m), getattr(m, "negative_slope", 0.0))
            layers[-1].slope = _from_floats(np.array(float(s)))
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


@dataclass
class _Problem:
    layers: list[_Layer]
    kind: str
    X: _Dy  # N × d₀
    y: object  # class indices (list of int) or a _Dy of targets N × C
    n_total: int
    mean: bool
    partition: dict
    names: dict


def _prepare(model, loss_fn, data, blocks) -> _Problem:
    check_loss_fn(loss_fn)
    layers = _layers(model)
    kind = _loss_kind(loss_fn)
    batches = prepare_batches(data, loss_fn)
    outputs = layers[-1].W.M.shape[0]
    for i, bt in enumerate(batches if kind == "ce" else []):  # diagnose()'s label checks, on the output shape
        check_targets(loss_fn, (bt.X.shape[0], outputs), bt.y, i)
        if bt.y.numel() and int(bt.y.min()) < 0:
            raise InvalidInputError(f"targets of batch {i} hold label {int(bt.y.min())} (ignore_index); highprec "
                                    "does not skip samples: pass labels in 0..C-1 only")
    X = torch.cat([bt.X.reshape(bt.X.shape[0], -1) for bt in batches]).double()
    if X.shape[1] != layers[0].W.M.shape[1]:
        raise InvalidInputError(f"data has {X.shape[1]} features but the first Linear expects {layers[0].W.M.shape[1]}")
    ys = torch.cat([bt.y.reshape(bt.y.shape[0], -1) if kind != "ce" else bt.y.reshape(-1) for bt in batches])
    y = ys.tolist() if kind == "ce" else _from_floats(ys.double().numpy())
    names = {}
    for li, layer in enumerate(layers):
        names[f"{layer.name}.weight"] = (li, "weight")
        if layer.b is not None:
            names[f"{layer.name}.bias"] = (li, "bias")
    partition = resolve_blocks(list(names), blocks)
    mean = getattr(loss_fn, "reduction", "mean") == "mean"
    return _Problem(layers, kind, _from_floats(X.numpy()), y, int(X.shape[0]), mean, partition, names)


# --------------------------------------------------------------------------- derivatives


def _affine(a: _Dy, layer: _Layer) -> _Dy:
    z = _dymatmul(a, _Dy(layer.W.M.T, layer.W.e))
    if layer.b is None:
        return z
    e = min(z.e, layer.b.e)
    return _Dy(_shift_to(z, e) + _shift_to(layer.b, e)[None, :], e)


def _activate(z: _Dy, slope: _Dy) -> tuple[_Dy, _Dy]:
    """``(σ(z), σ'(z))`` for ``σ(v) = v`` (v > 0) and ``s·v`` otherwise; ``σ'(0) = s`` as in torch."""
    pos = z.M > 0
    s = int(slope.M)
    if s == 0:
        return _Dy(np.where(pos, z.M, 0), z.e), _Dy(pos.astype(np.int64).astype(object), 0)
    one, es, s_int = 1 << max(0, -slope.e), min(0, slope.e), s << max(0, slope.e)
    dv = np.empty(pos.shape, dtype=object)
    dv[...] = s_int
    dv[pos] = one
    return _Dy(z.M * dv, z.e + es), _Dy(dv, es)


def _with_ones(a: _Dy) -> _Dy:
    """``ã = [a, 1]`` per sample."""
    e = min(a.e, 0)
    M = _shift_to(a, e)
    return _Dy(np.concatenate([M, np.full((M.shape[0], 1), 1 << -e, dtype=object)], axis=1), e)


def _layer_terms(prob: _Problem, F: int):
    """Per layer ``(ã, δ, G)`` with ``∂ℓ/∂(W,b) = δ ⊗ ã`` and ``H_ll = Σ_n G_n ⊗ ã_nã_nᵀ`` (times the
    loss factor); returns them and ``(factor_u, factor_Λ)`` (mpf)."""
    layers = prob.layers
    N = prob.n_total
    a = prob.X
    inputs, derivs = [], []
    for layer in layers:
        inputs.append(a)
        z = _round(_affine(a, layer), F + 32)
        if layer.slope is None:
            f = z
        else:
            a, d = _activate(z, layer.slope)
            derivs.append(d)
    C = f.M.shape[1]
    if prob.kind == "ce":
        p = np.zeros((N, C), dtype=object)
        with mpmath.workprec(F + 16):
            for n in range(N):
                fs = [_to_mpf(int(v), f.e) for v in f.M[n]]
                top = max(fs)
                ex = [mpmath.exp(v - top) for v in fs]
                tot = mpmath.fsum(ex)
                for c in range(C):
                    p[n, c] = mpmath.libmp.to_fixed((ex[c] / tot)._mpf_, F)
        onehot = np.zeros((N, C), dtype=object)
        onehot[np.arange(N), np.asarray(prob.y, dtype=np.int64)] = 1 << F
        u = _Dy(p - onehot, -F)
        fu = fL = mpmath.mpf(1)
    else:
        t = prob.y
        if t.M.shape != f.M.shape:
            raise InvalidInputError(f"MSE targets have shape {t.M.shape}, outputs {f.M.shape}")
        e = min(f.e, t.e)
        u = _Dy(_shift_to(f, e) - _shift_to(t, e), e)
        per = C if prob.kind == "mse_mean" else 1
        fu = fL = mpmath.mpf(2) / per
        p = None
    # J_L = I; J_l = (J_{l+1} W_{l+1}) diag(σ'(z_l)), batched as (N·C) × d matrices
    eye = np.zeros((N, C, C), dtype=object)
    eye[:, np.arange(C), np.arange(C)] = 1
    J = _Dy(eye, 0)
    out = [None] * len(layers)
    for li in range(len(layers) - 1, -1, -1):
        d = J.M.shape[2]
        delta = _Dy((J.M * u.M[:, :, None]).sum(axis=1), J.e + u.e)
        if p is None:
            LJ = J
        else:  # Λ = diag(p) − ppᵀ, p at 2^-F
            PJ = p[:, :, None] * J.M
            LJ = _round(_Dy((PJ << F) - p[:, :, None] * PJ.sum(axis=1)[:, None, :], J.e - 2 * F), F + 8)
        G = _round(_Dy((J.M[:, :, :, None] * LJ.M[:, :, None, :]).sum(axis=1), J.e + LJ.e), F + 8)
        out[li] = (_with_ones(inputs[li]) if layers[li].b is not None else inputs[li], delta, G, d)
        if li:
            nxt = layers[li]
            JW = _imatmul(J.M.reshape(N * C, d), nxt.W.M).reshape(N, C, -1)
            dv = derivs[li - 1]
            J = _round(_Dy(JW * dv.M[:, None, :], J.e + nxt.W.e + dv.e), F + 32)
    return out, fu, fL


def _layer_hessian(at: _Dy, G: _Dy, F: int) -> _Dy:
    """``Σ_n G_n ⊗ ã_nã_nᵀ`` over coordinates ``(o, i)`` flattened as ``o·k + i``."""
    N, k = at.M.shape
    d = G.M.shape[1]
    a = _round(at, F + 8)
    iu, ju = np.triu_indices(d)
    T = _round(_Dy(G.M[:, iu, ju][:, :, None] * a.M[:, None, :], G.e + a.e), F + 8)
    R = _imatmul(np.ascontiguousarray(a.M.T), T.M.reshape(N, -1)).reshape(k, len(iu), k)
    H = np.zeros((d * k, d * k), dtype=object)
    for q, (o, o2) in enumerate(zip(iu.tolist(), ju.tolist())):
        blk = R[:, q, :]
        H[o * k:(o + 1) * k, o2 * k:(o2 + 1) * k] = blk
        if o != o2:
            H[o2 * k:(o2 + 1) * k, o * k:(o + 1) * k] = blk.T
    return _Dy(H, a.e + T.e)


# --------------------------------------------------------------------------- pseudo-inverse


def _pivoted_cholesky(A: np.ndarray, stop: int) -> tuple[np.ndarray, list[int], list[int], bool]:
    """``PAPᵀ ≈ LLᵀ`` for ``A`` (ints at scale ``2^-2F``; ``L`` at ``2^-F``), greedy diagonal
    pivoting, until the remaining diagonal has ``Σ|d_i| ≤ stop``. Returns ``L`` (n×r), the
    permutation, the remaining diagonal and whether the remainder looked PSD."""
    n = A.shape[0]
    A = A.copy()
    L = np.zeros((n, n), dtype=object)
    dg = [A[i, i] for i in range(n)]
    perm = list(range(n))
    c = j0 = 0
    psd = True
    while c < n:
        j1 = min(j0 + _PANEL, n)
        while c < j1:
            rest = dg[c:]
            if sum(map(abs, rest)) <= stop:
                break
            p = c + max(range(n - c), key=rest.__getitem__)
            if dg[p] <= 0:
                psd = False
                break
            if p != c:
                perm[c], perm[p], dg[c], dg[p] = perm[p], perm[c], dg[p], dg[c]
                A[[c, p], :] = A[[p, c], :]
                A[:, [c, p]] = A[:, [p, c]]
                L[[c, p], :c] = L[[p, c], :c]
            v = A[c + 1:, c] - L[c + 1:, j0:c].dot(L[c, j0:c]) if c > j0 else A[c + 1:, c]
            dd = math.isqrt(dg[c])
            L[c, c] = dd
            col = _rdiv(v, dd)
            L[c + 1:, c] = col
            dg[c + 1:] = [x - y * y for x, y in zip(dg[c + 1:], col.tolist())]
            c += 1
        if c < n and c > j0:
            P = L[c:, j0:c]
            A[c:, c:] -= _imatmul(P, np.ascontiguousarray(P.T))
        if c < j1:
            break
        j0 = c
    return L[:, :c], perm, dg[c:], psd and all(x >= -stop for x in dg[c:])


def _tri_inv(L: np.ndarray, F: int) -> np.ndarray:
    """``L⁻¹`` for lower-triangular ``L`` in ``F``-bit fixed point (ints at ``2^-F``)."""
    n = L.shape[0]
    if n <= 24:
        X = np.zeros((n, n), dtype=object)
        for j in range(n):
            X[j, j] = _rdiv(1 << (2 * F), L[j, j])
            if j:
                X[j, :j] = -_rdiv(L[j, :j].dot(X[:j, :j]), L[j, j])
        return X
    h = n // 2
    Ai, Ci = _tri_inv(L[:h, :h], F), _tri_inv(L[h:, h:], F)
    low = -_rshift(_imatmul(_rshift(_imatmul(Ci, np.ascontiguousarray(L[h:, :h])), F), Ai), F)
    X = np.zeros((n, n), dtype=object)
    X[:h, :h], X[h:, h:], X[h:, :h] = Ai, Ci, low
    return X


def _spd_solve(M2: np.ndarray, b: np.ndarray, F: int) -> np.ndarray:
    """``M⁻¹b`` for SPD ``M`` (ints at ``2^-2F``), ``b`` and the result at ``2^-F``."""
    L, perm, _, _ = _pivoted_cholesky(M2, 0)
    n = L.shape[0]
    if n < M2.shape[0]:
        raise InvalidInputError("highprec: internal SPD solve met a singular matrix")
    y = np.zeros(n, dtype=object)
    bp = b[perm]
    for j in range(n):
        y[j] = _rdiv((bp[j] << F) - L[j, :j].dot(y[:j]), L[j, j])
    x = np.zeros(n, dtype=object)
    for j in range(n - 1, -1, -1):
        x[j] = _rdiv((y[j] << F) - L[j + 1:, j].dot(x[j + 1:]), L[j, j])
    out = np.zeros(n, dtype=object)
    out[perm] = x
    return out


@dataclass
class _Pinv:
    value: mpmath.mpf
    rank: int
    cutoff: mpmath.mpf | None
    min_rel: mpmath.mpf | None
    note: str


def _to_float(A: np.ndarray, F: int) -> np.ndarray:
    """Ints at ``2^-2F`` (entries of order 1) as float64."""
    sh = 2 * F - 60
    return np.array([float(x >> sh) for x in A.ravel().tolist()]).reshape(A.shape) * 2.0**-60


def _pinv_eigsy(H: _Dy, w: _Dy, rtol, F: int, why: str) -> _Pinv:
    n = H.M.shape[0]
    with mpmath.workprec(F):
        E, Q = mpmath.eigsy(mpmath.matrix([[_to_mpf(int(x), H.e) for x in row] for row in H.M.tolist()]))
        lam = [E[i] for i in range(n)]
        top = max(abs(v) for v in lam)
        cutoff = rtol * top
        keep = [i for i in range(n) if abs(lam[i]) > cutoff]
        wv = [_to_mpf(int(x), w.e) for x in w.M.tolist()]
        value = mpmath.fsum((mpmath.fsum(Q[r, i] * wv[r] for r in range(n)) ** 2) / lam[i] for i in keep)
        min_rel = min(abs(lam[i]) for i in keep) / top if keep else None
    return _Pinv(value, len(keep), cutoff, min_rel, f"H⁺ by mpmath.eigsy{why}")


def _pinv_form(H: _Dy, w: _Dy, rtol, F: int) -> _Pinv:
    """``wᵀH⁺_τw``, ``τ = rtol·max|λ|``: certified pivoted Cholesky, else ``mpmath.eigsy``."""
    n = H.M.shape[0]
    diag = [int(H.M[i, i]) for i in range(n)]
    top = max(diag, default=0)
    if n <= _EIG_MAX or top <= 0:
        if not any(H.M.ravel().tolist()):
            return _Pinv(mpmath.mpf(0), 0, mpmath.mpf(0), None, "H_bb = 0: H⁺ = 0")
        return _pinv_eigsy(H, w, rtol, F, "" if top > 0 else " (block not PSD)")
    sh = 2 * F + 1 - top.bit_length()  # scale so that max diag ∈ [1, 2)
    A = H.M << sh if sh >= 0 else _rshift(H.M, -sh)
    E = H.e - sh + 2 * F  # H = Ã·2^E with Ã = A·2^-2F
    with mpmath.workprec(F + 16):
        amax = max(int(A[i, i]) for i in range(n))
        # stop at the rounding-noise floor (2^-(F-24) of the top), never above half the cutoff
        stop = min(int(mpmath.floor(rtol * amax / 2)), amax >> (F - _NOISE_MARGIN))
        L, perm, rest, psd = _pivoted_cholesky(A, stop)
        r = L.shape[1]
        cutoff_note = "H⁺ by pivoted Cholesky (kept set certified equal to the eigenvalue cutoff)"
        if not psd:
            return _pinv_eigsy(H, w, rtol, F, " (block not PSD)")
        if r == 0:
            return _Pinv(mpmath.mpf(0), 0, None, None, "H_bb = 0 under the cutoff: H⁺ = 0; " + cutoff_note)
        X = _tri_inv(np.ascontiguousarray(L[:r, :r]), F)
        frob = mpmath.mpf(sum(x * x for x in X.ravel().tolist())) * mpmath.mpf(2) ** (-2 * F)
        trace = mpmath.mpf(sum(int(A[i, i]) for i in range(n))) * mpmath.mpf(2) ** (-2 * F)
        if not 2 * rtol * trace * frob < 1:
            return _pinv_eigsy(H, w, rtol, F, " (no certified spectral gap at the cutoff)")
        wb = w.M[perm]
        wsh = F + 1 - _bits(wb)
        wi = wb << wsh if wsh >= 0 else _rshift(wb, -wsh)
        ew = w.e - wsh + F  # w = w̃·2^ew, w̃ = wi·2^-F
        w1, w2 = wi[:r], wi[r:]
        m = n - r
        if m:
            K = _rshift(_imatmul(np.ascontiguousarray(L[r:, :r]), X), F)  # L₂₁L₁₁⁻¹, m × r
            v = w1 + _rshift(_imatmul(np.ascontiguousarray(K.T), w2[:, None])[:, 0], F)
            Kv = _rshift(_imatmul(K, v[:, None])[:, 0], F)
            if m <= r:  # (I + KᵀK)⁻¹v = v − Kᵀ(I + KKᵀ)⁻¹Kv
                M2 = _imatmul(K, np.ascontiguousarray(K.T))
                M2[np.arange(m), np.arange(m)] += 1 << (2 * F)
                t = _spd_solve(M2, Kv, F)
                s = v - _rshift(_imatmul(np.ascontiguousarray(K.T), t[:, None])[:, 0], F)
            else:
                M2 = _imatmul(np.ascontiguousarray(K.T), K)
                M2[np.arange(r), np.arange(r)] += 1 << (2 * F)
                s = _spd_solve(M2, v, F)
        else:
            s = w1
        y = _imatmul(X, s[:, None])[:, 0]  # at 2^-2F
        value = mpmath.mpf(sum(x * x for x in y.tolist())) * mpmath.mpf(2) ** (2 * ew - E - 4 * F)
        dropped = mpmath.mpf(sum(map(abs, rest))) * mpmath.mpf(2) ** (E - 2 * F)
        note = f"{cutoff_note}; dropped trace {mpmath.nstr(dropped, 3)}"
        lam_top = float(np.linalg.eigvalsh(_to_float(A, F))[-1])  # λ_max(Ã) to float64 accuracy
        cutoff = rtol * mpmath.mpf(lam_top) * mpmath.mpf(2) ** E
    return _Pinv(value, r, cutoff, None, note)


# --------------------------------------------------------------------------- assembly


def _diagnose_problem(prob: _Problem, F: int, inverse: bool, rtol, seconds: dict) -> list[BlockDiagnosis]:
    t0 = time.perf_counter()
    with mpmath.workprec(F):  # loss factors 1/N, 2/C at the working precision, not at dps
        terms, fu, fL = _layer_terms(prob, F)
        wt = mpmath.mpf(1) / prob.n_total if prob.mean else mpmath.mpf(1)
        fg, fH = wt * fu, wt * fL
    seconds["derivatives"] = time.perf_counter() - t0
    grads, hess = {}, {}
    records = []
    for block, members in prob.partition.items():
        lis = {prob.names[m][0] for m in members}
        if len(lis) != 1:
            raise InvalidInputError(f"highprec blocks must lie within one Linear layer; {block!r} spans several")
        li = lis.pop()
        layer = prob.layers[li]
        at, delta, G, d = terms[li]
        t0 = time.perf_counter()
        if li not in hess:
            grads[li] = _dymatmul(_Dy(np.ascontiguousarray(delta.M.T), delta.e), at)  # d × k
            hess[li] = _layer_hessian(at, G, F)
        seconds["hessian"] = seconds.get("hessian", 0.0) + time.perf_counter() - t0
        gl, Hl = grads[li], hess[li]
        k = gl.M.shape[1]
        idx, wparts = [], []
        for mname in members:
            if prob.names[mname][1] == "weight":
                kin = layer.W.M.shape[1]
                idx += [o * k + i for o in range(d) for i in range(kin)]
                wparts.append(layer.W)
            else:
                idx += [o * k + k - 1 for o in range(d)]
                wparts.append(layer.b)
        e = min(p.e for p in wparts)
        w = _Dy(np.concatenate([_shift_to(p, e).ravel() for p in wparts]), e)
        g = _Dy(gl.M.ravel()[idx], gl.e)
        H = _Dy(np.ascontiguousarray(Hl.M[np.ix_(idx, idx)]), Hl.e)
        t0 = time.perf_counter()
        records.append(_record(block, members, w, g, H, fg, fH, inverse, rtol, F))
        seconds["pinv"] = seconds.get("pinv", 0.0) + time.perf_counter() - t0
    return records


def _record(block, members, w: _Dy, g: _Dy, H: _Dy, fg, fH, inverse, rtol, F) -> BlockDiagnosis:
    """Block quantities from exact integer ``w``, ``g``, ``H`` (real ``g·fg``, ``H·fH``), rounded to
    the caller's precision at the end."""
    wl, gl = w.M.tolist(), g.M.tolist()
    notes: list[str] = []
    pf = None
    with mpmath.workprec(F):
        w_sq = _to_mpf(sum(x * x for x in wl), 2 * w.e)
        g_sq = _to_mpf(sum(x * x for x in gl), 2 * g.e) * fg**2
        w_dot_g = _to_mpf(sum(a * b for a, b in zip(wl, gl)), w.e + g.e) * fg
        Hw = _imatmul(H.M, w.M[:, None])[:, 0].tolist()
        wHw = _to_mpf(sum(a * b for a, b in zip(wl, Hw)), 2 * w.e + H.e) * fH
        wHpw = None
        if inverse:
            pf = _pinv_form(H, w, rtol, F)
            wHpw = pf.value / fH
        rq, D, Dp = derived_quantities(w_sq, g_sq, wHw, wHpw, notes)
    if pf is not None:
        notes.append(pf.note)

    def r(x):  # round to the caller's dps
        return None if x is None else +x

    return BlockDiagnosis(
        name=block, params=tuple(members), size=len(wl), w_sq=r(w_sq), g_sq=r(g_sq), w_dot_g=r(w_dot_g),
        wHw=r(wHw), rayleigh=r(rq), coupled=r(D), wHpinvw=r(wHpw), inverse_coupled=r(Dp),
        rank=None if pf is None else pf.rank, cutoff=None if pf is None or pf.cutoff is None else r(pf.cutoff * fH),
        min_kept_rel_eig=None if pf is None else r(pf.min_rel), notes=tuple(notes),
    )


def _working_bits() -> int:
    """``F``: the integer engine's fraction bits at the current mpmath precision."""
    return mpmath.mp.prec + _GUARD


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
    """``D = (wᵀHw/wᵀw)/‖g‖²`` and ``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²`` of every block at ``dps`` decimal
    digits (mpmath numbers), for small MLPs, in the same ``Diagnosis`` shape as the float64 path.

    The float64 weights and data are converted exactly to binary rationals; the gradient and the
    dense Hessian blocks ``H = Σ_n (J_nᵀΛ_nJ_n) ⊗ ã_nã_nᵀ`` (exact for a Linear tensor of a
    piecewise-linear net away from activation kinks) are exact up to the rounded softmax and
    carried with ``mp.prec + 64`` bits; ``wᵀH⁺w`` keeps the eigenvalues ``|λ| > pinv_rtol·max|λ|``
    (default ``pinv_rtol = 10^(−⌈2·dps/3⌉)``), through a pivoted Cholesky whose kept set is
    certified to be that set, else ``mpmath.eigsy`` (the block's last note names the route).
    Fields hold ``mpmath.mpf`` rounded to ``dps`` digits; ``cutoff`` is ``pinv_rtol·λ_max`` with
    ``λ_max`` to float64 accuracy on the Cholesky route. ``meta["seconds"]`` has the wall time
    per phase (prepare, derivatives, hessian, pinv).

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(6, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1, 0])
    >>> d = diagnose(net, nn.CrossEntropyLoss(), (X, y), dps=30)
    >>> type(d["0.weight"].coupled).__name__
    'mpf'
    """
    _check_dps(dps)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    prob = _prepare(model, loss_fn, data, blocks)
    seconds["prepare"] = time.perf_counter() - t0
    with mpmath.workdps(dps):
        rtol = _default_rtol(dps) if pinv_rtol is None else mpmath.mpf(pinv_rtol)
        if not rtol >= 0:
            raise InvalidInputError(f"pinv_rtol must be ≥ 0, got {pinv_rtol!r}")
        F = _working_bits()
        records = _diagnose_problem(prob, F, inverse, rtol, seconds)
        rtol_s = mpmath.nstr(rtol, 5)
    meta = {"dps": dps, "n_samples": prob.n_total, "reduction": "mean" if prob.mean else "sum",
            "pinv_rtol": rtol_s, "working_bits": F, "seconds": seconds}
    return Diagnosis(records, meta)


#: the most digits accepted: the integer engine's numbers grow like 2·dps·log2(10) bits, and far above
#: this Python's int-to-string limit (4300 digits) stops the run after minutes of work


def _check_dps(dps: object) -> None:
    if not isinstance(dps, int) or isinstance(dps, bool) or not MIN_DPS <= dps <= MAX_DPS:
        raise InvalidInputError(f"dps must be an int in {MIN_DPS}..{MAX_DPS}, got {dps!r}; pass e.g. dps=50")


def _default_rtol(dps: int) -> mpmath.mpf:
    return mpmath.mpf(10) ** (-(2 * dps) // 3)


def _rescaled(prob: _Problem, layer: int, c: mpmath.mpf) -> _Problem:
    """``W_l -> cW_l, b_l -> cb_l, W_{l+1} -> W_{l+1}/c``, each product rounded at the current precision."""

    def scale(d: _Dy | None, f) -> _Dy | None:
        if d is None:
            return None
        vals = [f(_to_mpf(int(x), d.e)) for x in d.M.ravel().tolist()]
        return _from_mpfs(vals, d.M.shape)

    layers = list(prob.layers)
    cur, nxt = layers[layer], layers[layer + 1]
    layers[layer] = _Layer(cur.name, scale(cur.W, lambda v: v * c), scale(cur.b, lambda v: v * c), cur.slope)
    layers[layer + 1] = _Layer(nxt.name, scale(nxt.W, lambda v: v / c), nxt.b, nxt.slope)
    return _Problem(layers, prob.kind, prob.X, prob.y, prob.n_total, prob.mean, prob.partition, prob.names)


def invariance_error(
    model: nn.Module, loss_fn: Callable, data: object, *, layer: int, c: object, dps: int = 50
) -> dict[str, mpmath.mpf]:
    """Max over blocks of ``|X' − X|/|X|`` for ``X = D, D⁺`` under ``W_l -> cW_l, b_l -> cb_l,
    W_{l+1} -> W_{l+1}/c`` applied at ``dps`` digits (``c`` any positive number, or a string
    such as ``"0.3"`` or ``"3/7"``). The rescaled weights are rounded to ``dps`` digits (the only
    rounding of the map); D and D⁺ of both nets are then compared before the final rounding, so
    the error is the effect of that rounding, of order ``10^-dps`` (T3), not 0.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(6, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1, 0])
    >>> err = invariance_error(net, nn.CrossEntropyLoss(), (X, y), layer=0, c="3/7", dps=30)
    >>> bool(err["D"] < mpmath.mpf(10) ** -25)
    True
    """
    _check_dps(dps)
    prob = _prepare(model, loss_fn, data, "tensor")
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(prob.layers) - 1:
        raise InvalidInputError(f"layer must be in 0..{len(prob.layers) - 2}, got {layer!r}; pass an int in that range")
    with mpmath.workdps(dps):
        try:
            cc = mpmath.mpf(c)
        except (TypeError, ValueError):
            raise InvalidInputError(f"c must be a positive number or a string like '0.3' or '3/7', got {c!r}; pass one of those") from None
        if not (cc > 0 and mpmath.isfinite(cc)):
            raise InvalidInputError(f"c must be positive and finite, got {c!r}; pass e.g. '3/7'")
        rtol = _default_rtol(dps)
        F = _working_bits()
        moved = _rescaled(prob, layer, cc)  # the only rounding to dps digits: the map itself
        with mpmath.workprec(F):  # compare unrounded values, so the error is not the output rounding
            before = _diagnose_problem(prob, F, True, rtol, {})
            after = _diagnose_problem(moved, F, True, rtol, {})
            out = {}
            for key, field in (("D", "coupled"), ("Dplus", "inverse_coupled")):
                errs = [abs(getattr(a, field) - getattr(b, field)) / abs(getattr(b, field))
                        for a, b in zip(after, before) if getattr(b, field) not in (None, 0)]
                out[key] = max(errs) if errs else mpmath.mpf(0)
        return {k: +v for k, v in out.items()}
