"""The one curvature engine: :func:`plan` picks each block's routes, :func:`execute` runs them.

Per block ``b`` (value ``w``, gradient ``g``, Hessian block ``H = H_bb``) the engine computes
``w``, ``g``, ``wᵀHw`` and, where a spectral route ran, the spectral data of ``H`` along ``w``,
from which ``wᵀH⁺_τw`` follows at any relative cutoff ``τ = rtol·max|λ|``::

    wᵀH⁺_τw = Σ_{|λ_i| > τ} (u_iᵀw)²/λ_i          (dense: eigenpairs of H_bb)
            = Σ_{λ_i(G) > τ} (q_iᵀBw)²/λ_i(G)²      (Gram: H_bb = BᵀB, G = BBᵀ)

``diagnose``, ``spectral_profile``, ``cutoff_sensitivity``, the factor route of ``relu_mlp`` and
``ccurv diagnose`` are thin callers: they check their options with
:func:`~coupled_curvature.numeric.core.options.run_options`, plan, execute and read what they need
off :class:`~coupled_curvature.numeric.core.routes.BlockCurvature`. Routes are
:class:`WHwRoute` and :class:`SpectralRoute` values, each with a reason in words.

>>> import torch
>>> from torch import nn
>>> torch.manual_seed(0) and None
>>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
>>> X, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
>>> p = plan(net, nn.CrossEntropyLoss(), (X, y), run_options())
>>> p.blocks["0.weight"].spectral, p.blocks["0.weight"].wHw
(<SpectralRoute.GRAM: 'gram'>, <WHwRoute.TANGENT: 'tangent'>)
>>> run = execute(p)
>>> run.blocks["0.weight"].spectral_reason.startswith("Gram: the network is piecewise affine")
True
"""

from coupled_curvature.numeric.core.execution import execute
from coupled_curvature.numeric.core.options import RunOptions, run_options
from coupled_curvature.numeric.core.planning import plan
from coupled_curvature.numeric.core.routes import (
    BlockCurvature, BlockPlan, Execution, Plan, SpectralRoute, WHwRoute,
)

__all__ = ["BlockCurvature", "BlockPlan", "Execution", "Plan", "RunOptions", "SpectralRoute", "WHwRoute", "execute",
           "plan", "run_options"]
