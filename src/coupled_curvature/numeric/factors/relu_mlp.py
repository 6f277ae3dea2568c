"""Exact per-sample factors ``H_bb = BᵀB`` of ReLU MLPs under cross-entropy, and ``D⁺`` from them.

For an ``nn.Sequential`` of Linear and (leaky) ReLU layers the loss is piecewise linear in each
layer's parameters, so every diagonal Hessian block is its Gauss–Newton block and factors through
per-sample Jacobians. ``wᵀH⁺w`` then comes from an eigendecomposition of size ``min(n_b, N(C − 1))``
(:func:`factor_pinv_forms`), and :func:`with_factor_dplus` puts the engine's Gram-route ``D⁺`` into a :class:`Diagnosis` after
checking ``‖Bw‖² = wᵀHw`` against it. The factors come from the general engine (the output
factors of :mod:`.outputs`, the layer rows of :mod:`.layers`) and the forms go through
:mod:`.forms`, as the Gram route's do; what is particular here is the Gram matrix of a Linear
weight, ``K = (PPᵀ) ∘ (aaᵀ)``, formed without forming ``B``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.core.inputs import float64_copy, prepare_batches
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.core.results import Diagnosis
from coupled_curvature.numeric.factors.forms import factor_side, factor_spectrum, reproduces_wHw
from coupled_curvature.numeric.factors.layers import layer_rows
from coupled_curvature.numeric.factors.outputs import output_factors
from coupled_curvature.numeric.layer_capabilities import layer_capabilities

@dataclass(frozen=True)
class LayerFactors:
    """Per-sample square-root factors of one ``nn.Linear`` of a ReLU net under mean cross-entropy.

    ``A[n] = a_n`` (layer input), ``P[n] = M_n J_n`` with ``J_n = ∂f_n/∂z_n`` (``z_n = W a_n + b``) and
    ``M_nᵀM_n = S_n = (diag p_n − p_n p_nᵀ)/N`` (``M_n`` has ``C − 1`` rows, ``S_n 1 = 0``; fewer
    where round-off leaves no more). The net is
    piecewise linear in each layer's parameters, so the diagonal Hessian blocks are exactly
    ``H_WW = Σ_n (P_nᵀP_n) ⊗ a_n a_nᵀ = BᵀB`` and ``H_bb = Σ_n P_nᵀP_n``, with
    ``B[(n,k),(s,i)] = P[n,k,s]·a_n[i]``.
    """

    weight: str
    bias: str | None
    A: torch.Tensor
    P: torch.Tensor


def relu_ce_factors(model: nn.Module, X: torch.Tensor) -> list[LayerFactors]:
    """:class:`LayerFactors` of every ``nn.Linear`` of a ``Sequential`` of Linear and (leaky) ReLU layers.

    ``M_n`` is the root ``A_n`` of :func:`~coupled_curvature.numeric.factors.outputs.output_factors`
    (``S_n`` by autograd, labels irrelevant); one forward pass and a backward pass per row of ``M_n``
    (:func:`~coupled_curvature.numeric.factors.layers.layer_rows`) give every ``P_n``.

    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> f = relu_ce_factors(net, torch.randn(5, 3))
    >>> [(x.weight, tuple(x.P.shape)) for x in f]
    [('0.weight', (5, 1, 4)), ('2.weight', (5, 1, 2))]
    """
    if not isinstance(model, nn.Sequential) or not all(layer_capabilities(m).factor in ("linear", "activation")
                                                       for m in model):
        raise UnsupportedModelError("the exact factor route needs an nn.Sequential of Linear and (leaky) ReLU layers")
    if not isinstance(X, torch.Tensor) or X.dim() != 2 or X.shape[0] == 0:
        raise InvalidInputError("X must be a tensor of shape (N, features) with N ≥ 1")
    net = float64_copy(model)
    assert isinstance(net, nn.Sequential)  # a copy of the Sequential checked above
    X = X.to(torch.float64)
    loss_fn = nn.CrossEntropyLoss()  # S_n does not depend on the labels: any will do
    labels = torch.zeros(X.shape[0], dtype=torch.long)
    objective = Objective(net, loss_fn, prepare_batches((X, labels), loss_fn))
    of = output_factors(objective, 0)
    linear = [(str(i), m) for i, m in enumerate(net) if isinstance(m, nn.Linear)]
    rows = layer_rows(objective, 0, [p for p, _ in linear], of.A)
    return [LayerFactors(f"{p}.weight", None if m.bias is None else f"{p}.bias", rows[p].U[:, :, 0], rows[p].P[..., 0])
            for p, m in linear]


def relu_ce_trace(model: nn.Module, X: torch.Tensor) -> float:
    """``tr ∇²L`` for mean cross-entropy and a Linear/(leaky) ReLU ``Sequential``, exactly:
    ``Σ_layers Σ_n ‖P_n‖²_F (‖a_n‖² + [bias])`` (:class:`LayerFactors`; ``tr G_n = ‖P_n‖²_F``).

    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> relu_ce_trace(net, torch.randn(5, 3)) > 0
    True
    """
    return trace_from_factors(relu_ce_factors(model, X))


def trace_from_factors(factors: Sequence[LayerFactors]) -> float:
    """``Σ_layers Σ_n ‖P_n‖²_F (‖a_n‖² + [bias])`` from :func:`relu_ce_factors` (their trace, computed once).

    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> X = torch.randn(5, 3)
    >>> abs(trace_from_factors(relu_ce_factors(net, X)) - relu_ce_trace(net, X)) == 0.0
    True
    """
    total = 0.0
    for f in factors:
        tr_g = (f.P * f.P).sum(dim=(1, 2))
        total += float((tr_g * ((f.A * f.A).sum(dim=1) + (0.0 if f.bias is None else 1.0))).sum())
    return total


@dataclass(frozen=True)
class FactorForm:
    """``wᵀH⁺_τ w`` of one block from its factor ``H = BᵀB`` (``τ = rtol·max λ``), and ``wᵀHw = ‖Bw‖²``;
    ``value_alt``/``rank_alt`` are the same at the second cutoff ``rtol_alt`` (a sensitivity check); a value
    that does not fit float64 (a block rescaled far from unit scale) is ``None``."""

    value: float | None
    wHw: float
    rank: int
    min_kept_rel_eig: float | None
    route: str
    value_alt: float | None = None
    rank_alt: int | None = None


def factor_pinv_forms(factors: Sequence[LayerFactors], values: Mapping[str, torch.Tensor],
                      rtol: float, rtol_alt: float | None = None) -> dict[str, FactorForm]:
    """``wᵀH_bb⁺w`` for every weight and bias block from :class:`LayerFactors`, exactly (to rounding).

    With ``R = N(C − 1)`` rows of ``B``: a block of ``n_b ≤ R`` parameters forms ``H = BᵀB`` and
    eigendecomposes it (``Σ_{|λ_i|>τ}(u_iᵀw)²/λ_i``, as :func:`pinv.pinv_quadratic_form`); a larger one
    uses the ``R × R`` Gram matrix ``K = BBᵀ``, ``K[(n,k),(m,l)] = (P_nP_mᵀ)[k,l]·(a_nᵀa_m)``, whose
    non-zero spectrum is that of ``H`` (same relative cutoff): ``wᵀH⁺w = Σ_{λ_i > τ} (u_iᵀBw)²/λ_i²``.
    ``rtol_alt`` adds the value at a second cutoff from the same eigendecomposition.

    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> X = torch.randn(6, 3)
    >>> forms = factor_pinv_forms(relu_ce_factors(net, X), dict(net.named_parameters()), 1e-10)
    >>> {name: f.route for name, f in sorted(forms.items())}  # R = 6 rows: blocks above 6 use K
    {'0.bias': 'dense', '0.weight': 'gram', '2.bias': 'dense', '2.weight': 'gram'}
    """
    rtols = [rtol] if rtol_alt is None else [rtol, rtol_alt]

    def form(side, mat, u, w):
        spectrum = factor_spectrum(side, mat, u, w)
        (main, *alt) = [spectrum.form(t) for t in rtols]
        return FactorForm(main.value, float(u @ u), main.rank, main.min_kept_rel_eig, _ROUTES[side],
                          alt[0].value if alt else None, alt[0].rank if alt else None)

    out = {}
    for f in factors:
        n, k, width = f.P.shape
        rows = n * k
        Pf = f.P.reshape(rows, width)
        W = values[f.weight].detach().to(torch.float64)
        Bw = torch.einsum("nks,ns->nk", f.P, f.A @ W.T).reshape(-1)
        side = factor_side(W.numel(), rows)
        if side == "factor":
            B = (f.P.unsqueeze(3) * f.A.unsqueeze(1).unsqueeze(2)).reshape(rows, W.numel())
            out[f.weight] = form(side, B.T @ B, Bw, W.reshape(-1))
        else:
            K = (Pf @ Pf.T) * (f.A @ f.A.T).repeat_interleave(k, 0).repeat_interleave(k, 1)
            out[f.weight] = form(side, K, Bw, W.reshape(-1))
        if f.bias is not None:
            b = values[f.bias].detach().to(torch.float64)
            side = factor_side(b.numel(), rows)
            out[f.bias] = form(side, Pf.T @ Pf if side == "factor" else Pf @ Pf.T, Pf @ b, b)
    return out


_ROUTES = {"factor": "dense", "gram": "gram"}  # the factor side is this module's "dense" route


def with_factor_dplus(d: Diagnosis, model: nn.Module, X: torch.Tensor, rtol: float = 1e-10) -> Diagnosis:
    """``d`` with ``wᵀH_bb⁺w`` and ``D⁺_b = (wᵀH⁺w/wᵀw)·‖g‖²`` of every block from the exact factor ``H = BᵀB``.

    A thin caller of the curvature engine (:mod:`~coupled_curvature.numeric.core.engine`): the Gram
    route of ``diagnose`` on ``model`` and ``X`` under mean cross-entropy (its Hessian does not depend
    on the labels), ``wᵀH⁺_τw = Σ_{λ_i(G)>τ}(q_iᵀBw)²/λ_i(G)²``, ``τ = rtol·λ_max``. ``d`` must come from
    :func:`diagnose` on the same ``model`` and inputs ``X`` with mean cross-entropy. A block is filled
    only when the route applies and its ``‖Bw‖²`` reproduces ``d``'s ``wᵀHw`` to ``1e-8`` relative;
    otherwise it keeps ``D⁺ = None`` and a note says why.

    >>> from coupled_curvature.numeric.linalg.tolerance import agrees
    >>> from coupled_curvature.numeric.core.diagnostics import diagnose
    >>> torch.manual_seed(0); net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3)).double()
    <torch._C.Generator object at ...>
    >>> X, y = torch.randn(8, 3, dtype=torch.float64), torch.arange(8) % 3
    >>> dense = diagnose(net, nn.CrossEntropyLoss(), (X, y), method="dense")
    >>> fac = with_factor_dplus(diagnose(net, nn.CrossEntropyLoss(), (X, y), inverse=False), net, X)
    >>> all(agrees(fac[b.name].inverse_coupled, b.inverse_coupled, rtol=1e-6) for b in dense)
    True
    """
    from coupled_curvature.numeric.core.execution import execute
    from coupled_curvature.numeric.core.options import run_options
    from coupled_curvature.numeric.core.planning import plan
    from coupled_curvature.numeric.core.routes import SpectralRoute

    if not isinstance(d, Diagnosis):
        raise InvalidInputError(f"d must be the Diagnosis of diagnose(model, CrossEntropyLoss(), (X, y)), got "
                                f"{type(d).__name__}")
    if not isinstance(X, torch.Tensor) or X.dim() < 2 or X.shape[0] == 0:
        raise InvalidInputError("X must be a tensor of shape (N, features...) with N ≥ 1")
    labels = torch.zeros(X.shape[0], dtype=torch.long)  # the CE Hessian does not depend on them
    o = run_options(method="gram", max_dense=0, pinv_rtol=rtol)
    run = execute(plan(model, nn.CrossEntropyLoss(), (X, labels), o))
    blocks = []
    for b in d:
        c = run.blocks.get(b.name)
        gram = c is not None and c.spectral is SpectralRoute.GRAM
        if c is None or not gram or b.w_sq == 0.0 or not reproduces_wHw(c.wHw, b.wHw):
            why = ("not a block of this model" if c is None else c.spectral_reason if not gram
                   else "w = 0" if b.w_sq == 0.0 else f"‖Bw‖² = {c.wHw:.6g} does not reproduce wᵀHw = {b.wHw:.6g}")
            blocks.append(b.without_dplus(f"the factor route does not apply: {why}"))
            continue
        assert c.spectrum is not None and c.gram is not None  # a block the Gram route took has both
        f = c.spectrum.form(rtol)
        side = "gram" if c.gram.side == "gram" else "dense"
        blocks.append(b.with_dplus(f.exact, f.rank, f.min_kept_rel_eig,
                                   f"D⁺ from the exact per-sample factor H = BᵀB ({side} route, rank {f.rank})"))
    return Diagnosis(blocks, {**d.meta, "dplus_route": "factor"}, notes=d.notes, frozen=d.frozen, skipped=d.skipped)


__all__ = ["FactorForm", "LayerFactors", "factor_pinv_forms", "relu_ce_factors", "relu_ce_trace", "trace_from_factors",
           "with_factor_dplus"]
