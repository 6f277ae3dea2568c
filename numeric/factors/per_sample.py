"""Exact Hessian blocks, diagonals and Gauss–Newton factors of ``nn.Linear`` and ``nn.Conv2d`` layers
from per-sample factors.

Two routes, both exact only under a stated condition that the callers verify against
Hessian-vector products (and fall back from when it fails):

* **layer output** (``nn.Linear`` on 2-D inputs, any network): ``z_n = W a_n + b`` and
  ``G_n = ∂²L/∂z_n²`` give ``∂²L/∂W_{ai}∂W_{bj} = Σ_n G_n[a,b] a_n[i] a_n[j]`` — exact whenever
  the loss is a sum of per-sample terms, whatever sits above the layer.
* **network output** (``nn.Linear`` and ``nn.Conv2d`` with ``groups=1``): a layer's output is
  linear in its own weights, ``z_n[c,p] = Σ_q W[c,q] U_n[q,p] + b[c]`` with ``U_n`` the input
  unfolded into patches (``torch.nn.functional.unfold``; ``P = 1``, ``U_n = a_n`` for Linear).
  With ``M_n = ∂f_n/∂z_n`` (back-propagated from the ``k`` network outputs) the per-sample
  Jacobian is ``J_n[j,(c,q)] = Σ_p M_n[j,c,p] U_n[q,p]`` (:mod:`.sample_jacobians`) and, with ``Λ_n = ∂²L/∂f_n²``,
  ``e_n = ∂L/∂f_n``: ``g_b = Σ_n J_nᵀe_n`` always, and ``H_bb = Σ_n J_nᵀΛ_nJ_n`` (Gauss–Newton)
  exactly when ``f`` is affine in the block near ``θ`` — true almost everywhere when everything
  above the layer is piecewise linear (ReLU, LeakyReLU, max/avg pooling, eval-mode BatchNorm,
  Linear, Conv), false for Tanh (negative control) and for batch statistics (samples coupled).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.sample_jacobians import SampleJacobians, linear_module_of, sample_jacobians

_CHUNK_ELEMENTS = 1 << 22  # per-sample Jacobian chunk: samples·outputs·block size


# ---------------------------------------------------------------------------- layer-output route


def per_sample_factors(
    objective: Objective, batch: int, paths: Iterable[str], params: dict[str, Tensor] | None = None
) -> dict[str, tuple[Tensor, Tensor]]:
    """``(G, A)`` per ``nn.Linear`` path: inputs ``A[n] = a_n`` and ``G[n] = ∂²L/∂z_n²`` for ``z_n = W a_n + b``.

    One forward pass with a zero shift ``δ`` added to each layer's output, then ``out``
    batched Hessian-vector products in ``δ`` (cross-sample blocks of ``∂²L/∂δ²`` vanish when
    the loss is a sum of per-sample terms, so each product yields one column of every
    ``G_n``). Layers that see non-2-D inputs or run more than once are left out.

    >>> net = nn.Sequential(nn.Linear(2, 1)).double()
    >>> data = [(torch.eye(2, dtype=torch.float64), torch.zeros(2, 1, dtype=torch.float64))]
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> G, A = per_sample_factors(Objective(net, nn.MSELoss(), prepare_batches(data, nn.MSELoss())), 0, ["0"])["0"]
    >>> G.reshape(-1).tolist()  # L = mean_n z_n²: ∂²L/∂z_n² = 2/2
    [1.0, 1.0]
    """
    model = objective.model
    seen: dict[str, list[Tensor]] = {path: [] for path in paths}
    shifts: dict[str, Tensor] = {}

    def hook(path: str):
        def add_shift(module, inputs, output):
            seen[path].append(inputs[0].detach())
            if output.dim() != 2 or len(seen[path]) > 1:
                return None
            shifts[path] = torch.zeros_like(output, requires_grad=True)
            return output + shifts[path]

        return add_shift

    handles = [model.get_submodule(p).register_forward_hook(hook(p)) for p in seen]
    try:
        loss = objective.batch_loss(batch, objective.values if params is None else params)
    finally:
        for h in handles:
            h.remove()
    usable = [p for p in seen if len(seen[p]) == 1 and p in shifts]
    if not usable:
        return {}
    grads = torch.autograd.grad(loss, [shifts[p] for p in usable], create_graph=True, allow_unused=True)
    out_factors: dict[str, tuple[Tensor, Tensor]] = {}
    for p, g in zip(usable, grads):
        n, out = shifts[p].shape
        if g is None or not g.requires_grad:  # loss linear in this layer's output
            G = torch.zeros(n, out, out, dtype=torch.float64)
        else:
            cot = torch.eye(out, dtype=torch.float64).unsqueeze(1).expand(out, n, out)
            cols = torch.autograd.grad(g, shifts[p], grad_outputs=cot, retain_graph=True, is_grads_batched=True)[0]
            G = cols.permute(1, 2, 0)  # G[n, a, b]
        out_factors[p] = (G, seen[p][0])
    return out_factors


def _assemble(G: Tensor, A: Tensor, members: list[str]) -> Tensor:
    """``Σ_n G_n ⊗ ã_n ã_nᵀ`` over the block's coordinates, ``ã = a``, ``[a, 1]`` or ``1``."""
    attrs = [m.rpartition(".")[2] for m in members]
    if attrs == ["bias"]:
        return G.sum(dim=0)
    n, out = G.shape[0], G.shape[1]
    with_bias = "bias" in attrs
    At = torch.cat([A, torch.ones(n, 1, dtype=A.dtype)], dim=1) if with_bias else A
    k = At.shape[1]
    outer = (At.unsqueeze(2) * At.unsqueeze(1)).reshape(n, k * k)
    H = (G.reshape(n, out * out).T @ outer).reshape(out, out, k, k)
    H = H.permute(0, 2, 1, 3).reshape(out * k, out * k)
    if not with_bias:
        return H
    grid = torch.arange(out * k).reshape(out, k)
    index = {"weight": grid[:, : k - 1].reshape(-1), "bias": grid[:, k - 1]}
    idx = torch.cat([index[a] for a in attrs])
    return H[idx][:, idx]


def _chunks(n: int, k: int, size: int) -> list[slice]:
    step = max(1, _CHUNK_ELEMENTS // max(1, k * size))
    return [slice(s, min(n, s + step)) for s in range(0, n, step)]


def _attrs(members: Sequence[str]) -> list[str]:
    return [m.rpartition(".")[2] for m in members]


def _gauss_newton_dense(sj: SampleJacobians, path: str, members: Sequence[str]) -> Tensor:
    lj = sj.layers[path]
    attrs = _attrs(members)
    size = sum(lj.jacobian([a], slice(0, 1)).shape[2] for a in attrs)
    n, k = sj.e.shape
    H = torch.zeros(size, size, dtype=torch.float64)
    for rows in _chunks(n, k, size):
        J = lj.jacobian(attrs, rows)
        LJ = torch.bmm(sj.hess[rows], J)
        H += J.reshape(-1, size).T @ LJ.reshape(-1, size)
    return 0.5 * (H + H.T)


def linear_block_hessians(
    objective: Objective, batch: int, requests: dict[str, tuple[str, list[str]]]
) -> dict[str, Tensor]:
    """Dense ``H_bb`` of batch ``batch`` for blocks made of one layer's weight and/or bias.

    ``nn.Linear`` on 2-D inputs: the layer-output route, exactly
    ``∂²L/∂W_{ai}∂W_{bj} = Σ_n G_n[a,b] a_n[i] a_n[j]`` and ``∂²L/∂b∂b = Σ_n G_n`` (per-sample
    losses). ``nn.Conv2d`` (``groups=1``, any stride, padding, dilation) and other Linear inputs:
    the Gauss–Newton form ``Σ_n J_nᵀΛ_nJ_n`` (see the module docstring; exact for networks
    piecewise linear above the layer). The caller verifies ``H_bb w`` against a Hessian-vector
    product and falls back; blocks whose layer cannot be factored are left out of the result.
    """
    lin = {p for p, _ in requests.values() if type(objective.model.get_submodule(p)) is nn.Linear}
    factors = per_sample_factors(objective, batch, lin) if lin else {}
    out = {block: _assemble(*factors[path], members) for block, (path, members) in requests.items() if path in factors}
    rest = {block: r for block, r in requests.items() if block not in out}
    if rest:
        sj = sample_jacobians(objective, batch, {p for p, _ in rest.values()})
        if sj is not None:
            for block, (path, members) in rest.items():
                if path in sj.layers:
                    out[block] = _gauss_newton_dense(sj, path, members)
    return out


# ---------------------------------------------------------------------------- sums over the data


@dataclass
class GaussNewton:
    """Sums over the data for one block ``b`` of the Gauss–Newton form ``Σ_n J_nᵀΛ_nJ_n``.

    ``diagonal``: its diagonal; ``products``: it times the probe columns; ``grad = Σ_n J_nᵀe_n``
    (always ``g_b``); with ``factor=True``, ``B`` and ``s`` stacking ``C_nJ_n`` and ``s_n`` over
    the samples, where ``Λ_n = C_nᵀC_n`` and ``e_n = C_nᵀs_n``, so ``Σ J_nᵀΛ_nJ_n = BᵀB`` and
    ``Σ J_nᵀe_n = Bᵀs`` (``None`` if some ``Λ_n`` is indefinite or ``e_n ∉ range(Λ_n)``).
    """

    diagonal: Tensor
    products: Tensor
    grad: Tensor
    B: Tensor | None = None
    s: Tensor | None = None


def _sample_factor(hess: Tensor, e: Tensor) -> tuple[Tensor, Tensor, Tensor] | None:
    """Per sample ``C_n`` ``(k, k)`` with ``C_nᵀC_n = Λ_n``, ``s_n`` with ``C_nᵀs_n = e_n`` and the mask
    of the rows of ``C_n`` kept (eigenvalues of ``Λ_n`` above round-off); ``None`` if some ``Λ_n`` is
    indefinite beyond round-off or ``e_n`` leaves ``range(Λ_n)`` (both judged against the largest
    ``|Λ|``, ``|e|`` over the data)."""
    mu, V = torch.linalg.eigh(hess)
    # round-off of Λ_n is relative to the largest entries over the data, not to Λ_n's own size (a
    # confident sample's Λ_n = diag(p) − ppᵀ is a difference of O(1) terms), hence one global cut
    cut = 64 * torch.finfo(torch.float64).eps * float(mu.abs().max()) if mu.numel() else 0.0
    if bool((mu < -cut).any()):
        return None
    keep = mu > cut
    root = torch.where(keep, mu.clamp(min=0.0).sqrt(), torch.zeros_like(mu))
    inv = torch.where(keep, 1.0 / torch.where(keep, root, torch.ones_like(root)), torch.zeros_like(mu))
    C = root.unsqueeze(2) * V.transpose(1, 2)
    coeff = torch.einsum("nkj,nk->nj", V, e)
    resid = e - torch.einsum("nkj,nj->nk", V, torch.where(keep, coeff, torch.zeros_like(coeff)))
    if float(resid.abs().max()) > 1e-9 * max(float(e.abs().max()), 1e-300):
        return None
    return C, inv * coeff, keep


def gauss_newton(
    objective: Objective,
    blocks: dict[str, list[str]],
    *,
    probes: dict[str, Tensor] | None = None,
    factor: bool = False,
    params: dict[str, Tensor] | None = None,
) -> dict[str, GaussNewton]:
    """:class:`GaussNewton` sums for every block that is one factorable layer's weight and/or bias in
    every batch (others are left out). ``probes[b]`` is an ``(size, m)`` matrix of vectors to
    multiply (e.g. ``w_b`` and a random vector, for the caller's check against exact
    Hessian-vector products). Work is chunked over samples.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> X, y = torch.randn(5, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1])
    >>> obj = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> gn = gauss_newton(obj, {"2.weight": ["2.weight"]}, factor=True)["2.weight"]
    >>> bool(torch.allclose(gn.B.T @ gn.s, gn.grad, atol=1e-14)), tuple(gn.B.shape)  # rank Λ_n = k − 1 = 1
    (True, (5, 6))
    """
    probes = probes or {}
    paths = {b: linear_module_of(objective.model, m) for b, m in blocks.items()}
    paths = {b: p for b, p in paths.items() if p is not None}
    acc: dict[str, dict[str, list[Tensor] | Tensor]] = {}
    alive = set(paths)
    for i in range(len(objective.batches)):
        sj = sample_jacobians(objective, i, set(paths.values()), params)
        if sj is None:
            return {}
        alive &= {b for b, p in paths.items() if p in sj.layers}
        fac = _sample_factor(sj.hess, sj.e) if factor else None
        for b in list(alive):
            lj, attrs = sj.layers[paths[b]], _attrs(blocks[b])
            n, k = sj.e.shape
            size = lj.jacobian(attrs, slice(0, 1)).shape[2]
            V = probes.get(b, torch.zeros(size, 0, dtype=torch.float64))
            a = acc.setdefault(b, {"diag": torch.zeros(size, dtype=torch.float64),
                                   "prod": torch.zeros(size, V.shape[1], dtype=torch.float64),
                                   "grad": torch.zeros(size, dtype=torch.float64), "B": [], "s": []})
            for rows in _chunks(n, k, size):
                J = lj.jacobian(attrs, rows)
                LJ = torch.bmm(sj.hess[rows], J)
                a["diag"] += (J * LJ).sum(dim=(0, 1))
                a["grad"] += torch.einsum("nkm,nk->m", J, sj.e[rows])
                if V.shape[1]:
                    a["prod"] += torch.einsum("nkm,nkv->mv", J, torch.einsum("nkj,jv->nkv", LJ, V))
                if fac is not None:
                    keep = fac[2][rows]
                    a["B"].append(torch.bmm(fac[0][rows], J)[keep])
                    a["s"].append(fac[1][rows][keep])
        if factor and fac is None:
            factor = False
            for a in acc.values():
                a["B"], a["s"] = [], []
    out = {}
    for b in alive:
        a = acc[b]
        B = torch.cat(a["B"]) if factor and a["B"] else None
        s = torch.cat(a["s"]) if factor and a["s"] else None
        out[b] = GaussNewton(a["diag"], a["prod"], a["grad"], B, s)
    return out
