"""coupled-curvature: reparameterization-invariant curvature diagnostics, made executable.

For a parameter block with value ``w``, gradient ``g`` and Hessian block ``H``::

    D  = (wᵀHw / wᵀw) / ‖g‖²          D⁺ = (wᵀH⁺w / wᵀw) · ‖g‖²

Both are exactly invariant under the conformal group ``CO(n) = {cQ}`` acting on a
block, which contains the layer-wise rescalings and permutations of ReLU networks.

Heavy submodules are imported lazily, so ``coupled_curvature.symbolic`` never pulls in
torch and ``coupled_curvature.numeric`` never pulls in sympy.
"""

from __future__ import annotations

import importlib
from typing import Any

from coupled_curvature.base.errors import (
    CoupledCurvatureError,
    InvalidInputError,
    MissingExtraError,
    TrainModeError,
    UnsupportedModelError,
)

__version__ = "0.1.0"

_LAZY = {
    "diagnose": "coupled_curvature.numeric.core.diagnostics",
    "block_hessian": "coupled_curvature.numeric.core.curvature_operator",
    "Diagnosis": "coupled_curvature.numeric.core.results",
    "BlockDiagnosis": "coupled_curvature.numeric.core.results",
    "compare": "coupled_curvature.numeric.core.compare",
    "layer_rescale": "coupled_curvature.numeric.symmetries.homogeneous",
    "neuron_rescale": "coupled_curvature.numeric.symmetries.homogeneous",
    "permute_neurons": "coupled_curvature.numeric.symmetries.homogeneous",
    "function_gap": "coupled_curvature.numeric.symmetries.homogeneous",
    "qk_transform": "coupled_curvature.numeric.symmetries.attention",
    "vo_transform": "coupled_curvature.numeric.symmetries.attention",
    "permute_heads": "coupled_curvature.numeric.symmetries.attention",
    "norm_rescale": "coupled_curvature.numeric.symmetries.attention",
    "train_mlp": "coupled_curvature.numeric.models.training",
    "CurvatureTracker": "coupled_curvature.numeric.tracking.tracker",
    "crr_penalty": "coupled_curvature.numeric.training.crr",
    "training_step": "coupled_curvature.numeric.training.step",
    "make_optimizer": "coupled_curvature.numeric.training.step",
    "sharpness_curve": "coupled_curvature.numeric.measures.sharpness_curve",
    "certify": "coupled_curvature.numeric.certify.api",
    "Certificate": "coupled_curvature.numeric.certify.api",
    "certify_invariance": "coupled_curvature.numeric.certify.invariance",
    "Ball": "coupled_curvature.numeric.certify.ball",
    "derive_all": "coupled_curvature.symbolic",
    "witness": "coupled_curvature.symbolic",
}

__all__ = [
    "CoupledCurvatureError",
    "InvalidInputError",
    "MissingExtraError",
    "TrainModeError",
    "UnsupportedModelError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'coupled_curvature' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
