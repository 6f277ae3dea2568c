"""Exact ``wᵀH_bbw`` and ``wᵀH_bb⁺w`` of any network that is piecewise affine in a block: the Gram route.

If the outputs ``f_n`` of sample ``n`` are affine in block ``b`` near ``θ`` (Linear, Conv, (leaky)
ReLU, pooling, eval-mode BatchNorm, residual additions, flatten), their second derivative inside the
block vanishes and, with ``J_n = ∂f_n/∂w_b`` and ``S_n = ∂²L/∂f_n²`` (the output Hessian of the loss,
block-diagonal over samples when the loss is a sum of per-sample terms)::

    H_bb = Σ_n J_nᵀ S_n J_n + Σ_n Σ_k (∂L/∂f_nk) ∇²_bb f_nk = Σ_n J_nᵀ A_nᵀ A_n J_n = BᵀB,

with ``S_n = A_nᵀA_n`` (``r`` rows: ``C − 1`` for softmax cross-entropy, where
``S = diag(p) − ppᵀ``; ``C`` for MSE, where ``S = (2/N)·I`` under mean reduction) and ``B`` stacking
the rows ``A_nJ_n`` (``m = N·r`` of them). With ``u = Bw`` and ``G = BBᵀ`` (``m × m``), ``G`` and
``H_bb`` share their non-zero spectrum (``Bᵀq_i/√λ_i`` are ``H``'s eigenvectors), so::

    wᵀHw = ‖u‖²,      wᵀH⁺_τ w = Σ_{λ_i(G) > τ} (q_iᵀu)² / λ_i(G)²,      τ = rtol·λ_max(G),

exactly, for any block size, at the cost of an ``m × m`` eigenproblem (a block with ``n_b ≤ m``
forms ``H = BᵀB`` instead and uses ``Σ (u_iᵀw)²/λ_i``; same kept set). ``S_n`` comes from autograd
on the loss (``C`` Hessian-vector products in the outputs, checked to couple no samples), so batch
weights and the reduction are built in. ``B`` is computed per sample (one forward of a batch of one,
exact for eval-mode models, then ``r`` backward passes restricted to a chunk of blocks); chunks (a
block's columns are split when it alone is too big) keep the rows held at once under
``memory_budget`` bytes.

Before a block's value is trusted, :func:`gram_forms` proves the route applies there: on the first
``check_samples`` samples the outputs' second directional derivative along ``w_b`` and along two random
in-block directions (projected on a random Gaussian ``v``: :func:`second_derivative_ratios`) is at most
``1e-8`` of the first derivative,
and ``‖u‖²`` reproduces autograd's ``wᵀHw`` (all samples) to ``1e-8`` relative. A block that fails
gets a reason instead of a form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, vjp, vmap

from coupled_curvature.numeric.core.inputs import Batch, checked_loss
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.linalg.pinv import cutoff_sum, symmetric_spectrum

#: the rows ``B`` held at once stay under this many bytes by default
MEMORY_BUDGET = 2 * 2**30
#: the second-derivative check runs on this many samples of the first batch by default
CHECK_SAMPLES = 4
SECOND_DERIVATIVE_RTOL = 1e-8
#: per-sample Jacobian rows computed in one vmapped call (bounds the backward's intermediates)
SAMPLES_PER_CALL = 64
WHW_RTOL = 1e-8


@dataclass(frozen=True)
class GramForm:
    """One block by the Gram route: ``value = wᵀH⁺_τw``, ``wHw = ‖Bw‖²``; ``side`` is ``"gram"``
    (``m × m`` matrix ``G = BBᵀ``) or ``"factor"`` (``n_b × n_b`` matrix ``BᵀB``, when ``n_b ≤ m``);
    ``second_derivative`` the largest ``‖f''‖/‖f'‖`` the check found (``None`` if forced)."""

    value: float
    wHw: float
    rank: int
    cutoff: float
    max_abs_eig: float
    min_kept_rel_eig: float | None
    noise_kept: int
    side: str
    rows: int
    second_derivative: float | None
    evals: np.ndarray
    weights: np.ndarray


@dataclass(frozen=True)
class GramResult:
    """``form`` when the route applies to the block, else ``reason`` says why not."""

    form: GramForm | None
    reason: str | None


def output_factors(objective: Objective, batch: int) -> tuple[Tensor, Tensor]:
    """``(F, A)``: batched outputs ``F`` (N, K) and factors ``A`` (N, r, K) with ``A_nᵀA_n = S_n``.

    ``S_n[:, k]`` is the Hessian-vector product of ``weight·loss_fn(F, y)`` in ``F`` along class
    ``k`` of every sample at once; a second product with random signs per sample checks that the
    loss couples no samples. ``A_n = diag(√μ) Vᵀ`` over the ``r`` largest eigenvalues of ``S_n``.
    Raises ``ValueError`` (caught by :func:`gram_forms`) when samples couple or ``S_n`` is indefinite.

    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> net = nn.Linear(2, 3).double(); X, y = torch.randn(4, 2, dtype=torch.float64), torch.tensor([0, 1, 2, 0])
    >>> ob = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> F, A = output_factors(ob, 0); tuple(A.shape)  # C − 1 = 2 rows per sample
    (4, 2, 3)
    >>> p = torch.softmax(F, 1)[0]; S = (torch.diag(p) - torch.outer(p, p)) / 4
    >>> bool(torch.allclose(A[0].T @ A[0], S, atol=1e-15))
    True
    """
    b: Batch = objective.batches[batch]
    with torch.no_grad():
        out = functional_call(objective.model, {**objective.values, **objective.buffers}, (b.X,))
    if not isinstance(out, Tensor) or out.dim() < 1 or out.shape[0] != b.X.shape[0]:
        raise ValueError("the model's output is not one tensor with the samples along dimension 0")
    n, shape = out.shape[0], out.shape
    F = out.detach().reshape(n, -1).requires_grad_(True)
    k = F.shape[1]
    if k > 512:
        raise ValueError(f"the model has {k} outputs per sample (more than 512 backward passes per sample)")
    with torch.enable_grad():
        loss = b.weight * checked_loss(objective.loss_fn(F.reshape(shape), b.y), batch)
        (grad,) = torch.autograd.grad(loss, F, create_graph=True)
        eye = torch.eye(k, dtype=F.dtype).unsqueeze(1).expand(k, n, k)
        signs = torch.randint(0, 2, (n, 1), generator=torch.Generator().manual_seed(0)).to(F.dtype) * 2 - 1
        dirs = torch.cat([eye, eye * signs.unsqueeze(0)])
        (cols,) = torch.autograd.grad(grad, F, dirs, is_grads_batched=True) if grad.requires_grad else (
            torch.zeros(2 * k, n, k, dtype=F.dtype),)
    S, S_signed = cols[:k].permute(1, 2, 0), cols[k:].permute(1, 2, 0)  # S[n, :, j] = S_n e_j
    scale = float(S.abs().max()) or 1.0
    if float((S_signed - S * signs.unsqueeze(2)).abs().max()) > 1e-12 * scale:
        raise ValueError("the loss couples samples (its output Hessian is not block-diagonal over samples)")
    S = (S + S.transpose(1, 2)) / 2
    mu, V = torch.linalg.eigh(S)
    top = mu.abs().amax(dim=1, keepdim=True).clamp(min=1e-300)
    if bool((mu < -1e-10 * top).any()):
        raise ValueError("the loss's output Hessian is indefinite, so H_bb is not BᵀB")
    r = max(1, int((mu > 1e-13 * top).sum(dim=1).max()))
    A = mu[:, -r:].clamp(min=0).sqrt().unsqueeze(2) * V[:, :, -r:].transpose(1, 2)
    return out.detach().reshape(n, -1), A


def second_derivative_ratios(objective: Objective, partition: Mapping[str, Sequence[str]], blocks: Sequence[str],
                             X: Tensor, seed: int = 0) -> dict[str, float]:
    """Per block: ``max_d |vᵀ∂²_t f(θ + t·d)| / (‖v‖·‖∂_t f(θ + t·d)‖)`` at ``t = 0`` over ``d = w_b``
    and two random in-block directions (each scaled to ``‖w_b‖``), on inputs ``X``, for one random
    Gaussian projection ``v`` of the outputs: 0 when ``f`` is affine in the block, and, when it is
    not, non-zero with probability one.

    One graph of ``s = vᵀf(θ)`` with ``∇s`` retained (``create_graph=True``); per block one batched
    backward of ``∇_b s · d`` into ``(w_b, v)`` gives ``∇²_bb s · d`` (so ``vᵀf''[d, d] = dᵀ∇²_bb s d``)
    and ``J_b d`` at once. (Forward-over-forward ``jvp`` of ``jvp`` gives the same numbers but cost about
    ten forward passes per direction through float64 convolutions.)

    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> X = torch.randn(3, 2, dtype=torch.float64)
    >>> for act in (nn.ReLU(), nn.Tanh()):
    ...     _ = torch.manual_seed(0); net = nn.Sequential(nn.Linear(2, 4), act, nn.Linear(4, 2)).double()
    ...     ob = Objective(net, nn.MSELoss(), prepare_batches((X, X), nn.MSELoss()))
    ...     r = second_derivative_ratios(ob, {"0.weight": ["0.weight"], "2.weight": ["2.weight"]}, ["0.weight", "2.weight"], X)
    ...     print(type(act).__name__, r["0.weight"] > 1e-8, r["2.weight"] > 1e-8)
    ReLU False False
    Tanh True False
    """
    gen = torch.Generator().manual_seed(seed)
    names = [m for b in blocks for m in partition[b]]
    leaves = {n: v.clone().requires_grad_(n in names) for n, v in objective.values.items()}
    with torch.enable_grad():
        out = functional_call(objective.model, {**leaves, **objective.buffers}, (X,))
        v = torch.randn(out.shape, generator=gen, dtype=out.dtype).requires_grad_(True)
        grads = dict(zip(names, torch.autograd.grad((v * out).sum(), [leaves[m] for m in names], create_graph=True,
                                                    allow_unused=True)))
    ratios = {}
    for block in blocks:
        members = partition[block]
        w = torch.cat([objective.values[m].reshape(-1) for m in members])
        norm = float(w.norm()) or 1.0
        dirs = [w] + [torch.randn(w.shape, generator=gen, dtype=w.dtype) for _ in range(2)]
        D = torch.stack([d * (norm / (float(d.norm()) or 1.0)) for d in dirs])
        live = [m for m in members if grads[m] is not None and grads[m].requires_grad]
        if not live:  # the outputs do not depend on the block at all
            ratios[block] = 0.0
            continue
        offsets = dict(zip(members, torch.split(D, [objective.values[m].numel() for m in members], dim=1)))
        cot = [offsets[m].reshape((3, *objective.values[m].shape)) for m in live]
        res = torch.autograd.grad([grads[m] for m in live], [leaves[m] for m in members] + [v], cot, retain_graph=True,
                                  allow_unused=True, is_grads_batched=True)
        hv = torch.cat([torch.zeros(3, objective.values[m].numel(), dtype=w.dtype) if r is None else r.reshape(3, -1)
                        for m, r in zip(members, res[:-1])], dim=1)
        second = (hv * D).sum(dim=1).abs()
        first = float(v.detach().norm()) * res[-1].reshape(3, -1).norm(dim=1)
        ratio = torch.where(first > 0, second / first.clamp(min=1e-300),
                            torch.where(second > 0, torch.full_like(second, float("inf")), torch.zeros_like(second)))
        ratios[block] = float(ratio.max())
    return ratios


def _rows(objective: Objective, names: Sequence[str], x: Tensor, A: Tensor) -> dict[str, Tensor]:
    """Per sample ``n`` of ``x``: ``A_n J_n`` for the parameters ``names`` -> {name: (N, r, numel)}.

    One forward of a batch of one per sample, then ``r`` vector-Jacobian products (``vmap``)."""
    chunk = {m: objective.values[m] for m in names}
    rest = {n: v for n, v in objective.values.items() if n not in chunk}

    def one(xn, an):
        def f(p):
            return functional_call(objective.model, {**rest, **p, **objective.buffers}, (xn.unsqueeze(0),)).reshape(-1)

        _, pull = vjp(f, chunk)
        return {m: t.reshape(an.shape[0], -1) for m, t in vmap(pull)(an)[0].items()}

    try:
        return vmap(one)(x, A)
    except (RuntimeError, ValueError, NotImplementedError):  # a model vmap cannot batch: one sample at a time
        parts = [one(x[i], A[i]) for i in range(x.shape[0])]
        return {m: torch.stack([p[m] for p in parts]) for m in names}


@dataclass
class _Acc:
    """Per block: ``G`` (or ``BᵀB`` on the factor side) and ``u = Bw``, summed over chunks."""

    side: str
    mat: Tensor
    u: list[Tensor]


def gram_forms(
    objective: Objective,
    partition: Mapping[str, Sequence[str]],
    wHw: Mapping[str, float] | None,
    *,
    rtol: float,
    memory_budget: int = MEMORY_BUDGET,
    check_samples: int = CHECK_SAMPLES,
    force: bool = False,
) -> dict[str, GramResult]:
    """``wᵀH_bb⁺w = Σ_{λ_i(G) > τ} (q_iᵀu)²/λ_i(G)²`` and ``wᵀH_bbw = ‖u‖²`` (``u = B_bw``,
    ``G = B_bB_bᵀ``, ``τ = rtol·λ_max``) for every block of ``partition`` where the route applies.

    ``wHw`` holds autograd's ``wᵀH_bbw`` per block (the check ``‖u‖² = wᵀHw``); ``force=True`` skips
    both checks (a negative control: on a network that is not piecewise affine the value is wrong).
    A block whose checks fail, or a model the route cannot take, gets a :class:`GramResult` with a
    ``reason``.

    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> torch.manual_seed(0); net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    <torch._C.Generator object at ...>
    >>> X, y = torch.randn(5, 3, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1])
    >>> ob = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> res = gram_forms(ob, {"0.weight": ["0.weight"]}, None, rtol=1e-10, force=True)
    >>> res["0.weight"].form.side, res["0.weight"].form.rows  # m = N·(C − 1) = 5 < 12 parameters
    ('gram', 5)
    """
    names = list(partition)
    bad = [n for n, m in objective.model.named_modules()
           if m.training and isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd))]
    if bad:
        return _refuse(names, f"module {bad[0]!r} is in train mode (samples are coupled through the batch)")
    try:
        factors = [output_factors(objective, i) for i in range(len(objective.batches))]
    except ValueError as e:
        return _refuse(names, str(e))
    out: dict[str, GramResult] = {}
    ratios: dict[str, float | None] = {}
    if force:
        ratios = dict.fromkeys(names)
    else:
        try:
            ratios = second_derivative_ratios(objective, partition, names, objective.batches[0].X[:check_samples])
        except (RuntimeError, NotImplementedError) as e:
            return _refuse(names, f"the second-derivative check failed to run ({str(e).splitlines()[0]})")
        for block, ratio in ratios.items():
            if not ratio <= SECOND_DERIVATIVE_RTOL:
                out[block] = GramResult(None, f"the outputs are not affine in the block (|vᵀf''|/‖v‖‖f'‖ = "
                                              f"{ratio:.2e} > {SECOND_DERIVATIVE_RTOL:g} along w or a random direction)")
    todo = [b for b in names if b not in out]
    try:
        accs = _assemble(objective, partition, todo, factors, memory_budget)
    except (RuntimeError, ValueError, NotImplementedError) as e:
        for b in todo:
            out[b] = GramResult(None, f"the per-sample Jacobians could not be computed ({str(e).splitlines()[0]})")
        return {b: out[b] for b in names}
    for block in todo:
        acc = accs[block]
        u = torch.cat(acc.u)
        w = torch.cat([objective.values[m].reshape(-1) for m in partition[block]])
        u_sq = float(u @ u)
        if acc.side == "gram":
            lam, c = symmetric_spectrum(acc.mat, u)
            pf = cutoff_sum(lam, c, rtol, power=2)
        else:
            lam, c = symmetric_spectrum(acc.mat, w)
            pf = cutoff_sum(lam, c, rtol, power=1)
        if not force and wHw is not None and abs(u_sq - wHw[block]) > WHW_RTOL * max(abs(u_sq), abs(wHw[block]), 1e-300):
            out[block] = GramResult(None, f"‖Bw‖² = {u_sq:.10g} does not reproduce autograd's wᵀHw = "
                                          f"{wHw[block]:.10g} (the network is not piecewise affine in the block)")
            continue
        out[block] = GramResult(GramForm(pf.value, u_sq, pf.rank, pf.cutoff, pf.max_abs_eig, pf.min_kept_rel_eig,
                                         pf.noise_kept, acc.side, u.numel(), ratios[block], lam, c), None)
    return {b: out[b] for b in names}


def _refuse(names: Sequence[str], reason: str) -> dict[str, GramResult]:
    return {b: GramResult(None, reason) for b in names}


def _assemble(objective: Objective, partition: Mapping[str, Sequence[str]], blocks: Sequence[str],
              factors: Sequence[tuple[Tensor, Tensor]], budget: int) -> dict[str, _Acc]:
    """``G = BBᵀ`` (or ``BᵀB`` when ``n_b ≤ m``) and ``u = Bw`` of every block, in memory-bounded chunks."""
    m = sum(A.shape[0] * A.shape[1] for _, A in factors)
    per_col = 8 * m
    units: list[tuple[str, int, int]] = []  # (block, first column, stop) on the gram side
    accs: dict[str, _Acc] = {}
    for block in blocks:
        n_b = sum(objective.values[p].numel() for p in partition[block])
        if n_b <= m:
            accs[block] = _Acc("factor", torch.zeros(n_b, n_b, dtype=torch.float64), [])
            units.append((block, 0, n_b))
        else:
            accs[block] = _Acc("gram", torch.zeros(m, m, dtype=torch.float64), [])
            step = max(1, budget // per_col)
            units.extend((block, s, min(n_b, s + step)) for s in range(0, n_b, step))
    chunks: list[list[tuple[str, int, int]]] = [[]]
    used = 0
    for unit in units:
        cost = (unit[2] - unit[1]) * per_col
        if chunks[-1] and used + cost > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(unit)
        used += cost
    for chunk in chunks:
        params = sorted({p for b, _, _ in chunk for p in partition[b]}, key=list(objective.values).index)
        cols: dict[tuple[str, int, int], list[Tensor]] = {u: [] for u in chunk}
        for (_, A), batch in zip(factors, objective.batches):
            n, r = A.shape[0], A.shape[1]
            step = max(1, min(SAMPLES_PER_CALL // r, budget // max(1, 8 * r * sum(objective.values[p].numel() for p in params))))
            for s in range(0, n, step):
                rows = _rows(objective, params, batch.X[s:s + step], A[s:s + step])
                for unit in chunk:
                    block, lo, hi = unit
                    R = torch.cat([rows[p] for p in partition[block]], dim=2)[:, :, lo:hi]
                    cols[unit].append(R.reshape(-1, hi - lo))
                del rows
        for unit in chunk:
            block, lo, hi = unit
            B = torch.cat(cols.pop(unit))
            w = torch.cat([objective.values[p].reshape(-1) for p in partition[block]])[lo:hi]
            acc = accs[block]
            if acc.side == "factor":
                acc.mat += _gram_of_columns(B)
                acc.u.append(B @ w)
            else:
                acc.mat += B @ B.T
                acc.u = [B @ w + (acc.u[0] if acc.u else 0.0)]
            del B
    return accs


def _gram_of_columns(B: Tensor) -> Tensor:
    """``BᵀB``: BLAS ``dsyrk`` (half the flops of a product) for wide blocks, a product otherwise."""
    if B.shape[1] < 512:
        return B.T @ B
    from scipy.linalg.blas import dsyrk

    low = torch.from_numpy(dsyrk(1.0, B.numpy().T, trans=0, lower=1))  # Bᵀ is B's memory read column-major
    return low + torch.tril(low, -1).T


__all__ = ["CHECK_SAMPLES", "GramForm", "GramResult", "MEMORY_BUDGET", "gram_forms", "output_factors",
           "second_derivative_ratios"]
