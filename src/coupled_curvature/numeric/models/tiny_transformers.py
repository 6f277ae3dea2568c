"""Tiny trained transformers for the attention explorer and ``ccurv experiment transformers``.

Four kinds, each a token classifier ``body -> features -> head`` in float64, built from configs
(nothing is downloaded) and trained by :func:`~coupled_curvature.numeric.models.training.fit`:

- ``gpt2-tiny``: Hugging Face ``GPT2Model`` (fused ``c_attn``, causal), features of the last token;
- ``bert-tiny``: Hugging Face ``BertModel`` (separate query/key/value), features of the first token;
- ``encoder-layer``: ``nn.Embedding`` then ``nn.TransformerEncoderLayer`` (``in_proj_weight``), mean over tokens;
- ``mha``: ``nn.Embedding`` then self-attention by ``nn.MultiheadAttention``, mean over tokens.

The head is ``nn.Sequential(Linear(E, E, bias=False), LayerNorm(E, eps=1e-20), Linear(E, classes))``:
its first Linear feeds a LayerNorm, so ``norm_rescale`` (T13's norm scale, T10) has a place to act;
``eps = 1e-20`` keeps that map exact to far below rounding. Dropout is 0 everywhere, the models are
returned in eval mode. The data are ``samples`` seeded random sequences of ``tokens`` token ids below
``vocab``, labelled by a fixed rule (how many ids fall below ``vocab/2``, modulo ``classes``); the
weights start from the seeded default initialisation (Hugging Face's with ``initializer_range = 0.3``,
so the softmax is far from uniform) and take ``steps`` full-batch Adam steps at ``lr``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError, MissingExtraError
from coupled_curvature.numeric.models.training import fit

__all__ = ["TINY_TRANSFORMERS", "TinyTransformer", "TokenClassifier", "tiny_transformer"]

#: the kinds :func:`tiny_transformer` builds, and whether each needs the ``transformers`` package
TINY_TRANSFORMERS = {"gpt2-tiny": True, "bert-tiny": True, "encoder-layer": False, "mha": False}
F64 = torch.float64


class TokenClassifier(nn.Module):
    """``head(features(body(x)))``: the body's hidden states (batch × tokens × E) reduced to one row per
    sequence by ``pick`` (``"last"``, ``"first"`` or ``"mean"``), then the head."""

    def __init__(self, body: nn.Module, pick: str, width: int, classes: int) -> None:
        super().__init__()
        self.body, self.pick = body, pick
        self.head = nn.Sequential(nn.Linear(width, width, bias=False), nn.LayerNorm(width, eps=1e-20),
                                  nn.Linear(width, classes))

    def forward(self, x: Tensor) -> Tensor:
        h = self.body(x)
        h = getattr(h, "last_hidden_state", h)
        h = h[:, -1] if self.pick == "last" else h[:, 0] if self.pick == "first" else h.mean(1)
        return self.head(h)


class _SelfAttention(nn.Module):
    """Token embedding, then ``nn.MultiheadAttention`` of the embeddings with themselves."""

    def __init__(self, vocab: int, width: int, heads: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)

    def forward(self, x: Tensor) -> Tensor:
        e = self.emb(x)
        return self.attn(e, e, e, need_weights=False)[0]


@dataclass
class TinyTransformer:
    """A trained tiny transformer: the model (float64, eval mode), its loss and data, the attention module
    the T13 maps act on (``attn``), the Linear that feeds the head's LayerNorm (``norm_linear``) and the
    training loss before and after."""

    kind: str
    model: nn.Module
    loss_fn: Callable
    data: tuple[Tensor, Tensor]
    attn: str
    norm_linear: str
    description: str
    loss_before: float
    loss_after: float


def tiny_transformer(kind: str, *, seed: int = 0, width: int = 8, heads: int = 2, layers: int = 1, vocab: int = 20,
                     samples: int = 8, tokens: int = 6, classes: int = 3, steps: int = 20,
                     lr: float = 1e-2) -> TinyTransformer:
    """Build ``kind`` (one of :data:`TINY_TRANSFORMERS`), train it ``steps`` Adam steps on seeded token data.

    The T13 maps act on the attention of the last layer (``attn``). Deterministic under ``seed``.

    >>> t = tiny_transformer("mha", seed=0, steps=3)
    >>> t.attn, t.norm_linear, tuple(t.data[0].shape), t.loss_after < t.loss_before
    ('body.attn', 'head.0', (8, 6), True)
    """
    if kind not in TINY_TRANSFORMERS:
        raise InvalidInputError(f"unknown tiny transformer {kind!r}; available: {', '.join(TINY_TRANSFORMERS)}")
    if width % heads or min(width, heads, layers, vocab, samples, tokens, classes) < 1 or steps < 0:
        raise InvalidInputError(f"need positive sizes with width divisible by heads and steps ≥ 0; got width={width}, "
                                f"heads={heads}, layers={layers}, vocab={vocab}, samples={samples}, tokens={tokens}, "
                                f"classes={classes}, steps={steps}")
    if TINY_TRANSFORMERS[kind]:
        MissingExtraError.require("transformers", f"the tiny transformer {kind!r}", "hf",
                                  "encoder-layer and mha need only torch")
    gen = torch.Generator().manual_seed(1000 + seed)
    X = torch.randint(0, vocab, (samples, tokens), generator=gen)
    y = (X < vocab // 2).sum(1) % classes
    torch.manual_seed(seed)
    body, pick, attn = _body(kind, width, heads, layers, vocab, tokens)
    model = TokenClassifier(body, pick, width, classes).to(F64)
    loss_fn = nn.CrossEntropyLoss()
    with torch.no_grad():
        before = float(loss_fn(model.eval()(X), y))
    fit(model.train(), X, y, epochs=steps, seed=seed, lr=lr, batch_size=samples)
    model.eval()
    with torch.no_grad():
        after = float(loss_fn(model(X), y))
    text = (f"{kind}: width {width}, {heads} heads, {layers} layer(s), vocab {vocab}; {samples} sequences × {tokens} "
            f"tokens, {classes} classes; {steps} Adam steps (lr {lr:g}), seed {seed}; loss {before:.3f} -> {after:.3f}")
    return TinyTransformer(kind, model, loss_fn, (X, y), attn, "head.0", text, before, after)


def _body(kind: str, width: int, heads: int, layers: int, vocab: int, tokens: int) -> tuple[nn.Module, str, str]:
    """The body of ``kind``, how its hidden states are reduced, and the name of its last attention."""
    if kind == "gpt2-tiny":
        from transformers import GPT2Config, GPT2Model

        cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=vocab, n_positions=tokens,
                         bos_token_id=0, eos_token_id=0, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0,
                         initializer_range=0.3)
        return GPT2Model(cfg), "last", f"body.h.{layers - 1}.attn"
    if kind == "bert-tiny":
        from transformers import BertConfig, BertModel

        bert = BertConfig(vocab_size=vocab, hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
                         intermediate_size=2 * width, max_position_embeddings=tokens, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0, initializer_range=0.3)
        return BertModel(bert, add_pooling_layer=False), "first", f"body.encoder.layer.{layers - 1}.attention"
    if kind == "encoder-layer":
        stack = [nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True)
                 for _ in range(layers)]
        return nn.Sequential(nn.Embedding(vocab, width), *stack), "mean", f"body.{layers}.self_attn"
    if layers != 1:
        raise InvalidInputError(f"mha is one self-attention layer; got layers={layers}: pass layers=1")
    return _SelfAttention(vocab, width, heads), "mean", "body.attn"
