"""The one model factory and the one architecture vocabulary of every command.

An architecture is named ``KIND`` or ``KIND:WIDTHxDEPTH`` (``mlp:64x3``: three hidden layers of
64 units) or ``KIND:W1,W2,…`` (``cnn:8,16``: the channels of two conv stages). Every model is
built in float64 from its seed with the global RNG untouched.

======================  ==========================================================================
kind                    layers (each hidden stage)
======================  ==========================================================================
``mlp``                 ``Linear -> ReLU``
``mlp-nobias``          ``Linear(bias=False) -> ReLU`` (the last layer bias-free too)
``mlp-leaky``           ``Linear -> LeakyReLU``
``linear``              ``Linear`` (a deep linear net)
``mlp-bn``              ``Linear(bias=False) -> BatchNorm1d(eps) -> ReLU`` (scale-invariant: T10)
``cnn``                 ``Conv2d(3×3, pad 1) -> ReLU -> MaxPool2d(2)`` on square images, then
                        ``Flatten -> Linear``
======================  ==========================================================================

>>> parse_arch("mlp:64x3")
('mlp', (64, 64, 64))
>>> net = build_model("cnn", (), 1, 10, seed=0, image_side=8)
>>> [type(m).__name__ for m in net][:3], net[-1].in_features
(['Conv2d', 'ReLU', 'MaxPool2d'], 64)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.models.datasets import Dataset

__all__ = ["KINDS", "DEFAULT_HIDDEN", "parse_arch", "build_model", "build_for", "make_mlp", "randomize_batchnorm"]

_ACTIVATIONS = {"relu": nn.ReLU, "leaky_relu": nn.LeakyReLU, "identity": nn.Identity, "tanh": nn.Tanh}
#: kind -> (activation, bias) of the MLP-like kinds; ``mlp-bn`` and ``cnn`` are built below
_MLP_KINDS = {"mlp": ("relu", True), "mlp-nobias": ("relu", False), "mlp-leaky": ("leaky_relu", True),
              "linear": ("identity", True)}
KINDS = (*_MLP_KINDS, "mlp-bn", "cnn")
#: the hidden widths (channels for ``cnn``) of a bare ``KIND``
DEFAULT_HIDDEN = {"mlp": (64, 64, 64), "mlp-nobias": (32, 32, 32, 32), "mlp-leaky": (64, 64, 64),
                  "linear": (16, 16, 16), "mlp-bn": (32, 32, 32), "cnn": (8, 16)}


def parse_arch(text: str) -> tuple[str, tuple[int, ...]]:
    """``"KIND"``, ``"KIND:WIDTHxDEPTH"`` or ``"KIND:W1,W2,…"`` -> ``(kind, hidden widths)``.

    >>> parse_arch("cnn"), parse_arch("mlp-bn:4,8")
    (('cnn', (8, 16)), ('mlp-bn', (4, 8)))
    """
    kind, _, shape = str(text).partition(":")
    hidden: tuple[int, ...] | None = DEFAULT_HIDDEN.get(kind) if not shape else None
    if shape:
        try:
            if "x" in shape:
                width, depth = (int(v) for v in shape.split("x"))
                hidden = (width,) * depth
            else:
                hidden = tuple(int(v) for v in shape.split(","))
        except ValueError:
            hidden = None
    if kind not in KINDS or not hidden or any(h <= 0 for h in hidden) or len(hidden) > 64:
        raise InvalidInputError(
            f"unknown arch {text!r}; available: mlp:64x3, cnn:8,16 and in general KIND, KIND:W1,W2 or "
            f"KIND:WIDTHxDEPTH (e.g. mlp:WIDTHxDEPTH) with KIND one of {', '.join(KINDS)}")
    return kind, hidden


def make_mlp(in_features: int, hidden: Sequence[int], out_features: int, *, bias: bool = True,
             activation: str = "relu", seed: int = 0) -> nn.Sequential:
    """``Linear -> act -> … -> Linear`` in float64, initialised from ``seed`` (global RNG untouched).

    Args:
        in_features: the input width.
        hidden: the hidden widths.
        out_features: the output width.
        bias: give every Linear a bias.
        activation: ``"relu"``, ``"leaky_relu"``, ``"tanh"`` or ``"identity"``.
        seed: the initialisation's seed.

    Returns:
        An ``nn.Sequential`` in float64.

    Raises:
        InvalidInputError: a width that is not a positive int, or an unknown activation.

    See also:
        :func:`~coupled_curvature.numeric.models.training.train_mlp`.

    >>> make_mlp(4, [8, 8], 3)[0].weight.shape
    torch.Size([8, 4])
    """
    if activation not in _ACTIVATIONS:
        raise InvalidInputError(f"unknown activation {activation!r}; available: {', '.join(_ACTIVATIONS)}")
    if not hidden or any(int(h) <= 0 for h in hidden):
        raise InvalidInputError(f"hidden widths must be positive, got {list(hidden)}")
    widths = [in_features, *map(int, hidden), out_features]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        for i in range(len(widths) - 1):
            layers.append(nn.Linear(widths[i], widths[i + 1], bias=bias, dtype=torch.float64))
            if i < len(widths) - 2:
                layers.append(_ACTIVATIONS[activation]())
        return nn.Sequential(*layers)


def build_model(kind: str, hidden: Sequence[int], n_in: int, n_out: int, *, seed: int,
                image_side: int | None = None, bn_eps: float = 1e-12) -> nn.Sequential:
    """The untrained float64 net of ``kind`` (see the module table); ``hidden=()`` takes the default.

    ``n_in`` is the number of input features, or the input channels for ``cnn`` (which also needs
    ``image_side``). ``bn_eps`` is the BatchNorm eps of ``mlp-bn`` (> 0).

    >>> bn = build_model("mlp-bn", (4,), 3, 2, seed=0)[1]
    >>> type(bn).__name__, bn.num_features, bn.eps
    ('BatchNorm1d', 4, 1e-12)
    """
    if kind not in KINDS:
        raise InvalidInputError(f"unknown arch kind {kind!r}; available: {', '.join(KINDS)}")
    hidden = tuple(int(h) for h in hidden) or DEFAULT_HIDDEN[kind]
    if kind in _MLP_KINDS:
        activation, bias = _MLP_KINDS[kind]
        return make_mlp(n_in, hidden, n_out, bias=bias, activation=activation, seed=seed)
    if any(h <= 0 for h in hidden):
        raise InvalidInputError(f"hidden widths must be positive, got {list(hidden)}")
    f64 = torch.float64
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        if kind == "cnn":
            if image_side is None:
                raise InvalidInputError("the cnn arch needs square image inputs: pass image_side (digits: 8)")
            ch, side = n_in, int(image_side)
            for c in hidden:
                layers += [nn.Conv2d(ch, c, 3, padding=1, dtype=f64), nn.ReLU(), nn.MaxPool2d(2)]
                ch, side = c, side // 2
            if side < 1:
                raise InvalidInputError(f"{len(hidden)} pooling stages shrink a {image_side}-pixel image to nothing")
            layers += [nn.Flatten(), nn.Linear(ch * side * side, n_out, dtype=f64)]
        else:  # mlp-bn: weight -> batch-statistics normalization -> ReLU; a tiny eps keeps L(sW) = L(W)
            if not bn_eps > 0:
                raise InvalidInputError(f"bn_eps must be > 0 (torch requires it), got {bn_eps}")
            width = n_in
            for h in hidden:
                layers += [nn.Linear(width, h, bias=False, dtype=f64), nn.BatchNorm1d(h, eps=bn_eps, dtype=f64),
                           nn.ReLU()]
                width = h
            layers.append(nn.Linear(width, n_out, dtype=f64))
        return nn.Sequential(*layers)


def build_for(kind: str, hidden: Sequence[int], data: Dataset, *, seed: int, bn_eps: float = 1e-12) -> nn.Sequential:
    """:func:`build_model` sized for ``data`` (features and classes; channels and side for ``cnn``).

    >>> from coupled_curvature.numeric.models.datasets import load
    >>> build_for("mlp", (5,), load("wine"), seed=0)[0].in_features
    13
    """
    if kind == "cnn":
        if data.X_train.dim() != 4:
            raise InvalidInputError("the cnn arch needs image data (digits loaded with image=True)")
        return build_model(kind, hidden, data.X_train.shape[1], data.n_classes, seed=seed,
                           image_side=data.X_train.shape[-1])
    return build_model(kind, hidden, data.n_features, data.n_classes, seed=seed, bn_eps=bn_eps)


def randomize_batchnorm(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give every BatchNorm random running statistics and affine parameters, as after training (a fresh
    BatchNorm has bias 0, where ``D`` is undefined, and identity statistics), in place; returns ``model``.

    ``running_mean ~ 0.3·N(0, 1)``, ``running_var ~ 0.5 + U(0, 1)``, ``weight ~ 1 + 0.2·N(0, 1)``,
    ``bias ~ 0.1·N(0, 1)``, drawn from ``seed``.

    >>> bn = randomize_batchnorm(build_model("mlp-bn", (3,), 2, 2, seed=0))[1]
    >>> bool((bn.running_var > 0.5).all()), bool((bn.bias != 0).all())
    (True, True)
    """
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            assert m.running_mean is not None and m.running_var is not None, "a BatchNorm with running statistics"
            with torch.no_grad():
                m.running_mean.copy_(0.3 * torch.randn(m.running_mean.shape, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
    return model
