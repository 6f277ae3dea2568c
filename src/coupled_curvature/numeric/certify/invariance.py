"""``certify_invariance``: certified balls of the change of ``D``, ``D⁺``, ``RQ`` and ``‖g‖²`` under a T2 symmetry."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from flint import arb, ctx
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.certify.api import Certificate, check_run_options, evaluate, prepare, run
from coupled_curvature.numeric.certify.ball import Ball, from_arb, ratio
from coupled_curvature.numeric.certify.blocks import BlockCertificate
from coupled_curvature.numeric.certify.exact import exact_params
from coupled_curvature.numeric.certify.network import Network
from coupled_curvature.numeric.certify.symmetry import ExactSymmetry, apply_exact, parse_symmetry
from coupled_curvature.numeric.certify.trace import trace
from coupled_curvature.numeric.core.progress import progress_bar

__all__ = ["InvarianceBlock", "InvarianceCertificate", "certify_invariance"]


@dataclass(frozen=True)
class InvarianceBlock:
    """Balls of ``X(Tθ) − X(θ)`` for one block (``None`` where either side is ``None``, see ``before``
    and ``after`` for the reasons), and ``coupled_change_relative``: the width of the ``D`` change
    ball over ``|D(θ)|`` (an upper bound of the relative change that is certified)."""

    name: str
    before: BlockCertificate
    after: BlockCertificate
    coupled_change: Ball | None
    inverse_coupled_change: Ball | None
    rayleigh_change: Ball | None
    sqnorm_grad_change: Ball | None
    coupled_change_relative: float | None


@dataclass(frozen=True)
class InvarianceCertificate:
    """Per-block :class:`InvarianceBlock`, the two certificates, the symmetry, and ``output_gap``: the
    ball of ``max |f_Tθ(x) − f_θ(x)|`` over the data (it contains 0: checked before any work)."""

    blocks: dict[str, InvarianceBlock]
    symmetry: ExactSymmetry
    before: Certificate
    after: Certificate
    output_gap: Ball

    def __getitem__(self, name: str) -> InvarianceBlock:
        return self.blocks[name]

    def __iter__(self) -> Iterator[InvarianceBlock]:
        return iter(self.blocks.values())

    def names(self) -> list[str]:
        return list(self.blocks)


def _change(a: arb | None, b: arb | None) -> Ball | None:
    return None if a is None or b is None else from_arb(b - a)


def _output_gap(before: Network, after: Network, prec: int) -> Ball:
    """The exact function gap on the data, as a ball; a gap certainly ≠ 0 is an ``InvalidInputError``."""
    saved = ctx.prec
    try:
        ctx.prec = prec
        f0, f1 = before.output.entries(), after.output.entries()
        gaps = [b - a for a, b in zip(f0, f1)]
        C = before.output.ncols()
        for i, g in enumerate(gaps):
            if not g.contains(0):
                raise InvalidInputError(
                    f"the symmetry changes the function: output {i % C} of sample {i // C} moves by {g.str(6, radius=True)} "
                    "(certified ≠ 0), so it is not a symmetry of this model on this data")
        top = max((abs(g).upper() for g in gaps), default=arb(0))
        return from_arb(arb(0).union(top))
    finally:
        ctx.prec = saved


def certify_invariance(model: nn.Module, loss_fn: Callable, data: object, symmetry: tuple, *, prec: int = 256,
                       blocks: str | Mapping[str, Sequence[str]] = "tensor", inverse: bool = True,
                       pinv_rtol: float = 1e-10, progress: bool | None = None) -> InvarianceCertificate:
    """Balls of ``D(Tθ) − D(θ)``, ``D⁺(Tθ) − D⁺(θ)``, ``RQ(Tθ) − RQ(θ)``, ``‖g(Tθ)‖² − ‖g(θ)‖²`` per block.

    ``symmetry = (name, layer, argument)``: ``("layer_rescale", layer, c)``, ``("neuron_rescale", layer,
    scales)`` or ``("permute_neurons", layer, perm)`` (``layer`` as in ``layer_rescale``), applied
    exactly in ball arithmetic to the float64 weights (:mod:`.symmetry`); both parameter sets are
    certified by :func:`~.api.certify`'s engine at ``prec`` bits. Before that, the output gap
    ``f_Tθ − f_θ`` is evaluated on the data in ball arithmetic: an output whose gap is certainly
    non-zero is an ``InvalidInputError``. Losses, checks and ``progress`` as in :func:`~.api.certify`. T3: under a layer rescaling ``D`` and ``D⁺`` are unchanged
    (the change ball contains 0, and is ~``2^-prec`` wide) while ``RQ`` and ``‖g‖²`` of the affected
    blocks scale by ``c^{∓2}`` (their change balls exclude 0); a non-uniform neuron rescaling moves
    ``D`` (T5).

    Args:
        model: the network, as for :func:`~coupled_curvature.numeric.certify.api.certify`; never modified.
        loss_fn: ``nn.CrossEntropyLoss`` or ``nn.MSELoss``.
        data: one batch ``(X, y)`` or an iterable of batches, float64.
        symmetry: ``(name, layer, argument)``: ``("layer_rescale", layer, c)``, ``("neuron_rescale", layer,
            scales)`` or ``("permute_neurons", layer, perm)``; ``c`` and the scales may be ``Fraction`` (exact).
        prec: the working precision in bits, as for ``certify``.
        blocks: the partition, as for ``certify`` and ``diagnose``.
        inverse: certify the change of ``D⁺`` too, as for ``certify``.
        pinv_rtol: the relative cutoff of ``H⁺``, as for ``certify``.
        progress: print the stages and a count of both runs' blocks on stderr, as for ``certify``.

    Returns:
        InvarianceCertificate: per block, balls of the
        changes of ``D``, ``D⁺``, ``RQ`` and ``‖g‖²``.

    Raises:
        InvalidInputError: the map changes the network's output on the data (a certainly non-zero gap), or any
            input :func:`~coupled_curvature.numeric.certify.api.certify` refuses.
        MissingExtraError: python-flint is not installed.

    See also:
        :func:`~coupled_curvature.numeric.symmetries.homogeneous.layer_rescale` and the other maps it applies in
        float64, :func:`~coupled_curvature.numeric.core.compare.compare` (the float64 comparison).

    >>> import torch
    >>> from fractions import Fraction
    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    >>> X, y = torch.randn(8, 3, dtype=torch.float64), torch.randint(0, 2, (8,))
    >>> inv = certify_invariance(net, nn.CrossEntropyLoss(), (X, y), ("layer_rescale", 0, Fraction(37, 10)), prec=128)
    >>> 0 in inv["0.weight"].coupled_change, inv["0.weight"].rayleigh_change.excludes_zero()
    (True, True)
    """
    rtol = check_run_options(inverse, pinv_rtol, progress)
    prep = prepare(model, loss_fn, data, prec=prec, blocks=blocks)
    sym = parse_symmetry(prep.model64, symmetry)
    params = exact_params(prep.model64)
    saved = ctx.prec
    try:
        ctx.prec = prec
        moved_model, new = apply_exact(prep.model64, params, sym)
    finally:
        ctx.prec = saved
    moved = prep if moved_model is prep.model64 else replace(prep, model64=moved_model, ops=trace(moved_model))
    bar = progress_bar("certify_invariance", 2 * len(prep.partition), progress)
    try:
        bar.stage(f"both forward passes and losses ({prep.X.shape[0]} samples, {prec} bits)")
        e0, e1 = evaluate(prep, params, prec), evaluate(moved, new, prec)  # shared by all below
        gap = _output_gap(e0[0], e1[0], max(e0[2], e1[2]))
        before = run(prep, params, prec=prec, inverse=inverse, pinv_rtol=rtol, evaluated=e0, bar=bar)
        after = run(moved, new, prec=prec, inverse=inverse, pinv_rtol=rtol, evaluated=e1, bar=bar,
                    done=len(prep.partition))
    finally:
        bar.close()
    out = {}
    ctx.prec, saved = max(before.prec_used, after.prec_used), ctx.prec  # the differences at the runs' precision
    try:
        for name in before.names():
            out[name] = _block_change(name, before, after)
    finally:
        ctx.prec = saved
    return InvarianceCertificate(out, sym, before, after, gap)


def _block_change(name: str, before: Certificate, after: Certificate) -> InvarianceBlock:
    """The change balls of one block (at the current precision)."""
    a, b = before.arbs[name], after.arbs[name]
    dc = _change(a.coupled, b.coupled)
    rel = None if dc is None or a.coupled is None or a.coupled == 0 else ratio(dc.width, abs(from_arb(a.coupled).mid))
    return InvarianceBlock(name, before[name], after[name], dc, _change(a.inverse_coupled, b.inverse_coupled),
                           _change(a.rayleigh, b.rayleigh), _change(a.g_sq, b.g_sq), rel)
