"""Arbitrary-precision diagnostics of small ReLU-type MLPs, from float64 weights taken exactly.

Engine. A float64 (and any mpmath number) is a dyadic rational ``m·2^e``, so arrays are held as
Python integers with one binary exponent per array (:class:`~.arithmetic.Dyadic`), and the model
and its derivatives are computed exactly (:mod:`.mlp`). The forward pass, the activation
pattern, the back-propagated Jacobians and the gradients are integer arithmetic, exact while
they fit in ``F + 32`` bits (``F = mp.prec + 64``; beyond that rounded blockwise to that many
bits). The softmax of ``CrossEntropyLoss`` is the only transcendental step (``F`` bits); the
curvature of ``MSELoss`` is exact. Integer matrix products are exact (:func:`~.arithmetic.int_matmul`). The
block ``H = Σ_n (J_nᵀΛ_nJ_n) ⊗ ã_nã_nᵀ`` (the Hessian of a Linear tensor of a piecewise-linear
net away from kinks: the output is affine in that tensor) is assembled in ``F``-bit block
floating point. Results are rounded to ``dps`` digits at the end.

The pseudo-inverse ``wᵀH⁺w`` is :func:`~.pinv.pinv_form` (a certified pivoted Cholesky, else
``mpmath.eigsy``), with the float64 path's relative cutoff.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import mpmath
import numpy as np
import torch  # the examples below
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.options import check_pinv_rtol, run_options
from coupled_curvature.numeric.core.results import BlockDiagnosis, Diagnosis, derived_quantities
from coupled_curvature.numeric.highprec.arithmetic import Dyadic, dyadic_matmul, int_matmul, shift_to, to_mpf
from coupled_curvature.numeric.highprec.mlp import Problem, layer_hessian, layer_terms, prepare_problem, rescale_problem
from coupled_curvature.numeric.highprec.pinv import pinv_form
from coupled_curvature.numeric.vocabulary import MAX_DPS, MIN_DPS

__all__ = ["diagnose", "invariance_error", "working_bits"]

_GUARD = 64  # working bits beyond mp.prec


# --------------------------------------------------------------------------- assembly


def _diagnose_problem(prob: Problem, F: int, inverse: bool, rtol, seconds: dict) -> list[BlockDiagnosis]:
    t0 = time.perf_counter()
    with mpmath.workprec(F):  # loss factors 1/N, 2/C at the working precision, not at dps
        terms, fu, fL = layer_terms(prob, F)
        wt = mpmath.mpf(1) / prob.n_total if prob.mean else mpmath.mpf(1)
        fg, fH = wt * fu, wt * fL
    seconds["derivatives"] = time.perf_counter() - t0
    grads, hess = {}, {}
    records = []
    for block, members in prob.partition.items():
        lis = {prob.names[m][0] for m in members}
        if len(lis) != 1:
            raise InvalidInputError(f"highprec blocks must lie within one Linear layer; {block!r} spans several")
        li = lis.pop()
        layer = prob.layers[li]
        at, delta, G, d = terms[li]
        t0 = time.perf_counter()
        if li not in hess:
            grads[li] = dyadic_matmul(Dyadic(np.ascontiguousarray(delta.M.T), delta.e), at)  # d × k
            hess[li] = layer_hessian(at, G, F)
        seconds["hessian"] = seconds.get("hessian", 0.0) + time.perf_counter() - t0
        gl, Hl = grads[li], hess[li]
        k = gl.M.shape[1]
        idx, wparts = [], []
        for mname in members:
            if prob.names[mname][1] == "weight":
                kin = layer.W.M.shape[1]
                idx += [o * k + i for o in range(d) for i in range(kin)]
                wparts.append(layer.W)
            else:
                idx += [o * k + k - 1 for o in range(d)]
                wparts.append(layer.b)
        e = min(p.e for p in wparts)
        w = Dyadic(np.concatenate([shift_to(p, e).ravel() for p in wparts]), e)
        g = Dyadic(gl.M.ravel()[idx], gl.e)
        H = Dyadic(np.ascontiguousarray(Hl.M[np.ix_(idx, idx)]), Hl.e)
        t0 = time.perf_counter()
        records.append(_record(block, members, w, g, H, fg, fH, inverse, rtol, F))
        seconds["pinv"] = seconds.get("pinv", 0.0) + time.perf_counter() - t0
    return records


def _record(block, members, w: Dyadic, g: Dyadic, H: Dyadic, fg, fH, inverse, rtol, F) -> BlockDiagnosis:
    """Block quantities from exact integer ``w``, ``g``, ``H`` (real ``g·fg``, ``H·fH``), rounded to
    the caller's precision at the end."""
    wl, gl = w.M.tolist(), g.M.tolist()
    notes: list[str] = []
    pf = None
    with mpmath.workprec(F):
        w_sq = to_mpf(sum(x * x for x in wl), 2 * w.e)
        g_sq = to_mpf(sum(x * x for x in gl), 2 * g.e) * fg**2
        w_dot_g = to_mpf(sum(a * b for a, b in zip(wl, gl)), w.e + g.e) * fg
        Hw = int_matmul(H.M, w.M[:, None])[:, 0].tolist()
        wHw = to_mpf(sum(a * b for a, b in zip(wl, Hw)), 2 * w.e + H.e) * fH
        wHpw = None
        if inverse:
            pf = pinv_form(H, w, rtol, F)
            wHpw = pf.value / fH
        rq, D, Dp = derived_quantities(w_sq, g_sq, wHw, wHpw, notes)
    if pf is not None:
        notes.append(pf.note)

    def r(x):  # round to the caller's dps
        return None if x is None else +x

    return BlockDiagnosis(
        name=block, params=tuple(members), size=len(wl), w_sq=r(w_sq), g_sq=r(g_sq), w_dot_g=r(w_dot_g),
        wHw=r(wHw), rayleigh=r(rq), coupled=r(D), wHpinvw=r(wHpw), inverse_coupled=r(Dp),
        rank=None if pf is None else pf.rank, cutoff=None if pf is None or pf.cutoff is None else r(pf.cutoff * fH),
        min_kept_rel_eig=None if pf is None else r(pf.min_rel), notes=tuple(notes),
    )


def working_bits() -> int:
    """``F = mp.prec + 64``: the integer engine's fraction bits at the current mpmath precision.

    >>> with mpmath.workprec(100): working_bits()
    164
    """
    return mpmath.mp.prec + _GUARD


def diagnose(model: nn.Module, loss_fn: Callable, data: object, *, dps: int = 50,
             blocks: str | Mapping[str, Sequence[str]] = "tensor", inverse: bool = True,
             pinv_rtol: object = None) -> Diagnosis:
    """``D = (wᵀHw/wᵀw)/‖g‖²`` and ``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²`` of every block at ``dps`` decimal
    digits (mpmath numbers), for small MLPs, in the same ``Diagnosis`` shape as the float64 path.

    The float64 weights and data are converted exactly to binary rationals; the gradient and the
    dense Hessian blocks ``H = Σ_n (J_nᵀΛ_nJ_n) ⊗ ã_nã_nᵀ`` (exact for a Linear tensor of a
    piecewise-linear net away from activation kinks) are exact up to the rounded softmax and
    carried with ``mp.prec + 64`` bits; ``wᵀH⁺w`` keeps the eigenvalues ``|λ| > pinv_rtol·max|λ|``
    (default ``pinv_rtol = 10^(−⌈2·dps/3⌉)``), through a pivoted Cholesky whose kept set is
    certified to be that set, else ``mpmath.eigsy`` (the block's last note names the route).
    Fields hold ``mpmath.mpf`` rounded to ``dps`` digits; ``cutoff`` is ``pinv_rtol·λ_max`` with
    ``λ_max`` to float64 accuracy on the Cholesky route. ``meta["seconds"]`` has the wall time
    per phase (prepare, derivatives, hessian, pinv).

    Args:
        model: a small ``nn.Sequential`` MLP (Linear and piecewise-linear activations); never modified.
        loss_fn: ``nn.CrossEntropyLoss`` or ``nn.MSELoss``.
        data: one batch ``(X, y)``.
        dps: the working precision in decimal digits.
        blocks: ``"tensor"``, ``"layer"`` or ``{block: [parameter names]}``, as in the float64 ``diagnose``.
        inverse: compute ``D⁺`` too.
        pinv_rtol: the relative cutoff (default ``10^(−⌈2·dps/3⌉)``); a number or a string such as ``"1e-30"``.

    Returns:
        Diagnosis: the float64 path's shape, its fields holding ``mpmath.mpf``.

    Raises:
        InvalidInputError: a model or loss outside this path's reach, or a bad ``dps`` or cutoff.

    See also:
        :func:`invariance_error`, :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` (float64),
        :func:`~coupled_curvature.numeric.certify.api.certify` (certified balls).

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(6, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1, 0])
    >>> d = diagnose(net, nn.CrossEntropyLoss(), (X, y), dps=30)
    >>> type(d["0.weight"].coupled).__name__
    'mpf'
    """
    _check_dps(dps)
    run_options(blocks=blocks, inverse=inverse)  # the options it shares with diagnose, checked the same way
    given_rtol = None if pinv_rtol is None else _checked_rtol(pinv_rtol)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    prob = prepare_problem(model, loss_fn, data, blocks)
    seconds["prepare"] = time.perf_counter() - t0
    with mpmath.workdps(dps):
        rtol = _default_rtol(dps) if given_rtol is None else mpmath.mpf(given_rtol)
        F = working_bits()
        records = _diagnose_problem(prob, F, inverse, rtol, seconds)
        rtol_s = mpmath.nstr(rtol, 5)
    meta = {"dps": dps, "n_samples": prob.n_total, "reduction": "mean" if prob.mean else "sum",
            "pinv_rtol": rtol_s, "working_bits": F, "seconds": seconds}
    return Diagnosis(records, meta)


#: the most digits accepted: the integer engine's numbers grow like 2·dps·log2(10) bits, and far above
#: this Python's int-to-string limit (4300 digits) stops the run after minutes of work


def _check_dps(dps: object) -> None:
    if not isinstance(dps, int) or isinstance(dps, bool) or not MIN_DPS <= dps <= MAX_DPS:
        raise InvalidInputError(f"dps must be an int in {MIN_DPS}..{MAX_DPS}, got {dps!r}; pass e.g. dps=50")


def _checked_rtol(value: object) -> mpmath.mpf:
    """``pinv_rtol`` in ``[0, 1)`` as diagnose checks it; a string or mpf may go below float64's range."""
    if isinstance(value, (bool, int, float)):
        return mpmath.mpf(check_pinv_rtol(value))
    try:
        r = mpmath.mpf(value)
    except (TypeError, ValueError):
        r = mpmath.mpf(-1)
    if not 0 <= r < 1:
        check_pinv_rtol(value)  # raises diagnose's own message
    return r


def _default_rtol(dps: int) -> mpmath.mpf:
    return mpmath.mpf(10) ** (-(2 * dps) // 3)


def invariance_error(
    model: nn.Module, loss_fn: Callable, data: object, *, layer: int, c: object, dps: int = 50
) -> dict[str, mpmath.mpf]:
    """Max over blocks of ``|X' − X|/|X|`` for ``X = D, D⁺`` under ``W_l -> cW_l, b_l -> cb_l,
    W_{l+1} -> W_{l+1}/c`` applied at ``dps`` digits (``c`` any positive number, or a string
    such as ``"0.3"`` or ``"3/7"``). The rescaled weights are rounded to ``dps`` digits (the only
    rounding of the map); D and D⁺ of both nets are then compared before the final rounding, so
    the error is the effect of that rounding, of order ``10^-dps`` (T3), not 0.

    Args:
        model: a small ``nn.Sequential`` MLP; never modified.
        loss_fn: ``nn.CrossEntropyLoss`` or ``nn.MSELoss``.
        data: one batch ``(X, y)``.
        layer: the weight layer rescaled (counted from 0).
        c: the factor: a positive number or a string (``"0.3"``, ``"3/7"``).
        dps: the working precision in decimal digits.

    Returns:
        dict[str, mpmath.mpf]: ``{"D": error, "D_plus": error}``, the relative errors.

    Raises:
        InvalidInputError: a factor that is not positive, a layer out of range, or inputs ``diagnose`` at this
            precision refuses.

    See also:
        :func:`highprec_diagnose`, :func:`~coupled_curvature.numeric.symmetries.homogeneous.layer_rescale`.

    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 2)).double()
    >>> X, y = torch.randn(6, 2, dtype=torch.float64), torch.tensor([0, 1, 0, 1, 1, 0])
    >>> err = invariance_error(net, nn.CrossEntropyLoss(), (X, y), layer=0, c="3/7", dps=30)
    >>> bool(err["D"] < mpmath.mpf(10) ** -25)
    True
    """
    _check_dps(dps)
    prob = prepare_problem(model, loss_fn, data, "tensor")
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(prob.layers) - 1:
        raise InvalidInputError(f"layer must be in 0..{len(prob.layers) - 2}, got {layer!r}; pass an int in that range")
    with mpmath.workdps(dps):
        try:
            cc = mpmath.mpf(c)
        except (TypeError, ValueError):
            raise InvalidInputError(f"c must be a positive number or a string like '0.3' or '3/7', got {c!r}; pass one of those") from None
        if not (cc > 0 and mpmath.isfinite(cc)):
            raise InvalidInputError(f"c must be positive and finite, got {c!r}; pass e.g. '3/7'")
        rtol = _default_rtol(dps)
        F = working_bits()
        moved = rescale_problem(prob, layer, cc)  # the only rounding to dps digits: the map itself
        with mpmath.workprec(F):  # compare unrounded values, so the error is not the output rounding
            before = _diagnose_problem(prob, F, True, rtol, {})
            after = _diagnose_problem(moved, F, True, rtol, {})
            out = {}
            for key, field in (("D", "coupled"), ("Dplus", "inverse_coupled")):
                errs = [abs(getattr(a, field) - getattr(b, field)) / abs(getattr(b, field))
                        for a, b in zip(after, before) if getattr(b, field) not in (None, 0)]
                out[key] = max(errs) if errs else mpmath.mpf(0)
        return {k: +v for k, v in out.items()}
