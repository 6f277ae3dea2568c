"""T14: the balanced representative of a model's orbit under its function-preserving linear maps.

``D`` and ``D⁺`` are exact only under maps that are conformal on a block (T4); attention's group
(T13: ``W_Q -> W_Q A``, ``W_K -> W_K A⁻ᵀ`` and ``W_V -> W_V B``, ``W_O^h -> B⁻¹W_O^h`` per head, any
invertible ``A``, ``B``) and non-uniform ReLU neuron rescaling (T5) are not. Evaluated at a point of
the orbit chosen by the orbit alone, unique up to a map that is conformal on every block, they are
invariant under the whole group (T14). :func:`balance` moves a model to that point:

- **attention**, per head of every module :mod:`.attention_kinds` recognises: with the head's
  augmented query map ``Ã_Q = [M_Q; b_Q]`` (inputs and bias rows × head size ``d``, ``x ↦ x·M + b``)
  and ``Ã_K`` likewise, the product ``Ã_QÃ_Kᵀ = UΣVᵀ`` is what the logits see; the balanced pair is
  ``Ã_Q A = U_dΣ_d^{1/2}``, ``Ã_K A⁻ᵀ = V_dΣ_d^{1/2}`` (so ``(Ã_QA)ᵀ(Ã_QA) = Σ_d = (Ã_KA⁻ᵀ)ᵀ(Ã_KA⁻ᵀ)``).
  Two balanced pairs of one orbit differ by an orthogonal ``A`` when ``Ã_Q`` has full column rank:
  ``P = AAᵀ`` solves ``PSP = S`` for ``S = Ã_QᵀÃ_Q ≻ 0``, whose only positive definite solution is
  ``P = I``. An orthogonal map of a head's columns is orthogonal on the whole tensor, hence
  conformal on every block (T4). The same for the value map ``Ã_V`` and the head's rows ``O_h`` of the
  output map, with ``Ã_V O_h = UΣVᵀ``, ``Ã_V B = U_dΣ_d^{1/2}``, ``B⁻¹O_h = Σ_d^{1/2}V_dᵀ``.
- **ReLU neuron rescaling**, between consecutive weight layers of an ``nn.Sequential`` chain with only
  positively homogeneous maps between: unit ``j`` with incoming weights and bias of squared norm
  ``a_j`` and outgoing weights of squared norm ``b_j`` is scaled by ``s_j = (b_j/a_j)^{1/4}`` (both
  become ``√(a_jb_j)``), in sweeps over the layers until no scale moves by more than ``tol``. The
  balanced point minimises ``Σ‖W‖²`` over the orbit, a strictly convex function of the log-scales,
  so it is unique: no orthogonal freedom is left.

A head whose product has rank below ``d``, or a unit with zero incoming or outgoing weights, has no
unique balanced point: refused, with the reason, never left unbalanced in silence.

>>> torch.manual_seed(0) and None
>>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
>>> fixed = balance(net).model
>>> a = fixed[0].weight.pow(2).sum(1) + fixed[0].bias.pow(2); b = fixed[2].weight.pow(2).sum(0)
>>> bool(torch.allclose(a, b, rtol=1e-10))
True
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from coupled_curvature.base.errors import InvalidInputError, UnsupportedModelError
from coupled_curvature.numeric.symmetries.attention_kinds import (
    AttentionLayout,
    Projection,
    attention_modules,
    input_rows,
    output_columns,
)
from coupled_curvature.numeric.symmetries.homogeneous import (LayerPair, layer_bias, layer_pair, layer_weight,
                                                                weight_layers)

__all__ = ["Balanced", "balance"]

#: a head's product is of full rank ``d`` when its ``d``-th singular value exceeds this times the first
_RANK_RTOL = 1e-10


@dataclass
class Balanced:
    """A balanced copy of a model (:func:`balance`): ``heads`` attention heads (Q/K and V/O pairs each)
    and ``units`` ReLU units balanced, in ``sweeps`` sweeps over the layers; ``notes`` say what was left
    as it was and why."""

    model: nn.Module
    heads: int = 0
    units: int = 0
    sweeps: int = 0
    notes: list[str] = field(default_factory=list)


def balance(model: nn.Module, *, tol: float = 1e-13, max_sweeps: int = 2000, inplace: bool = False) -> Balanced:
    """T14: a copy of ``model`` (float64) at the balanced point of its orbit under attention's per-head
    ``GL(d)`` maps (Q/K and V/O) and ReLU neuron rescaling; the function is unchanged.

    Per attention head ``Ã_QÃ_Kᵀ = UΣVᵀ`` gives ``Ã_Q* = U_dΣ_d^{1/2}``, ``Ã_K* = V_dΣ_d^{1/2}`` (likewise
    ``Ã_VO_h``); per ReLU unit ``s_j = (b_j/a_j)^{1/4}`` until ``max|log s_j| ≤ tol`` (see the module
    docstring). ``D``, ``D⁺`` of the result are invariant under every map of those groups applied to
    ``model`` first. ``inplace=True`` balances ``model`` itself (a float64 model the caller owns, such as the
    engine's own copy), without a second copy.

    >>> from coupled_curvature.numeric import function_gap
    >>> torch.manual_seed(0) and None
    >>> layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=torch.float64).eval()
    >>> fixed = balance(layer)
    >>> fixed.heads, function_gap(layer, fixed.model, torch.randn(5, 3, 8, dtype=torch.float64)) < 1e-12
    (2, True)
    """
    if not isinstance(model, nn.Module):
        raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not (isinstance(tol, float) and 0.0 < tol < 1.0):
        raise InvalidInputError(f"tol must be a float in (0, 1), got {tol!r}; pass e.g. 1e-13")
    if not isinstance(inplace, bool):
        raise InvalidInputError(f"inplace must be True or False, got {inplace!r}")
    if inplace and any(p.dtype != torch.float64 for p in model.parameters()):
        raise InvalidInputError("inplace=True balances a float64 model; call model.double() first or pass inplace=False")
    new = model if inplace else copy.deepcopy(model).double()
    out = Balanced(new)
    with torch.no_grad():
        for name, layout in _attention_modules(new):
            for h in range(layout.heads):
                _balance_pair(new, layout, h, name)
            out.heads += layout.heads
        out.units, out.sweeps = _balance_units(new, tol, max_sweeps)
    if not out.heads and not out.units:
        out.notes.append("the model has no recognised attention and no ReLU chain: nothing to balance, the "
                         "gauge-fixed values are the raw ones")
    return out


def _attention_modules(model: nn.Module) -> list[tuple[str, AttentionLayout]]:
    """Every recognised attention module; attention that cannot be mapped (rotary, grouped-query) is refused:
    leaving it unbalanced would leave its group acting on the result."""
    found, refused = attention_modules(model)
    if refused:
        name, why = next(iter(refused.items()))
        raise UnsupportedModelError(f"gauge='balanced' cannot balance {name!r}: {why}")
    return list(found.items())


def _head(t: Tensor, h: int, d: int) -> Tensor:
    return t[:, h * d:(h + 1) * d]


def _augmented(model: nn.Module, p: Projection, h: int, d: int) -> tuple[Tensor, list[Tensor]]:
    """``[M; vectors]`` of head ``h`` of projection ``p`` and the views it was stacked from."""
    M, vecs = output_columns(model, p)
    views = [_head(t, h, d) for t in (M, *vecs)]
    return torch.cat([v.double() for v in views], dim=0), views


def _balance_pair(model: nn.Module, lay: AttentionLayout, h: int, name: str) -> None:
    d, dv = lay.head_dim, lay.value_dim
    q, q_views = _augmented(model, lay.q, h, d)
    k, k_views = _augmented(model, lay.k, h, d)
    A = _balancing_map(q, k.T, d, f"{name!r} head {h} (query/key)")
    _write(q_views, q @ A)
    _write(k_views, k @ torch.linalg.inv(A).T)
    v, v_views = _augmented(model, lay.v, h, dv)
    rows = input_rows(model, lay.o)[h * dv:(h + 1) * dv]
    B = _balancing_map(v, rows.double(), dv, f"{name!r} head {h} (value/output)")
    _write(v_views, v @ B)
    rows.copy_((torch.linalg.inv(B) @ rows.double()).to(rows.dtype))


def _balancing_map(left: Tensor, right: Tensor, d: int, what: str) -> Tensor:
    """The ``d × d`` map ``A`` with ``left·A = U_dΣ_d^{1/2}`` for ``left·right = UΣVᵀ`` (then
    ``A⁻¹·right = Σ_d^{1/2}V_dᵀ``)."""
    U, S, _ = torch.linalg.svd(left @ right, full_matrices=False)
    if S.numel() < d or not float(S[d - 1]) > _RANK_RTOL * float(S[0]):
        raise UnsupportedModelError(
            f"gauge='balanced': {what} has a product of rank below its head size {d} (singular values "
            f"{', '.join(f'{float(s):.2g}' for s in S[:d + 1])}), so its balanced point is not unique; diagnose "
            "without gauge, or after training has made the head full rank")
    return torch.linalg.lstsq(left, U[:, :d] * S[:d].sqrt()).solution


def _write(views: list[Tensor], stacked: Tensor) -> None:
    start = 0
    for v in views:
        v.copy_(stacked[start:start + v.shape[0]].to(v.dtype))
        start += v.shape[0]


def _balance_units(model: nn.Module, tol: float, max_sweeps: int) -> tuple[int, int]:
    """Balance every ReLU unit of an ``nn.Sequential`` chain in sweeps; ``(units, sweeps)``."""
    if not isinstance(model, nn.Sequential):
        return 0, 0
    pairs = []
    for layer in range(len(weight_layers(model)) - 1):
        try:
            pair = layer_pair(model, layer)
        except (InvalidInputError, UnsupportedModelError):
            continue  # no rescaling symmetry between these layers: nothing to fix there
        if not pair.between:
            pairs.append((layer, pair))
    if not pairs:
        return 0, 0
    for sweep in range(1, max_sweeps + 1):
        moved = 0.0
        for layer, pair in pairs:
            a, b = _unit_norms(pair)
            if not bool((a > 0).all() and (b > 0).all()):
                raise UnsupportedModelError(
                    f"gauge='balanced': weight layer {layer} has a unit with zero incoming or outgoing weights "
                    "(a dead unit), whose rescaling has no balanced point; diagnose without gauge")
            s = (b / a) ** 0.25
            moved = max(moved, float(s.log().abs().max()))
            _scale_units(pair, s)
        if moved <= tol:
            return sum(_unit_norms(p)[0].numel() for _, p in pairs), sweep
    raise UnsupportedModelError(f"gauge='balanced': the ReLU units did not balance in {max_sweeps} sweeps (a scale "
                                f"still moved by {math.expm1(moved):.1e}); diagnose without gauge")


def _unit_norms(pair: LayerPair) -> tuple[Tensor, Tensor]:
    """Squared norms of each unit's incoming weights and bias (``a``) and of its outgoing weights (``b``)."""
    W = layer_weight(pair.this).double()
    a = W.reshape(W.shape[0], -1).pow(2).sum(1)
    bias = layer_bias(pair.this)
    if bias is not None:
        a = a + bias.double().pow(2)
    V = layer_weight(pair.nxt).double()
    cols = V.transpose(0, 1).reshape(W.shape[0], -1) if pair.spread is None else \
        V.reshape(V.shape[0], W.shape[0], pair.spread).transpose(0, 1).reshape(W.shape[0], -1)
    return a, cols.pow(2).sum(1)


def _scale_units(pair: LayerPair, s: Tensor) -> None:
    weight, bias, nxt = layer_weight(pair.this), layer_bias(pair.this), layer_weight(pair.nxt)
    shape = (-1,) + (1,) * (weight.dim() - 1)
    weight.mul_(s.reshape(shape).to(weight.dtype))
    if bias is not None:
        bias.mul_(s.to(bias.dtype))
    inv = (1.0 / s).to(nxt.dtype)
    if pair.spread is None:
        nxt.mul_(inv.reshape((1, -1) + (1,) * (nxt.dim() - 2)))
    else:
        nxt.mul_(inv.repeat_interleave(pair.spread).reshape(1, -1))
