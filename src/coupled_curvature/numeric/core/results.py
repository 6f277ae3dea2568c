"""What :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` returns: one
:class:`BlockDiagnosis` per block and the :class:`Diagnosis` that holds them, with the derived
quantities ``RQ = wᵀHw/wᵀw``, ``D = RQ/‖g‖²`` and ``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²``.

>>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, 1.0, 0.25, 2, 0.0)
>>> b.radial_ratio, b.scale_invariant
(32.0, False)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from types import ModuleType
from typing import TYPE_CHECKING, Any

from coupled_curvature.base.errors import MissingExtraError, InvalidInputError
from coupled_curvature.base.output import json_text
from coupled_curvature.numeric.core.by_block import ByBlock
from coupled_curvature.numeric.linalg.tolerance import looks_scale_invariant
from coupled_curvature.numeric.core.routes import SpectralRoute, WHwRoute
from coupled_curvature.numeric.core.derived import (
    derived_quantities, fitting_value, gradient_at_rounding, missing_note,
)
from coupled_curvature.numeric.linalg.scaled import Scaled

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

    from coupled_curvature.numeric.core.summary import Summary

__all__ = ["BLOCK_MEASURES", "BlockDiagnosis", "Diagnosis", "derived_quantities", "missing_note"]

#: the per-block measures by short name (``flat()`` keys, ``compare()`` measures) and their field
BLOCK_MEASURES: dict[str, str] = {"D": "coupled", "D+": "inverse_coupled", "RQ": "rayleigh", "g_sq": "g_sq",
                                  "wHw": "wHw"}


@dataclass(frozen=True)
class BlockDiagnosis:
    """Per-block quantities; fields are ``None`` where undefined (see ``notes``).

    ``rayleigh = wᵀHw/wᵀw``, ``coupled = rayleigh/‖g‖²`` (D),
    ``inverse_coupled = (wᵀH⁺w/wᵀw)·‖g‖²`` (D⁺), with ``H = H_bb`` the diagonal block.
    ``method`` says how ``wᵀH⁺w`` was computed, a :class:`~.routes.SpectralRoute` (``"gram"``, ``"dense"``,
    ``"krylov"``, or ``"none"`` when it was not: ``method_reason`` says why, in words); Krylov blocks
    carry the Lanczos step count, convergence flag, relative error estimate and Ritz
    extremes ``(min θ, max θ)``; where Lanczos did not converge, ``D⁺`` (and ``wᵀH⁺w``) is ``None``,
    ``dplus_missing`` gives the step count and error estimate, and the estimate itself is kept apart in
    ``krylov_estimate`` (never in ``inverse_coupled``). ``noise_kept`` counts the kept eigenvalues at rounding level,
    ``|λ| ≤ n·ε·max|λ|`` (``pinv_rtol`` below ``n·ε``): when it is above 0, ``D⁺`` is
    dominated by rounding noise and a note says so. ``dplus_missing`` says why ``D⁺`` is
    ``None`` although it was asked for (the block is above ``max_dense``, say); ``None`` otherwise.
    ``wHw_route`` says where ``wᵀHw`` came from, a :class:`~.routes.WHwRoute`: ``"tangent"`` (the output
    tangent route, where the outputs are affine in the block) or ``"hvp"`` (a Hessian-vector product);
    ``wHw_reason`` says why. Both route fields are ``str`` enums: they compare equal to their values.
    ``g_rounding`` is the rounding level of the gradient, ``m·ε·‖Σ_n J_nᵀ|r_n|‖`` (``r_n = ∂L/∂f_n`` the
    output cotangents, ``m`` their number): the size of the rounding errors in ``g = Σ_n J_nᵀr_n``
    (``None`` where it was not computed); where the loss does not move when the block moves by
    ``max(‖w‖, 1)`` along ``±g`` (:mod:`.gradient_level`: a cancellation inside one sample's backward pass,
    such as a key bias under softmax), it is ``‖g‖`` itself. A block with ``‖g‖ ≤ g_rounding`` has a gradient that is zero
    to rounding (``g_at_rounding``; e.g. a logit shift under cross-entropy, whose gradient is exactly 0):
    ``D`` and ``D⁺`` are ``None`` there and a note says so. ``curvature`` is the matrix ``H`` stands for:
    ``"hessian"`` (the block's own Hessian), or ``"external: <type>"`` where ``diagnose(curvature=…)``
    supplied an operator for the block (:mod:`~.curvature_operator`).
    """

    name: str
    params: tuple[str, ...]
    size: int
    w_sq: float
    g_sq: float
    w_dot_g: float
    wHw: float
    rayleigh: float | None
    coupled: float | None
    wHpinvw: float | None
    inverse_coupled: float | None
    rank: int | None
    cutoff: float | None
    min_kept_rel_eig: float | None = None
    notes: tuple[str, ...] = field(default=())
    method: SpectralRoute = SpectralRoute.DENSE
    krylov_iterations: int | None = None
    krylov_converged: bool | None = None
    krylov_error: float | None = None
    ritz_extremes: tuple[float, float] | None = None
    noise_kept: int | None = None
    dplus_missing: str | None = None
    wHw_route: WHwRoute = WHwRoute.HVP
    method_reason: str = ""
    wHw_reason: str = ""
    g_rounding: float | None = None
    curvature: str = "hessian"
    krylov_estimate: float | None = None

    def with_dplus(self, wHpinvw: float | Scaled | None, rank: int | None, min_kept_rel_eig: float | None,
                   note: str) -> BlockDiagnosis:
        """This block with ``wᵀH⁺w`` supplied by another route (``note`` says which, a
        :class:`~coupled_curvature.numeric.linalg.scaled.Scaled` where it need not fit float64); ``D⁺`` is
        recomputed and the 'not computed' record and note are dropped. A block whose gradient is zero to
        rounding (``g_at_rounding``) keeps ``D⁺ = None``."""
        if self.g_at_rounding:
            return self
        notes = [n for n in self.notes if self.dplus_missing is None or n != missing_note(self.dplus_missing)]
        _, _, dplus = derived_quantities(self.w_sq, self.g_sq, self.wHw, wHpinvw, notes)
        value = fitting_value(wHpinvw, "wᵀH⁺w", notes)
        return replace(self, wHpinvw=value, inverse_coupled=dplus, rank=rank, min_kept_rel_eig=min_kept_rel_eig,
                       notes=(*notes, note), dplus_missing=None)

    def unconverged(self, iterations: int, error: float | None, *, dense_size: int | None = None) -> BlockDiagnosis:
        """This block after a Lanczos run that did not converge: ``D⁺`` and ``wᵀH⁺w`` become ``None``, the
        estimate moves to ``krylov_estimate``, and ``dplus_missing`` says why (steps, error estimate, what to do:
        the ``max_dense`` that sends the block to the exact dense route, its size or, for a per-head attention
        block, the smaller ``dense_size`` its Hessian is eigendecomposed at).

        >>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, 1.0, 0.25, 2, 0.0, method="krylov")
        >>> u = b.unconverged(64, 3.0)
        >>> u.inverse_coupled, u.wHpinvw, u.krylov_estimate, u.krylov_converged
        (None, None, 0.25, False)
        >>> u.dplus_missing
        'Lanczos did not converge in 64 Hessian-vector products (estimated relative error 3.0e+00; the estimate D⁺ ≈ 2.5e-01 is in krylov_estimate): raise krylov_max_iter, or use method="dense" with max_dense ≥ 2 (its size: a dense eigendecomposition is exact)'
        """
        err = "unknown" if error is None else f"{error:.1e}"
        est = "" if self.inverse_coupled is None else f"; the estimate D⁺ ≈ {self.inverse_coupled:.1e} is in krylov_estimate"
        need = (f"{self.size} (its size" if dense_size is None else
                f"{dense_size} (the dimension its per-head Hessian is eigendecomposed in")
        reason = (f"Lanczos did not converge in {iterations} Hessian-vector products (estimated relative error "
                  f"{err}{est}): raise krylov_max_iter, or use method=\"dense\" with max_dense ≥ {need}: a dense "
                  "eigendecomposition is exact)")
        return replace(self, krylov_estimate=self.inverse_coupled, inverse_coupled=None, wHpinvw=None,
                       krylov_converged=False, krylov_iterations=iterations, krylov_error=error, dplus_missing=reason,
                       notes=(*self.notes, missing_note(reason)))

    def without_dplus(self, reason: str) -> BlockDiagnosis:
        """This block recording why ``D⁺`` is absent (unless it has one)."""
        if self.inverse_coupled is not None or self.dplus_missing is not None:
            return self
        return replace(self, dplus_missing=reason, notes=(*self.notes, missing_note(reason)))

    @property
    def scale_invariant(self) -> bool:
        """``wᵀg ≈ 0`` (``|wᵀg| ≤ 1e-12·‖w‖·‖g‖``, both non-zero): the block looks scale-invariant
        (T10: ``L(sw) = L(w)`` gives ``wᵀg = 0``, ``Hw = −g``, so ``wᵀHw = 0`` and ``D = 0``), and
        ``D`` is uninformative there."""
        return looks_scale_invariant(self.w_dot_g, self.w_sq, self.g_sq)

    @property
    def g_at_rounding(self) -> bool:
        """``‖g‖ ≤ g_rounding``: the gradient is zero to rounding, so ``D`` and ``D⁺`` are undefined."""
        return gradient_at_rounding(self.g_sq, self.g_rounding)

    @property
    def radial_ratio(self) -> float | None:
        """``ρ = wᵀHw / (wᵀg)²`` (T11), ``None`` when ``wᵀg = 0``."""
        return None if self.w_dot_g == 0.0 else self.wHw / self.w_dot_g**2


class Diagnosis(ByBlock[BlockDiagnosis]):
    """The result of :func:`diagnose`: block records by name, in partition order.

    ``frozen``: parameters with ``requires_grad=False``; ``skipped``: those left out of the
    blocks (``frozen="skip"``); ``notes``: model-level notes (per-block ones are on the blocks).
    """

    def __init__(self, blocks: Sequence[BlockDiagnosis], meta: Mapping[str, object], *,
                 notes: Sequence[str] = (), frozen: Sequence[str] = (), skipped: Sequence[str] = ()):
        super().__init__(blocks)
        self.meta = dict(meta)
        self.notes: tuple[str, ...] = tuple(notes)
        self.frozen: tuple[str, ...] = tuple(frozen)
        self.skipped: tuple[str, ...] = tuple(skipped)

    def to_dict(self) -> dict:
        """Plain data: ``{"meta": {...}, "blocks": [{field: value}, ...], "notes", "frozen", "skipped"}``.

        Block values are the :class:`BlockDiagnosis` fields as they are (``None`` where
        undefined, ``inf``/``nan`` floats kept); :meth:`to_json` makes it strict JSON.
        """
        blocks = []
        for b in self:
            d = asdict(b)
            d["params"] = list(b.params)
            d["method"], d["wHw_route"] = str(b.method), str(b.wHw_route)
            d["notes"] = list(b.notes)
            d["ritz_extremes"] = None if b.ritz_extremes is None else list(b.ritz_extremes)
            blocks.append(d)
        return {"meta": dict(self.meta), "blocks": blocks, "notes": list(self.notes),
                "frozen": list(self.frozen), "skipped": list(self.skipped)}

    def to_json(self, *, indent: int | None = 2) -> str:
        """:meth:`to_dict` as strict JSON (RFC 8259: no ``NaN``/``Infinity`` tokens).

        Missing values are ``null``; a non-finite number is written as the string ``"inf"``,
        ``"-inf"`` or ``"nan"`` (what Python's ``float()`` reads back); other numbers (numpy,
        mpmath) are written as float64. :meth:`from_json` reverses it.

        >>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, float("inf"), None, None, None, None, None, None)
        >>> text = Diagnosis([b], {"loss": 0.5}).to_json(indent=None)
        >>> '"wHw": "inf"' in text, '"rayleigh": null' in text
        (True, True)
        >>> Diagnosis.from_json(text)["w"].wHw
        inf
        """
        return json_text(self.to_dict(), indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        """The :class:`Diagnosis` that :meth:`to_dict` (or the parsed :meth:`to_json`) describes.

        The strings ``"inf"``, ``"-inf"``, ``"nan"`` in a number's place become floats again.

        >>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, 1.0, 0.25, 2, 0.0)
        >>> d = Diagnosis([b], {"loss": 0.5})
        >>> Diagnosis.from_dict(d.to_dict()).to_dict() == d.to_dict()
        True
        """
        if not isinstance(data, Mapping) or not isinstance(data.get("blocks"), list):
            raise InvalidInputError("from_dict needs the mapping Diagnosis.to_dict() returns, with a 'blocks' list; "
                                    f"got {type(data).__name__}")
        names = {f.name for f in fields(BlockDiagnosis)}
        blocks = []
        for i, row in enumerate(data["blocks"]):
            if isinstance(row, Mapping):  # data written before these fields existed reads them as absent
                row = {**_ADDED_FIELDS, **row}
            if not isinstance(row, Mapping) or set(row) != names:
                got = set(row) if isinstance(row, Mapping) else set()
                raise InvalidInputError(
                    f"block {i} of the data does not have the BlockDiagnosis fields (missing: "
                    f"{', '.join(sorted(names - got)) or 'none'}; unknown: {', '.join(sorted(got - names)) or 'none'}); "
                    "pass what Diagnosis.to_dict() wrote")
            blocks.append(_block_from_row(row))
        meta = data.get("meta", {})
        return cls(blocks, {k: _number(v) for k, v in dict(meta).items()} if isinstance(meta, Mapping) else {},
                   notes=tuple(data.get("notes", ())), frozen=tuple(data.get("frozen", ())),
                   skipped=tuple(data.get("skipped", ())))

    @classmethod
    def from_json(cls, text: str) -> Diagnosis:
        """:meth:`from_dict` of the JSON text :meth:`to_json` wrote (example there)."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as err:
            raise InvalidInputError(f"from_json needs the text Diagnosis.to_json() wrote: {err}") from None
        return cls.from_dict(data)

    def flat(self, prefix: str = "") -> dict[str, float]:
        """``{f"{prefix}{measure}/{block}": value}`` for loggers (TensorBoard, W&B, CSV).

        ``measure`` is one of :data:`BLOCK_MEASURES` (``D``, ``D+``, ``RQ``, ``g_sq``, ``wHw``;
        ``D+`` in ASCII so that every logger accepts the key), in that order, block by block.
        Undefined values are **left out** (no ``None`` values: a logger cannot plot them), so
        ``key in d.flat()`` says whether it is defined; values are Python floats (an ``inf`` or
        ``nan`` stays a float).

        >>> b = BlockDiagnosis("0.weight", ("0.weight",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, None, None, None, None)
        >>> Diagnosis([b], {}).flat(prefix="curv/")
        {'curv/D/0.weight': 2.0, 'curv/RQ/0.weight': 2.0, 'curv/g_sq/0.weight': 1.0, 'curv/wHw/0.weight': 8.0}
        """
        out: dict[str, float] = {}
        for b in self:
            for measure, name in BLOCK_MEASURES.items():
                value = getattr(b, name)
                if value is not None:
                    out[f"{prefix}{measure}/{b.name}"] = float(value)
        return out

    def to_dataframe(self) -> pandas.DataFrame:
        """One row per block (index ``name``), one column per :class:`BlockDiagnosis` field plus
        ``scale_invariant`` and ``radial_ratio = wᵀHw/(wᵀg)²``.

        Needs pandas, an optional extra (``pip install 'coupled-curvature[pandas]'``). Missing
        values are ``pd.NA`` in nullable columns (``Float64``, ``Int64``, ``boolean``), so that a
        missing ``D⁺`` is not confused with a computed ``nan``.

        Without pandas it raises :class:`~coupled_curvature.base.errors.MissingExtraError` (an
        ``ImportError``) that says so; the lines marked SKIP need pandas (the tests run them).

        >>> issubclass(MissingExtraError, ImportError)
        True
        >>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, None, None, None, None)
        >>> df = Diagnosis([b], {}).to_dataframe()  # doctest: +SKIP
        >>> str(df.loc["w", "coupled"]), str(df.loc["w", "inverse_coupled"])  # doctest: +SKIP
        ('2.0', '<NA>')
        """
        pd = _pandas()
        columns = {}
        for col in [f.name for f in fields(BlockDiagnosis) if f.name != "name"] + ["scale_invariant", "radial_ratio",
                                                                                    "g_at_rounding"]:
            values = [getattr(b, col) for b in self]
            if col in _FLOAT_FIELDS:
                columns[col] = pd.array([None if v is None else float(v) for v in values], dtype="Float64")
            elif col in _COLUMN_KIND:
                columns[col] = pd.array(values, dtype=_COLUMN_KIND[col])
            else:  # tuples (params, notes, ritz_extremes) stay Python objects
                columns[col] = pd.Series(values, dtype=object, index=range(len(values))).array
        return pd.DataFrame(columns, index=pd.Index([b.name for b in self], name="name"))

    def summary(self) -> Summary:
        """Model-level aggregates (:class:`~coupled_curvature.numeric.core.summary.Summary`:
        median and geometric mean of D and D⁺, totals, the blocks to watch); see there.

        >>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, None, None, None, None)
        >>> s = Diagnosis([b], {}).summary(); s.parameters, s.d_median, s.dplus_missing
        (2, 2.0, ('w',))
        """
        from coupled_curvature.numeric.core.summary import summarize

        return summarize(self)

    def plot(self) -> Figure:
        """Per-block bars of ``|D|`` and ``|D⁺|`` on a log axis (a matplotlib ``Figure``, no pyplot
        state; save it with ``fig.savefig("d.png")``). Drawn by
        :func:`coupled_curvature.numeric.core.plots.diagnosis_figure`, which says how negative,
        missing and unconverged values are shown.

        >>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, 1.0, 0.25, 2, 0.0)
        >>> type(Diagnosis([b], {}).plot()).__name__
        'Figure'
        """
        from coupled_curvature.numeric.core.plots import diagnosis_figure

        return diagnosis_figure(self)

    def table(self) -> str:
        """Aligned text: one row per block; columns ``block`` (the ``name`` field), ``size``,
        ``g_sq``, ``wHw`` (fields of those names), ``RQ``, ``D``, ``D⁺`` (the fields ``rayleigh``,
        ``coupled``, ``inverse_coupled``) and ``rank``; ``-`` where undefined.

        A Krylov block that did not converge has ``-`` for ``D⁺``; its note gives the estimate and why it is
        not reported. Then come the notes.

        >>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, 1.0, 0.25, 2, 0.0)
        >>> print(Diagnosis([b], {}).table())
        block  size          g_sq           wHw            RQ             D            D⁺  rank
        w         2  1.000000e+00  8.000000e+00  2.000000e+00  2.000000e+00  2.500000e-01     2
        """
        head = ["block", "size", "g_sq", "wHw", "RQ", "D", "D⁺", "rank"]
        rows = [head] + [[b.name, str(b.size), _fmt(b.g_sq), _fmt(b.wHw), _fmt(b.rayleigh), _fmt(b.coupled),
                          _fmt(b.inverse_coupled), "-" if b.rank is None else str(b.rank)] for b in self]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in rows]
        notes = [f"  model: {n}" for n in self.notes] + [f"  {b.name}: {n}" for b in self for n in b.notes]
        return "\n".join(lines + (["notes:"] + notes if notes else []))

    def __repr__(self) -> str:
        return f"Diagnosis({len(self)} blocks)\n{self.table()}"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6e}"


#: fields added after the JSON form was first written, with the value they read as when absent
_ADDED_FIELDS = {"g_rounding": None, "krylov_estimate": None}
_FLOAT_FIELDS = frozenset({"w_sq", "g_sq", "w_dot_g", "wHw", "rayleigh", "coupled", "wHpinvw", "inverse_coupled",
                           "cutoff", "min_kept_rel_eig", "krylov_error", "radial_ratio", "g_rounding",
                           "krylov_estimate"})
_COLUMN_KIND = {"size": "Int64", "rank": "Int64", "krylov_iterations": "Int64", "noise_kept": "Int64",
                "krylov_converged": "boolean", "scale_invariant": "boolean", "g_at_rounding": "boolean", "method": "string",
                "dplus_missing": "string"}
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _number(v: object) -> object:
    """The inverse of :func:`~coupled_curvature.base.output.strict_json` on one number's place."""
    return _NONFINITE[v] if isinstance(v, str) and v in _NONFINITE else v


def _block_from_row(row: Mapping[str, object]) -> BlockDiagnosis:
    """Only the number fields are decoded: a note or a name that reads "nan" stays a string."""
    values: dict[str, Any] = {k: _number(v) if k in _FLOAT_FIELDS else v for k, v in row.items()}
    values["params"] = tuple(values["params"])
    if "method" in values:
        values["method"] = SpectralRoute(values["method"])
    if "wHw_route" in values:
        values["wHw_route"] = WHwRoute(values["wHw_route"])
    values["notes"] = tuple(values["notes"])
    if values["ritz_extremes"] is not None:
        values["ritz_extremes"] = tuple(_number(v) for v in values["ritz_extremes"])
    return BlockDiagnosis(**values)


def _pandas() -> ModuleType:
    return MissingExtraError.require("pandas", "Diagnosis.to_dataframe", "pandas",
                                     "to_dict(), flat() and to_json() need nothing extra")
