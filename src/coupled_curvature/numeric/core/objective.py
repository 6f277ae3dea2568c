"""The total loss ``L(θ)`` of a model over weighted batches, as a function of named parameters."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import torch
from torch import Tensor, nn

from coupled_curvature.numeric.core.calling import Inputs, ModelCall
from coupled_curvature.numeric.core.inputs import Batch, checked_loss
from coupled_curvature.numeric.core.slices import Piece, assemble, gather_index


class Objective:
    """``L(θ) = Σ_batches weight·loss_fn(model(X; θ), y)`` as a function of named parameters;
    ``reduction`` (``"mean"`` or ``"sum"``) says how ``loss_fn`` reduces a batch, so that one sample's
    term enters ``L`` with weight ``weight/n_batch`` or ``weight`` (:meth:`sample_weight`). ``call`` says which
    tensor of the model's output the loss receives (:class:`~.calling.ModelCall`); every forward pass of the
    engine is :meth:`forward`.

    ``pieces`` (parameter -> its :class:`~.slices.Piece` s, from :func:`~.slices.sliced_partition`) makes
    sub-tensors leaves of their own: ``names`` lists the leaves (each sliced parameter replaced by its
    pieces), ``values`` holds them and every parameter's full value, and :meth:`forward` rebuilds a sliced
    parameter from the full value and the pieces given (out of place), so derivatives reach the pieces."""

    def __init__(self, model: nn.Module, loss_fn: Callable, batches: Sequence[Batch], reduction: str = "mean",
                 call: ModelCall = ModelCall(), pieces: Mapping[str, Sequence[Piece]] | None = None):
        self.model = model
        self.call = call
        self.loss_fn = loss_fn
        self.reduction = reduction
        self.batches = list(batches)
        full = {n: p.detach() for n, p in model.named_parameters()}
        self.pieces = {n: list(ps) for n, ps in (pieces or {}).items() if ps}
        self.names = [leaf for n in full for leaf in ([p.leaf for p in self.pieces[n]] if n in self.pieces else [n])]
        self.values = dict(full)
        for n, ps in self.pieces.items():
            self.values.update({p.leaf: full[n].reshape(-1)[p.flat.to(full[n].device)].reshape(p.shape) for p in ps})
        self._params = list(full)
        self._gather = {n: gather_index(full[n].shape, ps).to(full[n].device) for n, ps in self.pieces.items()}
        self.buffers = {n: b.detach() for n, b in model.named_buffers()}
        self.graph_loss: float | None = None

    def sample_weight(self, i: int) -> float:
        """The weight of one sample's loss term in ``L`` on batch ``i``: ``|weight|/n`` for a mean, ``|weight|`` for a sum."""
        batch = self.batches[i]
        return abs(batch.weight) / (max(1, batch.n) if self.reduction == "mean" else 1)

    def forward(self, params: Mapping[str, Tensor], X: Inputs) -> Tensor:
        """The tensor the loss receives from the model run on ``X`` with the parameters ``params`` (any not
        given keep their values) and the model's buffers; a sliced parameter is assembled from its pieces."""
        given = {**self.values, **params}
        tensors = {n: given[n] for n in self._params}
        for n, ps in self.pieces.items():
            tensors[n] = assemble(given[n], [given[p.leaf] for p in ps], self._gather[n])
        return self.call.functional(self.model, {**tensors, **self.buffers}, X)

    def batch_loss(self, i: int, params: dict[str, Tensor]) -> Tensor:
        return self.output_loss(i, self.forward(params, self.batches[i].X))

    def output_loss(self, i: int, out: Tensor) -> Tensor:
        """Batch ``i``'s weighted term of ``L`` from ``out``, the tensor the loss receives (a scalar, checked)."""
        batch = self.batches[i]
        return batch.weight * checked_loss(self.loss_fn(out, batch.y), i)

    def loss(self) -> float:
        """``L(θ)``; after a full pass of :meth:`graphs`, the value that pass computed."""
        if self.graph_loss is not None:
            return self.graph_loss
        with torch.no_grad():
            return float(sum(self.batch_loss(i, self.values) for i in range(len(self.batches))))

    def graphs(self) -> Iterator[tuple[dict[str, Tensor], dict[str, Tensor]]]:
        """Per batch: leaf parameters and their gradients, built with ``create_graph=True``."""
        total = 0.0
        for i in range(len(self.batches)):
            leaves = {n: v.clone().requires_grad_(True) for n, v in self.values.items()}
            loss = self.batch_loss(i, leaves)
            raw = torch.autograd.grad(
                loss, list(leaves.values()), create_graph=True, allow_unused=True
            )
            grads = {
                n: torch.zeros_like(v) if g is None else g
                for (n, v), g in zip(leaves.items(), raw)
            }
            total += float(loss.detach())
            yield leaves, grads
        self.graph_loss = total

    def cotangent_magnitudes(self) -> tuple[dict[str, Tensor], int] | None:
        """``(Σ_batches |J_bᵀ|r_b||, m)`` per parameter: the gradient taken with the absolute output cotangents
        ``|r_b| = |∂(weight·loss_fn)/∂f_b|`` (one more forward and backward pass per batch), and ``m`` the number
        of output entries (of the tensor the loss receives, :class:`~.calling.ModelCall`). ``g = Σ_b J_bᵀr_b`` is
        a sum of ``m`` terms no larger than these, so its rounding error is at most about ``m·ε·‖Σ_b |J_bᵀ|r_b||‖``.
        ``None`` when that output is not a floating tensor the loss depends on (no cotangent to take).

        >>> net = nn.Linear(2, 3).double()
        >>> X, y = torch.randn(4, 2, dtype=torch.float64), torch.tensor([0, 1, 2, 0])
        >>> from coupled_curvature.numeric.core.inputs import Batch
        >>> mags, m = Objective(net, nn.CrossEntropyLoss(), [Batch(X, y, 1.0)]).cotangent_magnitudes()
        >>> m, sorted(mags), bool((mags["bias"] > 0).all())
        (12, ['bias', 'weight'], True)
        """
        sums = {n: torch.zeros_like(v) for n, v in self.values.items()}
        m = 0
        for i, batch in enumerate(self.batches):
            leaves = {n: v.clone().requires_grad_(True) for n, v in self.values.items()}
            out = self.forward(leaves, batch.X)
            outs = [out] if out.is_floating_point() and out.requires_grad else []
            loss = self.output_loss(i, out)
            if not outs or not loss.requires_grad:
                return None
            rs = torch.autograd.grad(loss, outs, retain_graph=True, allow_unused=True)
            pairs = [(t, r.abs()) for t, r in zip(outs, rs) if r is not None]
            if not pairs:
                return None
            grads = torch.autograd.grad([t for t, _ in pairs], list(leaves.values()), [r for _, r in pairs],
                                        allow_unused=True)
            for (n, _), g in zip(leaves.items(), grads):
                if g is not None:
                    sums[n] += g.detach().abs()
            m += sum(t.numel() for t, _ in pairs)
        return sums, m

