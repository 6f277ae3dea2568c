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
import os
from typing import Any

from coupled_curvature.errors import (
    CoupledCurvatureError,
    InvalidInputError,
    TrainModeError,
    UnsupportedModelError,
)

__version__ = "0.1.0"

# In a source checkout (tests, benchmarks run from the repository root) the sub-packages
# sit beside this folder, as symbolic/, numeric/ and proofs/; installs map them by
# package-dir. Let the import system find them in both cases.
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_checkout, "numeric", "diagnostics.py")) and _checkout not in __path__:
    __path__.append(_checkout)

_LAZY = {
    "diagnose": "coupled_curvature.numeric.diagnostics",
    "Diagnosis": "coupled_curvature.numeric.diagnostics",
    "BlockDiagnosis": "coupled_curvature.numeric.diagnostics",
    "layer_rescale": "coupled_curvature.numeric.symmetries",
    "neuron_rescale": "coupled_curvature.numeric.symmetries",
    "permute_neurons": "coupled_curvature.numeric.symmetries",
    "function_gap": "coupled_curvature.numeric.symmetries",
    "train_mlp": "coupled_curvature.numeric.training",
    "derive_all": "coupled_curvature.symbolic",
    "witness": "coupled_curvature.symbolic",
}

__all__ = [
    "CoupledCurvatureError",
    "InvalidInputError",
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
