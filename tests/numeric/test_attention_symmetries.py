"""Attention's symmetries (T13): per-head Q/K and V/O maps, head permutations and the norm scale keep
the function of every recognised kind of attention, return new models, move ``D`` exactly as T4
says, and refuse what they cannot prove (singular or wrong-sized maps, rotary embeddings,
grouped-query attention, unknown modules)."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric import diagnose, function_gap, norm_rescale, permute_heads, qk_transform, vo_transform
from coupled_curvature.numeric.symmetries.attention_kinds import attention_layout, output_columns
from tests.reliability._common import assert_names_fix, assert_unchanged, snapshot

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers is not installed (the hf extra)")
F64 = torch.float64


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Tiny models are built from configs; nothing here may reach the network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def invertible(n: int, seed: int, max_cond: float = 30.0) -> torch.Tensor:
    """``U diag(s) Vᵀ`` with random orthogonal ``U``, ``V`` and singular values in ``[1, max_cond]`` times a
    random scale: condition number at most ``max_cond``, far from conformal."""
    g = torch.Generator().manual_seed(seed)
    U = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=F64))[0]
    V = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=F64))[0]
    s = torch.exp(torch.rand(n, generator=g, dtype=F64) * math.log(max_cond))
    return U @ torch.diag(s) @ V.T * float(10 ** (torch.rand(1, generator=g) * 2 - 1))


def _randomize(model: nn.Module, seed: int, std: float = 0.3) -> nn.Module:
    """Weights large enough that the softmax is far from uniform (HF's init, std 0.02, makes the logits tiny and a
    wrong map nearly invisible)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(std * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


class MHA(nn.Module):
    """Self-attention through ``nn.MultiheadAttention``; ``kdim``/``vdim`` other than E give separate q/k/v weights."""

    def __init__(self, batch_first: bool, separate: bool, **kw) -> None:
        super().__init__()
        dims = {"kdim": 5, "vdim": 3} if separate else {}
        self.batch_first, self.separate = batch_first, separate
        self.attn = nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=F64, **dims, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, v = (x[..., :5], x[..., 5:]) if self.separate else (x, x)
        return self.attn(x, k, v, need_weights=False)[0]


class Declared(nn.Module):
    """A hand-written causal attention declaring q, k, v, o and num_heads; value heads wider than query heads."""

    def __init__(self, E: int = 8, heads: int = 2, dv: int = 6) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(E, E, dtype=F64), nn.Linear(E, E, dtype=F64)
        self.v, self.o = nn.Linear(E, heads * dv, dtype=F64), nn.Linear(heads * dv, E, dtype=F64)
        self.num_heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        H = self.num_heads
        q, k, v = (f(x).view(B, T, H, -1).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))  # causal
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1))


class Classifier(nn.Module):
    """``attention -> mean over the sequence -> Linear``: logits for a loss."""

    def __init__(self, attn: nn.Module, E: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.attn, self.head = attn, nn.Linear(E, classes, dtype=F64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.attn(x).mean(1))


class Logits(nn.Module):
    """A Hugging Face model answering with its ``.logits`` (``diagnose``/``function_gap`` want a tensor)."""

    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.m(x).logits


def _gpt2() -> tuple[nn.Module, str, torch.Tensor]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=16, n_head=4, vocab_size=50, n_positions=16, bos_token_id=0, eos_token_id=0)
    model = _randomize(Logits(GPT2LMHeadModel(cfg).double().eval()), 1)
    return model, "m.transformer.h.1.attn", torch.randint(0, 50, (3, 7), generator=torch.Generator().manual_seed(0))


class GPT2Cross(nn.Module):
    """GPT-2's cross-attention (``q_attn`` for Q, ``c_attn`` fused K and V): the first 3 positions attend to the rest."""

    def __init__(self) -> None:
        from transformers import GPT2Config
        from transformers.models.gpt2.modeling_gpt2 import GPT2Attention

        super().__init__()
        cfg = GPT2Config(n_layer=1, n_embd=16, n_head=4, vocab_size=50, n_positions=16, bos_token_id=0, eos_token_id=0)
        self.attn = GPT2Attention(cfg, is_cross_attention=True, layer_idx=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x[:, :3].contiguous(), encoder_hidden_states=x[:, 3:].contiguous())[0]


def _gpt2_cross() -> tuple[nn.Module, str, torch.Tensor]:
    model = _randomize(GPT2Cross().double().eval(), 14, 0.5)
    return model, "attn", torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(0), dtype=F64)


def _bert(layers: int = 2) -> tuple[nn.Module, str, torch.Tensor]:
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=32, max_position_embeddings=16, num_labels=3)
    model = _randomize(Logits(BertForSequenceClassification(cfg).double().eval()), 2)
    return model, "m.bert.encoder.layer.0.attention", torch.randint(0, 50, (3, 7), generator=torch.Generator().manual_seed(0))


def _vit() -> tuple[nn.Module, str, torch.Tensor]:
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(image_size=8, patch_size=4, num_channels=1, hidden_size=16, num_hidden_layers=1,
                    num_attention_heads=4, intermediate_size=32, num_labels=3)
    model = _randomize(Logits(ViTForImageClassification(cfg).double().eval()), 3)
    return model, "m.vit.layers.0.attention", torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=F64)


def _torch_kind(kind: str) -> tuple[nn.Module, str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    if kind.startswith("mha"):
        batch_first, separate = kind in ("mha-bf", "mha-sep-bf"), "sep" in kind
        extra = {"add_bias_kv": True, "add_zero_attn": True} if kind == "mha" else {}
        model = _randomize(MHA(batch_first, separate, **extra), 4, 0.5)
        return model, "attn", torch.randn(4, 5, 8, generator=g, dtype=F64)
    if kind.startswith("encoder"):
        norm_first = kind.endswith("norm-first")
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=F64)
        model = _randomize(layer.eval(), 5, 0.5)
        return model, "" if norm_first else "self_attn", torch.randn(4, 5, 8, generator=g, dtype=F64)
    return _randomize(Declared(), 6, 0.5), "", torch.randn(3, 5, 8, generator=g, dtype=F64)


TORCH_KINDS = ["mha", "mha-bf", "mha-sep", "mha-sep-bf", "encoder", "encoder-norm-first", "declared"]
HF_KINDS = ["gpt2", "gpt2-cross", "bert", "vit"]


def build(kind: str) -> tuple[nn.Module, str, torch.Tensor]:
    return {"gpt2": _gpt2, "gpt2-cross": _gpt2_cross, "bert": _bert, "vit": _vit}.get(kind, lambda: _torch_kind(kind))()


KINDS = TORCH_KINDS + [pytest.param(k, marks=needs_transformers) for k in HF_KINDS]


def _changed(a: nn.Module, b: nn.Module) -> list[str]:
    sb = b.state_dict()
    return [k for k, v in a.state_dict().items() if not torch.equal(v, sb[k])]


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=4)
@given(seed=st.integers(0, 2**31 - 1), head=st.one_of(st.none(), st.integers(0, 1)))
def test_maps_keep_the_function(kind, seed, head):
    model, name, X = build(kind)
    lay = attention_layout(model, name)
    snap = snapshot(model)
    A, B = invertible(lay.head_dim, seed), invertible(lay.value_dim, seed + 1)
    perm = torch.randperm(lay.heads, generator=torch.Generator().manual_seed(seed))
    if torch.equal(perm, torch.arange(lay.heads)):
        perm = perm.flip(0)
    for new in (qk_transform(model, name, A, head), vo_transform(model, name, B, head), permute_heads(model, name, perm)):
        assert function_gap(model, new, X) <= 1e-10
        assert new is not model and _changed(model, new), "a map must change the weights (negative control for a no-op)"
    assert_unchanged(model, snap)


def _q_only(model: nn.Module, name: str, A: torch.Tensor) -> nn.Module:
    """A wrong map: ``W_Q -> W_Q A`` without ``W_K -> W_K A⁻ᵀ`` (the K columns put back)."""
    lay = attention_layout(model, name)
    new = qk_transform(model, name, A)
    (M_old, vecs_old), (M_new, vecs_new) = output_columns(model, lay.k), output_columns(new, lay.k)
    with torch.no_grad():
        for old, now in zip([M_old, *vecs_old], [M_new, *vecs_new]):
            now.copy_(old)
    return new


@pytest.mark.parametrize("kind", KINDS)
def test_a_broken_map_changes_the_function(kind):
    model, name, X = build(kind)
    lay = attention_layout(model, name)
    assert function_gap(model, _q_only(model, name, invertible(lay.head_dim, 7)), X) > 1e-6
    wrong_o = vo_transform(model, name, invertible(lay.value_dim, 8))
    with torch.no_grad():  # V mapped, O left as it was
        wrong_o.get_submodule(lay.o.module).weight.copy_(model.get_submodule(lay.o.module).weight)
    assert function_gap(model, wrong_o, X) > 1e-6


@needs_transformers
def test_gpt2_options_that_do_not_matter():
    """``scale_attn_by_inverse_layer_idx`` and ``reorder_and_upcast_attn`` act on the logits after Q·Kᵀ; the
    causal mask too."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=16, n_head=4, vocab_size=50, n_positions=16, bos_token_id=0, eos_token_id=0,
                     scale_attn_by_inverse_layer_idx=True, reorder_and_upcast_attn=True)
    model = _randomize(Logits(GPT2LMHeadModel(cfg).double().eval()), 9)
    X = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(1))
    new = qk_transform(model, "m.transformer.h.1.attn", invertible(4, 10), head=2)
    # the upcast runs the logits in float32, so the gap is float32 rounding of the same logits
    assert function_gap(model, new, X) <= 1e-5
    assert function_gap(model, _q_only(model, "m.transformer.h.1.attn", invertible(4, 10)), X) > 1e-3


def _d(model: nn.Module, loss, data, names: dict[str, str]) -> dict[str, float]:
    diag = diagnose(model, loss, data, inverse=False, blocks={k: [v] for k, v in names.items()})
    return {k: diag[k].coupled for k in names}


def _t4_check(model, name, data, q_weight, k_weight):
    loss = nn.CrossEntropyLoss()
    blocks = {"q": q_weight, "k": k_weight}
    d = _d(model, loss, data, blocks)
    lay = attention_layout(model, name)
    conformal = _d(qk_transform(model, name, 3.0 * torch.eye(lay.head_dim, dtype=F64)), loss, data, blocks)
    general = _d(qk_transform(model, name, invertible(lay.head_dim, 11)), loss, data, blocks)
    one_head = _d(qk_transform(model, name, 3.0 * torch.eye(lay.head_dim, dtype=F64), head=0), loss, data, blocks)
    for k in blocks:
        assert abs(conformal[k] - d[k]) <= 1e-10 * abs(d[k])  # c·I on every head: c·I on the tensor (T4)
        assert abs(general[k] - d[k]) > 1e-3 * abs(d[k])  # not conformal on the tensor: D moves
        assert abs(one_head[k] - d[k]) > 1e-3 * abs(d[k])  # c·I on one head only is not conformal on the tensor


def test_t4_on_a_declared_attention(one_thread):
    model = _randomize(Classifier(Declared()), 12, 0.5)
    g = torch.Generator().manual_seed(2)
    data = (torch.randn(6, 5, 8, generator=g, dtype=F64), torch.randint(0, 3, (6,), generator=g))
    _t4_check(model, "attn", data, "attn.q.weight", "attn.k.weight")


@needs_transformers
def test_t4_on_bert(one_thread):
    model, name, _ = _bert(layers=1)
    g = torch.Generator().manual_seed(3)
    data = (torch.randint(0, 50, (6, 5), generator=g), torch.randint(0, 3, (6,), generator=g))
    _t4_check(model, name, data, f"{name}.self.query.weight", f"{name}.self.key.weight")


# refusals: each names the reason and what to do, before any work, the model untouched

@pytest.mark.parametrize("A, match", [
    (torch.tensor([[1.0, 2.0], [2.0, 4.0]]), "singular"),
    (torch.diag(torch.tensor([1.0, 1e-12])), "ill-conditioned|singular"),
    (torch.eye(3), "shape"),
    (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), "NaN"),
    (torch.eye(2, dtype=torch.complex128), "real"),
    ("eye", "real"),
    (torch.eye(2, dtype=torch.bool), "real"),
])
def test_bad_matrices_are_refused(A, match):
    model, name, _ = _torch_kind("mha")  # 2 heads of 4: pad the 2 × 2 cases to the wrong size or keep them wrong
    A = torch.block_diag(A, torch.eye(2, dtype=A.dtype)) if isinstance(A, torch.Tensor) and A.shape == (2, 2) else A
    snap = snapshot(model)
    for f in (qk_transform, vo_transform):
        with pytest.raises(InvalidInputError, match=match) as e:
            f(model, name, A)
        assert_names_fix(e)
    assert_unchanged(model, snap)


def test_the_condition_limit_is_the_callers():
    model, name, X = _torch_kind("mha")
    A = torch.diag(torch.tensor([1.0, 1.0, 1.0, 1e-9], dtype=F64))
    with pytest.raises(InvalidInputError, match=r"condition number 1e\+09"):
        qk_transform(model, name, A)
    assert function_gap(model, qk_transform(model, name, A, max_condition=1e10), X) <= 1e-6


@pytest.mark.parametrize("head", [2, -1, True, 1.0, "0"])
def test_bad_heads_are_refused(head):
    model, name, _ = _torch_kind("mha")
    with pytest.raises(InvalidInputError, match="head") as e:
        qk_transform(model, name, torch.eye(4), head=head)
    assert_names_fix(e)


@pytest.mark.parametrize("perm", [[0, 0], [0, 1, 2], [0.0, 1.0], [True, False], "01"])
def test_bad_permutations_are_refused(perm):
    model, name, _ = _torch_kind("mha")
    with pytest.raises(InvalidInputError, match="permutation") as e:
        permute_heads(model, name, perm)
    assert_names_fix(e)


class Rotary(Declared):
    """Declares q, k, v, o but holds a rotary embedding: a general A would not commute with it."""

    def __init__(self) -> None:
        super().__init__()
        self.rotary_emb = nn.Identity()


class Grouped(Declared):
    """Keys and values of one head shared by two query heads."""

    def __init__(self) -> None:
        super().__init__()
        self.k = nn.Linear(8, 4, dtype=F64)


@pytest.mark.parametrize("model, name, error, match", [
    (Classifier(Declared()), "attn.q", UnsupportedModelError, "Linear, not an attention|not an attention"),
    (Classifier(Declared()), "nope", InvalidInputError, "not a module"),
    (Classifier(Declared()), 3, InvalidInputError, "module name"),
    (Rotary(), "", UnsupportedModelError, "rotary"),
    (Grouped(), "", UnsupportedModelError, "grouped-query"),
    (nn.TransformerDecoderLayer(8, 2), "", UnsupportedModelError, "self_attn"),
    (nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 1, enable_nested_tensor=False), "", UnsupportedModelError,
     "not an attention"),
])
def test_modules_that_are_not_provably_attention_are_refused(model, name, error, match):
    snap = snapshot(model)
    for call in (lambda: qk_transform(model, name, torch.eye(4)), lambda: vo_transform(model, name, torch.eye(4)),
                 lambda: permute_heads(model, name, [1, 0])):
        with pytest.raises(error, match=match) as e:
            call()
        assert_names_fix(e)
    assert_unchanged(model, snap)


@needs_transformers
@pytest.mark.parametrize("build, name, nearest", [
    (_bert, "m.bert.encoder.layer.0.attention.self", "'m.bert.encoder.layer.0.attention'"),
    (_gpt2, "m.transformer.h.0", "'m.transformer.h.0.attn'"),
    (_gpt2, "m.transformer.h.0.attn.c_attn", "'m.transformer.h.0.attn'"),
])
def test_a_near_miss_names_the_attention_to_pass(build, name, nearest):
    model = build()[0]
    with pytest.raises(UnsupportedModelError, match=f"nearest to it: {nearest}$") as e:
        qk_transform(model, name, torch.eye(4))
    assert_names_fix(e)


@needs_transformers
def test_llama_attention_is_refused_with_both_reasons():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=16, num_attention_heads=4, num_key_value_heads=2, intermediate_size=32,
                      num_hidden_layers=1, vocab_size=50, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = LlamaForCausalLM(cfg)
    with pytest.raises(UnsupportedModelError, match="rotary.*grouped-query") as e:
        qk_transform(model, "model.layers.0.self_attn", torch.eye(4))
    assert_names_fix(e)


def test_tied_weights_are_refused():
    model = Declared()
    model.k.weight = model.q.weight
    with pytest.raises(InvalidInputError, match="shared|untie"):
        qk_transform(model, "", torch.eye(4))


# norm_rescale

def _normed(norm: nn.Module) -> nn.Sequential:
    return _randomize(nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), norm, nn.ReLU(), nn.Linear(4, 2)).double().eval(),
                      13, 1.0)


@settings(max_examples=6)
@given(seed=st.integers(0, 2**31 - 1), log_c=st.floats(-3, 3).filter(lambda t: abs(t) > 0.01))
def test_norm_rescale_keeps_the_function(seed, log_c):
    X = torch.randn(7, 3, generator=torch.Generator().manual_seed(seed), dtype=F64)
    for norm in (nn.LayerNorm(4, eps=1e-20), nn.RMSNorm(4, eps=0.0)):
        model = _normed(norm)
        snap = snapshot(model)
        new = norm_rescale(model, "0", 10**log_c, X)
        assert function_gap(model, new, X) <= 1e-10
        assert _changed(model, new) == ["0.weight", "0.bias"]
        assert_unchanged(model, snap)
    exact = _normed(nn.RMSNorm(4, eps=0.0))
    assert function_gap(exact, norm_rescale(exact, "0", 10**log_c), X) <= 1e-10  # eps = 0: no X needed


def test_norm_rescale_reports_what_eps_does():
    model = _normed(nn.LayerNorm(4))  # eps = 1e-5
    X = torch.randn(7, 3, generator=torch.Generator().manual_seed(0), dtype=F64)
    with pytest.raises(InvalidInputError, match="pass the inputs X") as e:
        norm_rescale(model, "0", 8.0)
    assert_names_fix(e)
    with pytest.raises(InvalidInputError, match=r"changes its normalised output by up to \d") as e:
        norm_rescale(model, "0", 8.0, X)
    assert_names_fix(e)
    # the refusal is right: the function does change by about that much (negative control of the bound)
    loose = norm_rescale(model, "0", 8.0, X, tol=1e-2)
    assert function_gap(model, loose, X) > 1e-8


@pytest.mark.parametrize("model, linear, match", [
    (nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LayerNorm(4)), "0", "ReLU"),
    (nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2)), "2", "no LayerNorm"),
    (nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4)), "1", "LayerNorm; pass an nn.Linear"),
    (nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4)), "x", "not a module"),
    (Classifier(Declared()), "attn.q", "not in an nn.Sequential"),
])
def test_norm_rescale_refuses_other_structures(model, linear, match):
    with pytest.raises((InvalidInputError, UnsupportedModelError), match=match) as e:
        norm_rescale(model.double(), linear, 2.0, torch.randn(2, 3, dtype=F64))
    assert_names_fix(e)


@pytest.mark.parametrize("c", [0.0, -1.0, float("inf"), float("nan"), "2", True])
def test_norm_rescale_refuses_bad_factors(c):
    with pytest.raises(InvalidInputError, match="c must be"):
        norm_rescale(_normed(nn.RMSNorm(4, eps=0.0)), "0", c)


def test_float32_models_stay_float32():
    model, name, X = _torch_kind("mha-sep")
    model = model.float()
    new = qk_transform(model, name, invertible(4, 15))
    assert {p.dtype for p in new.parameters()} == {torch.float32}
    assert function_gap(model, new, X) <= 1e-4  # float32 rounding of the new weights, not the map
    assert function_gap(model, _q_only(model, name, invertible(4, 15)), X) > 1e-2
