"""diagnose() on attention, recurrent and checkpointed models, against dense references.

Reference: the block Hessian by ``torch.autograd.functional.hessian`` of the loss as a function of
the flattened block alone (attention under the math kernel set here with ``sdpa_kernel``; a
checkpointed model through a twin that runs without checkpointing), and numpy ``eigh`` with the
same relative cutoff. ``wᵀHw``, ``‖g‖²`` and ``D`` must agree to 1e-9 relative, ``D⁺`` to
``max(1e-9, 20εκ)`` relative to ``Σ|c_i/λ_i|`` (κ = 1/smallest kept relative eigenvalue: two
float64 eigensolvers differ by that much on the small kept eigenvalues).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import CheckpointError, checkpoint

from coupled_curvature.numeric.core import execution, hvp
from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.diagnostics import diagnose
from tests.numeric._nets import block_loss, rel

CE = nn.CrossEntropyLoss()
EPS = float(np.finfo(np.float64).eps)
RTOL = 1e-10
TOL = 1e-9
MATH_NOTE = "math kernel"


def _randomize(net: nn.Module, seed: int) -> nn.Module:
    """Every parameter redrawn (PyTorch zeroes attention biases, where ``w = 0`` leaves D undefined)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return net.eval()


class Transformer(nn.Module):
    """Linear embedding, one encoder layer (d_model 8, 2 heads), mean over the sequence, linear head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(3, 8)
        layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=8, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)).mean(dim=1))


class SelfAttention(nn.Module):
    """Hand-written multi-head self-attention: one qkv projection, ``F.scaled_dot_product_attention``
    called directly, an output projection."""

    def __init__(self, d: int = 8, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, t, d))


class CustomTransformer(nn.Module):
    """Linear embedding, a residual :class:`SelfAttention`, mean over the sequence, linear head."""

    def __init__(self):
        super().__init__()
        self.emb, self.attn, self.head = nn.Linear(3, 8), SelfAttention(), nn.Linear(8, 3)

    def forward(self, x):
        h = self.emb(x)
        return self.head((h + self.attn(h)).mean(dim=1))


class Recurrent(nn.Module):
    """An LSTM or GRU over the sequence, a linear head on the last hidden state."""

    def __init__(self, cell: type[nn.Module]):
        super().__init__()
        self.rnn = cell(3, 4, batch_first=True)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


class Checkpointed(nn.Module):
    """``body`` under ``torch.utils.checkpoint`` (non-reentrant) when ``use_checkpoint``, then a head."""

    def __init__(self, body: nn.Module, head: nn.Module):
        super().__init__()
        self.body, self.head = body, head
        self.use_checkpoint = True

    def forward(self, x):
        h = checkpoint(self.body, x, use_reentrant=False) if self.use_checkpoint else self.body(x)
        return self.head(h)


def _mlp_ckpt() -> Checkpointed:
    return Checkpointed(nn.Sequential(nn.Linear(4, 5), nn.Tanh()), nn.Linear(5, 3))


def _cnn_ckpt() -> Checkpointed:
    return Checkpointed(nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()), nn.Sequential(nn.Flatten(), nn.Linear(18, 3)))


def _data(shape, seed=1, n=6):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, *shape), generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


MODELS = {
    "transformer": (lambda: Transformer(), (4, 3)),
    "custom_attention": (lambda: CustomTransformer(), (4, 3)),
    "lstm": (lambda: Recurrent(nn.LSTM), (4, 3)),
    "gru": (lambda: Recurrent(nn.GRU), (4, 3)),
    "checkpointed_mlp": (_mlp_ckpt, (4,)),
    "checkpointed_cnn": (_cnn_ckpt, (1, 5, 5)),
}


def _model(name: str, seed: int = 0):
    build, shape = MODELS[name]
    torch.manual_seed(seed)
    return _randomize(build().double(), seed), _data(shape, seed + 1)


def reference(model, X, y, members, w_members=None, rtol=RTOL):
    """``{wHw, g_sq, coupled, inverse_coupled, tol}`` of the block ``members`` from its dense Hessian.

    ``w_members`` (same size) takes ``w`` from another block: the negative control."""
    plain = getattr(model, "use_checkpoint", None)
    if plain is not None:
        model.use_checkpoint = False
    f, theta = block_loss(model, CE, X, y, members)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            t = theta.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(f(t), t)
            H = torch.autograd.functional.hessian(f, theta)
    finally:
        if plain is not None:
            model.use_checkpoint = plain
    w = (theta if w_members is None else block_loss(model, CE, X, y, w_members)[1]).numpy()
    g, H = g.numpy(), H.numpy()
    lam, U = np.linalg.eigh((H + H.T) / 2)
    c = (U.T @ w) ** 2
    keep = np.abs(lam) > rtol * np.abs(lam).max()
    wsq, gsq = w @ w, g @ g
    wHw = w @ H @ w
    dplus = (c[keep] / lam[keep]).sum() / wsq * gsq
    kappa = np.abs(lam).max() / np.abs(lam[keep]).min()
    tol = max(TOL * abs(dplus), 20 * EPS * kappa * np.abs(c[keep] / lam[keep]).sum() / wsq * gsq)
    return {"wHw": wHw, "g_sq": gsq, "coupled": wHw / wsq / gsq, "inverse_coupled": dplus, "tol": tol}


_REFERENCES: dict[tuple[str, tuple[str, ...]], dict] = {}  # (model, block) -> reference, shared by the tests


def _check(model, X, y, d, name: str | None = None):
    """Every block of ``d`` against its reference; returns the largest relative error of D and D⁺.

    ``name`` (a key of ``MODELS``, built by :func:`_model`) lets the tests share references."""
    worst = [0.0, 0.0]
    for b in d:
        key = (name, b.params)
        ref = _REFERENCES.get(key) if name else None
        if ref is None:
            ref = reference(model, X, y, list(b.params))
            if name:
                _REFERENCES[key] = ref
        for field in ("wHw", "g_sq", "coupled"):
            assert rel(getattr(b, field), ref[field]) <= TOL, (b.name, field, getattr(b, field), ref[field])
        assert b.inverse_coupled is not None, (b.name, b.notes)
        assert abs(b.inverse_coupled - ref["inverse_coupled"]) <= ref["tol"], (b.name, b.inverse_coupled, ref)
        worst = [max(worst[0], rel(b.coupled, ref["coupled"])),
                 max(worst[1], rel(b.inverse_coupled, ref["inverse_coupled"]))]
    return worst


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", list(MODELS))
def test_defaults_match_dense_reference(name):
    model, (X, y) = _model(name)
    d = diagnose(model, CE, (X, y))
    _check(model, X, y, d, name)
    assert all(b.method in ("dense", "gram") for b in d)  # the default: Gram where the net is affine, else dense


#: the blocks the network is piecewise affine in (the rest: attention, gates, Tanh, below a LayerNorm)
AFFINE = {"transformer": {"head.weight", "head.bias", "enc.layers.0.norm2.weight", "enc.layers.0.norm2.bias"},
          "lstm": {"head.weight", "head.bias"}, "checkpointed_mlp": {"head.weight", "head.bias"}}


@pytest.mark.parametrize("name", ["transformer", "lstm", "checkpointed_mlp"])
@pytest.mark.parametrize("method", ["auto", "gram"])
def test_gram_and_auto_refuse_non_affine_blocks_and_match_reference(name, method):
    model, (X, y) = _model(name)
    d = diagnose(model, CE, (X, y), method=method)
    _check(model, X, y, d, name)
    gram = {b.name for b in d if b.method == "gram"}
    refused = {b.name for b in d if any("Gram route does not apply" in n for n in b.notes)}
    assert gram == AFFINE.get(name, set()) and refused == set(d.names()) - gram
    assert all(d[b].method == "dense" for b in refused)
    assert all(any("not affine in the block" in n for n in d[b].notes) for b in refused)


def _math_note(paths: str) -> str:
    return f"attention ({paths}) runs on the math kernel: the fused kernels have no second derivative"


class _UnusedAttention(nn.Module):
    """Holds an ``nn.MultiheadAttention`` its forward never calls."""

    def __init__(self):
        super().__init__()
        self.attn, self.head = nn.MultiheadAttention(4, 2, batch_first=True), nn.Linear(4, 3)

    def forward(self, x):
        return self.head(x.mean(dim=1))


@pytest.mark.parametrize("name, paths", [("transformer", "enc.layers.0.self_attn"), ("custom_attention", "attn")])
def test_math_kernel_note_names_the_modules_that_call_attention(name, paths):
    """nn.TransformerEncoderLayer (through nn.MultiheadAttention) and a module calling
    F.scaled_dot_product_attention itself: one model-level note naming the calling module."""
    model, (X, y) = _model(name)
    notes = diagnose(model, CE, (X, y), inverse=False).notes
    assert [n for n in notes if MATH_NOTE in n] == [_math_note(paths)]


def test_no_math_kernel_note_without_attention_calls():
    """Negative controls: no attention at all, and an attention module that never runs."""
    mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3)).double()
    assert not any(MATH_NOTE in n for n in diagnose(mlp, CE, _data((3,))).notes)
    unused = _randomize(_UnusedAttention().double(), 0)
    assert not any(MATH_NOTE in n for n in diagnose(unused, CE, _data((5, 4)), inverse=False).notes)


class _Inline(nn.Module):
    """Attention in the model's own forward, in a submodule called twice, and none in the rest."""

    def __init__(self):
        super().__init__()
        self.attn, self.head = SelfAttention(4), nn.Linear(4, 3)

    def forward(self, x):
        x = self.attn(self.attn(x))
        return self.head(F.scaled_dot_product_attention(x, x, x).mean(dim=1))


def test_attention_calls_counts_per_module_path():
    model = nn.Sequential(nn.Linear(4, 4), _Inline()).double()
    mha = nn.MultiheadAttention(4, 2).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    with hvp.attention_calls(model) as calls:
        out = model(x)
        mha(x, x, x)
        torch.ops.aten.scaled_dot_product_attention(x, x, x)
    assert calls == {"1.attn": 2, "1": 1, "outside the model": 2}
    with hvp.attention_calls(mha) as calls:
        mha(x, x, x, need_weights=False)
    assert calls == {"top level": 1}
    with hvp.attention_calls(model) as calls:
        model[0](x)
    assert calls == {} and out.shape == (2, 3)


class _Failing(Exception):
    """Not an error of the forward that diagnose reports as bad input: it propagates."""


class _FailingAttention(CustomTransformer):
    def forward(self, x):
        super().forward(x)
        raise _Failing


def _state(model: nn.Module) -> list:
    """Everything diagnose might leave behind: the model's values, modes and hooks, torch's switches."""
    hooks = [len(d) for m in model.modules() for d in (m._forward_pre_hooks, m._forward_hooks)]
    return [[(k, v.dtype, v.tolist()) for k, v in model.state_dict().items()], model.training, hooks,
            torch._C._len_torch_function_stack(), torch.backends.mha.get_fastpath_enabled()]


def test_attention_detection_leaves_no_trace():
    """The user's model and torch's global state are as before diagnose, also when the forward raises;
    the check can fail: inside the detection context the mode is on the stack."""
    model, (X, y) = _model("custom_attention")
    before = _state(model)
    with hvp.attention_calls(model):
        assert _state(model) != before
    diagnose(model, CE, (X, y), inverse=False)
    assert _state(model) == before
    with pytest.raises(InvalidInputError, match="model.X. failed"):
        diagnose(model, CE, (X[..., :2], y), inverse=False)
    assert _state(model) == before
    failing = _randomize(_FailingAttention().double(), 0)
    before = _state(failing)
    with pytest.raises(_Failing):
        diagnose(failing, CE, (X, y), inverse=False)
    assert _state(failing) == before


@pytest.mark.parametrize("name", ["transformer", "custom_attention"])
def test_without_the_math_kernel_the_fused_attention_has_no_second_derivative(monkeypatch, name):
    """Negative control: the models do reach the fused kernel, so the math kernel is what works."""
    model, (X, y) = _model(name)
    monkeypatch.setattr(hvp, "sdpa_kernel", lambda *backends: contextlib.nullcontext())
    with pytest.raises(RuntimeError, match="derivative for .* is not implemented"):
        diagnose(model, CE, (X, y))


def test_reference_with_another_blocks_w_disagrees():
    """Negative control: the same-size biases of the LSTM, w of one with H of the other."""
    model, (X, y) = _model("lstm")
    b = diagnose(model, CE, (X, y))["rnn.bias_ih_l0"]
    good = reference(model, X, y, ["rnn.bias_ih_l0"])
    bad = reference(model, X, y, ["rnn.bias_ih_l0"], w_members=["rnn.bias_hh_l0"])
    assert rel(b.wHw, good["wHw"]) <= TOL
    assert rel(b.wHw, bad["wHw"]) > 1e-3 and rel(b.inverse_coupled, bad["inverse_coupled"]) > 1e-3


def test_checkpoint_failure_of_the_factor_route_is_noted():
    model, (X, y) = _model("checkpointed_mlp")
    d = diagnose(model, CE, (X, y))
    assert any("per-sample factor route failed (CheckpointError" in n for n in d["body.0.weight"].notes)


def _raising(error: Exception):
    def fail(*args, **kwargs):
        raise error

    return fail


def test_route_failures_fall_back_but_other_errors_propagate(monkeypatch):
    """The tangent and Gram routes (which these models do not break) under injected failures: a
    CheckpointError falls back to Hessian-vector products with a note; any other error propagates."""
    mlp = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3)).double()
    X, y = _data((3,))
    clean = diagnose(mlp, CE, (X, y), inverse=False)
    monkeypatch.setattr(execution, "tangent_forms", _raising(CheckpointError("recomputed differ")))
    d = diagnose(mlp, CE, (X, y), inverse=False)
    assert d.meta["wHw_route"] == "hvp" and any("tangent route failed (CheckpointError" in n for n in d.notes)
    assert all(rel(b.wHw, clean[b.name].wHw) <= 1e-12 for b in d)
    monkeypatch.setattr(execution, "gram_forms", _raising(RuntimeError("derivative for aten::x is not implemented")))
    d = diagnose(mlp, CE, (X, y), method="gram")
    _check(mlp, X, y, d)
    assert all(b.method == "dense" and any("Gram route does not apply: it failed" in n for n in b.notes) for b in d)
    monkeypatch.setattr(execution, "gram_forms", _raising(RuntimeError("an unrelated bug")))
    with pytest.raises(RuntimeError, match="an unrelated bug"):
        diagnose(mlp, CE, (X, y), method="gram")
    monkeypatch.setattr(hvp, "linear_block_hessians", _raising(RuntimeError("an unrelated bug")))
    with pytest.raises(RuntimeError, match="an unrelated bug"):
        diagnose(mlp, CE, (X, y))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dense", "auto"])
def test_larger_transformer_matches_reference(method):
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)
    model = Transformer()
    model.emb, model.head = nn.Linear(3, 16), nn.Linear(16, 3)
    model.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    model = _randomize(model.double(), 3)
    X, y = _data((6, 3), seed=4, n=16)
    _check(model, X, y, diagnose(model, CE, (X, y), method=method))


class _Reentrant(Checkpointed):
    def forward(self, x):
        return self.head(checkpoint(self.body, x, use_reentrant=True))


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")
def test_reentrant_checkpoint_is_refused_not_read_as_zero():
    """A reentrant checkpoint on an input that needs no gradient cuts the parameters inside it off
    the graph: their g and H would be 0. The same weights without the checkpoint are diagnosed."""
    model, (X, y) = _model("checkpointed_mlp")
    cut = _Reentrant(model.body, model.head)
    with pytest.raises(InvalidInputError, match=r"body.0.weight, body.0.bias change.*use_reentrant=False"):
        diagnose(cut, CE, (X, y))
    for p in cut.body.parameters():
        p.requires_grad_(False)
    d = diagnose(cut, CE, (X, y))
    assert d.names() == ["head.weight", "head.bias"] and d.skipped == ("body.0.weight", "body.0.bias")
    for p in cut.body.parameters():
        p.requires_grad_(True)
    model.use_checkpoint = False
    assert diagnose(model, CE, (X, y))["body.0.weight"].g_sq > 0  # control: the block has a gradient
