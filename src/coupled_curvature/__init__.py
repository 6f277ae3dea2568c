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
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

from coupled_curvature.errors import (
    CoupledCurvatureError,
    InvalidInputError,
    MissingExtraError,
    TrainModeError,
    UnsupportedModelError,
)

__version__ = "0.1.0"

# In a source checkout (tests and benchmarks run from the repository root) the sub-packages
# sit beside this folder, as symbolic/, numeric/ and proofs/; an install maps them by
# package-dir. In a checkout, a finder resolves exactly those three names to those folders:
# nothing else in the checkout (tests, bench, this folder itself) becomes importable as
# coupled_curvature.<name>.
_SUBPACKAGES = ("symbolic", "numeric", "proofs")
_checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``coupled_curvature.{symbolic,numeric,proofs}`` in the checkout's top-level folders."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        head, _, sub = name.partition(".")
        if head != __name__ or sub not in _SUBPACKAGES:
            return None
        folder = os.path.join(_checkout, sub)
        return importlib.util.spec_from_file_location(
            name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])


def _holds_subpackages(folder: str) -> bool:
    return all(os.path.isfile(os.path.join(folder, s, "__init__.py")) for s in _SUBPACKAGES)


# installed: the sub-packages sit inside this folder; a checkout: beside it, with the project file
_in_checkout = os.path.isfile(os.path.join(_checkout, "pyproject.toml")) and _holds_subpackages(_checkout)
if not _holds_subpackages(os.path.dirname(__file__)) and _in_checkout:
    if not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutFinder())

_LAZY = {
    "diagnose": "coupled_curvature.numeric.core.diagnostics",
    "Diagnosis": "coupled_curvature.numeric.core.results",
    "BlockDiagnosis": "coupled_curvature.numeric.core.results",
    "compare": "coupled_curvature.numeric.core.compare",
    "layer_rescale": "coupled_curvature.numeric.symmetries.homogeneous",
    "neuron_rescale": "coupled_curvature.numeric.symmetries.homogeneous",
    "permute_neurons": "coupled_curvature.numeric.symmetries.homogeneous",
    "function_gap": "coupled_curvature.numeric.symmetries.homogeneous",
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
