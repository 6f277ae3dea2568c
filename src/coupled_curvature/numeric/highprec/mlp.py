"""A ReLU-type MLP and its data as exact dyadic arrays, and its derivatives in integer arithmetic.

The forward pass, the activation pattern, the back-propagated Jacobians and the gradients are
exact while they fit in ``F + 32`` bits (beyond that rounded blockwise to that many bits); the
softmax of ``CrossEntropyLoss`` is the only transcendental step (``F`` bits). The block
``H = Σ_n (J_nᵀΛ_nJ_n) ⊗ ã_nã_nᵀ`` is assembled in ``F``-bit block floating point
(:func:`layer_hessian`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mpmath
import numpy as np
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.core.blocks import resolve_blocks
from coupled_curvature.numeric.core.inputs import check_loss_fn, check_targets, prepare_batches, tensor_inputs
from coupled_curvature.numeric.layer_capabilities import layer_capabilities
from coupled_curvature.numeric.highprec.arithmetic import (
    Dyadic,
    dyadic_matmul,
    from_floats,
    from_mpfs,
    int_matmul,
    round_to_bits,
    shift_to,
    to_mpf,
)

__all__ = ["Layer", "Problem", "layer_hessian", "layer_terms", "prepare_problem", "rescale_problem"]



@dataclass
class Layer:
    """One Linear layer as exact dyadic arrays, with the activation after it."""

    name: str  # module path in the Sequential, e.g. "0"
    W: Dyadic
    b: Dyadic | None
    slope: Dyadic | None  # activation after this layer: None (last), 0 (ReLU), s (LeakyReLU), 1 (Identity)


def _layers_of(model: nn.Module) -> list[Layer]:
    if not isinstance(model, nn.Sequential):
        raise UnsupportedModelError("highprec supports nn.Sequential MLPs of Linear and ReLU/LeakyReLU/Identity")
    layers: list[Layer] = []
    for name, m in model.named_children():
        if isinstance(m, nn.Linear):
            W = from_floats(m.weight.detach().double().cpu().numpy())
            b = None if m.bias is None else from_floats(m.bias.detach().double().cpu().numpy())
            layers.append(Layer(name, W, b, None))
        elif (slope := layer_capabilities(m).relu_slope) is not None and layers and layers[-1].slope is None:
            s = getattr(m, "negative_slope") if slope == "negative_slope" else slope  # max(z, s·z)
            layers[-1].slope = from_floats(np.array(float(s)))
        elif layer_capabilities(m).reshape and not layers:
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
class Problem:
    """The model's layers, the loss kind (``"ce"``, ``"mse_mean"``, ``"mse_sum"``), the data as exact
    arrays, the sample count, whether the loss is a mean, the block partition and ``name -> (layer, kind)``."""

    layers: list[Layer]
    kind: str
    X: Dyadic  # N × d₀
    y: object  # class indices (list of int) or a Dyadic of targets N × C
    n_total: int
    mean: bool
    partition: dict
    names: dict


def prepare_problem(model, loss_fn, data, blocks) -> Problem:
    """Check and convert ``(model, loss_fn, data)`` exactly (as :func:`diagnose` checks its inputs).

    >>> net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3)).double()
    >>> X, y = torch.ones(4, 2, dtype=torch.float64), torch.tensor([0, 1, 2, 0])
    >>> prob = prepare_problem(net, nn.CrossEntropyLoss(), (X, y), "tensor")
    >>> prob.kind, prob.n_total, list(prob.partition)
    ('ce', 4, ['0.weight', '0.bias', '2.weight', '2.bias'])
    """
    check_loss_fn(loss_fn)
    layers = _layers_of(model)
    kind = _loss_kind(loss_fn)
    route = "the mpmath route (numeric.highprec)"
    batches = prepare_batches(data, loss_fn, tensors_only=route)
    outputs = layers[-1].W.M.shape[0]
    for i, bt in enumerate(batches if kind == "ce" else []):  # diagnose()'s label checks, on the output shape
        check_targets(loss_fn, (bt.n, outputs), bt.y, i)
        if bt.y.numel() and int(bt.y.min()) < 0:
            raise InvalidInputError(f"targets of batch {i} hold label {int(bt.y.min())} (ignore_index); highprec "
                                    "does not skip samples: pass labels in 0..C-1 only")
    X = torch.cat([x.reshape(x.shape[0], -1) for x in tensor_inputs(batches, route)]).double()
    if X.shape[1] != layers[0].W.M.shape[1]:
        raise InvalidInputError(f"data has {X.shape[1]} features but the first Linear expects {layers[0].W.M.shape[1]}")
    ys = torch.cat([bt.y.reshape(bt.y.shape[0], -1) if kind != "ce" else bt.y.reshape(-1) for bt in batches])
    y = ys.tolist() if kind == "ce" else from_floats(ys.double().cpu().numpy())
    names = {}
    for li, layer in enumerate(layers):
        names[f"{layer.name}.weight"] = (li, "weight")
        if layer.b is not None:
            names[f"{layer.name}.bias"] = (li, "bias")
    partition = resolve_blocks(list(names), blocks)
    mean = getattr(loss_fn, "reduction", "mean") == "mean"
    return Problem(layers, kind, from_floats(X.cpu().numpy()), y, int(X.shape[0]), mean, partition, names)


# --------------------------------------------------------------------------- derivatives


def _affine(a: Dyadic, layer: Layer) -> Dyadic:
    z = dyadic_matmul(a, Dyadic(layer.W.M.T, layer.W.e))
    if layer.b is None:
        return z
    e = min(z.e, layer.b.e)
    return Dyadic(shift_to(z, e) + shift_to(layer.b, e)[None, :], e)


def _activate(z: Dyadic, slope: Dyadic) -> tuple[Dyadic, Dyadic]:
    """``(σ(z), σ'(z))`` for ``σ(v) = v`` (v > 0) and ``s·v`` otherwise; ``σ'(0) = s`` as in torch."""
    pos = z.M > 0
    s = int(slope.M)
    if s == 0:
        return Dyadic(np.where(pos, z.M, 0), z.e), Dyadic(pos.astype(np.int64).astype(object), 0)
    one, es, s_int = 1 << max(0, -slope.e), min(0, slope.e), s << max(0, slope.e)
    dv = np.empty(pos.shape, dtype=object)
    dv[...] = s_int
    dv[pos] = one
    return Dyadic(z.M * dv, z.e + es), Dyadic(dv, es)


def _with_ones(a: Dyadic) -> Dyadic:
    """``ã = [a, 1]`` per sample."""
    e = min(a.e, 0)
    M = shift_to(a, e)
    return Dyadic(np.concatenate([M, np.full((M.shape[0], 1), 1 << -e, dtype=object)], axis=1), e)


def layer_terms(prob: Problem, F: int):
    """Per layer ``(ã, δ, G)`` with ``∂ℓ/∂(W,b) = δ ⊗ ã`` and ``H_ll = Σ_n G_n ⊗ ã_nã_nᵀ`` (times the
    loss factor), with the layer's output width; returns them and ``(factor_u, factor_Λ)`` (mpf).

    >>> net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3)).double()
    >>> prob = prepare_problem(net, nn.MSELoss(), (torch.ones(4, 2, dtype=torch.float64), torch.zeros(4, 3, dtype=torch.float64)), "tensor")
    >>> terms, fu, fL = layer_terms(prob, 120)
    >>> [t[3] for t in terms], fu == fL == mpmath.mpf(2) / 3  # widths; MSE mean: 2/C
    ([2, 3], True)
    """
    layers = prob.layers
    N = prob.n_total
    a = prob.X
    inputs, derivs = [], []
    for layer in layers:
        inputs.append(a)
        z = round_to_bits(_affine(a, layer), F + 32)
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
                fs = [to_mpf(int(v), f.e) for v in f.M[n]]
                top = max(fs)
                ex = [mpmath.exp(v - top) for v in fs]
                tot = mpmath.fsum(ex)
                for c in range(C):
                    p[n, c] = mpmath.libmp.to_fixed((ex[c] / tot)._mpf_, F)
        onehot = np.zeros((N, C), dtype=object)
        onehot[np.arange(N), np.asarray(prob.y, dtype=np.int64)] = 1 << F
        u = Dyadic(p - onehot, -F)
        fu = fL = mpmath.mpf(1)
    else:
        t = prob.y
        assert isinstance(t, Dyadic)  # prepare_problem stores MSE targets as a Dyadic
        if t.M.shape != f.M.shape:
            raise InvalidInputError(f"MSE targets have shape {t.M.shape}, outputs {f.M.shape}")
        e = min(f.e, t.e)
        u = Dyadic(shift_to(f, e) - shift_to(t, e), e)
        per = C if prob.kind == "mse_mean" else 1
        fu = fL = mpmath.mpf(2) / per
        p = None
    # J_L = I; J_l = (J_{l+1} W_{l+1}) diag(σ'(z_l)), batched as (N·C) × d matrices
    eye = np.zeros((N, C, C), dtype=object)
    eye[:, np.arange(C), np.arange(C)] = 1
    J = Dyadic(eye, 0)
    out: list[tuple[Dyadic, Dyadic, Dyadic, int] | None] = [None] * len(layers)
    for li in range(len(layers) - 1, -1, -1):
        d = J.M.shape[2]
        delta = Dyadic((J.M * u.M[:, :, None]).sum(axis=1), J.e + u.e)
        if p is None:
            LJ = J
        else:  # Λ = diag(p) − ppᵀ, p at 2^-F
            PJ = p[:, :, None] * J.M
            LJ = round_to_bits(Dyadic((PJ << F) - p[:, :, None] * PJ.sum(axis=1)[:, None, :], J.e - 2 * F), F + 8)
        G = round_to_bits(Dyadic((J.M[:, :, :, None] * LJ.M[:, :, None, :]).sum(axis=1), J.e + LJ.e), F + 8)
        out[li] = (_with_ones(inputs[li]) if layers[li].b is not None else inputs[li], delta, G, d)
        if li:
            nxt = layers[li]
            JW = int_matmul(J.M.reshape(N * C, d), nxt.W.M).reshape(N, C, -1)
            dv = derivs[li - 1]
            J = round_to_bits(Dyadic(JW * dv.M[:, None, :], J.e + nxt.W.e + dv.e), F + 32)
    return out, fu, fL


def layer_hessian(at: Dyadic, G: Dyadic, F: int) -> Dyadic:
    """``Σ_n G_n ⊗ ã_nã_nᵀ`` over coordinates ``(o, i)`` flattened as ``o·k + i``.

    >>> H = layer_hessian(from_floats(np.array([[1.0, 2.0]])), from_floats(np.array([[[2.0]]])), 120)
    >>> [[float(to_mpf(int(x), H.e)) for x in row] for row in H.M.tolist()]
    [[2.0, 4.0], [4.0, 8.0]]
    """
    N, k = at.M.shape
    d = G.M.shape[1]
    a = round_to_bits(at, F + 8)
    iu, ju = np.triu_indices(d)
    T = round_to_bits(Dyadic(G.M[:, iu, ju][:, :, None] * a.M[:, None, :], G.e + a.e), F + 8)
    R = int_matmul(np.ascontiguousarray(a.M.T), T.M.reshape(N, -1)).reshape(k, len(iu), k)
    H = np.zeros((d * k, d * k), dtype=object)
    for q, (o, o2) in enumerate(zip(iu.tolist(), ju.tolist())):
        blk = R[:, q, :]
        H[o * k:(o + 1) * k, o2 * k:(o2 + 1) * k] = blk
        if o != o2:
            H[o2 * k:(o2 + 1) * k, o * k:(o + 1) * k] = blk.T
    return Dyadic(H, a.e + T.e)


def rescale_problem(prob: Problem, layer: int, c: mpmath.mpf) -> Problem:
    """``W_l -> cW_l, b_l -> cb_l, W_{l+1} -> W_{l+1}/c``, each product rounded at the current precision.

    >>> net = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3)).double()
    >>> prob = prepare_problem(net, nn.CrossEntropyLoss(), (torch.ones(4, 2, dtype=torch.float64), torch.tensor([0, 1, 2, 0])), "tensor")
    >>> W = rescale_problem(prob, 0, mpmath.mpf(2)).layers[0].W
    >>> float(to_mpf(int(W.M[0, 0]), W.e)) == 2 * float(net[0].weight[0, 0].detach())
    True
    """

    def scale(d: Dyadic, f) -> Dyadic:
        vals = [f(to_mpf(int(x), d.e)) for x in d.M.ravel().tolist()]
        return from_mpfs(vals, d.M.shape)

    layers = list(prob.layers)
    cur, nxt = layers[layer], layers[layer + 1]
    bias = None if cur.b is None else scale(cur.b, lambda v: v * c)
    layers[layer] = Layer(cur.name, scale(cur.W, lambda v: v * c), bias, cur.slope)
    layers[layer + 1] = Layer(nxt.name, scale(nxt.W, lambda v: v / c), nxt.b, nxt.slope)
    return Problem(layers, prob.kind, prob.X, prob.y, prob.n_total, prob.mean, prob.partition, prob.names)
