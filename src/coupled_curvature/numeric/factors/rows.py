"""The rows of ``B``: per sample ``n`` and cotangent row ``j`` on the outputs, ``cot[n, j]ᵀJ_n`` with
``J_n = ∂f_n/∂w_b``, for any blocks. The one routine every per-sample factor is built from.

With ``cot = A`` of :func:`~coupled_curvature.numeric.factors.outputs.output_factors` the rows are
those of ``B`` in ``Σ_n J_nᵀS_nJ_n = BᵀB``; an extra row ``e_n`` gives ``J_nᵀe_n`` (the gradient).
When every block is one ``nn.Linear``/``nn.Conv2d`` layer's weight and/or bias, the rows come from
:func:`~coupled_curvature.numeric.factors.layers.layer_rows` (one batched forward pass; 1.4–2.5×
faster for Gauss–Newton sums and dense conv blocks); otherwise, and for such a layer when it runs
twice or its layout is not supported, from ``torch.func``:
one forward pass of a batch of one per sample (exact for eval-mode models) and ``r``
vector-Jacobian products under ``vmap``. Rows are yielded in sample chunks that hold at most
``budget`` bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import torch
from torch import Tensor
from torch.func import vjp, vmap

from coupled_curvature.numeric.core.calling import Inputs, map_inputs, n_samples, take_samples
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.layers import layer_rows, linear_module_of

__all__ = ["SAMPLES_PER_CALL", "block_rows"]

#: per-sample rows computed in one vmapped call on the generic route (bounds the backward's intermediates)
SAMPLES_PER_CALL = 64


def block_rows(objective: Objective, batch: int, partition: Mapping[str, Sequence[str]], blocks: Sequence[str],
               cot: Tensor, *, budget: int, params: dict[str, Tensor] | None = None,
               ) -> Iterator[tuple[slice, dict[str, Tensor]]]:
    """``(samples, {block: R})`` over sample chunks of batch ``batch``, ``R[n, j] = cot[n, j]ᵀJ_n``
    ``(n, r, n_b)`` with the block's columns in ``partition[block]`` order; ``cot`` is ``(N, r, K)``.

    >>> from torch import nn
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(4, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1])
    >>> ob = Objective(net, nn.CrossEntropyLoss(), prepare_batches((X, y), nn.CrossEntropyLoss()))
    >>> part = {"w": ["0.weight"], "both": ["0.weight", "2.weight"]}  # one layer (fast), two layers (generic)
    >>> cot = torch.randn(4, 1, 2, dtype=torch.float64)
    >>> (sl, R), = block_rows(ob, 0, part, ["w", "both"], cot, budget=2**20)
    >>> tuple(R["w"].shape), tuple(R["both"].shape), bool(torch.allclose(R["both"][:, :, :6], R["w"]))
    ((4, 1, 6), (4, 1, 12), True)
    """
    values = objective.values if params is None else params
    paths = {b: linear_module_of(objective.model, partition[b]) for b in blocks}
    wanted = {p for p in paths.values() if p is not None}
    # the generic pass gives every block's rows at once: taking the fast route for some blocks
    # only would pay for both passes (measured slower on a ResNet), so it is all or nothing
    layered = layer_rows(objective, batch, wanted, cot, params) if wanted and None not in paths.values() else {}
    fast = {b: p for b, p in paths.items() if p in layered}
    generic = [b for b in blocks if b not in fast]
    names = sorted({m for b in generic for m in partition[b]}, key=list(values).index)
    n, r = cot.shape[0], cot.shape[1]
    width = sum(values[m].numel() for b in blocks for m in partition[b])
    step = max(1, budget // max(1, 8 * r * width))
    if generic:
        step = min(step, max(1, SAMPLES_PER_CALL // r))
    X = objective.batches[batch].X
    for start in range(0, n, step):
        samples = slice(start, min(n, start + step))
        out = {b: layered[p].rows([m.rpartition(".")[2] for m in partition[b]], samples) for b, p in fast.items()}
        if generic:
            per = _generic_rows(objective, values, names, take_samples(X, samples), cot[samples])
            out.update({b: torch.cat([per[m] for m in partition[b]], dim=2) for b in generic})
        yield samples, out


def _generic_rows(objective: Objective, values: dict[str, Tensor], names: Sequence[str], x: Inputs,
                  cot: Tensor) -> dict[str, Tensor]:
    """Per sample ``n`` of ``x``: ``cot_n J_n`` for the parameters ``names`` -> {name: (N, r, numel)}."""
    chunk = {m: values[m] for m in names}
    rest = {k: v for k, v in values.items() if k not in chunk}

    def one(xn, cn):
        def f(p):
            return objective.forward({**rest, **p}, map_inputs(xn, lambda t: t.unsqueeze(0))).reshape(-1)

        _, pull = vjp(f, chunk)
        return {m: t.reshape(cn.shape[0], -1) for m, t in vmap(pull)(cn)[0].items()}

    try:
        return vmap(one)(x, cot)
    except (RuntimeError, ValueError, NotImplementedError):  # a model vmap cannot batch: one sample at a time
        parts = [one(take_samples(x, i), cot[i]) for i in range(n_samples(x))]
        return {m: torch.stack([p[m] for p in parts]) for m in names}
