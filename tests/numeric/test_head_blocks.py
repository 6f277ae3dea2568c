"""T13 and T4 on real attention through ``blocks="head"``: a per-head ``c·Q`` map (Q orthogonal) is conformal on
that head's q/k (or v/o) blocks, so their ``D`` and ``D⁺`` stay exact, while a non-conformal ``A`` moves ``D`` of the
head's block, and ``c·Q`` on one head moves ``D`` of the whole fused tensor (the issue's claim). On GPT-2, BERT,
``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` built from configs (float64, eval, weights re-randomised
with std 0.3–0.5); the Hugging Face ones skip without ``transformers``."""

from __future__ import annotations

import functools
import importlib.util
import math

import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric import diagnose, function_gap, qk_transform, vo_transform
from coupled_curvature.numeric.core.head_blocks import head_blocks
from coupled_curvature.numeric.linalg.pinv import rounding_level
from tests.numeric.test_attention_symmetries import Logits

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers is not installed (the hf extra)")
F64 = torch.float64
CE = nn.CrossEntropyLoss()
TOL = 1e-10


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Tiny models are built from configs; nothing here may reach the network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _randomize(model: nn.Module, seed: int, std: float) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(std * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def lm_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Causal LM loss: position t predicts token t + 1."""
    return CE(out[:, :-1].reshape(-1, out.shape[-1]), y[:, 1:].reshape(-1))


class Pooled(nn.Module):
    """``body(x)`` (a sequence) -> mean over the sequence -> Linear: class logits."""

    def __init__(self, body: nn.Module, mha: bool) -> None:
        super().__init__()
        self.body, self.mha, self.head = body, mha, nn.Linear(8, 3, dtype=F64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x, x, x, need_weights=False)[0] if self.mha else self.body(x)
        return self.head(h.mean(1))


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=16, n_head=4, vocab_size=50, n_positions=16, bos_token_id=0, eos_token_id=0)
    model = _randomize(Logits(GPT2LMHeadModel(cfg).double().eval()), 1, 0.3)
    X = torch.randint(0, 50, (3, 7), generator=torch.Generator().manual_seed(0))
    a = "m.transformer.h.1.attn"
    return model, a, lm_loss, (X, X), f"{a}.c_attn", f"{a}.c_proj", f"{a}.c_attn.weight"


def _bert():
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                     max_position_embeddings=16, num_labels=3)
    model = _randomize(Logits(BertForSequenceClassification(cfg).double().eval()), 2, 0.4)
    g = torch.Generator().manual_seed(1)
    X, y = torch.randint(0, 50, (4, 6), generator=g), torch.randint(0, 3, (4,), generator=g)
    a = "m.bert.encoder.layer.0.attention"
    return model, a, CE, (X, y), (f"{a}.self.query", f"{a}.self.key", f"{a}.self.value"), f"{a}.output.dense", \
        f"{a}.self.query.weight"


def _mha():
    model = _randomize(Pooled(nn.MultiheadAttention(8, 2, batch_first=True, dtype=F64), True).eval(), 3, 0.5)
    g = torch.Generator().manual_seed(2)
    X, y = torch.randn(5, 4, 8, generator=g, dtype=F64), torch.randint(0, 3, (5,), generator=g)
    return model, "body", CE, (X, y), "body.in_proj_weight", "body.out_proj", "body.in_proj_weight"


def _encoder():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=F64)
    model = _randomize(Pooled(layer, False).eval(), 4, 0.4)
    g = torch.Generator().manual_seed(3)
    X, y = torch.randn(5, 4, 8, generator=g, dtype=F64), torch.randint(0, 3, (5,), generator=g)
    a = "body.self_attn"
    return model, "body", CE, (X, y), f"{a}.in_proj_weight", f"{a}.out_proj", f"{a}.in_proj_weight"


CASES = {"gpt2": pytest.param(_gpt2, marks=needs_transformers), "bert": pytest.param(_bert, marks=needs_transformers),
         "mha": _mha, "encoder": _encoder}


def _names(q_prefix, o_prefix, h):
    """Block names of head ``h`` (the documented rule: weight name without '.weight', then .q/.k/.v/.o[h])."""
    qkv = q_prefix if isinstance(q_prefix, tuple) else (q_prefix,) * 3
    return {"q": f"{qkv[0]}.q[{h}]", "k": f"{qkv[1]}.k[{h}]", "v": f"{qkv[2]}.v[{h}]", "o": f"{o_prefix}.o[{h}]"}


@functools.lru_cache(maxsize=None)
def _built(make):
    return make()


def _diagnose(model, loss, data, names):
    blocks = head_blocks(model).blocks
    return diagnose(model, loss, data, blocks={n: blocks[n] for n in names.values()})


def _conformal(n: int, c: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return c * torch.linalg.qr(torch.randn(n, n, generator=g, dtype=F64))[0]


def _non_conformal(n: int) -> torch.Tensor:
    """diag(2, 1/2, 1, …)·rotation: far from any c·Q."""
    t = 0.7
    R = torch.eye(n, dtype=F64)
    R[:2, :2] = torch.tensor([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]], dtype=F64)
    return torch.diag(torch.tensor([2.0, 0.5] + [1.0] * (n - 2), dtype=F64)) @ R


def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def _dplus_tol(*blocks):
    """D⁺ is exact in exact arithmetic (the relative cutoff and the kept set move with the spectrum, scaled by
    1/c²). In float64 a block ``H`` of size ``n`` built from Hessian-vector products is off by about
    ``‖δH‖ ≤ n·ε·max|λ|`` (Weyl), so each kept ``1/λ`` is good to ``n·ε·max|λ|/λ ≤ n·ε·κ`` with
    ``κ = max|λ|/min_kept|λ| ≤ 1/pinv_rtol`` (the cutoff); a factor 10 covers the eigenvectors' turn
    (Davis–Kahan) and cancellation between terms of both signs: ``max(1e-10, 10·n·ε·κ)``."""
    return max(max(TOL, 10 * rounding_level(b.size) / b.min_kept_rel_eig if b.min_kept_rel_eig else TOL)
               for b in blocks)


@pytest.mark.parametrize("pair", ["qk", "vo"])
@pytest.mark.parametrize("make", CASES.values(), ids=list(CASES))
@settings(max_examples=2, deadline=None, phases=[Phase.explicit, Phase.generate])  # a failure is reported, not shrunk
@given(h=st.integers(0, 3), c=st.floats(0.3, 3.0), seed=st.integers(0, 10_000))
def test_conformal_head_map_keeps_its_blocks_exact(make, h, c, seed, pair):
    model, attn, loss, data, q_prefix, o_prefix, _ = _built(make)
    lay = head_blocks(model).layouts
    heads = next(x for x in lay if x.name in (attn, f"{attn}.self_attn")).heads
    h %= heads
    names = _names(q_prefix, o_prefix, h)
    before = _diagnose(model, loss, data, names)
    dim = next(x for x in lay if x.name in (attn, f"{attn}.self_attn"))
    transform, n = (qk_transform, dim.head_dim) if pair == "qk" else (vo_transform, dim.value_dim)
    new = transform(model, attn, _conformal(n, c, seed), head=h)
    X = data[0]
    assert function_gap(model, new, X) <= 1e-10
    after = _diagnose(new, loss, data, names)
    for kind in pair:
        b, a = before[names[kind]], after[names[kind]]
        assert _rel(a.coupled, b.coupled) <= TOL, (kind, b.coupled, a.coupled)
        assert _rel(a.inverse_coupled, b.inverse_coupled) <= _dplus_tol(a, b), (kind, b.inverse_coupled,
                                                                                 a.inverse_coupled)
        scale = c * c if kind in "qv" else 1 / (c * c)  # A = cQ on q and v, A⁻ᵀ = Q/c on k, B⁻¹ on o's rows
        assert _rel(a.w_sq, b.w_sq * scale) <= 1e-12  # the map did act on the block
    witness = transform(model, attn, _non_conformal(n), head=h)
    moved = _diagnose(witness, loss, data, names)
    kind = pair[0]
    assert _rel(moved[names[kind]].coupled, before[names[kind]].coupled) > 1e4 * TOL, kind


@pytest.mark.parametrize("make", CASES.values(), ids=list(CASES))
def test_whole_tensor_d_moves_under_one_heads_cQ(make):
    """Negative control (the issue's claim): c·Q on one head is not conformal on the whole (fused) tensor."""
    model, attn, loss, data, _, _, whole = _built(make)
    new = qk_transform(model, attn, _conformal(_head_dim(model, attn), 2.0, 0), head=0)
    b, a = (diagnose(m, loss, data, blocks={"t": [whole]}, inverse=False)["t"] for m in (model, new))
    assert _rel(a.coupled, b.coupled) > 1e-3


def _head_dim(model, attn):
    return next(x for x in head_blocks(model).layouts if x.name in (attn, f"{attn}.self_attn")).head_dim


@pytest.mark.parametrize("make", CASES.values(), ids=list(CASES))
def test_head_partition_covers_every_parameter_once(make):
    model, *_ = _built(make)
    hb = head_blocks(model)
    counts = {n: torch.zeros(p.numel(), dtype=torch.long) for n, p in model.named_parameters()}
    for members in hb.blocks.values():
        for m in members:
            name, index = (m, ()) if isinstance(m, str) else m
            counts[name][torch.arange(counts[name].numel()).reshape(dict(model.named_parameters())[name].shape)[index]
                         .reshape(-1)] += 1
    assert all(bool((c == 1).all()) for c in counts.values())
    assert len(hb.layouts) == 2 if make is not _mha and make is not _encoder else len(hb.layouts) == 1


@needs_transformers
def test_stable_names_on_gpt2():
    model, *_ = _built(_gpt2)
    names = list(head_blocks(model).blocks)
    assert "m.transformer.h.0.attn.c_attn.q[3]" in names and "m.transformer.h.0.attn.c_proj.o[3]" in names
    assert "m.transformer.h.0.attn.c_proj.bias" in names and "m.transformer.h.0.attn.c_attn.weight" not in names
    d = diagnose(model, lm_loss, (_built(_gpt2)[3]), blocks="head", inverse=False)
    assert d.names() == names and d["m.transformer.h.0.attn.c_attn.k[1]"].size == 16 * 4 + 4


def test_head_blocks_of_a_model_without_attention_are_the_tensors():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert head_blocks(net).blocks == {n: [n] for n, _ in net.named_parameters()}


def test_head_and_frozen_skip_together():
    model, _, loss, data, *_ = _built(_mha)
    model = _randomize(Pooled(nn.MultiheadAttention(8, 2, batch_first=True, dtype=F64), True).eval(), 3, 0.5)
    model.body.in_proj_bias.requires_grad_(False)
    d = diagnose(model, loss, data, blocks="head", inverse=False)
    assert d["body.in_proj_weight.q[0]"].params == ("body.in_proj_weight[0:4, :]",)
    with pytest.raises(InvalidInputError, match="frozen"):
        diagnose(model, loss, data, blocks={"q": [("body.in_proj_bias", slice(0, 4))]})


def test_every_entry_point_takes_head_blocks():
    """spectral_profile, cutoff_sensitivity and the tracker take blocks='head' as diagnose does (one engine)."""
    from coupled_curvature.numeric import CurvatureTracker, cutoff_sensitivity, spectral_profile

    model, _, loss, data, *_ = _built(_mha)
    names = list(head_blocks(model).blocks)
    d = diagnose(model, loss, data, blocks="head")
    prof = spectral_profile(model, loss, data, blocks="head")
    assert [b.name for b in prof] == names == d.names()
    cut = cutoff_sensitivity(model, loss, data, blocks="head", rtols=(1e-10, 1e-6))
    assert "body.in_proj_weight.v[1]" in str(cut)
    rec = CurvatureTracker(model, loss, data, blocks="head", inverse=True).record(0)
    assert rec["D/body.out_proj.o[0]"] == pytest.approx(d["body.out_proj.o[0]"].coupled, rel=1e-12)
    assert rec["Dplus/body.in_proj_weight.k[1]"] == pytest.approx(d["body.in_proj_weight.k[1]"].inverse_coupled,
                                                                  rel=1e-9)
