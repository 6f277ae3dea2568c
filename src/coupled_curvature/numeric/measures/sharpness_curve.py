"""The radius sweep: fixed-radius (SAM-style) or adaptive sharpness as a curve over the radius."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.inputs import check_count, check_flag, check_increasing, check_positive
from coupled_curvature.numeric.core.flat import FlatLoss
from coupled_curvature.numeric.measures.sharpness import adaptive_average, adaptive_worst, sam_sharpness

__all__ = ["DEFAULT_RADII", "SharpnessCurve", "check_radii", "sharpness_curve"]

#: log-spaced default radii, 1e-3 … 1 (half a decade apart)
DEFAULT_RADII: tuple[float, ...] = tuple(10.0 ** (k / 2) for k in range(-6, 1))


@dataclass(frozen=True)
class SharpnessCurve:
    """``values[i]`` = the sharpness at ``radii[i]`` (``stderr[i]`` for the average, else ``None``).

    ``kind``: ``"l2"`` (``max_{‖δ‖₂≤ρ}``), ``"adaptive_worst"`` (``max_{‖δ/|θ|‖₂≤ρ}``) or
    ``"adaptive_average"`` (``E_{‖ε‖=ρ} L(θ+|θ|⊙ε) − L(θ)``); all are loss increases over ``L(θ)``.
    """

    radii: tuple[float, ...]
    values: tuple[float, ...]
    stderr: tuple[float | None, ...]
    kind: str
    steps: int
    seed: int

    @property
    def adaptive(self) -> bool:
        return self.kind != "l2"


def check_radii(radii: object) -> tuple[float, ...]:
    """``radii`` as a tuple of finite, positive, strictly increasing floats, or :class:`InvalidInputError`.

    >>> check_radii([0.01, 0.1])
    (0.01, 0.1)
    """
    return check_increasing(radii, "radii")


def sharpness_curve(model: nn.Module, loss_fn: Callable, data: object, radii: Sequence[float] | None = None, *,
                    adaptive: bool = False, average: bool = False, steps: int = 10, lr: float = 0.5,
                    samples: int = 32, seed: int = 0, allow_train_mode: bool = False) -> SharpnessCurve:
    """``ρ ↦ max_{‖δ‖₂ ≤ ρ} L(θ+δ) − L(θ)`` (default) or ``ρ ↦ max_{‖δ/|θ|‖₂ ≤ ρ} L(θ+δ) − L(θ)``
    (``adaptive``), or with ``average`` the mean over ``ε`` uniform on ``‖ε‖ = ρ`` of
    ``L(θ+|θ|⊙ε) − L(θ)``, at each radius of ``radii`` (default :data:`DEFAULT_RADII`, log-spaced).

    One float64 copy of the model and one data pass set-up serve every radius. Common random numbers:
    every radius uses the same ``seed`` (the average's ``samples`` draws are the same unit directions,
    scaled to each radius; the worst cases ascend from ``δ = 0``, deterministically), so differences
    between radii, and between a model and its rescaled twin, are not sampling noise. The worst-case
    values are lower bounds (projected normalised-gradient ascent, :mod:`.sharpness`). Invariance: the
    adaptive curves are unchanged by element-wise positive rescalings of the parameters (a layer
    rescaling's twin has the same curve); the ``l2`` curve moves.

    Args:
        model: the network whose parameters are perturbed (on a float64 copy), as for
            :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`.
        loss_fn: the loss ``L`` the curve measures, as for ``diagnose``.
        data: the batch or batches ``L`` is summed over, as for ``diagnose``.
        radii: the radii ``ρ``, positive and increasing (default :data:`DEFAULT_RADII`).
        adaptive: measure ``δ`` relative to ``|θ|``.
        average: the mean over random directions instead of the worst case.
        steps: ascent steps per radius (worst case).
        lr: the ascent's step size (worst case).
        samples: random directions (average).
        seed: the seed of every random draw.
        allow_train_mode: measure a model in training mode.

    Returns:
        SharpnessCurve: the kind, the radii and a
        value per radius.

    Raises:
        InvalidInputError: bad radii or counts, or data the model cannot take.
        TrainModeError: the model is in training mode and ``allow_train_mode`` is off.

    See also:
        :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` (the coupled measures, which do not move under
        the maps that move this curve).

    >>> net = nn.Sequential(nn.Linear(2, 1))
    >>> import torch
    >>> X, y = torch.randn(8, 2), torch.randn(8, 1)
    >>> c = sharpness_curve(net, nn.MSELoss(), (X, y), [0.01, 0.1])
    >>> c.kind, c.values[0] <= c.values[1]
    ('l2', True)
    """
    radii = DEFAULT_RADII if radii is None else check_radii(radii)
    for name, flag in (("adaptive", adaptive), ("average", average), ("allow_train_mode", allow_train_mode)):
        check_flag(flag, name)
    if average and not adaptive:
        raise InvalidInputError("average=True is the adaptive average-case sharpness: pass adaptive=True too")
    for name, v in (("steps", steps), ("samples", samples)):
        check_count(v, name, 1)
    check_count(seed, "seed")
    lr = check_positive(lr, "lr", hint="; it is the ascent step as a fraction of the radius: pass e.g. 0.5")
    flat = FlatLoss(model, loss_fn, data, allow_train_mode=allow_train_mode)
    flat.value()  # L(θ₀) finite, or an error that names the outputs and targets, before any radius
    results = []
    for rho in radii:
        try:
            if average:
                results.append(adaptive_average(flat.loss, flat.theta0, rho=rho, samples=samples, seed=seed))
            elif adaptive:
                results.append(adaptive_worst(flat.loss, flat.theta0, rho=rho, steps=steps, lr=lr))
            else:
                results.append(sam_sharpness(flat.loss, flat.theta0, rho=rho, steps=steps, lr=lr, seed=seed))
        except InvalidInputError as e:  # the loss at θ₀ was checked by FlatLoss: this is a perturbed point
            raise InvalidInputError(f"at radius {rho:g} the perturbed loss could not be evaluated ({e}); a radius this "
                                    "large overflows float64 in the model: pass smaller radii") from None
        if not math.isfinite(results[-1].value):
            raise InvalidInputError(f"at radius {rho:g} the loss increase is {results[-1].value} (float64 overflow: "
                                    "the perturbation is too large for the model); pass smaller radii")
    kind = "adaptive_average" if average else ("adaptive_worst" if adaptive else "l2")
    return SharpnessCurve(radii, tuple(r.value for r in results), tuple(r.stderr for r in results), kind,
                          samples if average else steps, seed)
