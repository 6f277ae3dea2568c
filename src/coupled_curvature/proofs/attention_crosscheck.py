"""T13's numeric cross-check: attention's Q/K map on a small trained float64 classifier (evidence).

The model is ``nn.MultiheadAttention`` (4 features, 2 heads of 2) → mean over the sequence →
``Linear``, trained briefly on seeded random sequences. Two layouts: separate Q, K, V weights
(``kdim``/``vdim`` other than the width, so ``q_proj_weight`` is its own block) and the fused
``in_proj_weight`` (Q, K and V in one tensor). ``qk_transform`` maps ``W_Q → W_QA``,
``W_K → W_KA⁻ᵀ``; in torch's row convention a head's rows of the Q weight move by ``Aᵀ``, so with
one ``A`` on every head the Q block moves by ``I ⊗ Aᵀ``: conformal iff ``A = cQ`` (T4).

Each row is ``(net, quantity, measured, bound, agrees)``:

* separate Q, ``A = 3·I`` on all heads: relative function gap ``≤ 1e-10``, rel ``ΔD`` of the Q and K
  weights ``≤ tol``;
* separate Q, the shear ``A = [[2, 1], [0, 1]]`` on all heads: function gap ``≤ 1e-10``, rel ``ΔD`` of
  the Q weight ``> move``;
* fused, ``A = 2·[[3/5, -4/5], [4/5, 3/5]]`` on head 0 only: function gap ``≤ 1e-10``, rel ``ΔD`` of
  ``in_proj_weight > move`` (the tensor moves by ``diag(Aᵀ, I, A⁻¹, I, I)``, not conformal).

>>> rows = attention_rows(0, tol=1e-10, move=1e-3)   # doctest: +SKIP
>>> all(r[-1] for r in rows)                         # doctest: +SKIP
True
"""

from __future__ import annotations

import torch
from torch import nn

from coupled_curvature.numeric.linalg.tolerance import relative_change
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.symmetries.attention import qk_transform
from coupled_curvature.numeric.symmetries.homogeneous import function_gap

__all__ = ["AttentionClassifier", "trained_classifier", "attention_rows", "GAP"]

F64 = torch.float64
#: bound on the relative function gap ``max|f' − f|/max|f|`` of a map that keeps the function
GAP = 1e-10
_N, _T, _E, _CLASSES, _STEPS = 48, 4, 4, 3, 150


class AttentionClassifier(nn.Module):
    """``nn.MultiheadAttention`` (batch first, 4 features, 2 heads) → mean over tokens → ``Linear(4, 3)``.

    ``separate=True`` gives keys and values of 3 features (``x[..., :3]``, ``x[..., 1:]``), so torch keeps
    separate ``q_proj_weight``, ``k_proj_weight`` and ``v_proj_weight``; otherwise ``in_proj_weight`` is fused.

    >>> m = AttentionClassifier(separate=True)
    >>> m(torch.zeros(2, 4, 4, dtype=torch.float64)).shape
    torch.Size([2, 3])
    """

    def __init__(self, separate: bool) -> None:
        super().__init__()
        self.separate = bool(separate)
        dims = {"kdim": 3, "vdim": 3} if separate else {}
        self.attn = nn.MultiheadAttention(_E, 2, batch_first=True, dtype=F64, **dims)
        self.head = nn.Linear(_E, _CLASSES, dtype=F64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, v = (x[..., :3], x[..., 1:]) if self.separate else (x, x)
        return self.head(self.attn(x, k, v, need_weights=False)[0].mean(1))


def trained_classifier(separate: bool, seed: int) -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    """The classifier trained (Adam, 150 full-batch steps, lr 0.03) on 48 seeded random sequences of 4 tokens,
    labelled by a fixed rule; ``(model in eval mode, (X, y))``.

    >>> model, (X, y) = trained_classifier(True, 0)
    >>> X.shape, y.shape
    (torch.Size([48, 4, 4]), torch.Size([48]))
    """
    gen = torch.Generator().manual_seed(1000 + seed)
    X = torch.randn(_N, _T, _E, generator=gen, dtype=F64)
    y = (X[:, :, 0] * X[:, :, 1]).sum(1).sign().long() + 1 + (X[:, 0, 2] > 1.0).long()
    y = y.clamp(max=_CLASSES - 1)
    torch.manual_seed(seed)
    model = AttentionClassifier(separate)
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    loss = nn.CrossEntropyLoss()
    for _ in range(_STEPS):
        opt.zero_grad()
        loss(model(X), y).backward()
        opt.step()
    return model.eval(), (X, y)


def _measure(model: nn.Module, new: nn.Module, data: tuple[torch.Tensor, torch.Tensor],
             blocks: tuple[str, ...]) -> tuple[float, dict[str, float]]:
    """The relative function gap of ``new`` against ``model`` and rel ``ΔD`` per named block."""
    X = data[0]
    with torch.no_grad():
        scale = float(model(X).abs().max())
    gap = function_gap(model, new, X) / scale
    loss = nn.CrossEntropyLoss()
    part = {b: [b] for b in blocks}
    before = diagnose(model, loss, data, blocks=part, inverse=False)
    after = diagnose(new, loss, data, blocks=part, inverse=False)
    changes = {}
    for b in blocks:
        r = relative_change(before[b].coupled, after[b].coupled)
        changes[b] = float("nan") if r is None else r
    return gap, changes


def attention_rows(seed: int, *, tol: float, move: float) -> list[tuple[str, str, float, str, bool]]:
    """The T13 cross-check rows ``(net, quantity, measured, bound, agrees)`` for one seed."""
    rows: list[tuple[str, str, float, str, bool]] = []
    sep, data = trained_classifier(True, seed)
    q, k = "attn.q_proj_weight", "attn.k_proj_weight"
    shear = torch.tensor([[2.0, 1.0], [0.0, 1.0]], dtype=F64)
    net = "mha-separate-4x2"
    gap, ch = _measure(sep, qk_transform(sep, "attn", 3.0 * torch.eye(2, dtype=F64)), data, (q, k))
    rows.append((net, "A = 3·I on all heads: max|f'−f|/max|f|", gap, f"≤ {GAP:g}", gap <= GAP))
    for b in (q, k):
        rows.append((net, f"A = 3·I on all heads (conformal on the block): rel ΔD[{b}]", ch[b], f"≤ {tol:g}",
                     ch[b] <= tol))
    gap, ch = _measure(sep, qk_transform(sep, "attn", shear), data, (q,))
    rows.append((net, "shear A = [[2,1],[0,1]] on all heads: max|f'−f|/max|f|", gap, f"≤ {GAP:g}", gap <= GAP))
    rows.append((net, f"shear A = [[2,1],[0,1]] on all heads (not conformal): moved rel ΔD[{q}]", ch[q],
                 f"> {move:g}", ch[q] > move))
    fused, data = trained_classifier(False, seed)
    rot = 2.0 * torch.tensor([[0.6, -0.8], [0.8, 0.6]], dtype=F64)
    net = "mha-fused-4x2"
    gap, ch = _measure(fused, qk_transform(fused, "attn", rot, head=0), data, ("attn.in_proj_weight",))
    rows.append((net, "per-head cQ (c = 2, Q = [[3/5,-4/5],[4/5,3/5]]) on head 0: max|f'−f|/max|f|", gap,
                 f"≤ {GAP:g}", gap <= GAP))
    moved = ch["attn.in_proj_weight"]
    rows.append((net, "per-head cQ on head 0, fused tensor (not conformal): moved rel ΔD[attn.in_proj_weight]", moved,
                 f"> {move:g}", moved > move))
    return rows
