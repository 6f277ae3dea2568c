"""The layer-capability registry: one table from ``nn.Module`` type to what the package's routes can do with it.

Every check of the form "is this layer X" (positively homogeneous? a pass-through? may a T2 map start or end
here? does the tangent, factor or certified route take it?) reads :func:`layer_capabilities` instead of its
own tuple of classes, so a new layer type is one :func:`register_layer` call (or one row of the table below).

The lookup walks the type's MRO: a subclass gets the nearest registered ancestor's row, less the
capabilities that row lists in ``exact`` (those hold for that very type only, because a subclass may change
``forward``: the tangent, factor and certified routes rebuild the layer's output from its parameters). A
type with no registered ancestor gets :data:`NO_CAPABILITIES`, so every check refuses it.

Rows (``deg``: ``degree``; ``pwa``: ``piecewise_affine``; roles: ``symmetry``; ``*``: exact type only):

=========================================  ===  ===  ==========================================================
type                                       deg  pwa  further capabilities
=========================================  ===  ===  ==========================================================
Linear                                          yes  unit_axis last; roles chain, src, dst; tangent* last;
                                                     factor* linear; certify* linear
Bilinear                                                 tangent* last (its bias only)
Conv1d, Conv2d                                  yes  spatial 1, 2; unit_axis first; roles chain, src, dst;
                                                     tangent* channels; certify* conv; Conv2d factor* conv
Conv3d                                          yes  spatial 3; unit_axis first; roles src, dst; tangent* channels
ConvTranspose1d/2d/3d                           yes  spatial 1/2/3; unit_axis first; tangent* channels
Embedding                                                tangent* rows
_BatchNorm (SyncBatchNorm, lazy ones)           yes  batch_statistics; unit_axis first; roles src, permuted
BatchNorm1d, BatchNorm2d, BatchNorm3d           yes  as _BatchNorm; unit_axis dim1 (1d); tangent* channels;
                                                     1d, 2d certify* batchnorm
GroupNorm                                                tangent* channels
LayerNorm, RMSNorm                                       role norm (LayerNorm also tangent* shape)
ReLU, LeakyReLU                            1    yes  elementwise; relu_slope; factor* activation; certify*
PReLU                                      1    yes  role permuted (one slope per channel follows the units)
Tanh, Sigmoid, GELU, SiLU, ELU, CELU, …              elementwise (a permutation of units passes them);
                                                     Hardtanh (so ReLU6), Hardsigmoid, Hard/Softshrink pwa
Identity                                   1    yes  elementwise; pass_through; relu_slope 1; factor* activation;
                                                     certify identity
Flatten                                    1    yes  pass_through; reshape; certify identity
_DropoutNd (Dropout1d/2d/3d, Alpha…)       1    yes  stochastic (the degree holds in eval mode)
Dropout                                    1    yes  stochastic; pass_through; certify identity
MaxPool, AvgPool, AdaptiveAvgPool,         1    yes  pool max/avg/adaptive_avg/adaptive_max; spatial 1/2/3;
AdaptiveMaxPool (1d, 2d, 3d)                         the 1d/2d Max, Avg, AdaptiveAvg certify* maxpool, …
=========================================  ===  ===  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from torch import nn

__all__ = ["CertifyKind", "FactorRole", "LAYER_CAPABILITIES", "LayerCapabilities", "NO_CAPABILITIES", "PoolKind",
           "SymmetryRole", "TangentBroadcast", "UnitAxis", "layer_capabilities", "register_layer", "train_mode_coupled",
           "unregister_layer"]

#: a pooling layer's reduction over each window
PoolKind = Literal["max", "avg", "adaptive_max", "adaptive_avg"]
#: where the unit index sits in the layer's batched output: last (Linear), dim 1 of a tensor with spatial
#: dims (Conv, BatchNorm2d/3d) or dim 1 of rank 2 or 3 (BatchNorm1d)
UnitAxis = Literal["last", "first", "dim1"]
#: the layer's part in the T2 maps: ``chain``, a weight layer the int form counts in an ``nn.Sequential``;
#: ``src``/``dst``, may start/end a named map; ``permuted``, per-unit tensors that follow a permutation of
#: the units; ``norm``, a normalisation whose input scale cancels (``norm_rescale``)
SymmetryRole = Literal["chain", "src", "dst", "permuted", "norm"]
#: how the output is linear in weight and bias: the bias broadcasts along the last dim, the channels (dim 1),
#: the normalised shape, or the weight's rows are looked up (Embedding)
TangentBroadcast = Literal["last", "channels", "shape", "rows"]
#: the exact factor routes: ``linear`` (``Wa + b``: Gram rows, Kronecker, ReLU-MLP), ``conv`` (unfolded
#: patches, ``groups=1`` only), ``activation`` (between the Linear layers of the ReLU-MLP route)
FactorRole = Literal["linear", "conv", "activation"]
#: the certified engine's operation for the module (``identity``: passed on unchanged)
CertifyKind = Literal["identity", "linear", "conv", "relu", "leaky_relu", "maxpool", "avgpool", "adaptive_avgpool",
                      "batchnorm"]


@dataclass(frozen=True)
class LayerCapabilities:
    """What one layer type supports; the defaults are "nothing" (:data:`NO_CAPABILITIES`).

    ``degree``: ``k`` when the parameter-free map is positively homogeneous, ``f(cz) = cᵏ f(z)`` for every
    ``c > 0`` (in eval mode); ``piecewise_affine``: affine on each piece of a finite polyhedral partition
    (a Linear with its bias is affine, degree ``None``); ``elementwise``: parameter-free and entry by entry,
    so it commutes with permutations of units; ``pass_through``: passes its input on unchanged but for the
    shape (in eval mode); ``reshape``: only moves entries; ``pool``/``spatial_dims``: a pooling's reduction
    and a layer's spatial dims; ``stochastic``: random in train mode; ``batch_statistics``: couples the
    samples of a batch in train mode; ``relu_slope``: ``s`` of ``max(z, s·z)`` (``"negative_slope"``: the
    instance's attribute); the rest as their types say. ``exact``: the fields that hold for this very type
    only (a subclass may change ``forward``).

    >>> caps = LayerCapabilities(degree=1, elementwise=True, factor="activation", exact=frozenset({"factor"}))
    >>> caps.inherited().factor is None, caps.inherited().degree
    (True, 1)
    """

    degree: int | None = None
    piecewise_affine: bool = False
    elementwise: bool = False
    pass_through: bool = False
    reshape: bool = False
    pool: PoolKind | None = None
    spatial_dims: int | None = None
    stochastic: bool = False
    batch_statistics: bool = False
    relu_slope: float | Literal["negative_slope"] | None = None
    unit_axis: UnitAxis | None = None
    symmetry: frozenset[SymmetryRole] = frozenset()
    tangent: TangentBroadcast | None = None
    factor: FactorRole | None = None
    certify: CertifyKind | None = None
    exact: frozenset[str] = field(default=frozenset())

    def __post_init__(self) -> None:
        unknown = set(self.exact) - {f.name for f in fields(self)} - {"exact"}
        if unknown:
            raise ValueError(f"exact names no field of LayerCapabilities: {sorted(unknown)}")

    @property
    def identity(self) -> bool:
        """Passes its input on unchanged, shape included (in eval mode): ``pass_through`` and not ``reshape``,
        so it commutes with any linear map of the units (Identity, Dropout).

        >>> LayerCapabilities(pass_through=True).identity, LayerCapabilities(pass_through=True, reshape=True).identity
        (True, False)
        """
        return self.pass_through and not self.reshape

    @property
    def mode_dependent(self) -> bool:
        """In train mode its output depends on the rest of the batch or on chance: ``batch_statistics`` or
        ``stochastic`` (BatchNorm, every dropout), so a train-mode module of this kind couples the samples.

        >>> LayerCapabilities(stochastic=True).mode_dependent, LayerCapabilities(degree=1).mode_dependent
        (True, False)
        """
        return self.batch_statistics or self.stochastic

    def inherited(self) -> LayerCapabilities:
        """The capabilities a subclass keeps: the fields named in ``exact`` reset to their defaults.

        >>> row = LayerCapabilities(tangent="last", piecewise_affine=True, exact=frozenset({"tangent"}))
        >>> row.inherited()
        LayerCapabilities(degree=None, piecewise_affine=True, ..., tangent=None, ..., exact=frozenset())
        """
        defaults: dict[str, Any] = {name: getattr(NO_CAPABILITIES, name) for name in self.exact}
        return replace(self, **defaults, exact=frozenset())


#: the empty row: what an unknown layer type supports
NO_CAPABILITIES = LayerCapabilities()


def _row(*, exact: tuple[str, ...] = (), symmetry: tuple[SymmetryRole, ...] = (), **kw: Any) -> LayerCapabilities:
    return LayerCapabilities(symmetry=frozenset(symmetry), exact=frozenset(exact), **kw)


_BN = _row(piecewise_affine=True, batch_statistics=True, unit_axis="first", symmetry=("src", "permuted"))
_DROPOUT = _row(degree=1, piecewise_affine=True, stochastic=True)
_RELU = _row(degree=1, piecewise_affine=True, elementwise=True, factor="activation", exact=("factor", "certify"))
_SMOOTH = _row(elementwise=True)
_PWA = _row(elementwise=True, piecewise_affine=True)


def _pool(kind: PoolKind, dims: int, certify: CertifyKind | None = None) -> LayerCapabilities:
    return _row(degree=1, piecewise_affine=True, pool=kind, spatial_dims=dims, certify=certify, exact=("certify",))


def _conv(dims: int, **kw: Any) -> LayerCapabilities:
    return _row(piecewise_affine=True, spatial_dims=dims, unit_axis="first", tangent="channels", **kw)


_TABLE: dict[type, LayerCapabilities] = {
    nn.Linear: _row(piecewise_affine=True, unit_axis="last", symmetry=("chain", "src", "dst"), tangent="last",
                    factor="linear", certify="linear", exact=("tangent", "factor", "certify")),
    nn.Bilinear: _row(tangent="last", exact=("tangent",)),
    nn.Conv1d: _conv(1, symmetry=("chain", "src", "dst"), certify="conv", exact=("tangent", "certify")),
    nn.Conv2d: _conv(2, symmetry=("chain", "src", "dst"), factor="conv", certify="conv",
                     exact=("tangent", "factor", "certify")),
    nn.Conv3d: _conv(3, symmetry=("src", "dst"), exact=("tangent",)),
    nn.ConvTranspose1d: _conv(1, exact=("tangent",)),
    nn.ConvTranspose2d: _conv(2, exact=("tangent",)),
    nn.ConvTranspose3d: _conv(3, exact=("tangent",)),
    nn.Embedding: _row(tangent="rows", exact=("tangent",)),
    nn.modules.batchnorm._BatchNorm: _BN,
    nn.BatchNorm1d: replace(_BN, unit_axis="dim1", tangent="channels", certify="batchnorm",
                            exact=frozenset({"tangent", "certify"})),
    nn.BatchNorm2d: replace(_BN, spatial_dims=2, tangent="channels", certify="batchnorm",
                            exact=frozenset({"tangent", "certify"})),
    nn.BatchNorm3d: replace(_BN, spatial_dims=3, tangent="channels", exact=frozenset({"tangent"})),
    nn.GroupNorm: _row(tangent="channels", exact=("tangent",)),
    nn.LayerNorm: _row(symmetry=("norm",), tangent="shape", exact=("tangent",)),
    nn.RMSNorm: _row(symmetry=("norm",)),
    nn.ReLU: replace(_RELU, relu_slope=0.0, certify="relu"),
    nn.LeakyReLU: replace(_RELU, relu_slope="negative_slope", certify="leaky_relu"),
    nn.PReLU: _row(degree=1, piecewise_affine=True, symmetry=("permuted",)),
    nn.Identity: replace(_RELU, pass_through=True, relu_slope=1.0, certify="identity", exact=frozenset({"factor"})),
    nn.Flatten: _row(degree=1, piecewise_affine=True, pass_through=True, reshape=True, certify="identity"),
    nn.modules.dropout._DropoutNd: _DROPOUT,
    nn.Dropout: replace(_DROPOUT, pass_through=True, certify="identity"),
    **{cls: _SMOOTH for cls in (nn.Tanh, nn.Sigmoid, nn.GELU, nn.SiLU, nn.ELU, nn.CELU, nn.SELU, nn.Softplus,
                                nn.Softsign, nn.Hardswish, nn.Mish, nn.LogSigmoid, nn.Tanhshrink)},
    **{cls: _PWA for cls in (nn.Hardtanh, nn.Hardsigmoid, nn.Softshrink, nn.Hardshrink)},
    nn.MaxPool1d: _pool("max", 1, "maxpool"), nn.MaxPool2d: _pool("max", 2, "maxpool"), nn.MaxPool3d: _pool("max", 3),
    nn.AvgPool1d: _pool("avg", 1, "avgpool"), nn.AvgPool2d: _pool("avg", 2, "avgpool"), nn.AvgPool3d: _pool("avg", 3),
    nn.AdaptiveAvgPool1d: _pool("adaptive_avg", 1, "adaptive_avgpool"),
    nn.AdaptiveAvgPool2d: _pool("adaptive_avg", 2, "adaptive_avgpool"),
    nn.AdaptiveAvgPool3d: _pool("adaptive_avg", 3),
    nn.AdaptiveMaxPool1d: _pool("adaptive_max", 1), nn.AdaptiveMaxPool2d: _pool("adaptive_max", 2),
    nn.AdaptiveMaxPool3d: _pool("adaptive_max", 3),
}

#: the registry, read-only: registered type -> its row (change it with :func:`register_layer`)
LAYER_CAPABILITIES: Mapping[type, LayerCapabilities] = _TABLE


def layer_capabilities(layer: type | object, *, subclasses: bool = True) -> LayerCapabilities:
    """The capabilities of a layer (a module or its type): the row of the nearest registered type in its
    MRO, less that row's ``exact`` fields unless it is the layer's own type; :data:`NO_CAPABILITIES` when
    no type in the MRO is registered. ``subclasses=False``: the layer's own type's row only (the check
    ``type(m) is X``), :data:`NO_CAPABILITIES` for any other type.

    >>> layer_capabilities(nn.ReLU()).degree, layer_capabilities(nn.Linear).factor
    (1, 'linear')
    >>> class Gated(nn.Linear): pass
    >>> layer_capabilities(Gated).symmetry == {"chain", "src", "dst"}, layer_capabilities(Gated).factor
    (True, None)
    >>> layer_capabilities(nn.Transformer) == NO_CAPABILITIES, layer_capabilities(Gated, subclasses=False).symmetry
    (True, frozenset())
    """
    cls = layer if isinstance(layer, type) else type(layer)
    if not subclasses:
        return _TABLE.get(cls, NO_CAPABILITIES)
    for ancestor in cls.__mro__:
        row = _TABLE.get(ancestor)
        if row is not None:
            return row if ancestor is cls else row.inherited()
    return NO_CAPABILITIES


def train_mode_coupled(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(path, module)`` of every submodule of ``model`` in train mode whose output then depends on the batch
    or on chance (:attr:`LayerCapabilities.mode_dependent`), in ``named_modules`` order.

    >>> net = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
    >>> [path for path, _ in train_mode_coupled(net)], train_mode_coupled(net.eval())
    (['1'], [])
    """
    return [(path, m) for path, m in model.named_modules() if m.training and layer_capabilities(m).mode_dependent]


def register_layer(cls: type[nn.Module], capabilities: LayerCapabilities, *, replace_existing: bool = False) -> None:
    """Add the row of a new layer type (one entry: every check reads it from here on).

    >>> class Square(nn.Module):
    ...     def forward(self, x): return x * x
    >>> register_layer(Square, LayerCapabilities(degree=2, elementwise=True))
    >>> layer_capabilities(Square()).degree
    2
    >>> unregister_layer(Square)
    """
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise TypeError(f"register an nn.Module subclass, not {cls!r}")
    if not isinstance(capabilities, LayerCapabilities):
        raise TypeError(f"capabilities must be a LayerCapabilities, not {type(capabilities).__name__}")
    if cls in _TABLE and not replace_existing:
        raise ValueError(f"{cls.__name__} is registered already; pass replace_existing=True to change its row")
    _TABLE[cls] = capabilities


def unregister_layer(cls: type[nn.Module]) -> None:
    """Remove a row added by :func:`register_layer` (a ``KeyError`` if ``cls`` has none).

    >>> class Twice(nn.Module): pass
    >>> register_layer(Twice, LayerCapabilities(degree=1)); unregister_layer(Twice)
    >>> layer_capabilities(Twice) == NO_CAPABILITIES
    True
    """
    del _TABLE[cls]
