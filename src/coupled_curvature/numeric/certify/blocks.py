"""Per-block certified quantities: ``‖g‖²``, ``wᵀHw`` (tangent form), ``RQ``, ``D``, and ``D⁺`` (dense ``H``
for blocks of at most :data:`MAX_PINV_DIM` parameters, else the Gram matrix ``G = BBᵀ`` of :mod:`.gram`
when its dimension ``m = N·C`` is at most :data:`MAX_GRAM_DIM`)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from flint import arb, arb_mat

from coupled_curvature.numeric.certify.arrays import Rows
from coupled_curvature.numeric.certify.ball import Ball, from_arb
from coupled_curvature.numeric.certify.gram import gram, gram_rows
from coupled_curvature.numeric.certify.hessian import factor_cotangents, hessian
from coupled_curvature.numeric.certify.layers import Kink
from coupled_curvature.numeric.certify.loss import ArbLoss
from coupled_curvature.numeric.certify.network import Network
from coupled_curvature.numeric.certify.spectrum import PinvForm, pinv_form
from coupled_curvature.numeric.core.progress import Progress

__all__ = ["MAX_GRAM_DIM", "MAX_PINV_DIM", "BlockArbs", "BlockCertificate", "certify_blocks"]

#: the largest block whose Hessian is assembled for a certified ``D⁺``
MAX_PINV_DIM = 512
#: the largest Gram matrix ``G = BBᵀ`` (``m = N·C`` rows of ``B``) assembled for a larger block's ``D⁺``
MAX_GRAM_DIM = 512


@dataclass(frozen=True)
class BlockCertificate:
    """Balls that contain the exact values of one block's quantities for the exact float64 weights.

    ``D = (wᵀHw / wᵀw) / ‖g‖²`` (``coupled``) and ``D⁺ = (wᵀH⁺_τw / wᵀw)·‖g‖²`` (``inverse_coupled``,
    ``τ = pinv_rtol·max|λ(H)|``). A field is ``None`` only with a reason: ``reason`` for the ``D``
    fields (``kink`` holds the undecided ReLU/max-pool that caused a refusal), ``inverse_reason`` for
    ``D⁺`` (``straddling`` holds an eigenvalue ball that meets the cutoff). ``inverse_route`` says how
    ``D⁺`` was computed: ``"hessian"`` (``H``, ``n_b × n_b``) or ``"gram"`` (``G = BBᵀ``, ``m × m``).
    """

    name: str
    params: tuple[str, ...]
    size: int
    w_sq: Ball | None = None
    sqnorm_grad: Ball | None = None
    w_dot_g: Ball | None = None
    wHw: Ball | None = None
    rayleigh: Ball | None = None
    coupled: Ball | None = None
    wHpinvw: Ball | None = None
    inverse_coupled: Ball | None = None
    rank: int | None = None
    reason: str | None = None
    inverse_reason: str | None = None
    kink: Kink | None = None
    straddling: Ball | None = None
    inverse_route: str | None = None


@dataclass(frozen=True)
class BlockArbs:
    """The arb values behind a :class:`BlockCertificate` (kept for differences of two certificates)."""

    w_sq: arb | None = None
    g_sq: arb | None = None
    wHw: arb | None = None
    rayleigh: arb | None = None
    coupled: arb | None = None
    inverse_coupled: arb | None = None


def _dot(a: arb_mat, b: arb_mat) -> arb:
    """``aᵀb`` of two column vectors (one arb product)."""
    return (a.transpose() * b).entries()[0]


def _column(mats: list[arb_mat]) -> arb_mat:
    entries = [e for m in mats for e in m.entries()]
    return arb_mat(len(entries), 1, entries)


def _ball(x: arb | None) -> Ball | None:
    return None if x is None else from_arb(x)


def _locate(name: str, members: list[str], net: Network) -> tuple[int | None, BlockCertificate]:
    """The op whose parameters the block is (``None`` with a refusal certificate when the tangent form of
    ``wᵀHw`` does not apply or an undecided kink lies downstream of the block)."""
    size = sum(net.params[m].nrows() * net.params[m].ncols() for m in members)
    base = BlockCertificate(name, tuple(members), size)
    owners = {m: [i for i, layer in enumerate(net.layers) if layer is not None and m in layer.params] for m in members}
    for m, where in owners.items():
        if not where:
            return None, _refused(base, f"parameter {m!r} is not used by the traced forward: its gradient is 0")
        if len(where) > 1:
            return None, _refused(base, f"parameter {m!r} is used by {len(where)} calls (shared): the output is not "
                                        "affine in the block, so the tangent form of wᵀHw does not apply")
    ops = {where[0] for where in owners.values()}
    if len(ops) != 1:
        return None, _refused(base, "the block spans several modules: the output is not affine in it, so the tangent "
                                    "form of wᵀHw does not apply; use blocks='tensor' or 'layer'")
    for i, k in net.kinks:
        if any(m in net.upstream[i] for m in members):
            return None, _refused(base, f"undecided kink at sample {k.sample}, module {k.layer!r}, unit {k.unit} "
                                        f"(ball {k.value}) upstream of the block: its derivatives are not determined",
                                  kink=k)
    return ops.pop(), base


def certify_blocks(partition: dict[str, list[str]], net: Network, loss: ArbLoss, grads: dict[str, arb_mat],
                   inverse: bool, rtol: Fraction, bar: Progress | None = None, done: int = 0
                   ) -> tuple[dict[str, BlockCertificate], dict[str, BlockArbs]]:
    """Every block's certificate on an evaluated network (``net``), loss and gradient. The tangents
    along the blocks' values ``w`` run as one pass per module (the module's blocks stacked as
    directions) and their curvatures ``wᵀHw`` as one entry-wise pass; ``bar`` shows the stages and
    counts the blocks from ``done`` on."""
    bar = Progress("certify", len(partition), enabled=False) if bar is None else bar
    located = {name: _locate(name, members, net) for name, members in partition.items()}
    by_op: dict[int, list[str]] = {}
    for name, (start, _) in located.items():
        if start is not None:
            by_op.setdefault(start, []).append(name)
    order = [name for names in by_op.values() for name in names]
    bar.stage("wᵀHw: tangents along every block's w")
    tangents = [net.tangent(start, [{m: net.params[m] for m in partition[n]} for n in names])
                for start, names in by_op.items()]
    curvatures = dict(zip(order, loss.curvature(tangents))) if tangents else {}
    reverse = [start for start, base in located.values() if start is not None and inverse
               and _route(base.size, loss) is not None]
    if reverse:
        bar.stage(f"D⁺: the loss factor's reverse pass ({loss.C} rows per sample)")
    cotangents = factor_cotangents(net, loss, min(reverse)) if reverse else {}  # one reverse pass for all
    certs, arbs = {}, {}
    for name, (start, base) in located.items():
        if start is None:
            certs[name], arbs[name] = base, BlockArbs()
        else:
            certs[name], arbs[name] = _certify_block(base, start, net, loss, grads, curvatures[name], inverse, rtol,
                                                     cotangents)
        done += 1
        bar.update(done, name)
    return certs, arbs


def _route(size: int, loss: ArbLoss) -> str | None:
    """``"hessian"`` for a block of at most :data:`MAX_PINV_DIM` parameters, ``"gram"`` for a larger one
    whose Gram dimension ``m = N·C`` is at most :data:`MAX_GRAM_DIM`, else ``None``."""
    if size <= MAX_PINV_DIM:
        return "hessian"
    return "gram" if gram_rows(loss) <= MAX_GRAM_DIM else None


def _certify_block(base: BlockCertificate, start: int, net: Network, loss: ArbLoss, grads: dict[str, arb_mat],
                   wHw: arb, inverse: bool, rtol: Fraction, cotangents: dict[int, Rows]
                   ) -> tuple[BlockCertificate, BlockArbs]:
    """One located block's certificate from its curvature ``wHw``."""
    name, members, size = base.name, list(base.params), base.size
    w = _column([net.params[m] for m in members])
    g = _column([grads[m] for m in members])
    w_sq, g_sq, w_dot_g = _dot(w, w), _dot(g, g), _dot(w, g)
    rayleigh = coupled = dplus = wHpinvw = None
    reason = inverse_reason = None
    straddling, rank = None, None
    route = _route(size, loss) if inverse else None
    used = None  # the route that ran
    if not w_sq > 0:
        reason = "w = 0: the Rayleigh quotient is undefined"
    else:
        rayleigh = wHw / w_sq
        if g_sq > 0:
            coupled = rayleigh / g_sq
        else:
            reason = f"‖g‖² ∈ {from_arb(g_sq)} is not certified positive: D is undefined or uncertified"
    if not inverse:
        inverse_reason = "not asked for (inverse=False)"
    elif route is None:
        inverse_reason = (f"block of n_b = {size} parameters > {MAX_PINV_DIM} and Gram dimension m = N·C = "
                          f"{loss.N}·{loss.C} = {gram_rows(loss)} > {MAX_GRAM_DIM}: neither its Hessian (n_b × n_b) "
                          "nor its Gram matrix BBᵀ (m × m) is assembled for a certified eigenvalue enclosure; "
                          f"use at most {MAX_GRAM_DIM // loss.C} samples")
    elif rayleigh is not None:
        used = route
        if route == "hessian":
            form = pinv_form(hessian(net, loss, start, members, cotangents), w, rtol)
        else:
            G, v = gram(net, loss, start, members, cotangents)
            form = _gram_form(G, v, loss, wHw, rtol)
        rank = form.rank
        if form.value is None:
            inverse_reason, straddling = form.reason, _ball(form.straddling)
        else:
            wHpinvw = form.value
            dplus = wHpinvw / w_sq * g_sq
    else:
        inverse_reason = reason
    cert = BlockCertificate(name, tuple(members), size, _ball(w_sq), _ball(g_sq), _ball(w_dot_g), _ball(wHw),
                            _ball(rayleigh), _ball(coupled), _ball(wHpinvw), _ball(dplus), rank, reason,
                            inverse_reason, None, straddling, used)
    return cert, BlockArbs(w_sq, g_sq, wHw, rayleigh, coupled, dplus)


def _gram_form(G: arb_mat, v: arb_mat, loss: ArbLoss, wHw: arb, rtol: Fraction) -> PinvForm:
    """``wᵀH⁺_τw = scale·vᵀ(G⁺_τ)²v`` (:mod:`.gram`), after checking that ``scale·‖v‖²`` and the tangent
    form's ``wᵀHw`` (two enclosures of the same number) overlap."""
    u_sq = _dot(v, v) * loss.scale
    if not u_sq.overlaps(wHw):
        return PinvForm(None, f"the Gram route's wᵀHw = scale·‖Bw‖² ∈ {from_arb(u_sq)} does not meet the tangent "
                        f"form's {from_arb(wHw)}: the block's rows are inconsistent", None, None, None)
    form = pinv_form(G, v, rtol, square=True)
    if form.value is None:
        return form
    return PinvForm(form.value * loss.scale, None, None, form.rank, form.cutoff)


def _refused(base: BlockCertificate, why: str, kink: Kink | None = None) -> BlockCertificate:
    return BlockCertificate(base.name, base.params, base.size, reason=why, inverse_reason=why, kink=kink)
