"""Curvature as an operator: a block's Hessian as a SciPy ``LinearOperator``, and ``D``, ``D⁺`` of a block
measured with a curvature operator the caller supplies (a Gauss–Newton, Fisher or K-FAC operator).

The seam runs both ways. :func:`block_hessian` hands the exact ``H_bb`` out as
``scipy.sparse.linalg.LinearOperator`` (``v ↦ H_bb v``, one Hessian-vector product per batch on graphs
built once), which SciPy's solvers and any library speaking that interface take. ``diagnose(...,
curvature={block: G})`` takes a symmetric operator ``G`` in, in place of ``H_bb`` for that block::

    D_G  = (wᵀGw / wᵀw) / ‖g‖²,   D⁺_G = (wᵀG⁺_τw / wᵀw)·‖g‖²,   τ = pinv_rtol·max|λ(G)|

with ``g`` the block's own gradient and ``w`` its value. ``wᵀG⁺w`` comes from the eigendecomposition of
``G`` assembled column by column (blocks up to ``max_dense``) or from Lanczos quadrature (above). The
record says which curvature was used (``BlockDiagnosis.curvature``, and ``wHw_route = "external"``).
T3's invariance holds for ``D_G`` whenever ``G`` transforms like the Hessian under the symmetry
(``G → A⁻ᵀGA⁻¹``), as the Gauss–Newton matrix does under layer rescaling; whether a given operator does is
the caller's to know.

Accepted operators (an ``(n, n)`` shape is required, ``n`` the block's entry count): a ``torch.Tensor``
or ``numpy.ndarray`` matrix, a SciPy ``LinearOperator``, or any object with ``shape`` whose ``op @ v`` takes a
torch vector (the PyTorch linear operators of curvlinops, for instance). The flattening order is the
block's: its members in order, each flattened row-major.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.derived import derived_quantities
from coupled_curvature.numeric.core.hvp import block_vjp, math_attention
from coupled_curvature.numeric.core.results import BlockDiagnosis, Diagnosis, missing_note
from coupled_curvature.numeric.core.routes import Plan, SpectralRoute, WHwRoute
from coupled_curvature.numeric.linalg.krylov_quadrature import krylov_pinv_form
from coupled_curvature.numeric.linalg.pinv import pinv_quadratic_form

__all__ = ["block_hessian", "external_matvec", "check_curvature", "skip_spectral", "with_curvature"]

F64 = torch.float64
#: relative asymmetry ``max|G − Gᵀ| / max|G|`` above which an assembled external operator is refused
ASYMMETRY = 1e-8


def block_hessian(model: nn.Module, loss_fn: Callable, data: object, block: str, **options: object) -> LinearOperator:
    """``H_bb`` of block ``block`` as a SciPy ``LinearOperator``: ``v ↦ Σ_batches ∂(g_bᵀv)/∂w_b`` (float64).

    The model is copied to float64 (the user's model is never touched) and the graphs of every batch are
    built once and kept, so each product is one backward pass per batch. ``options`` are
    :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`'s keyword options that describe the
    model and data (``blocks``, ``reduction``, ``frozen``, ``output``, ``target``, ``allow_train_mode``,
    ``device``, ``gauge``); ``block`` names one of the blocks ``diagnose`` would report.

    Args:
        model: the network, as for :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`
            (the operator runs on a float64 copy).
        loss_fn: the loss ``loss_fn(output, target)`` whose Hessian block is handed out, as for ``diagnose``.
        data: the batches the Hessian sums over, as for ``diagnose``.
        block: the name of one block, as :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` reports it.
        **options: the run settings that describe the model and the data (``blocks``, ``reduction``, ``frozen``,
            ``output``, ``target``, ``allow_train_mode``, ``device``, ``gauge``).

    Returns:
        LinearOperator: a SciPy operator of shape ``(n_b, n_b)``, float64 and symmetric, ``v ↦ H_bb v``.

    Raises:
        InvalidInputError: an unknown block name, a setting out of range, or data the model cannot take.
        TrainModeError: the model is in training mode and ``allow_train_mode`` is off.

    See also:
        :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` with ``curvature=`` (the other direction: an
        external operator in place of ``H_bb``).

    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    >>> X, y = torch.randn(16, 3, dtype=torch.float64), torch.randn(16, 2, dtype=torch.float64)
    >>> H = block_hessian(net, nn.MSELoss(), (X, y), "0.weight")
    >>> H.shape
    (12, 12)
    >>> w = net[0].weight.detach().reshape(-1).numpy()
    >>> from coupled_curvature.numeric.core.diagnostics import diagnose
    >>> bool(np.isclose(w @ (H @ w), diagnose(net, nn.MSELoss(), (X, y), inverse=False)["0.weight"].wHw))
    True
    """
    from coupled_curvature.numeric.core.options import run_options
    from coupled_curvature.numeric.core.planning import plan

    if not isinstance(block, str):
        raise InvalidInputError(f"block must be a block name (str), got {type(block).__name__}")
    p = plan(model, loss_fn, data, run_options(inverse=False, **options))
    if block not in p.partition:
        raise InvalidInputError(f"no block {block!r}; blocks are: {', '.join(p.partition)}")
    members = p.partition[block]
    with math_attention():
        graphs = list(p.objective.graphs())
    leaves0 = graphs[0][0]
    sizes = [leaves0[m].numel() for m in members]
    n, device = sum(sizes), leaves0[members[0]].device

    def matvec(v: np.ndarray) -> np.ndarray:
        flat = torch.as_tensor(np.asarray(v, dtype=np.float64).reshape(-1), device=device)
        total = torch.zeros(n, dtype=F64, device=device)
        for leaves, grads in graphs:
            cot = [c.reshape(leaves[m].shape) for c, m in zip(torch.split(flat, sizes), members)]
            total += torch.cat([t.reshape(-1) for t in block_vjp(grads, leaves, members, cot, False)])
        return total.cpu().numpy()

    return LinearOperator((n, n), matvec=matvec, rmatvec=matvec, dtype=np.float64)


def external_matvec(op: object, n: int, block: str) -> Callable[[Tensor], Tensor]:
    """``v ↦ G v`` in float64 for a supplied curvature operator ``op`` of shape ``(n, n)`` (checked here).

    >>> mv = external_matvec(np.diag([1.0, 2.0]), 2, "b")
    >>> mv(torch.ones(2, dtype=torch.float64)).tolist()
    [1.0, 2.0]
    >>> external_matvec(np.eye(3), 2, "b")
    Traceback (most recent call last):
    ...
    coupled_curvature.base.errors.InvalidInputError: curvature for block 'b' has shape (3, 3); the block has 2 entries, so pass a (2, 2) operator
    """
    shape = getattr(op, "shape", None)
    try:
        dims = tuple(int(s) for s in shape) if shape is not None else None
    except TypeError:
        dims = None
    if dims != (n, n):
        raise InvalidInputError(f"curvature for block {block!r} has shape {dims if dims is not None else shape}; "
                                f"the block has {n} entries, so pass a ({n}, {n}) operator")
    if isinstance(op, Tensor):
        M = op.detach().to(F64)
        return lambda v: M.to(v.device) @ v
    if isinstance(op, (np.ndarray, LinearOperator)):
        return lambda v: torch.as_tensor(np.asarray(op @ v.cpu().numpy(), dtype=np.float64).reshape(-1),
                                         device=v.device)
    if not hasattr(op, "__matmul__"):
        raise InvalidInputError(f"curvature for block {block!r}: {type(op).__name__} has no 'op @ v'; pass a tensor, "
                                "an array, a scipy LinearOperator or a torch linear operator")
    dtype, device = getattr(op, "dtype", F64), getattr(op, "device", None)

    def mv(v: Tensor) -> Tensor:
        out = op @ v.to(dtype=dtype, device=device if device is not None else v.device)  # type: ignore[operator]
        return torch.as_tensor(out).to(dtype=F64, device=v.device).reshape(-1)

    return mv


def check_curvature(curvature: object, blocks: Mapping[str, object] | None) -> dict[str, object]:
    """``curvature`` as ``{block: operator}``, every key a block of the run (``blocks=None``: the type only)."""
    if curvature is None:
        return {}
    if not isinstance(curvature, Mapping) or not all(isinstance(k, str) for k in curvature):
        raise InvalidInputError("curvature must map block names to operators, e.g. {'0.weight': G}")
    if blocks is None:
        return dict(curvature)
    unknown = [k for k in curvature if k not in blocks]
    if unknown:
        raise InvalidInputError(f"curvature names {unknown[0]!r}, which is not a block; blocks are: {', '.join(blocks)}")
    return dict(curvature)


def skip_spectral(p: Plan, names: list[str]) -> None:
    """Plan no spectral work on ``H_bb`` for the blocks whose curvature is supplied (their ``D⁺`` comes from it)."""
    for name in names:
        p.blocks[name] = replace(p.blocks[name], spectral=SpectralRoute.NONE,
                                 spectral_reason="a supplied curvature operator stands for H_bb",
                                 fallback=SpectralRoute.NONE)


def with_curvature(d: Diagnosis, p: Plan, curvature: Mapping[str, object]) -> Diagnosis:
    """``d`` with each block of ``curvature`` measured with its operator ``G`` instead of ``H_bb``."""
    if not curvature:
        return d
    records = [rec if rec.name not in curvature else _external_record(rec, p, curvature[rec.name]) for rec in d]
    meta = {**d.meta, "curvature": {b: _kind(op) for b, op in curvature.items()}}
    notes = [*d.notes, f"{len(curvature)} block(s) measured with a supplied curvature operator instead of the "
             "Hessian: BlockDiagnosis.curvature names it"]
    return Diagnosis(records, meta, notes=notes, frozen=d.frozen, skipped=d.skipped)


def _kind(op: object) -> str:
    return f"external: {type(op).__name__}"


def _external_record(rec: BlockDiagnosis, p: Plan, op: object) -> BlockDiagnosis:
    o = p.options
    w = torch.cat([p.objective.values[m].detach().reshape(-1) for m in p.partition[rec.name]]).to(F64)
    mv = external_matvec(op, w.numel(), rec.name)
    Gw = mv(w)
    if not bool(torch.isfinite(Gw).all()):
        raise InvalidInputError(f"curvature for block {rec.name!r}: G·w holds non-finite values")
    wGw = float(w @ Gw)
    fresh: list[str] = []
    rayleigh, coupled, _ = derived_quantities(rec.w_sq, rec.g_sq, wGw, None, fresh)
    gone = missing_note(rec.dplus_missing) if rec.dplus_missing is not None else None
    notes = [n for n in rec.notes if n != gone] + [n for n in fresh if n not in rec.notes]
    if rec.g_at_rounding:
        coupled = None
    out = replace(rec, wHw=wGw, rayleigh=rayleigh, coupled=coupled, wHpinvw=None, inverse_coupled=None, rank=None,
                  cutoff=None, min_kept_rel_eig=None, noise_kept=None, dplus_missing=None, notes=tuple(notes),
                  wHw_route=WHwRoute.EXTERNAL, wHw_reason="wᵀ(G w) from the supplied operator",
                  curvature=_kind(op), method=SpectralRoute.NONE, method_reason="D⁺ not asked for")
    if not o.inverse or rec.g_at_rounding:
        return out
    n = w.numel()
    if n <= o.max_dense:
        G = torch.stack([mv(e) for e in torch.eye(n, dtype=F64, device=w.device)], dim=1)
        scale = float(G.abs().max())
        if scale > 0 and float((G - G.T).abs().max()) > ASYMMETRY * scale:
            raise InvalidInputError(f"curvature for block {rec.name!r} is not symmetric (max|G − Gᵀ|/max|G| = "
                                    f"{float((G - G.T).abs().max()) / scale:.1e}); pass a symmetric operator")
        form = pinv_quadratic_form(G, w, o.pinv_rtol)
        out = out.with_dplus(form.exact, form.rank, form.min_kept_rel_eig,
                             "D⁺ from the eigendecomposition of the supplied operator")
        return replace(out, cutoff=form.cutoff, noise_kept=form.noise_kept, method=SpectralRoute.DENSE,
                       method_reason=f"the supplied operator assembled densely ({n} ≤ max_dense = {o.max_dense})")
    kf = krylov_pinv_form(mv, w, rtol=o.pinv_rtol, max_iter=o.krylov_max_iter, tol=o.krylov_tol, Hw=Gw)
    out = out.with_dplus(kf.exact, kf.rank, None, "D⁺ by Lanczos quadrature on the supplied operator")
    out = replace(out, cutoff=kf.cutoff, method=SpectralRoute.KRYLOV, krylov_iterations=kf.iterations,
                  krylov_converged=kf.converged, krylov_error=kf.error_estimate, ritz_extremes=kf.ritz_extremes,
                  method_reason=f"the supplied operator is above max_dense = {o.max_dense}: Lanczos quadrature")
    return out if kf.converged else out.unconverged(kf.iterations, kf.error_estimate)
