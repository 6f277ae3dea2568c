"""numeric/core/gradient_level.py: a block the loss cannot see (an attention key bias) gets D = None with the
rounding note; a small but real gradient, which moves the loss, keeps its D."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch import nn

from coupled_curvature.numeric import diagnose

CE = nn.CrossEntropyLoss()


class TinyAttention(nn.Module):
    """One softmax attention head with separate query/key biases, mean-pooled to 3 logits."""

    def __init__(self, d: int = 4, scale_extra: float = 0.0):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(d, d).double() for _ in range(3))
        self.out = nn.Linear(d, 3).double()
        self.extra = nn.Parameter(torch.tensor([0.5], dtype=torch.float64))
        self.scale_extra = scale_extra
        with torch.no_grad():
            for p in self.parameters():
                if p is not self.extra:
                    p.normal_(0.0, 0.5)

    def forward(self, x):  # x: (batch, tokens, d)
        a = torch.softmax(self.q(x) @ self.k(x).transpose(1, 2), dim=-1)
        logits = self.out((a @ self.v(x)).mean(dim=1))
        return logits + self.scale_extra * self.extra * x[:, 0, :3]


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(12, 5, 4, generator=g, dtype=torch.float64), torch.randint(0, 3, (12,), generator=g)


def test_a_key_bias_is_zero_to_rounding_and_a_query_bias_is_not():
    torch.manual_seed(0)
    d = diagnose(TinyAttention(), CE, _data(), inverse=False)
    key, query = d["k.bias"], d["q.bias"]
    assert key.g_sq < 1e-30 and key.coupled is None and key.g_at_rounding  # softmax ignores a per-row shift
    assert any("zero to rounding" in n for n in key.notes)
    assert query.coupled is not None and not query.g_at_rounding and query.g_sq > 1e-12  # negative control


def test_a_small_real_gradient_that_moves_the_loss_keeps_its_D():
    """``extra`` enters the logits scaled by 5e-13: its gradient is about 1e-13, a candidate for the check
    (t‖g‖ ≤ 10³·ε·|L|), but the loss moves by about that much along it (hundreds of ε·|L|), so it is real
    and D stays."""
    from coupled_curvature.numeric.core.gradient_level import CANDIDATE

    torch.manual_seed(0)
    d = diagnose(TinyAttention(scale_extra=5e-13), CE, _data(), inverse=False)
    extra = d["extra"]
    assert extra.g_sq ** 0.5 <= CANDIDATE * torch.finfo(torch.float64).eps * abs(d.meta["loss"])  # checked
    assert not extra.g_at_rounding and extra.coupled is not None
    assert d["k.bias"].coupled is None  # the key bias is still recognised in the same model


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers (the hf extra)")
def test_bert_key_bias_gets_none_not_1e17():
    """The case of issue 33: BERT's attention key bias. Before: D ≈ −1.2e17 from a gradient of 6e-19."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                     max_position_embeddings=16, num_labels=3)
    m = BertForSequenceClassification(cfg).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.3)
    ids = torch.randint(0, 50, (8, 6))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.randint(0, 3, (8,))}
    d = diagnose(m, CE, batch, inverse=False)
    key = d["bert.encoder.layer.0.attention.self.key.bias"]
    assert key.coupled is None and key.g_at_rounding
    assert d["bert.encoder.layer.0.attention.self.query.bias"].coupled is not None
