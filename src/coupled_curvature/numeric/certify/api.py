"""``certify``: balls that provably contain ``D``, ``D⁺`` and their ingredients for the exact float64 weights."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from flint import arb_mat, ctx
from torch import Tensor, nn

from coupled_curvature.numeric.certify.ball import Ball, from_arb
from coupled_curvature.numeric.certify.blocks import BlockArbs, BlockCertificate, certify_blocks
from coupled_curvature.numeric.certify.exact import as_arb, check_prec, exact_data, exact_params
from coupled_curvature.numeric.certify.layers import Kink
from coupled_curvature.numeric.certify.loss import ArbLoss, LossTerms, check_loss, check_value, loss_terms
from coupled_curvature.numeric.certify.network import Network, check_shapes
from coupled_curvature.numeric.certify.trace import Op, trace
from coupled_curvature.numeric.core.blocks import resolve_blocks
from coupled_curvature.numeric.core.by_block import ByBlock
from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.inputs import check_flag, check_loss_fn, check_targets, forward_checked
from coupled_curvature.numeric.core.options import check_pinv_rtol
from coupled_curvature.numeric.core.progress import Progress, progress_bar, progress_enabled

__all__ = ["Certificate", "certify"]


@dataclass(frozen=True)
class Certificate(ByBlock[BlockCertificate]):
    """Per-block :class:`~.blocks.BlockCertificate`, indexed by block name like a ``Diagnosis``.

    ``prec`` is the precision asked for, ``prec_used`` the one that ran (``2·prec`` when an undecided
    kink made it raise precision once); ``kinks`` the kinks still undecided at ``prec_used`` (each one
    refuses the blocks upstream of it); ``loss`` the ball of ``L``.
    """

    blocks: dict[str, BlockCertificate]
    prec: int
    prec_used: int
    n_samples: int
    loss: Ball
    kinks: tuple[Kink, ...]
    pinv_rtol: float
    seconds: float
    arbs: dict[str, BlockArbs] = field(default_factory=dict, repr=False, compare=False)

    def by_name(self) -> Mapping[str, BlockCertificate]:
        return self.blocks


@dataclass(frozen=True)
class Prepared:
    """Validated inputs of a certified run: traced ops, exact data, partition, the loss's exact terms."""

    model64: nn.Module
    ops: list[Op]
    X: Tensor
    y: Tensor
    partition: dict[str, list[str]]
    terms: LossTerms


def prepare(model: nn.Module, loss_fn: Callable, data: object, *, prec: int,
            blocks: str | Mapping[str, Sequence[str]] = "tensor") -> Prepared:
    """Every check before any work: precision, loss (a known one, :func:`~.loss.check_loss`), model
    (eval mode, untied, finite weights), data (finite), the traced structure (supported modules only),
    every op's input shape (:func:`~.network.check_shapes`), the targets and the partition."""
    check_prec(prec)
    check_loss_fn(loss_fn)
    check_loss(loss_fn)
    model64, X, y, sizes = exact_data(model, loss_fn, data)
    ops = trace(model64)
    out = forward_checked(model64, X, "the data")  # float64, cheap: shapes and targets checked before the arb work
    if not isinstance(out, Tensor) or out.dim() != 2:
        raise InvalidInputError(f"the model's output has shape {tuple(getattr(out, 'shape', ()))}; certify needs "
                                "(samples, outputs): pass inputs of the shape the model is written for, or use a "
                                "model that flattens its output")
    shape = check_shapes(ops, tuple(X.shape[1:]))
    if shape != tuple(out.shape[1:]):
        raise InvalidInputError(f"certify's trace of the model gives outputs of shape {shape} per sample, torch "
                                f"{tuple(out.shape[1:])}; the traced graph is not what runs, so nothing is certified: use a "
                                "model whose forward is a plain graph of supported modules")
    check_targets(loss_fn, tuple(out.shape), y, 0)
    assert isinstance(loss_fn, nn.Module), "check_loss accepted nn.CrossEntropyLoss or nn.MSELoss only"
    terms = loss_terms(loss_fn, y, out.shape[1], sizes)
    names = [n for n, p in model64.named_parameters() if p.requires_grad]
    return Prepared(model64, ops, X, y, resolve_blocks(names, blocks), terms)


def check_run_options(inverse: object, pinv_rtol: object, progress: object) -> float:
    """A certified run's own options checked before any work (``inverse`` a flag, ``progress`` ``None``, ``True``
    or ``False``, ``pinv_rtol`` in ``[0, 1)``); returns ``pinv_rtol`` as a float."""
    check_flag(inverse, "inverse")
    rtol = check_pinv_rtol(pinv_rtol)
    progress_enabled(progress)
    return rtol


def evaluate(prep: Prepared, params: Mapping[str, arb_mat], prec: int) -> tuple[Network, ArbLoss, int]:
    """The network and loss at ``prec`` bits, at ``2·prec`` if a kink was undecided (once); the
    precision used is the third value (``ctx.prec`` is left as it was). The certified loss is checked
    against the one torch computes (:func:`~.loss.check_value`)."""
    X = as_arb(prep.X.reshape(prep.X.shape[0], -1))
    saved = ctx.prec
    try:
        for attempt in (0, 1):
            used = prec * (attempt + 1)
            ctx.prec = used
            net = Network(prep.ops, params, X, tuple(prep.X.shape[1:]))
            if not net.kinks:
                break
        loss = ArbLoss(prep.terms, net.output, prep.y)
        check_value(loss, prep.y)
        return net, loss, used
    finally:
        ctx.prec = saved


def run(prep: Prepared, params: Mapping[str, arb_mat], *, prec: int, inverse: bool,
        pinv_rtol: float, evaluated: tuple[Network, ArbLoss, int] | None = None,
        bar: Progress | None = None, done: int = 0) -> Certificate:
    """The certificate of the parameters ``params`` (exact arb matrices) on the prepared problem
    (``evaluated``: the result of :func:`evaluate` for them, when the caller has it already); ``bar``
    shows the stages and counts the blocks from ``done`` on."""
    start = time.perf_counter()
    saved = ctx.prec
    bar = Progress("certify", len(prep.partition), enabled=False) if bar is None else bar
    try:
        if evaluated is None:
            bar.stage(f"forward pass and loss in ball arithmetic ({prep.X.shape[0]} samples, {prec} bits)")
        net, loss, used = evaluate(prep, params, prec) if evaluated is None else evaluated
        ctx.prec = used
        bar.stage("gradient")
        grads = net.backward(loss.grad)
        certs, arbs = certify_blocks(prep.partition, net, loss, grads, inverse, Fraction(pinv_rtol), bar,
                                     done)
        return Certificate(certs, prec, used, prep.X.shape[0], from_arb(loss.value), tuple(k for _, k in net.kinks),
                           float(pinv_rtol), time.perf_counter() - start, arbs)
    finally:
        ctx.prec = saved


def certify(model: nn.Module, loss_fn: Callable, data: object, *, prec: int = 256,
            blocks: str | Mapping[str, Sequence[str]] = "tensor", inverse: bool = True,
            pinv_rtol: float = 1e-10, progress: bool | None = None) -> Certificate:
    """Balls that contain the exact ``D``, ``D⁺``, ``RQ``, ``‖g‖²``, ``wᵀHw`` of every block of ``model``.

    For block ``b`` with value ``w``, gradient ``g`` and Hessian block ``H`` of the loss at the model's
    exact float64 weights and inputs (every float64 is a dyadic rational)::

        D  = (wᵀHw / wᵀw) / ‖g‖²        D⁺ = (wᵀH⁺_τw / wᵀw)·‖g‖²,  τ = pinv_rtol·max|λ(H)|

    computed in FLINT's arb ball arithmetic at ``prec`` bits: forward pass, softmax cross-entropy
    (rigorous exp/log) or MSE, gradient by reverse mode, and ``wᵀHw = Σ_n ḟ_nᵀ∇²ℓ ḟ_n`` from one
    tangent pass along ``w`` (exact: the network is piecewise affine, so away from kinks the output is
    affine in a one-module block). A pre-activation ball that contains 0 (or tied max-pool entries)
    raises precision once to ``2·prec``; if still undecided the blocks upstream of it are refused with
    the sample, module and unit (``BlockCertificate.kink``). ``D⁺`` needs every eigenvalue of ``H``
    enclosed, so a dense ball matrix is assembled (``BlockCertificate.inverse_route``): ``H`` itself
    (``n_b × n_b``) for blocks of at most 512 parameters; for a larger block its Gram matrix
    ``G = BBᵀ`` (``m × m``, ``B`` the ``m = N·C`` rows ``A_nJ_n`` of the loss factor times the block
    Jacobian, :mod:`.gram`) when ``m ≤ 512``: ``G`` has the nonzero eigenvalues of ``H`` (so the same
    cutoff and kept set) and ``wᵀH⁺_τw = scale·‖G⁺_τBw‖²``, exact because the network is piecewise
    affine in a one-module block. Beyond both (``n_b > 512`` and ``N·C > 512``) ``D⁺`` is ``None``
    with a reason naming ``n_b`` and ``m``: the ``n³`` ball products would dominate (use fewer
    samples). An eigenvalue ball that meets the cutoff refuses ``D⁺``, with the eigenvalue
    (:mod:`.spectrum`). Blocks at any scale (weights rescaled by ``10^±200``) are certified: the
    float64 steps see ``H`` and ``w`` brought to unit scale by exact powers of two.

    Only what it can prove is the computation that runs. Models: see :mod:`.trace`, in eval mode,
    without tied parameters, each module on inputs of the shape it is written for (a Linear on 3-D
    inputs is refused), BatchNorm with ``running_var + eps > 0``. Losses (:mod:`.loss`), recognised by
    exact type: ``nn.CrossEntropyLoss`` with integer labels and any ``weight`` (class weights ≥ 0),
    ``ignore_index`` (those samples drop out; a mean divides by the kept samples' total weight, as
    torch does), ``label_smoothing`` and ``reduction`` mean or sum; ``nn.MSELoss`` (mean or sum).
    Anything else (a subclass, another loss, a function) is an ``InvalidInputError``: the loss is
    recomputed in ball arithmetic, so certify must know exactly what it computes. The certified loss
    is checked against the one torch computes on the outputs (to float64 rounding); a mismatch is
    refused. ``blocks`` as in ``diagnose``; ``progress`` prints the stages and a block count on
    stderr (``None``: on a terminal, after a few seconds). Time and memory grow about linearly in the
    samples (a 64-32-10 MLP at 256 bits: about 9 ms and 0.25 MB per sample).

    Args:
        model: the network (see the module :mod:`~coupled_curvature.numeric.certify.trace` for what it may hold), in
            eval mode; never modified.
        loss_fn: ``nn.CrossEntropyLoss`` or ``nn.MSELoss``, recognised by exact type.
        data: one batch ``(X, y)`` or an iterable of batches, float64.
        prec: the ball arithmetic's working precision in bits (at least 53).
        blocks: the partition, as in :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` (``"tensor"``,
            ``"layer"`` or ``{block: [parameter names]}``).
        inverse: certify ``D⁺`` too (it needs every eigenvalue of ``H`` enclosed).
        pinv_rtol: the relative cutoff ``τ = pinv_rtol·max|λ|`` of ``H⁺``, in ``[0, 1)``.
        progress: print the stages and a block count on stderr (``None``: on a terminal, after a few seconds).

    Returns:
        Certificate: per block, balls (:class:`Ball`) of ``D``,
        ``D⁺``, ``RQ``, ``‖g‖²`` and ``wᵀHw``, or the reason a ball could not be made (a kink, an eigenvalue at the
        cutoff, a block too large).

    Raises:
        InvalidInputError: a loss, module or input certify cannot reproduce exactly, a model in training mode, or a
            loss that differs from torch's on the same outputs.
        MissingExtraError: python-flint is not installed.

    See also:
        :func:`~coupled_curvature.numeric.certify.invariance.certify_invariance` (balls of the change under a
        symmetry), :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` (the float64 numbers).

    >>> import torch
    >>> torch.manual_seed(0) and None
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    >>> X, y = torch.randn(8, 3, dtype=torch.float64), torch.randint(0, 2, (8,))
    >>> cert = certify(net, nn.CrossEntropyLoss(), (X, y), prec=128)
    >>> cert.names()
    ['0.weight', '0.bias', '2.weight', '2.bias']
    >>> cert["0.weight"].coupled.relative_width < 1e-25
    True
    """
    rtol = check_run_options(inverse, pinv_rtol, progress)
    prep = prepare(model, loss_fn, data, prec=prec, blocks=blocks)
    bar = progress_bar("certify", len(prep.partition), progress)
    try:
        return run(prep, exact_params(prep.model64), prec=prec, inverse=inverse, pinv_rtol=rtol, bar=bar)
    finally:
        bar.close()
