"""Numeric cross-checks of the theorems on trained float64 networks (evidence, never proof).

Each check compares a theorem's prediction (invariant, or must move) with a measurement on
trained ReLU MLPs: digits and breast cancer, with biases and bias-free. Trained models and
shared measurements (symmetry chains, neuron scalings) live in a :class:`Lab`, computed once
per seed and reused across theorems.

>>> lab = Lab(seed=0, heavy=False)                  # doctest: +SKIP
>>> crosscheck("T12", lab).agrees                   # doctest: +SKIP
True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.linalg.tolerance import relative_change
from coupled_curvature.numeric.core.threads import torch_threads as threads
from coupled_curvature.theorems import THEOREMS
from coupled_curvature.theorems import get as get_theorem

__all__ = ["NumericCheck", "Lab", "NETS", "CROSSCHECKS", "crosscheck"]

#: key -> (dataset, hidden widths, bias); "digits-64x3" is the reference net of the heavy T3/T7 chains
#: (D⁺ on its 4096-parameter blocks)
NETS: dict[str, tuple[str, tuple[int, ...], bool]] = {
    "digits-64x3": ("digits", (64, 64, 64), True),
    "bc-16x2": ("breast_cancer", (16, 16), True),
    "digits-nobias-16x2": ("digits", (16, 16), False),
    "bc-nobias-16x2": ("breast_cancer", (16, 16), False),
}
SMALL = ("bc-16x2", "digits-nobias-16x2", "bc-nobias-16x2")
BIAS_FREE = ("digits-nobias-16x2", "bc-nobias-16x2")
TOL_D = 1e-10
TOL_DPLUS = 1e-5
MOVE = 1e-3


@dataclass
class NumericCheck:
    """A theorem's prediction against a measurement; ``rows`` is the cross-check table."""

    theorem: str
    prediction: str
    figure_name: str
    figure: float
    agrees: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    label: str = "numeric"

    def to_dict(self) -> dict[str, Any]:
        return {"agrees": bool(self.agrees), "figure": float(self.figure)}


def _rel(a: float | None, b: float | None) -> float:
    """:func:`relative_change` with ``nan`` where undefined (the rows and figures hold floats)."""
    r = relative_change(a, b)
    return float("nan") if r is None else r


def _value(x: float | None) -> float:
    """A measure the checked nets always define (their gradients are non-zero): ``x`` itself."""
    assert x is not None, "a measure the cross-check relies on is undefined on its net"
    return x


def _row(net: str, quantity: str, measured: float, bound: str, agrees: bool) -> dict[str, Any]:
    return {"net": net, "quantity": quantity, "measured": float(measured), "bound": bound, "agrees": bool(agrees)}


class Lab:
    """Trained nets and shared measurements for one seed (computed lazily, cached).

    ``heavy`` adds the digits 64x3 net with ``D⁺`` (three 4096² eigendecompositions per
    diagnosis, ~1.5 min on 2 cores) to the T3/T7 chains.
    """

    def __init__(self, seed: int = 0, *, heavy: bool = True, progress: Callable[[str], None] | None = None):
        self.seed, self.heavy = int(seed), bool(heavy)
        self.say = progress or (lambda s: None)
        self._verbose = progress is not None
        self._data: dict[str, Any] = {}
        self._nets: dict[str, Any] = {}
        self._chains: dict[str, Any] = {}
        self._neuron: dict[str, Any] = {}
        self.loss = nn.CrossEntropyLoss()
        self._threads0 = torch.get_num_threads()

    def chain_nets(self) -> tuple[str, ...]:
        return (("digits-64x3",) if self.heavy else ()) + SMALL

    def dataset(self, name: str):
        if name not in self._data:
            from coupled_curvature.numeric.models.datasets import load

            self._data[name] = load(name, seed=self.seed)
        return self._data[name]

    def net(self, key: str):
        """``(TrainedModel, Dataset)`` for a key of :data:`NETS`."""
        if key not in self._nets:
            from coupled_curvature.numeric.models.training import train_mlp

            ds_name, hidden, bias = NETS[key]
            ds = self.dataset(ds_name)
            self.say(f"training {key} (seed {self.seed})")
            with threads(self._threads0 if key == "digits-64x3" else 1):
                self._nets[key] = (train_mlp(ds, hidden, bias=bias, seed=self.seed, progress=self._verbose), ds)
        return self._nets[key]

    def chain(self, key: str):
        """:class:`~coupled_curvature.numeric.studies.invariance.ChainResult` of a random rescaling chain + permutations."""
        if key not in self._chains:
            from coupled_curvature.numeric.studies.invariance import chain_check

            trained, ds = self.net(key)
            self.say(f"T3 chain on {key}" + (" (D⁺ on 4096-parameter blocks, the slow part)" if key == "digits-64x3" else ""))
            with threads(self._threads0 if key == "digits-64x3" else 1):
                self._chains[key] = chain_check(
                    trained.model, self.loss, ds.train, seed=self.seed, tol_D=TOL_D, tol_Dplus=TOL_DPLUS,
                    progress=lambda s: self.say("  " + s),
                )
        return self._chains[key]

    def computed_chain(self, key: str):
        """The chain for ``key`` if some cross-check already ran it, else ``None`` (never computes)."""
        return self._chains.get(key)

    def neuron(self, key: str, draws: int = 4):
        """Non-uniform neuron scalings of layer 0: list of ``(gap, before, after)``; ``inverse=False``."""
        if key not in self._neuron or len(self._neuron[key]) < draws:
            from coupled_curvature.numeric.core.diagnostics import diagnose
            from coupled_curvature.numeric.symmetries.homogeneous import function_gap, neuron_rescale

            trained, ds = self.net(key)
            self.say(f"T5 neuron scalings on {key} ({draws} draws)")
            rng = np.random.default_rng(self.seed + 7)
            before = diagnose(trained.model, self.loss, ds.train, inverse=False)
            units = trained.model[0].weight.shape[0]
            out = []
            for _ in range(draws):
                a = 2.0 ** rng.uniform(-2.0, 2.0, size=units)
                moved = neuron_rescale(trained.model, 0, a.tolist())
                after = diagnose(moved, self.loss, ds.train, inverse=False)
                out.append((function_gap(trained.model, moved, ds.X_train), before, after))
            self._neuron[key] = out
        return self._neuron[key][:draws]


# -- per-theorem checks --------------------------------------------------------------------------

_CHECKS: dict[str, Callable[[Lab], NumericCheck]] = {}
_Rows = Iterator[dict[str, Any]]


def _checks(theorem_id: str, prediction: str, figure_name: str, *, among: str = "", figure: Callable = max
            ) -> Callable[[Callable[[Lab], _Rows]], Callable[[Lab], NumericCheck]]:
    """Register the cross-check of a registered theorem that declares one: the decorated function yields its
    rows; the check agrees when every row does, and its figure (``figure_name``) is ``figure`` (max or min) of
    the measured values of the rows whose quantity contains ``among``."""
    theorem = get_theorem(theorem_id)
    if theorem.crosscheck is None:
        raise InvalidInputError(f"{theorem_id} declares no numeric cross-check in the theorem registry")

    def register(measure: Callable[[Lab], _Rows]) -> Callable[[Lab], NumericCheck]:
        def check(lab: Lab) -> NumericCheck:
            rows = list(measure(lab))
            fig = figure(r["measured"] for r in rows if among in r["quantity"])
            return NumericCheck(theorem.id, prediction, figure_name, fig, all(r["agrees"] for r in rows), rows)

        _CHECKS[theorem.id] = check
        return check

    return register


def _within(net: str, quantity: str, measured: float, tol: float) -> dict[str, Any]:
    """A row that agrees when ``measured ≤ tol`` (an invariance kept up to rounding)."""
    return _row(net, quantity, measured, f"≤ {tol:g}", measured <= tol)


def _moves(net: str, quantity: str, measured: float) -> dict[str, Any]:
    """A row that agrees when ``measured > MOVE`` (a quantity the theorem says must move)."""
    return _row(net, quantity, measured, f"> {MOVE:g}", measured > MOVE)


@_checks("T2", "the output is unchanged (up to rounding)", "max relative function gap")
def _t2(lab: Lab) -> _Rows:
    for key in lab.chain_nets():
        trained, ds = lab.net(key)
        with torch.no_grad():
            scale = float(trained.model(ds.X_train).abs().max())
        yield _within(key, "max|f'−f|/max|f| after rescaling chain + permutations",
                      lab.chain(key).function_gap / scale, 1e-10)
    for key in SMALL[:1]:
        trained, ds = lab.net(key)
        with torch.no_grad():
            scale = float(trained.model(ds.X_train).abs().max())
        yield _within(key, "max|f'−f|/max|f| after neuron-wise scaling", max(g for g, _, _ in lab.neuron(key)) / scale,
                      1e-10)


@_checks("T3", "D and D⁺ unchanged; the raw Rayleigh quotient moves", "max rel ΔD", among="ΔD ")
def _t3(lab: Lab) -> _Rows:
    for key in lab.chain_nets():
        ch = lab.chain(key)
        yield _within(key, "max rel ΔD (all blocks)", ch.max_dD, TOL_D)
        yield _within(key, "max rel ΔD⁺ (all blocks)", ch.max_dDplus, TOL_DPLUS)
        yield _moves(key, "max rel ΔRQ (raw curvature moves)", ch.max_drq)
    yield from certified_rows(lab, "layer")


@_checks("T5", "non-uniform neuron scaling moves D; layer-uniform keeps it (per-tensor blocks)",
         "min rel ΔD under non-uniform scaling", among="non-uniform", figure=min)
def _t5(lab: Lab) -> _Rows:
    from coupled_curvature.numeric.core.diagnostics import diagnose
    from coupled_curvature.numeric.symmetries.homogeneous import layer_rescale

    for key in ("bc-16x2", "digits-nobias-16x2"):
        runs = lab.neuron(key)
        names = [n for n in runs[0][1].names() if n.startswith(("0.", "2.weight"))]
        for name in names:
            moved = min(_rel(b[name].coupled, a[name].coupled) for _, b, a in runs)
            yield _moves(key, f"min over {len(runs)} draws of rel ΔD[{name}], non-uniform scaling", moved)
    trained, ds = lab.net("bc-16x2")
    before = diagnose(trained.model, lab.loss, ds.train, blocks="layer", inverse=False)
    after = diagnose(layer_rescale(trained.model, 0, 8.0), lab.loss, ds.train, blocks="layer", inverse=False)
    uniform = "'layer' partition, uniform c=8 on layer 0: rel ΔD"
    yield _within("bc-16x2", f"{uniform}[layer 0]", _rel(before["0"].coupled, after["0"].coupled), TOL_D)
    yield _moves("bc-16x2", f"{uniform}[layer 1]", _rel(before["2"].coupled, after["2"].coupled))
    yield from certified_rows(lab, "neuron")


@_checks("T7", "D⁺ (relative cutoff) unchanged under conformal block maps", "max rel ΔD⁺")
def _t7(lab: Lab) -> _Rows:
    for key in lab.chain_nets():
        ch = lab.chain(key)
        bound = max((b.dplus_bound for b in ch.blocks if b.dplus_bound is not None), default=float("nan"))
        yield _within(key, f"max rel ΔD⁺ (float64 conditioning limit {bound:.1e})", ch.max_dDplus, TOL_DPLUS)


@_checks("T9", "bias-free, k=1: wᵀg = P and wᵀHw = Q for every layer; D ≤ Q/P²", "max rel Euler-identity error",
         among="rel |")
def _t9(lab: Lab) -> _Rows:
    from coupled_curvature.numeric.core.diagnostics import diagnose
    from coupled_curvature.numeric.studies.invariance import euler_PQ

    for key in BIAS_FREE:
        trained, ds = lab.net(key)
        P, Q = euler_PQ(trained.model, lab.loss, *ds.train)
        for b in diagnose(trained.model, lab.loss, ds.train, inverse=False):
            yield _within(key, f"{b.name}: rel |wᵀg − P|/|P|", _rel(P, b.w_dot_g), 1e-10)
            yield _within(key, f"{b.name}: rel |wᵀHw − Q|/|Q|", _rel(Q, b.wHw), 1e-10)
            ratio = _value(b.coupled) / (Q / P**2)
            yield _row(key, f"{b.name}: D / (Q/P²) (= cos²∠(w, g))", ratio, "≤ 1", ratio <= 1.0 + 1e-12)


@_checks("T11", "ρ = wᵀHw/(wᵀg)² unchanged even under non-uniform neuron scaling", "max rel Δρ")
def _t11(lab: Lab) -> _Rows:
    for key in ("bc-16x2", "digits-nobias-16x2"):
        changes = [_rel(blk.radial_ratio, a[blk.name].radial_ratio) for _, b, a in lab.neuron(key) for blk in b]
        yield _within(key, "max rel Δρ under non-uniform neuron scaling (all blocks)", max([0.0, *changes]), TOL_D)


@_checks("T12", "L -> sL: D -> D/s, D⁺ -> sD⁺, ρ -> ρ/s, D·D⁺ unchanged", "max rel error of D/s", among="D_sum")
def _t12(lab: Lab) -> _Rows:
    from coupled_curvature.numeric.core.diagnostics import diagnose

    for key in ("bc-16x2", "bc-nobias-16x2"):
        trained, ds = lab.net(key)
        N = len(ds.y_train)
        mean = diagnose(trained.model, nn.CrossEntropyLoss(), ds.train)
        tot = diagnose(trained.model, nn.CrossEntropyLoss(reduction="sum"), ds.train)
        eD = max(_rel(_value(m.coupled) / N, tot[m.name].coupled) for m in mean)
        eP = max(_rel(_value(m.inverse_coupled) * N, tot[m.name].inverse_coupled) for m in mean)
        eR = max(_rel(_value(m.radial_ratio) / N, tot[m.name].radial_ratio) for m in mean)
        eDD = max(_rel(_value(m.coupled) * _value(m.inverse_coupled),
                       _value(tot[m.name].coupled) * _value(tot[m.name].inverse_coupled)) for m in mean)
        yield _within(key, f"sum vs mean (s = N = {N}): rel |D_sum − D_mean/N|", eD, TOL_D)
        yield _within(key, "rel |D⁺_sum − N·D⁺_mean|", eP, TOL_DPLUS)
        yield _within(key, "rel |ρ_sum − ρ_mean/N|", eR, TOL_D)
        yield _within(key, "rel Δ(D·D⁺)", eDD, TOL_DPLUS)


@_checks("T13", "qk_transform keeps the function; D of the Q weight is kept by A = c·I on all heads, moved by a "
         "non-conformal A and, on a fused in_proj_weight, by a per-head cQ", "max rel ΔD under a conformal A",
         among="(conformal on the block)")
def _t13(lab: Lab) -> _Rows:
    from coupled_curvature.proofs.attention_crosscheck import attention_rows

    lab.say(f"T13 attention maps on two small trained nn.MultiheadAttention classifiers (seed {lab.seed})")
    yield from (_row(*r) for r in attention_rows(lab.seed, tol=TOL_D, move=MOVE))


@_checks("T14", "random non-conformal per-head A (Q/K), B (V/O) and a non-uniform neuron rescaling keep the function "
         "and move the raw D; the gauge-fixed D stays", "max rel ΔD, gauge-fixed", among="gauge-fixed")
def _t14(lab: Lab) -> _Rows:
    from coupled_curvature.proofs.gauge_crosscheck import gauge_rows

    lab.say(f"T14 gauge-fixed D on two small trained nn.MultiheadAttention classifiers and bc-16x2 (seed {lab.seed})")
    trained, ds = lab.net("bc-16x2")
    yield from (_row(*r) for r in gauge_rows(lab.seed, tol=TOL_D, move=MOVE, mlp=(trained.model, ds.train)))


#: the net, the precision and the exact factors of the certified rows (non-dyadic: the rescaled weights are
#: not float64 numbers, and the symmetry is applied exactly in ball arithmetic)
CERTIFIED_NET, CERTIFIED_PREC, CERTIFIED_C = "bc-16x2", 256, Fraction(37, 10)


def certified_rows(lab: Lab, kind: str) -> list[dict[str, Any]]:
    """_Rows quoting certified balls (``certify_invariance``, arb at 256 bits) on ``bc-16x2``.

    ``kind="layer"`` (T3): ``layer_rescale(0, 37/10)``: every block's ``D`` change ball contains 0 and is
    narrower than 1e-30 relative; the ``RQ`` change balls of the rescaled blocks exclude 0.
    ``kind="neuron"`` (T5): a non-uniform scaling of layer 0 by non-dyadic factors: the ``D`` change balls
    of ``0.weight``, ``0.bias`` and ``2.weight`` exclude 0 (certified), the last layer's contain it.
    """
    from coupled_curvature.numeric.certify.invariance import certify_invariance

    cache = lab.__dict__.setdefault("_certified", {})
    if kind not in cache:
        trained, ds = lab.net(CERTIFIED_NET)
        units = trained.model[0].weight.shape[0]
        arg = CERTIFIED_C if kind == "layer" else [Fraction(2 ** (i % 5), 4) * Fraction(11, 10) for i in range(units)]
        lab.say(f"certified {kind} rescaling on {CERTIFIED_NET} ({CERTIFIED_PREC} bits)")
        cache[kind] = certify_invariance(trained.model, lab.loss, ds.train, (f"{kind}_rescale", 0, arg),
                                         prec=CERTIFIED_PREC, inverse=False)
    inv, rows = cache[kind], []
    tag = f"(certified, {inv.before.prec_used} bits)"
    # (no "ΔD " nor "non-uniform" in these quantities: T3's and T5's headline figures select rows by them)
    what = "c = 37/10" if kind == "layer" else "scales 1.1·2^{-2..2}"
    for b in inv:
        touched = b.name in ("0.weight", "0.bias", "2.weight")
        ch = b.coupled_change
        if ch is None:
            rows.append(_row(CERTIFIED_NET, f"{b.name}: certified ΔD", float("nan"), f"refused: {b.before.reason}", False))
        elif kind == "neuron" and touched:  # T5: not conformal on these blocks, D moves
            rows.append(_row(CERTIFIED_NET, f"{b.name}: certified ΔD-ball midpoint, {what}", float(ch.mid),
                             f"ΔD ∈ {ch} ∌ 0 {tag}", ch.excludes_zero()))
        else:
            rel = b.coupled_change_relative
            rows.append(_row(CERTIFIED_NET, f"{b.name}: certified ΔD-ball width/|D|, {what}", rel,
                             f"ΔD ∈ {ch} ∋ 0 {tag}, width < 1e-30", 0 in ch and rel < 1e-30))
        if kind == "layer" and touched and b.rayleigh_change is not None:
            rq = b.rayleigh_change
            rows.append(_row(CERTIFIED_NET, f"{b.name}: certified ΔRQ-ball midpoint/RQ, {what}",
                             float(rq.mid / b.before.rayleigh.mid), f"ΔRQ ∈ {rq} ∌ 0 {tag}", rq.excludes_zero()))
    return rows


#: theorem id -> cross-check, in registry order, for exactly the theorems whose registry entry
#: declares one (``Theorem.crosscheck``); the others are absent
CROSSCHECKS: dict[str, Callable[[Lab], NumericCheck]] = {t: _CHECKS[t] for t in THEOREMS if t in _CHECKS}
_UNCHECKED = [t for t, th in THEOREMS.items() if th.crosscheck is not None and t not in CROSSCHECKS]
if _UNCHECKED:
    raise ImportError(f"the theorem registry declares a numeric cross-check for {', '.join(_UNCHECKED)}, "
                      "but none is registered here")


def crosscheck(theorem: str, lab: Lab) -> NumericCheck | None:
    """Run the cross-check of ``theorem`` (``None`` where the theorem has none)."""
    fn = CROSSCHECKS.get(theorem)
    if fn is None:
        return None
    t0 = time.perf_counter()
    with threads(1):  # the heavy chain restores the full thread count inside Lab.chain
        res = fn(lab)
    res.seconds = time.perf_counter() - t0
    return res
