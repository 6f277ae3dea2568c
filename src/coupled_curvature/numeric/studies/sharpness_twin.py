"""A net and its layer-rescaled twin, swept over the radius: raw (ℓ2) and adaptive sharpness curves.

The twin computes the same function (T2), so any difference between the two curves is an artefact of
the coordinates. The ℓ2 curves shift (the ball ``‖δ‖₂ ≤ ρ`` means something else in the twin's
coordinates); the adaptive curves coincide (``δ = |θ|⊙ε`` follows the rescaling element-wise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import nn

from coupled_curvature.numeric.measures.sharpness_curve import SharpnessCurve, sharpness_curve
from coupled_curvature.numeric.symmetries.homogeneous import function_gap, layer_rescale

__all__ = ["TwinCurves", "curve_gap", "twin_curves", "twin_curve_data"]


@dataclass(frozen=True)
class TwinCurves:
    """The ℓ2 and adaptive (worst-case) sharpness curves of a net and of its twin ``layer_rescale(net, layer, c)``."""

    net: str
    layer: int
    c: float
    function_gap: float
    raw: tuple[SharpnessCurve, SharpnessCurve]  # (net, twin)
    adaptive: tuple[SharpnessCurve, SharpnessCurve]

    @property
    def raw_gap(self) -> float:
        """Largest relative difference between the net's and the twin's ℓ2 curve (large: it shifts)."""
        return curve_gap(*self.raw)

    @property
    def adaptive_gap(self) -> float:
        """Largest relative difference between the two adaptive curves (round-off: they coincide)."""
        return curve_gap(*self.adaptive)


def curve_gap(a: SharpnessCurve, b: SharpnessCurve) -> float:
    """``max_i |a_i − b_i| / max(|a_i|, |b_i|)`` over the common radii (0 where both are 0).

    >>> c = SharpnessCurve((0.1, 1.0), (1.0, 2.0), (None, None), "l2", 10, 0)
    >>> curve_gap(c, SharpnessCurve((0.1, 1.0), (1.0, 3.0), (None, None), "l2", 10, 0))
    0.3333333333333333
    """
    if a.radii != b.radii:
        raise ValueError("the curves have different radii")
    return max((abs(x - y) / max(abs(x), abs(y)) if max(abs(x), abs(y)) > 0 else 0.0)
               for x, y in zip(a.values, b.values))


def twin_curves(model: nn.Module, loss_fn: Callable, data: tuple, *, layer: int = 0, c: float = 4.0,
                radii: Sequence[float] | None = None, steps: int = 10, seed: int = 0, name: str = "net") -> TwinCurves:
    """Both curves of ``model`` and of ``layer_rescale(model, layer, c)`` on the same radii and seed.

    >>> import torch
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(16, 2, dtype=torch.float64), torch.randint(0, 2, (16,))
    >>> t = twin_curves(net, nn.CrossEntropyLoss(), (X, y), radii=[0.1, 0.3], steps=3)
    >>> t.adaptive_gap < 1e-9 < t.raw_gap
    True
    """
    twin = layer_rescale(model, layer, c)
    X = data[0]
    gap = function_gap(model, twin, X)
    curves = {}
    for adaptive in (False, True):
        curves[adaptive] = tuple(sharpness_curve(m, loss_fn, data, radii, adaptive=adaptive, steps=steps, seed=seed)
                                 for m in (model, twin))
    return TwinCurves(name, layer, float(c), gap, curves[False], curves[True])  # type: ignore[arg-type]


def twin_curve_data(seed: int = 0, *, c: float = 4.0, samples: int = 64, epochs: int = 30) -> TwinCurves:
    """The report's and explorer's example: a ReLU MLP 13-16-16-3 trained on wine (``epochs``, Adam), its
    first hidden layer rescaled by ``c``, curves on ``samples`` training points, 10 ascent steps."""
    import torch

    from coupled_curvature.numeric.models.datasets import load
    from coupled_curvature.numeric.models.factory import make_mlp
    from coupled_curvature.numeric.models.training import fit

    data = load("wine", seed=seed)
    net = make_mlp(data.X_train.shape[1], [16, 16], data.n_classes, seed=seed)
    fit(net, data.X_train, data.y_train, epochs=epochs, seed=seed)
    net.eval()
    X, y = data.X_train[:samples], data.y_train[:samples]
    return twin_curves(net, torch.nn.CrossEntropyLoss(), (X, y), layer=0, c=c, seed=seed,
                       name=f"wine ReLU 13-16-16-3, {samples} samples, seed {seed}")
