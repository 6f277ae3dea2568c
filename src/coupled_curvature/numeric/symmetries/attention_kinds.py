"""Which modules are multi-head attention whose symmetries (T13) we can apply, and where their
Q, K, V and output weights sit: recognised by type and structure, without ``torch.fx``.

An :class:`AttentionLayout` says, for one attention module, which tensor (and which slice of it)
computes each head's queries, keys and values, and which rows of the output map read each head.
Every projection is written as ``x ↦ x·M + b`` with ``M`` of shape (inputs × outputs); for an
``nn.Linear`` (``x Wᵀ + b``) ``M = Wᵀ``, for Hugging Face's ``Conv1D`` (``x W + b``) ``M = W``.
Head ``h`` owns output columns ``h·d … (h+1)·d − 1`` of Q, K, V and input rows ``h·d_v … `` of
the output map ``O``.

Recognised (exact types; a subclass may change ``forward`` and is refused):

- ``nn.MultiheadAttention``: fused ``in_proj_weight`` (3E × E) or ``q/k/v_proj_weight`` (when
  ``kdim``/``vdim`` differ), ``in_proj_bias``, ``bias_k``/``bias_v`` (extra key/value vectors,
  mapped like the biases), ``out_proj``; ``batch_first`` either way;
- ``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer``'s ``self_attn`` (name the
  encoder layer, or the ``self_attn``/``multihead_attn`` module itself);
- Hugging Face ``GPT2Attention`` (fused ``c_attn`` Conv1D E × 3E, ``c_proj``; cross-attention's
  ``q_attn`` too), ``BertAttention`` (``self.query/key/value`` + ``output.dense``), ``ViTAttention``
  (``q_proj/k_proj/v_proj/o_proj``);
- a declared module: attributes ``q``, ``k``, ``v``, ``o`` (each exactly ``nn.Linear``) and an int
  ``num_heads``, promising that ``forward`` splits ``q(x)``, ``k(x')``, ``v(x')`` into ``num_heads``
  contiguous chunks of the last dimension, computes ``softmax(s·Q_h K_hᵀ + mask) V_h`` per head
  (any scale ``s``, any additive mask), concatenates the heads in order and applies ``o``.

Refused with the reason: rotary position embeddings (a Q/K map must commute with every rotation),
grouped-query attention (K/V heads shared by several Q heads), BERT's relative position scores,
anything else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor, nn
from torch.nn.utils import parametrize

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.symmetries.tied import check_untied, parameter_owners

__all__ = ["AttentionLayout", "Projection", "attention_layout", "attention_modules", "input_rows", "output_columns"]


@dataclass(frozen=True)
class Projection:
    """One projection's tensors: output features ``start … start+width−1`` of ``module.weight``;
    ``rows``: the tensor is (outputs × inputs) as in ``nn.Linear``, else (inputs × outputs) as in
    ``Conv1D``. ``vectors``: ``(attribute, start)`` of the tensors holding output vectors that map
    like the outputs (the bias; ``bias_k``, a key appended to every sequence), from ``start`` on."""

    module: str
    weight: str
    start: int
    width: int
    rows: bool
    vectors: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class AttentionLayout:
    """Where one attention module's per-head maps act: ``heads`` heads of query/key size
    ``head_dim`` and value size ``value_dim``."""

    name: str
    kind: str
    q: Projection
    k: Projection
    v: Projection
    o: Projection
    heads: int
    head_dim: int
    value_dim: int


def output_columns(model: nn.Module, p: Projection) -> tuple[Tensor, list[Tensor]]:
    """Views (writes go to the parameters) of ``M`` (inputs × width) and of the bias-like vectors
    (each ``(…, width)``) of projection ``p`` in ``model``."""
    mod = model.get_submodule(p.module)
    t = getattr(mod, p.weight).detach()
    M = t[p.start:p.start + p.width].t() if p.rows else t[:, p.start:p.start + p.width]
    vecs = [(getattr(mod, a).detach(), i) for a, i in p.vectors if getattr(mod, a, None) is not None]
    return M, [v.reshape(-1, v.shape[-1])[:, i:i + p.width] for v, i in vecs]


def input_rows(model: nn.Module, p: Projection) -> Tensor:
    """A view of the output map's ``M`` (inputs × outputs): head ``h`` reads rows ``h·d_v …``."""
    t = getattr(model.get_submodule(p.module), p.weight).detach()
    return t.t() if p.rows else t


def attention_layout(model: nn.Module, name: object) -> AttentionLayout:
    """The layout of the attention module ``name`` of ``model``, checked; a package error naming
    the reason and what to do for anything else.

    >>> net = nn.Sequential(nn.MultiheadAttention(8, 2))
    >>> lay = attention_layout(net, "0")
    >>> lay.kind, lay.heads, lay.head_dim, lay.q.width
    ('nn.MultiheadAttention', 2, 4, 8)
    """
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(name, str):
        raise InvalidInputError(f"attn={name!r}: pass a module name (a string), as model.named_modules() lists them")
    try:
        mod = model.get_submodule(name)
    except AttributeError:
        found = [n for n, m in model.named_modules() if _known(m)]
        hint = f"pass one of its attention modules: {', '.join(repr(n) for n in found[:8])}" if found else \
            "it holds no attention module this package recognises: pass a name from model.named_modules()"
        raise InvalidInputError(f"attn={name!r} is not a module of this model; {hint}") from None
    try:
        layout = _layout(mod, name)
    except UnsupportedModelError as e:
        near = _nearby(model, name)
        if not near:
            raise
        raise UnsupportedModelError(f"{e}; the recognised attention nearest to it: "
                                    f"{', '.join(repr(n) for n in near[:4])}") from None
    _check_tensors(model, layout)
    return layout


def attention_modules(model: nn.Module) -> tuple[dict[str, AttentionLayout], dict[str, str]]:
    """Every attention module of ``model`` this package recognises, by its layout's name (an encoder
    layer and its ``self_attn`` once), and the refused ones with the reason: modules whose class is
    named as attention but that cannot be mapped (rotary, grouped-query, unknown), unless they sit
    inside or around a recognised one.

    >>> layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    >>> found, refused = attention_modules(nn.Sequential(layer))
    >>> list(found), refused
    (['0.self_attn'], {})
    """
    found: dict[str, AttentionLayout] = {}
    refused: dict[str, str] = {}
    for name, mod in model.named_modules():
        try:
            lay = attention_layout(model, name)
        except UnsupportedModelError as e:
            if "attention" in type(mod).__name__.lower():
                refused[name] = str(e)
            continue
        found.setdefault(lay.name, lay)
    return found, {n: why for n, why in refused.items()
                   if not any(n == m or n.startswith(f"{m}.") or m.startswith(f"{n}." if n else "") for m in found)}


def _nearby(model: nn.Module, name: str) -> list[str]:
    """Recognised attention modules inside ``name``, or the module holding it."""
    sub = f"{name}." if name else ""
    inside = [f"{sub}{n}" for n, m in model.get_submodule(name).named_modules() if n and _known(m)]
    parent = name.rpartition(".")[0]
    return inside or ([parent] if name and _known(model.get_submodule(parent)) else [])


def _known(m: nn.Module) -> bool:
    declared = all(hasattr(m, a) for a in ("q", "k", "v", "o", "num_heads"))
    return type(m) in (nn.MultiheadAttention, nn.TransformerEncoderLayer) or _hf_kind(m) is not None or declared


_HF_KINDS = {  # exact classes (module path and name): a look-alike class elsewhere may compute something else
    "transformers.models.gpt2.modeling_gpt2.GPT2Attention": "GPT-2",
    "transformers.models.bert.modeling_bert.BertAttention": "BERT",
    "transformers.models.vit.modeling_vit.ViTAttention": "ViT",
}


def _hf_kind(m: nn.Module) -> str | None:
    return _HF_KINDS.get(f"{type(m).__module__}.{type(m).__qualname__}")


def _layout(mod: nn.Module, name: str) -> AttentionLayout:
    if type(mod) is nn.MultiheadAttention:
        return _mha(mod, name)
    if type(mod) in (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer):
        if type(mod) is nn.TransformerDecoderLayer:
            sub = f"{name}." if name else ""
            raise UnsupportedModelError(f"{name!r} is an nn.TransformerDecoderLayer, which holds two attentions: "
                                        f"pass {sub + 'self_attn'!r} or {sub + 'multihead_attn'!r}")
        if type(mod.self_attn) is not nn.MultiheadAttention:
            raise UnsupportedModelError(f"{name!r}.self_attn is a {type(mod.self_attn).__name__}, not an "
                                        "nn.MultiheadAttention; pass a standard nn.TransformerEncoderLayer")
        return _mha(mod.self_attn, f"{name}.self_attn" if name else "self_attn")
    kind = _hf_kind(mod)
    if kind == "GPT-2":
        return _gpt2(mod, name)
    if kind == "BERT":
        return _bert(mod, name)
    if kind == "ViT":
        return _linear_heads(mod, name, "ViT", ("q_proj", "k_proj", "v_proj", "o_proj"),
                             mod.num_attention_heads)
    why = _unsupported_reason(mod)
    if why is None and all(hasattr(mod, a) for a in ("q", "k", "v", "o", "num_heads")):
        return _linear_heads(mod, name, "declared", ("q", "k", "v", "o"), mod.num_heads)
    raise UnsupportedModelError(
        f"{name!r} is a {type(mod).__name__}, " + (why or "not an attention module this package can prove the "
        "symmetries of") + "; supported: nn.MultiheadAttention, nn.TransformerEncoderLayer, Hugging Face "
        "GPT2Attention, BertAttention and ViTAttention, or a module declaring attributes q, k, v, o (nn.Linear) "
        "and num_heads (see attention_kinds' docstring): pass the name of one of those")


def _unsupported_reason(mod: nn.Module) -> str | None:
    """Why a module of unknown type that looks like attention is not plain multi-head attention,
    when its attributes say so."""
    words = {w for n in (*vars(mod), *dict(mod.named_children())) for w in re.split(r"[_\W]+", n.lower())}
    if "attention" not in type(mod).__name__.lower() and not words & {"q", "query", "qkv", "wqkv", "attn"}:
        return None
    config = getattr(mod, "config", None)
    reasons = []
    if words & {"rope", "rotary"} or getattr(config, "position_embedding_type", None) == "rotary" or any(
            getattr(config, a, None) is not None for a in ("rope_parameters", "rope_theta", "rope_scaling",
                                                            "rotary_pct", "rotary_dim")):
        reasons.append("applies rotary position embeddings to Q and K: a map A keeps the logits only if it commutes "
                       "with every rotation (A = c·Q block-diagonal on the rotation planes) and a general A "
                       "would change the function")
    heads = getattr(mod, "num_heads", getattr(mod, "num_attention_heads", getattr(config, "num_attention_heads", None)))
    kv = getattr(mod, "num_key_value_heads", getattr(config, "num_key_value_heads", heads))
    groups = getattr(mod, "num_key_value_groups", 1)
    k, q = getattr(mod, "k", None), getattr(mod, "q", None)
    narrow = isinstance(k, nn.Linear) and isinstance(q, nn.Linear) and k.out_features != q.out_features
    if (isinstance(groups, int) and groups > 1) or kv != heads or narrow:
        reasons.append("shares its key/value heads among several query heads (grouped-query attention): a K-side "
                       "map would have to fit every query head of its group, which is not supported")
    return "which " + "; and which ".join(reasons) + ", so it is refused" if reasons else None


def _mha(m: nn.MultiheadAttention, name: str) -> AttentionLayout:
    E, d = m.embed_dim, m.head_dim
    fused = m.in_proj_weight is not None

    def proj(i: int, separate: str, extra: str) -> Projection:
        vectors = ((("in_proj_bias", i * E),) if m.in_proj_bias is not None else ()) + \
            (((extra, 0),) if getattr(m, extra, None) is not None else ())
        return Projection(name, "in_proj_weight" if fused else separate, i * E if fused else 0, E, True, vectors)

    q, k, v = proj(0, "q_proj_weight", ""), proj(1, "k_proj_weight", "bias_k"), proj(2, "v_proj_weight", "bias_v")
    o = Projection(f"{name}.out_proj" if name else "out_proj", "weight", 0, m.out_proj.out_features, True,
                   (("bias", 0),))
    return AttentionLayout(name, "nn.MultiheadAttention", q, k, v, o, m.num_heads, d, d)


def _int_attribute(m: nn.Module, attr: str, name: str) -> int:
    """The int ``m.attr`` of a recognised attention (a size or a head count), else an error naming it."""
    value = getattr(m, attr, None)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnsupportedModelError(f"{name!r}: {type(m).__name__}.{attr} is {value!r}, not an int; pass a standard "
                                    f"{type(m).__name__}")
    return value


def _gpt2(m: nn.Module, name: str) -> AttentionLayout:
    E, H, d = (_int_attribute(m, a, name) for a in ("embed_dim", "num_heads", "head_dim"))
    split = _int_attribute(m, "split_size", name)
    cross = bool(getattr(m, "is_cross_attention", False))
    if H * d != E or split != E:
        raise UnsupportedModelError(f"{name!r}: GPT2Attention with embed_dim {E}, {H} heads of {d} and split_size "
                                    f"{split} is not the standard layout; pass a standard GPT-2 attention")
    sub = f"{name}." if name else ""

    def conv(module: str, i: int) -> Projection:
        return Projection(f"{sub}{module}", "weight", i * E, E, False, (("bias", i * E),))

    q, k, v = (conv("q_attn", 0), conv("c_attn", 0), conv("c_attn", 1)) if cross else \
        (conv("c_attn", 0), conv("c_attn", 1), conv("c_attn", 2))
    return AttentionLayout(name, "GPT-2", q, k, v, conv("c_proj", 0), H, d, d)


def _bert(m: nn.Module, name: str) -> AttentionLayout:
    s = m.get_submodule("self")
    position = getattr(s, "position_embedding_type", "absolute")
    if position != "absolute":
        raise UnsupportedModelError(
            f"{name!r}: BERT attention with position_embedding_type={position!r} adds Q·r and K·r scores with "
            "distance embeddings r, which a Q/K map changes; pass a model with absolute position embeddings")
    paths = ("self.query", "self.key", "self.value", "output.dense")
    mods = [m.get_submodule(a) for a in paths]
    linears = [x for x in mods if type(x) is nn.Linear]
    if len(linears) != len(mods):
        raise UnsupportedModelError(f"{name!r}: query, key, value and output.dense must be nn.Linear; pass a "
                                    "standard BertAttention")
    q, k, v, o = _whole_linears(name, paths, linears)
    d = _int_attribute(s, "attention_head_size", name)
    return AttentionLayout(name, "BERT", q, k, v, o, _int_attribute(s, "num_attention_heads", name), d, d)


def _linear_heads(m: nn.Module, name: str, kind: str, attrs: tuple[str, str, str, str], heads: object) -> AttentionLayout:
    """Four separate ``nn.Linear`` maps q, k, v, o with ``heads`` contiguous heads (ViT, a declared module)."""
    mods = [getattr(m, a) for a in attrs]
    bad = [a for a, x in zip(attrs, mods) if type(x) is not nn.Linear]
    if bad:
        raise UnsupportedModelError(f"{name!r}: attribute(s) {', '.join(bad)} are not nn.Linear; a declared attention "
                                    "needs q, k, v, o as nn.Linear modules: pass such a module")
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise UnsupportedModelError(f"{name!r}: num_heads={heads!r}; declare an int number of heads ≥ 1")
    q, k, v, o = mods
    if q.out_features % heads or v.out_features % heads or k.out_features != q.out_features \
            or o.in_features != v.out_features:
        raise UnsupportedModelError(
            f"{name!r}: q, k, v, o give {q.out_features}, {k.out_features}, {v.out_features} features and o reads "
            f"{o.in_features}; {heads} heads need q and k of equal width and q, v widths divisible by num_heads, "
            "with o reading v's width: fix the declaration")
    q, k, v, o = _whole_linears(name, attrs, mods)
    return AttentionLayout(name, kind, q, k, v, o, heads, q.width // heads, v.width // heads)


def _whole_linears(name: str, paths: Sequence[str], linears: Sequence[nn.Linear]) -> list[Projection]:
    """Each ``nn.Linear`` (at ``paths`` under ``name``) as one projection of all its rows, its bias mapped alike."""
    sub = f"{name}." if name else ""
    return [Projection(f"{sub}{a}", "weight", 0, x.out_features, True, (("bias", 0),)) for a, x in zip(paths, linears)]


def _check_tensors(model: nn.Module, lay: AttentionLayout) -> None:
    """Float, materialised, unparametrized tensors owned by this attention alone."""
    owners = parameter_owners(model)
    for p in (lay.q, lay.k, lay.v, lay.o):
        mod = model.get_submodule(p.module)
        if parametrize.is_parametrized(mod):
            raise UnsupportedModelError(f"{p.module!r} is parametrized (its weight is computed); remove the "
                                        "parametrization first (parametrize.remove_parametrizations)")
        for attr in (p.weight, *(a for a, _ in p.vectors)):
            t = getattr(mod, attr, None)
            if t is None:
                continue
            full = f"{p.module}.{attr}" if p.module else attr
            if t.is_meta:
                raise UnsupportedModelError(f"{full!r} is on the meta device (no values); materialize the model first "
                                            "(model.to_empty(device='cpu'), then load_state_dict)")
            if not t.is_floating_point():
                raise UnsupportedModelError(f"{full!r} holds {t.dtype}; the maps need float weights: call .double()")
            check_untied(owners.get(id(t), set()), full, "is shared with")
