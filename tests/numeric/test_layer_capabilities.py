"""The layer-capability registry: its rows, the MRO lookup, an unknown type, one entry making a new layer
type pass the checks that read it, and no leftover tuple of layer classes elsewhere in the package."""

import ast
from pathlib import Path

import pytest
import torch
from torch import nn

import coupled_curvature
from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.certify.trace import trace
from coupled_curvature.numeric.factors.layers import is_factorable
from coupled_curvature.numeric.layer_capabilities import (LAYER_CAPABILITIES, NO_CAPABILITIES, LayerCapabilities,
                                                          layer_capabilities, register_layer, unregister_layer)
from coupled_curvature.numeric.symmetries.graph import channel_path
from coupled_curvature.numeric.symmetries.homogeneous import layer_pair, passes_chain

REGISTRY = "numeric/layer_capabilities.py"


def test_the_rows_of_the_table():
    relu, leaky, lin = layer_capabilities(nn.ReLU), layer_capabilities(nn.LeakyReLU), layer_capabilities(nn.Linear)
    assert (relu.degree, relu.piecewise_affine, relu.elementwise, relu.relu_slope) == (1, True, True, 0.0)
    assert (leaky.degree, leaky.relu_slope, leaky.certify) == (1, "negative_slope", "leaky_relu")
    assert lin.degree is None and lin.piecewise_affine  # affine: the bias breaks homogeneity
    assert lin.symmetry == {"chain", "src", "dst"}
    assert (lin.factor, lin.certify, lin.tangent) == ("linear", "linear", "last")
    assert layer_capabilities(nn.Conv3d).symmetry == {"src", "dst"}  # not counted by the int form
    assert layer_capabilities(nn.Conv2d).factor == "conv" and layer_capabilities(nn.Conv1d).factor is None
    for cls in (nn.Identity, nn.Flatten, nn.Dropout):
        caps = layer_capabilities(cls)
        assert caps.pass_through and caps.degree == 1 and caps.certify == "identity"
    assert layer_capabilities(nn.Flatten).reshape and not layer_capabilities(nn.Flatten).identity
    assert layer_capabilities(nn.Identity).identity and layer_capabilities(nn.Dropout).identity
    bn = layer_capabilities(nn.BatchNorm1d)
    assert bn.batch_statistics and bn.mode_dependent and bn.unit_axis == "dim1" and bn.symmetry == {"src", "permuted"}
    assert layer_capabilities(nn.BatchNorm2d).unit_axis == "first"
    assert layer_capabilities(nn.BatchNorm3d).certify is None
    assert layer_capabilities(nn.PReLU).symmetry == {"permuted"} and not layer_capabilities(nn.PReLU).elementwise
    assert layer_capabilities(nn.Tanh).elementwise and layer_capabilities(nn.Tanh).degree is None
    assert layer_capabilities(nn.MaxPool3d).pool == "max" and layer_capabilities(nn.MaxPool3d).certify is None
    assert (layer_capabilities(nn.AdaptiveAvgPool2d).pool, layer_capabilities(nn.AdaptiveAvgPool2d).spatial_dims) == (
        "adaptive_avg", 2)
    assert layer_capabilities(nn.LayerNorm).symmetry == {"norm"} and layer_capabilities(nn.RMSNorm).symmetry == {"norm"}
    assert layer_capabilities(nn.Embedding).tangent == "rows"
    assert all(isinstance(row, LayerCapabilities) for row in LAYER_CAPABILITIES.values())
    assert layer_capabilities(nn.ReLU()) is LAYER_CAPABILITIES[nn.ReLU]  # a module reads its type's row


def test_a_subclass_resolves_to_its_ancestor_less_the_exact_fields():
    class MyLinear(nn.Linear):
        pass

    class MyReLU(nn.ReLU):
        pass

    caps = layer_capabilities(MyLinear(2, 2))
    assert caps.symmetry == {"chain", "src", "dst"} and caps.unit_axis == "last" and caps.piecewise_affine
    assert (caps.factor, caps.certify, caps.tangent, caps.exact) == (None, None, None, frozenset())
    assert layer_capabilities(MyReLU).degree == 1 and layer_capabilities(MyReLU).factor is None
    assert layer_capabilities(nn.ReLU6).elementwise  # ReLU6 is a Hardtanh
    assert layer_capabilities(nn.Dropout2d).stochastic and not layer_capabilities(nn.Dropout2d).pass_through
    assert layer_capabilities(nn.SyncBatchNorm).batch_statistics  # _BatchNorm's row
    assert layer_capabilities(MyLinear, subclasses=False) == NO_CAPABILITIES
    assert not is_factorable(MyLinear(2, 2)) and is_factorable(nn.Linear(2, 2))  # as type(m) is nn.Linear was


def test_an_unknown_type_has_no_capabilities():
    class Mystery(nn.Module):
        pass

    for layer in (Mystery, Mystery(), nn.Transformer, None, 3):
        assert layer_capabilities(layer) == NO_CAPABILITIES
    caps = NO_CAPABILITIES
    assert caps.degree is None and not (caps.pass_through or caps.elementwise or caps.mode_dependent or caps.symmetry)


def test_registering_checks_its_arguments():
    with pytest.raises(ValueError, match="registered already"):
        register_layer(nn.ReLU, LayerCapabilities())
    with pytest.raises(TypeError):
        register_layer(int, LayerCapabilities())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exact names no field"):
        LayerCapabilities(exact=frozenset({"colour"}))


class Doubler(nn.Module):
    """A new layer type: ``x ↦ 2x``, positively homogeneous of degree 1 and element-wise."""

    def forward(self, x):
        return 2 * x


class Reshaper(nn.Module):
    """A new pass-through type: ``flatten(x, 1)`` spelt differently."""

    start_dim, end_dim = 1, -1

    def forward(self, x):
        return x.reshape(x.shape[0], -1)


# torch.fx keeps torch.nn's own modules as leaves (call_module nodes) and traces through any other: a type
# declared as torch.nn's reaches the graph checks as one module, which is what the registry decides on
Doubler.__module__ = Reshaper.__module__ = "torch.nn.modules.custom"


@pytest.fixture
def registered():
    """Register the two new types for one test and remove them again."""
    register_layer(Doubler, LayerCapabilities(degree=1, piecewise_affine=True, elementwise=True))
    register_layer(Reshaper, LayerCapabilities(degree=1, piecewise_affine=True, pass_through=True, reshape=True,
                                               certify="identity"))
    yield
    unregister_layer(Doubler)
    unregister_layer(Reshaper)


def _chain(middle: nn.Module) -> nn.Sequential:
    return nn.Sequential(nn.Linear(3, 4), middle, nn.Linear(4, 2)).double()


class _Named(nn.Module):
    def __init__(self, middle: nn.Module):
        super().__init__()
        self.a, self.mid, self.b = nn.Linear(3, 4), middle, nn.Linear(4, 2)

    def forward(self, x):
        return self.b(self.mid(self.a(x)))


def test_without_an_entry_a_new_type_is_refused():
    assert layer_capabilities(Doubler) == NO_CAPABILITIES and not passes_chain(layer_capabilities(Doubler))
    with pytest.raises(UnsupportedModelError, match="is not positively homogeneous of degree 1"):
        layer_pair(_chain(Doubler()), 0)
    with pytest.raises(InvalidInputError, match="is not known to commute with the map"):
        channel_path(_Named(Doubler()), "a", "b", "layer")
    with pytest.raises(UnsupportedModelError, match=r"module '1' \(Reshaper\) is not supported by certify"):
        trace(_chain(Reshaper()))


def test_one_entry_makes_the_checks_accept_a_new_type(registered):
    assert passes_chain(layer_capabilities(Doubler))
    pair = layer_pair(_chain(Doubler()), 0)
    assert pair.spread == 1
    path = channel_path(_Named(Doubler()), "a", "b", "neuron")
    assert path.between == ("mid",)
    assert [o.kind for o in trace(_chain(Reshaper()))] == ["linear", "identity", "linear"]
    net = _chain(Doubler())
    moved = coupled_curvature.layer_rescale(net, 0, 7.0)
    X = torch.randn(5, 3, dtype=torch.float64)
    assert torch.allclose(net(X), moved(X), rtol=1e-12, atol=1e-12)  # the accepted map keeps the function


# --- no leftover tuples of layer classes outside the registry ---------------------------------------------------

#: isinstance/type checks of nn classes in a tuple or set that are not capability questions, with why
ALLOWED: dict[str, str] = {
    "numeric/symmetries/attention_kinds.py": "parses the structure of nn.MultiheadAttention and the Transformer "
                                             "layers (which projections, where the heads sit), not a capability",
}


def _is_nn_class(node: ast.AST) -> bool:
    """``nn.X`` / ``torch.nn.X`` / ``nn.modules.….X`` whose last name is not a loss."""
    return (isinstance(node, ast.Attribute) and "nn" in ast.unparse(node).split(".")[:-1]
            and not node.attr.endswith("Loss"))


def _class_collections(source: str) -> list[str]:
    """Tuples, lists, sets and dicts (as keys) of nn classes, and ``isinstance(x, (…))``/``type(x) in (…)``
    with one, anywhere in ``source`` but in an ``assert`` (which narrows a module already checked for the
    type checker: not a capability question)."""
    tree = ast.parse(source)
    asserted = {id(n) for a in ast.walk(tree) if isinstance(a, ast.Assert) for n in ast.walk(a)}
    found = []
    for node in ast.walk(tree):
        if id(node) in asserted:
            continue
        elements: list[ast.AST] = []
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elements = list(node.elts)
        elif isinstance(node, ast.Dict):
            elements = [k for k in node.keys if k is not None]
        if sum(_is_nn_class(e) for e in elements) >= 2:
            found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return found


def _package_sources() -> dict[str, str]:
    root = Path(coupled_curvature.__file__).parent
    return {str(p.relative_to(root)).replace("\\", "/"): p.read_text(encoding="utf-8") for p in root.rglob("*.py")}


def test_the_grep_finds_a_tuple_of_layer_classes():
    assert _class_collections("ok = isinstance(m, (nn.Linear, nn.Conv1d))")
    assert _class_collections("_PASS = {nn.ReLU: 0.0, torch.nn.Identity: 1.0}")
    assert _class_collections("_ACTS = (nn.ReLU, nn.modules.dropout._DropoutNd)")
    assert not _class_collections("isinstance(loss, (nn.CrossEntropyLoss, nn.MSELoss))")
    assert not _class_collections("isinstance(m, nn.Linear) and m.bias is None")
    assert not _class_collections("assert isinstance(norm, (nn.LayerNorm, nn.RMSNorm))")


def test_no_tuple_of_layer_classes_outside_the_registry():
    sources = _package_sources()
    assert REGISTRY in sources and _class_collections(sources[REGISTRY])  # the table itself is found
    leftover = {path: hits for path, src in sources.items()
                if path != REGISTRY and path not in ALLOWED and (hits := _class_collections(src))}
    assert not leftover, ("collections of layer classes outside numeric/layer_capabilities.py: read the registry "
                          f"(layer_capabilities) instead, or add the file to ALLOWED with the reason: {leftover}")
    stale = [path for path in ALLOWED if not _class_collections(sources.get(path, ""))]
    assert not stale, f"ALLOWED lists files with no such collection any more: {stale}"
