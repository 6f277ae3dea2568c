"""Attention's symmetries (T13) as new models: per-head Q/K and V/O maps, head permutations, and
the scale invariance of a linear map that feeds a LayerNorm or RMSNorm.

For one head with ``Q = XW_Q``, ``K = X'W_K``, ``V = X'W_V`` and rows ``W_O^h`` of the output map,
``W_Q -> W_Q A``, ``W_K -> W_K A⁻ᵀ`` keeps the logits ``QKᵀ`` for any invertible ``A``, and
``W_V -> W_V B``, ``W_O^h -> B⁻¹W_O^h`` keeps the head's contribution to the output; the Q, K and
V biases of the head map with the same matrix (``b -> bA``). Everything downstream of the logits
(scaling by ``1/√d``, a causal or padding mask, softmax, dropout) sees the same logits, so masks
do not interfere; neither do GPT-2's ``scale_attn_by_inverse_layer_idx`` and
``reorder_and_upcast_attn``. Which modules are recognised, and how their tensors are laid out:
:mod:`~coupled_curvature.numeric.symmetries.attention_kinds`.

By T4, ``D`` and ``D⁺`` of a block are exact under a map that is conformal on it. The blocks are
whole tensors: a per-head ``A`` (or a fused ``c_attn``/``in_proj_weight``, where Q, K and V share
one tensor) is not conformal on the tensor even when ``A = cQ``; ``A = c·I`` on all heads
(``head=None``) of a separate Q weight is, and leaves its ``D`` unchanged.

Every map returns a deep copy in the model's dtype (the user's model is never changed); on
float32 the new weights are rounded, so ``.double()`` the model first to see the invariance to
~1e-13.

>>> from coupled_curvature.numeric import function_gap
>>> torch.manual_seed(0) and None
>>> layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=torch.float64).eval()
>>> X = torch.randn(5, 3, 8, dtype=torch.float64)
>>> A = torch.tensor([[2.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 3.0], [0.0, 0.0, 0.0, 1.0]])
>>> B = torch.eye(4, dtype=torch.float64) + 0.5 * torch.randn(4, 4, dtype=torch.float64)
>>> moved = [qk_transform(layer, "", A, head=1), vo_transform(layer, "self_attn", B), permute_heads(layer, "", [1, 0])]
>>> [function_gap(layer, new, X) < 1e-12 for new in moved]
[True, True, True]
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.core.inputs import check_positive, float64_copy, forward_checked, prepare_inputs
from coupled_curvature.numeric.layer_capabilities import layer_capabilities
from coupled_curvature.numeric.symmetries.arguments import INTEGER_DTYPES, array_argument
from coupled_curvature.numeric.symmetries.attention_kinds import (AttentionLayout, Projection, attention_layout,
                                                                  input_rows, output_columns)

__all__ = ["norm_rescale", "permute_heads", "qk_transform", "vo_transform"]

def qk_transform(model: nn.Module, attn: str, A: Tensor | Sequence, head: int | None = None, *,
                 max_condition: float = 1e8) -> nn.Module:
    """T13: ``W_Q -> W_Q A``, ``W_K -> W_K A⁻ᵀ`` (and the Q, K biases, ``b -> bA``, ``b -> bA⁻ᵀ``) of
    head ``head`` of the attention module ``attn``, or of every head when ``head`` is None.

    The logits ``Q_h K_hᵀ = X W_Q A A⁻¹ W_Kᵀ X'ᵀ`` are unchanged, so the function is. In torch's
    ``nn.Linear`` convention (``x Wᵀ + b``) this maps the head's rows ``W_q[h] -> Aᵀ W_q[h]`` and
    ``W_k[h] -> A⁻¹ W_k[h]``. ``attn`` is a module name as ``model.named_modules()`` lists it (``""``
    for the model itself). ``A`` is a real ``d_head × d_head`` matrix with a finite condition number
    at most ``max_condition`` (the result loses about ``log10(cond)`` digits).

    Args:
        model: the network; it is copied, never modified.
        attn: the attention module's name as ``model.named_modules()`` lists it (``""`` for the model itself).
        A: a real invertible ``d_head × d_head`` matrix.
        head: the head to transform; ``None`` for every head.
        max_condition: the largest condition number of ``A`` accepted.

    Returns:
        A new model with the same function.

    Raises:
        InvalidInputError: a matrix of the wrong shape, not finite, or too ill-conditioned; a head out of range.
        UnsupportedModelError: a module the package cannot prove is that kind of attention (rotary embeddings,
            grouped-query attention and other layouts are refused with the reason).

    See also:
        :func:`vo_transform`, :func:`permute_heads`, :func:`norm_rescale`,
        :func:`~coupled_curvature.numeric.symmetries.homogeneous.function_gap`; the module's example applies
        the first three.
    """
    lay = attention_layout(model, attn)
    heads = _heads(head, lay)
    A = _matrix(A, "A", lay.head_dim, "query/key", max_condition)
    new = copy.deepcopy(model)
    with torch.no_grad():
        _map_columns(new, lay.q, lay.head_dim, heads, A)
        _map_columns(new, lay.k, lay.head_dim, heads, torch.linalg.inv(A).T)
    _check_finite(new, lay, "A")
    return new


def vo_transform(model: nn.Module, attn: str, B: Tensor | Sequence, head: int | None = None, *,
                 max_condition: float = 1e8) -> nn.Module:
    """T13: ``W_V -> W_V B`` (the V bias ``b -> bB``) and the head's rows of the output map
    ``W_O^h -> B⁻¹ W_O^h``, for head ``head`` of ``attn`` or every head when ``head`` is None.

    Head ``h`` adds ``P_h V_h W_O^h = P_h X' W_V B B⁻¹ W_O^h`` to the output: unchanged. In torch's
    ``nn.Linear`` convention ``W_v[h] -> Bᵀ W_v[h]`` and the output weight's columns of the head
    ``W_o[:, h] -> W_o[:, h] B⁻ᵀ``. ``B`` is a real ``d_head × d_head`` matrix (the value head size)
    with condition number at most ``max_condition``.

    Args:
        model: the network, as for :func:`qk_transform`.
        attn: the attention module's name, as for :func:`qk_transform`.
        B: a real invertible ``d_v × d_v`` matrix (``d_v`` the value head size).
        head: the head whose values and output rows move; ``None`` for every head.
        max_condition: the largest condition number of ``B`` accepted.

    Returns:
        The new model, as for :func:`qk_transform`.

    Raises:
        InvalidInputError: as for :func:`qk_transform`, for ``B``.
        UnsupportedModelError: as for :func:`qk_transform`.

    See also:
        :func:`qk_transform`, :func:`permute_heads`,
        :func:`~coupled_curvature.numeric.symmetries.homogeneous.function_gap`; the module's example applies it.
    """
    lay = attention_layout(model, attn)
    heads = _heads(head, lay)
    B = _matrix(B, "B", lay.value_dim, "value", max_condition)
    inv = torch.linalg.inv(B)
    new = copy.deepcopy(model)
    with torch.no_grad():
        _map_columns(new, lay.v, lay.value_dim, heads, B)
        rows = input_rows(new, lay.o)
        for h in heads:
            block = rows[h * lay.value_dim:(h + 1) * lay.value_dim]
            block.copy_((inv.to(block.device) @ block.double()).to(block.dtype))
    _check_finite(new, lay, "B")
    return new


def permute_heads(model: nn.Module, attn: str, perm: Sequence[int] | Tensor) -> nn.Module:
    """T13: relabel the heads of ``attn``: new head ``i`` is old head ``perm[i]`` (its Q, K, V columns,
    biases and output rows move together), so the function is unchanged.

    ``perm`` holds integers (no floats, no bools), each of ``0..heads−1`` once.

    Args:
        model: the network, as for :func:`qk_transform`.
        attn: the attention module's name, as for :func:`qk_transform`.
        perm: the new order of the heads (new head ``i`` is old head ``perm[i]``).

    Returns:
        A new model whose heads are relabelled, with the same function.

    Raises:
        InvalidInputError: ``perm`` is not a permutation of the heads.
        UnsupportedModelError: a module the package cannot read as multi-head attention.

    See also:
        :func:`qk_transform`, :func:`vo_transform`; the module's example applies it.
    """
    lay = attention_layout(model, attn)
    p = _permutation(perm, lay.heads)
    new = copy.deepcopy(model)
    with torch.no_grad():
        for proj, d in ((lay.q, lay.head_dim), (lay.k, lay.head_dim), (lay.v, lay.value_dim)):
            idx = _head_index(p, d)
            M, vecs = output_columns(new, proj)
            for t in (M, *vecs):
                t.copy_(t[:, idx.to(t.device)].clone())
        rows = input_rows(new, lay.o)
        idx = _head_index(p, lay.value_dim).to(rows.device)
        rows.copy_(rows[idx].clone())
    return new


def norm_rescale(model: nn.Module, linear: str, c: float, X: Tensor | None = None, *, tol: float = 1e-10) -> nn.Module:
    """T13 (T10): ``W -> cW``, ``b -> cb`` of the ``nn.Linear`` named ``linear``, whose output feeds a
    LayerNorm or RMSNorm with nothing but Identity or Dropout between, as a new model.

    The norm divides by the root of the (centred, for LayerNorm) mean square ``v`` of its input:
    ``N(cz) = cz/√(c²v + eps) = z/√(v + eps/c²)``, exactly ``N(z)`` only when ``eps = 0``. With
    ``eps > 0`` the normalised output changes by the factor ``√((v + eps)/(v + eps/c²))``; pass the
    inputs ``X`` and this relative change, at the smallest ``v > 0`` the norm sees on ``X``, must be at
    most ``tol`` (else ``InvalidInputError`` gives it: build the norm with a smaller eps, or use c
    closer to 1). The structure is read from the model: the Linear must sit in an ``nn.Sequential``
    with the norm after it, be used once (not shared) and be called only through that Sequential.

    Args:
        model: the network; it is copied, never modified.
        linear: the name of the ``nn.Linear`` whose output feeds the LayerNorm or RMSNorm.
        c: the factor, finite and positive.
        X: inputs on which the norm's ``eps`` effect is bounded (needed when ``eps > 0``).
        tol: the largest relative change of the normalised output allowed on ``X``.

    Returns:
        A new model whose function is unchanged (to ``tol`` where the norm has ``eps > 0``).

    Raises:
        InvalidInputError: a bad factor, or an ``eps`` effect above ``tol`` on ``X`` (with the change).
        UnsupportedModelError: the Linear does not feed a norm directly in an ``nn.Sequential``, or is shared.

    See also:
        :func:`qk_transform`, :func:`~coupled_curvature.numeric.symmetries.homogeneous.layer_rescale`.

    >>> from coupled_curvature.numeric import function_gap
    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4, eps=1e-14), nn.Linear(4, 2)).double()
    >>> X = torch.randn(6, 3, dtype=torch.float64)
    >>> function_gap(net, norm_rescale(net, "0", 8.0, X), X) < 1e-12
    True
    """
    c = check_positive(c, "c", hint="; pass e.g. 8.0")
    tol = check_positive(tol, "tol", hint="; pass e.g. 1e-10")
    lin, norm_name, norm = _linear_before_norm(model, linear)
    eps = norm.eps if norm.eps is not None else torch.finfo(lin.weight.dtype).eps
    if eps > 0:
        if X is None:
            raise InvalidInputError(
                f"{norm_name!r} ({type(norm).__name__}) has eps={eps:g} > 0, so rescaling its input by c changes its "
                "output slightly (by √((v+eps)/(v+eps/c²)) at input mean square v): pass the inputs X to bound the "
                "change against tol, or build the norm with eps=0")
        change = _norm_change(model, norm_name, X, eps, c)
        if change > tol:
            raise InvalidInputError(
                f"{norm_name!r} ({type(norm).__name__}) has eps={eps:g}: rescaling its input by c={c!r} changes its "
                f"normalised output by up to {change:.3g} relative on X (> tol={tol:g}); build the norm with a "
                "smaller eps, use c closer to 1, or pass a larger tol if that change is acceptable")
    new = copy.deepcopy(model)
    lin_new = new.get_submodule(linear)
    assert isinstance(lin_new, nn.Linear)  # a deep copy: the same module tree as model's, checked above
    with torch.no_grad():
        for t in (lin_new.weight, lin_new.bias):
            if t is not None:
                t.mul_(c)
    if not all(bool(torch.isfinite(t).all()) for t in lin_new.parameters()):
        raise InvalidInputError(f"c={c:g} overflows {lin.weight.dtype} on {linear!r}; pass a smaller c, or call "
                                ".double() on the model first")
    return new


def _linear_before_norm(model: nn.Module, linear: object) -> tuple[nn.Linear, str, nn.LayerNorm | nn.RMSNorm]:
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(linear, str) or not linear:
        raise InvalidInputError(f"linear={linear!r}: pass the module name of an nn.Linear, as model.named_modules() "
                                "lists it")
    try:
        lin = model.get_submodule(linear)
    except AttributeError:
        raise InvalidInputError(f"linear={linear!r} is not a module of this model; pass a name from "
                                "model.named_modules()") from None
    if type(lin) is not nn.Linear:
        raise UnsupportedModelError(f"{linear!r} is a {type(lin).__name__}; pass an nn.Linear that feeds a norm")
    parent_name, _, key = linear.rpartition(".")
    parent = model.get_submodule(parent_name)
    if type(parent) is not nn.Sequential:
        raise UnsupportedModelError(
            f"{linear!r} is not in an nn.Sequential, so which module reads its output cannot be read off the model "
            "without tracing; pass a Linear that sits with its LayerNorm/RMSNorm in an nn.Sequential")
    uses = sum(m is lin for _, m in model.named_modules(remove_duplicate=False))
    owners = [n for n, p in model.named_parameters(remove_duplicate=False) for q in lin.parameters() if p is q]
    if uses > 1 or len(owners) > len(list(lin.parameters())):
        raise InvalidInputError(f"{linear!r} (or its weight) is used at more than one place in the model; rescaling "
                                "it would change the others too: untie it first")
    children = list(parent.named_children())
    after = children[[k for k, _ in children].index(key) + 1:]
    for k, m in after:
        name = f"{parent_name}.{k}" if parent_name else k
        own = layer_capabilities(m, subclasses=False)  # exact types, as before: a subclass may change forward
        if "norm" in own.symmetry:  # LayerNorm, RMSNorm
            assert isinstance(m, (nn.LayerNorm, nn.RMSNorm))  # narrowed for the type checker
            return lin, name, m
        if not own.identity:  # Identity and Dropout commute with a scale c > 0
            raise UnsupportedModelError(
                f"{name!r} ({type(m).__name__}) lies between {linear!r} and the next norm; only Identity and Dropout "
                "commute with the scale: pass a Linear followed by LayerNorm or RMSNorm")
    raise UnsupportedModelError(f"no LayerNorm or RMSNorm follows {linear!r} in its nn.Sequential; pass a Linear "
                                "followed by one")


def _norm_change(model: nn.Module, norm_name: str, X: object, eps: float, c: float) -> float:
    """The largest relative change ``|√((v + eps)/(v + eps/c²)) − 1|`` of the norm's output on ``X``."""
    X = prepare_inputs(X, "X")
    run = float64_copy(model)
    norm = run.get_submodule(norm_name)
    assert isinstance(norm, (nn.LayerNorm, nn.RMSNorm))  # a copy of the model: the norm _linear_before_norm found
    seen: list[Tensor] = []
    handle = norm.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    with torch.no_grad():
        forward_checked(run, X, "the model")
    handle.remove()
    if not seen:
        raise InvalidInputError(f"{norm_name!r} is never called on X; pass inputs that reach it")
    dims = tuple(range(-len(norm.normalized_shape), 0))
    v = torch.cat([(z.var(dim=dims, unbiased=False) if isinstance(norm, nn.LayerNorm) else z.pow(2).mean(dims))
                   .reshape(-1) for z in seen])
    v = v[v > 0]  # a row with v = 0 normalises to 0 (RMSNorm) or to the bias alone (LayerNorm) either way
    if not v.numel():
        return 0.0
    return float(((v + eps) / (v + eps / c**2)).sqrt().sub(1.0).abs().max())


def _heads(head: object, lay: AttentionLayout) -> range:
    if head is None:
        return range(lay.heads)
    if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= int(head) < lay.heads:
        raise InvalidInputError(f"head={head!r}: {lay.name!r} has heads 0..{lay.heads - 1}; pass one of them, or "
                                "None for all heads")
    return range(int(head), int(head) + 1)


def _matrix(A: object, name: str, n: int, what: str, max_condition: object) -> Tensor:
    """``A`` as a float64 ``n × n`` tensor, finite and with condition number ≤ ``max_condition``."""
    limit = check_positive(max_condition, "max_condition", hint="; pass e.g. 1e8")
    t = array_argument(A)
    if t is None or not (t.is_floating_point() or t.dtype in INTEGER_DTYPES):
        raise InvalidInputError(f"{name} must be a real {n} × {n} matrix, got {A!r}; pass e.g. torch.eye({n})")
    if tuple(t.shape) != (n, n):
        raise InvalidInputError(f"{name} has shape {tuple(t.shape)}, but the {what} heads here have size {n}: pass "
                                f"a {n} × {n} matrix")
    t = t.to("cpu", torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise InvalidInputError(f"{name} holds NaN or inf; pass a finite matrix")
    cond = float(torch.linalg.cond(t))
    if not cond <= limit:
        what_is = "singular" if not np.isfinite(cond) or cond > 1e15 else "ill-conditioned"
        raise InvalidInputError(f"{name} is {what_is} (condition number {cond:.3g} > max_condition={limit:g}): the "
                                "map needs its inverse; pass a better-conditioned matrix, or raise max_condition "
                                "knowing the result loses about log10(cond) digits")
    return t


def _map_columns(model: nn.Module, p: Projection, d: int, heads: range, M: Tensor) -> None:
    """Right-multiply the columns of each head in ``heads`` (weight and bias-like vectors) by ``M``."""
    W, vecs = output_columns(model, p)
    for t in (W, *vecs):
        for h in heads:
            block = t[:, h * d:(h + 1) * d]
            block.copy_((block.double() @ M.to(block.device)).to(block.dtype))


def _permutation(perm: object, n: int) -> Tensor:
    t = array_argument(perm)
    if t is not None:
        t = t.cpu()
    if t is None or t.dtype not in INTEGER_DTYPES or t.dim() != 1 \
            or not torch.equal(torch.sort(t.long()).values, torch.arange(n)):
        raise InvalidInputError(f"perm={perm!r}: pass a permutation of the head indices 0..{n - 1} (integers, each "
                                f"once), e.g. {list(range(n))[::-1]}")
    return t.long()


def _head_index(perm: Tensor, d: int) -> Tensor:
    return (perm.reshape(-1, 1) * d + torch.arange(d)).reshape(-1)


def _check_finite(model: nn.Module, lay: AttentionLayout, name: str) -> None:
    for p in (lay.q, lay.k, lay.v, lay.o):
        M, vecs = output_columns(model, p)
        if not all(bool(torch.isfinite(t).all()) for t in (M, *vecs)):
            raise InvalidInputError(f"{name} overflows the dtype of {p.module!r} (its new weights hold inf or NaN); "
                                    "pass a matrix of smaller norm, or call .double() on the model first")

