"""Cotangents at module outputs: one forward pass with a zero shift added to the output of each
chosen module, then one backward pass per cotangent row on the network outputs, to the shifts.

For a shift ``δ`` added to module ``p``'s output ``z`` and a cotangent row ``a_n`` on the outputs
``f_n`` of every sample, the backward pass of ``Σ_n a_nᵀf_n`` to ``δ`` gives ``Σ_n a_nᵀ∂f_n/∂z``,
which is ``a_nᵀM_n`` at sample ``n`` (``M_n = ∂f_n/∂z_n``) when samples do not interact. The
per-sample factor rows (:mod:`.layers`) and the tangent route of ``wᵀH_bbw`` (:mod:`.tangent_forms`)
are built on it; the callers check that samples do not interact.

The rows go through autograd together (``is_grads_batched``: one vectorised backward pass per chunk
of rows, chunks sized to :data:`ROW_BYTES`) on small batches and on accelerators: the arithmetic is
the same, but the batched matrix products and convolutions run several times faster than ``r``
separate passes there (3.1× on a float64 ResNet-18 with 32 samples and 10 rows). On the CPU a batch
of :data:`ROW_PASS_SAMPLES` samples or more takes one pass per row instead: each pass is then
already one large product per layer, and the vectorised pass only adds memory traffic (one thread,
14x95 ReLU MLP, 1,797 samples, 11 rows: 21–22 ms a row one by one, 27 ms a row batched two at a
time, 31 ms batched eleven at a time; 256 samples: equal; 32 samples: batched 1.4–1.8× faster). An
operation that autograd cannot batch falls back to one pass per row.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from coupled_curvature.numeric.core.objective import Objective

if TYPE_CHECKING:
    from torch.autograd.graph import Node

__all__ = ["ROW_BYTES", "ROW_PASS_SAMPLES", "ShiftedForward", "cotangent_rows", "shifted_forward"]

#: about how many bytes the cotangents of one chunk of rows may take (every shifted output, per row)
ROW_BYTES = 256 * 2**20
#: on the CPU, a batch of at least this many samples sends its rows back one pass each (see above)
ROW_PASS_SAMPLES = 256


@dataclass
class ShiftedForward:
    """One forward pass of one batch: the outputs ``out``; per module path the recorded
    ``(input, output)`` of each call (``calls``), the zero ``shift`` added to the first call's
    output and the autograd node of ``output + shift`` (``marks``: where the module's output enters
    the rest of the graph); ``outputs``: that first output itself, with its graph (a cotangent at the
    module's output goes back to the module's own parameters from it)."""

    out: Tensor
    calls: dict[str, list[tuple[Tensor | None, Tensor]]]
    shifts: dict[str, Tensor] = field(default_factory=dict)
    marks: dict[str, Node | None] = field(default_factory=dict)
    outputs: dict[str, Tensor] = field(default_factory=dict)

    def once(self) -> list[str]:
        """The paths whose module ran exactly once and returned one tensor (the others carry no shift)."""
        return [p for p, c in self.calls.items() if len(c) == 1 and p in self.shifts]


def shifted_forward(objective: Objective, batch: int, paths: Iterable[str],
                    params: dict[str, Tensor] | None = None) -> ShiftedForward:
    """The forward pass of batch ``batch`` with a zero shift (``requires_grad``) on the output of
    every module in ``paths``, under grad mode, with parameter values ``params`` (default: the
    objective's; pass leaves that require grad to differentiate the same graph in them).

    >>> from torch import nn
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)).double()
    >>> X = torch.randn(4, 2, dtype=torch.float64)
    >>> fw = shifted_forward(Objective(net, nn.MSELoss(), prepare_batches((X, X[:, :1]), nn.MSELoss())), 0, ["0", "2"])
    >>> fw.once(), tuple(fw.shifts["0"].shape), type(fw.marks["2"]).__name__
    (['0', '2'], (4, 3), 'AddBackward0')
    """
    model = objective.model
    values = objective.values if params is None else params
    calls: dict[str, list[tuple[Tensor | None, Tensor]]] = {}
    shifts: dict[str, Tensor] = {}
    marks: dict[str, Node | None] = {}
    outputs: dict[str, Tensor] = {}

    def hook(path: str):
        def add_shift(module, inputs, output):
            if not isinstance(output, Tensor):
                calls[path].append((None, output))
                return None
            first = inputs[0].detach() if inputs and isinstance(inputs[0], Tensor) else None
            calls[path].append((first, output.detach()))
            if len(calls[path]) > 1:
                return None
            shift = torch.zeros_like(output, requires_grad=True)
            shifted = output + shift
            outputs[path] = output
            shifts[path], marks[path] = shift, shifted.grad_fn  # before any in-place op downstream
            return shifted

        return add_shift

    handles = []
    for p in dict.fromkeys(paths):
        calls[p] = []
        handles.append(model.get_submodule(p).register_forward_hook(hook(p)))
    try:
        with torch.enable_grad():
            out = objective.forward(values, objective.batches[batch].X)
    finally:
        for h in handles:
            h.remove()
    return ShiftedForward(out, calls, shifts, marks, outputs)


def cotangent_rows(fw: ShiftedForward, paths: Sequence[str], cot: Tensor, *, retain_graph: bool = True,
                   max_bytes: int = ROW_BYTES, batched: bool | None = None
                   ) -> Iterator[tuple[slice, dict[str, Tensor | None]]]:
    """``(rows, {path: G})`` over chunks ``rows`` of the rows of ``cot`` ``(N, r, K)``, with
    ``G[i] = Σ_n cot[n, j]ᵀ∂f_n/∂z_path`` for row ``j = rows.start + i`` (``None`` where the outputs do
    not depend on the module): one batched backward pass of ``Σ_n cot[n, j]ᵀf_n`` to the shifts of
    ``paths`` per chunk of rows, the chunk's cotangents within about ``max_bytes``; the graph is kept
    after the last chunk when ``retain_graph``. ``batched``: ``True`` for the vectorised pass, ``False``
    for one pass per row (the same numbers to rounding), ``None`` to choose by device and batch size
    (:data:`ROW_PASS_SAMPLES`).

    >>> from torch import nn
    >>> from coupled_curvature.numeric.core.inputs import prepare_batches
    >>> X = torch.randn(4, 2, dtype=torch.float64)  # the targets too: two outputs per sample
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> fw = shifted_forward(Objective(net, nn.MSELoss(), prepare_batches((X, X), nn.MSELoss())), 0, ["0"])
    >>> [(rows, tuple(g["0"].shape)) for rows, g in cotangent_rows(fw, ["0"], torch.ones(4, 3, 2, dtype=torch.float64))]
    [(slice(0, 3, None), (3, 4, 3))]
    """
    out = fw.out
    shifts = [fw.shifts[p] for p in paths]
    rows = cot.shape[1]
    per_row = max(1, sum(s.numel() * s.element_size() for s in shifts))
    chunk = max(1, min(rows, max_bytes // per_row))
    if batched is None:
        batched = cot.device.type != "cpu" or cot.shape[0] < ROW_PASS_SAMPLES or rows == 1
    for start in range(0, rows, chunk):
        stop = min(rows, start + chunk)
        keep = retain_graph or stop < rows
        if batched:
            seeds = cot[:, start:stop].transpose(0, 1).reshape(stop - start, *out.shape)
            try:
                with warnings.catch_warnings():  # a missing batching rule: slower, still exact
                    warnings.filterwarnings("ignore", message=".*performance drop.*")
                    grads = torch.autograd.grad(out, shifts, seeds, retain_graph=True, allow_unused=True,
                                                is_grads_batched=True)
            except RuntimeError:  # an operation autograd cannot batch at all: one pass per row
                batched = False
            else:  # the graph stays until the caller drops ``fw`` (a failed batched pass may have run part of it)
                yield slice(start, stop), dict(zip(paths, grads))
                continue
        for j in range(start, stop):  # one row at a time, not stacked: no copy of every row's cotangents
            one = torch.autograd.grad(out, shifts, cot[:, j].reshape(out.shape), retain_graph=keep or j < stop - 1,
                                      allow_unused=True)
            yield slice(j, j + 1), {p: None if g is None else g.unsqueeze(0) for p, g in zip(paths, one)}
