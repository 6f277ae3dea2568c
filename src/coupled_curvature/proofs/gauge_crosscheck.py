"""T14's numeric cross-check: the gauge-fixed ``D`` on small trained float64 models (evidence).

On the two ``nn.MultiheadAttention`` classifiers of T13's cross-check
(:func:`~coupled_curvature.proofs.attention_crosscheck.trained_classifier`: separate Q, K, V weights and
the fused ``in_proj_weight``), each head gets its own seeded random non-conformal map: ``A`` on Q/K
(``qk_transform``) and ``B`` on V/O (``vo_transform``), each ``(I + 0.6·G)·diag(0.5 … 2)`` with
``G`` Gaussian. Then, over every parameter block of the model:

* the function is kept: relative gap ``≤ 1e-10``;
* the raw ``D`` moves: the largest rel ``ΔD > move``;
* the gauge-fixed ``D`` (``diagnose(..., gauge="balanced")``) stays: the largest rel ``ΔD ≤ tol``.

On a trained ReLU MLP, the same under a non-uniform neuron rescaling (``neuron_rescale``, scales
``2^{U(−2, 2)}``) of layer 0.

Each row is ``(net, quantity, measured, bound, agrees)``.

>>> rows = gauge_rows(0, tol=1e-10, move=1e-3)
>>> all(r[-1] for r in rows), len(rows)
(True, 12)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from coupled_curvature.numeric.linalg.tolerance import relative_change
from coupled_curvature.numeric.core.diagnostics import diagnose
from coupled_curvature.numeric.symmetries.attention import qk_transform, vo_transform
from coupled_curvature.numeric.symmetries.homogeneous import function_gap, neuron_rescale
from coupled_curvature.proofs.attention_crosscheck import GAP, trained_classifier

__all__ = ["non_conformal", "gauge_rows", "Row"]

F64 = torch.float64
#: ``(net, quantity, measured, bound, agrees)``
Row = tuple[str, str, float, str, bool]
_HEADS, _HEAD_DIM = 2, 2


def non_conformal(n: int, seed: int) -> torch.Tensor:
    """A seeded random invertible ``n × n`` map that is not conformal: ``(I + 0.6·G)·diag(linspace(0.5, 2, n))``.

    >>> A = non_conformal(2, 0)
    >>> M = A.T @ A
    >>> bool(torch.linalg.det(A).abs() > 0) and not bool(torch.allclose(M, M[0, 0] * torch.eye(2, dtype=M.dtype)))
    True
    """
    g = torch.Generator().manual_seed(int(seed))
    A = torch.eye(n, dtype=F64) + 0.6 * torch.randn(n, n, generator=g, dtype=F64)
    return A @ torch.diag(torch.linspace(0.5, 2.0, n, dtype=F64))


def _max_change(before, after) -> float:
    """The largest rel ``ΔD`` over the blocks; a ``D`` that is ``None`` on one side only is infinite."""
    worst = 0.0
    for b in before:
        x, y = b.coupled, after[b.name].coupled
        if x is None or y is None:
            if (x is None) != (y is None):
                return float("inf")
            continue
        r = relative_change(x, y)
        worst = max(worst, float("inf") if r is None else r)
    return worst


def _compare(net: str, what: str, model: nn.Module, moved: nn.Module, loss: Callable, data: tuple,
             scale: float, *, tol: float, move: float) -> list[Row]:
    gap = function_gap(model, moved, data[0]) / scale
    raw = _max_change(diagnose(model, loss, data, inverse=False), diagnose(moved, loss, data, inverse=False))
    fixed = _max_change(diagnose(model, loss, data, inverse=False, gauge="balanced"),
                        diagnose(moved, loss, data, inverse=False, gauge="balanced"))
    return [
        (net, f"{what}: max|f'−f|/max|f|", gap, f"≤ {GAP:g}", gap <= GAP),
        (net, f"{what} (not conformal): raw D moves, max rel ΔD over the blocks", raw, f"> {move:g}", raw > move),
        (net, f"{what}: gauge-fixed max rel ΔD over the blocks", fixed, f"≤ {tol:g}", fixed <= tol),
    ]


def gauge_rows(seed: int, *, tol: float, move: float, mlp: tuple[nn.Module, tuple] | None = None) -> list[Row]:
    """The T14 cross-check rows for one seed: both attention layouts (Q/K and V/O maps) and, when ``mlp`` (a
    trained ReLU ``nn.Sequential`` and its ``(X, y)``) is given, a non-uniform neuron rescaling of its layer 0."""
    rows: list[Row] = []
    loss = nn.CrossEntropyLoss()
    for separate in (True, False):
        model, data = trained_classifier(separate, seed)
        net = "mha-separate-4x2" if separate else "mha-fused-4x2"
        with torch.no_grad():
            scale = float(model(data[0]).abs().max())
        for pair, fn in (("Q/K", qk_transform), ("V/O", vo_transform)):
            moved = model
            for h in range(_HEADS):
                moved = fn(moved, "attn", non_conformal(_HEAD_DIM, 100 * seed + 10 * h + (pair == "V/O")), head=h)
            rows += _compare(net, f"random non-conformal {'A' if pair == 'Q/K' else 'B'} per head on {pair}", model,
                             moved, loss, data, scale, tol=tol, move=move)
    if mlp is not None:
        model, data = mlp
        with torch.no_grad():
            scale = float(model(data[0]).abs().max())
        first = model[0] if isinstance(model, nn.Sequential) else None
        assert isinstance(first, nn.Linear), "the MLP is an nn.Sequential whose layer 0 (rescaled) is nn.Linear"
        units = first.weight.shape[0]
        rng = np.random.default_rng(seed + 11)
        moved = neuron_rescale(model, 0, (2.0 ** rng.uniform(-2.0, 2.0, size=units)).tolist())
        rows += _compare("relu-mlp", "non-uniform neuron rescaling of layer 0", model, moved, loss, data, scale,
                         tol=tol, move=move)
    return rows
