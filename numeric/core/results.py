"""What :func:`~coupled_curvature.numeric.core.diagnostics.diagnose` returns: one
:class:`BlockDiagnosis` per block and the :class:`Diagnosis` that holds them, with the derived
quantities ``RQ = wᵀHw/wᵀw``, ``D = RQ/‖g‖²`` and ``D⁺ = (wᵀH⁺w/wᵀw)·‖g‖²``.

>>> b = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, 1.0, 0.25, 2, 0.0)
>>> b.radial_ratio, b.scale_invariant
(32.0, False)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from coupled_curvature.numeric.core.compare import looks_scale_invariant

__all__ = ["BlockDiagnosis", "Diagnosis", "derived_quantities", "missing_note"]


@dataclass(frozen=True)
class BlockDiagnosis:
    """Per-block quantities; fields are ``None`` where undefined (see ``notes``).

    ``rayleigh = wᵀHw/wᵀw``, ``coupled = rayleigh/‖g‖²`` (D),
    ``inverse_coupled = (wᵀH⁺w/wᵀw)·‖g‖²`` (D⁺), with ``H = H_bb`` the diagonal block.
    ``method`` says how ``wᵀH⁺w`` was computed (``"dense"``, ``"krylov"`` or ``"gram"``); Krylov blocks
    carry the Lanczos step count, convergence flag, relative error estimate and Ritz
    extremes ``(min θ, max θ)``; an unconverged estimate stays in ``inverse_coupled``
    and a note says so. ``noise_kept`` counts the kept eigenvalues at rounding level,
    ``|λ| ≤ n·ε·max|λ|`` (``pinv_rtol`` below ``n·ε``): when it is above 0, ``D⁺`` is
    dominated by rounding noise and a note says so. ``dplus_missing`` says why ``D⁺`` is
    ``None`` although it was asked for (the block is above ``max_dense``, say); ``None`` otherwise.
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
    method: str = "dense"
    krylov_iterations: int | None = None
    krylov_converged: bool | None = None
    krylov_error: float | None = None
    ritz_extremes: tuple[float, float] | None = None
    noise_kept: int | None = None
    dplus_missing: str | None = None

    def with_dplus(self, wHpinvw: float, rank: int | None, min_kept_rel_eig: float | None,
                   note: str) -> BlockDiagnosis:
        """This block with ``wᵀH⁺w`` supplied by another route (``note`` says which); ``D⁺`` is
        recomputed and the 'not computed' record and note are dropped."""
        notes = [n for n in self.notes if self.dplus_missing is None or n != missing_note(self.dplus_missing)]
        _, _, dplus = derived_quantities(self.w_sq, self.g_sq, self.wHw, wHpinvw, notes)
        return replace(self, wHpinvw=wHpinvw, inverse_coupled=dplus, rank=rank, min_kept_rel_eig=min_kept_rel_eig,
                       notes=(*notes, note), dplus_missing=None)

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
    def radial_ratio(self) -> float | None:
        """``ρ = wᵀHw / (wᵀg)²`` (T11), ``None`` when ``wᵀg = 0``."""
        return None if self.w_dot_g == 0.0 else self.wHw / self.w_dot_g**2


class Diagnosis:
    """The result of :func:`diagnose`: block records by name, in partition order.

    ``frozen``: parameters with ``requires_grad=False``; ``skipped``: those left out of the
    blocks (``frozen="skip"``); ``notes``: model-level notes (per-block ones are on the blocks).
    """

    def __init__(self, blocks: Sequence[BlockDiagnosis], meta: Mapping[str, object], *,
                 notes: Sequence[str] = (), frozen: Sequence[str] = (), skipped: Sequence[str] = ()):
        self._blocks = {b.name: b for b in blocks}
        self.meta = dict(meta)
        self.notes: tuple[str, ...] = tuple(notes)
        self.frozen: tuple[str, ...] = tuple(frozen)
        self.skipped: tuple[str, ...] = tuple(skipped)

    def __getitem__(self, name: str) -> BlockDiagnosis:
        try:
            return self._blocks[name]
        except KeyError:
            raise KeyError(f"no block {name!r}; blocks are: {', '.join(self._blocks)}") from None

    def __iter__(self) -> Iterator[BlockDiagnosis]:
        return iter(self._blocks.values())

    def __len__(self) -> int:
        return len(self._blocks)

    def names(self) -> list[str]:
        return list(self._blocks)

    def to_dict(self) -> dict:
        """Plain data: ``{"meta": {...}, "blocks": [{field: value}, ...]}``."""
        blocks = []
        for b in self:
            d = asdict(b)
            d["params"] = list(b.params)
            d["notes"] = list(b.notes)
            d["ritz_extremes"] = None if b.ritz_extremes is None else list(b.ritz_extremes)
            blocks.append(d)
        return {"meta": dict(self.meta), "blocks": blocks, "notes": list(self.notes),
                "frozen": list(self.frozen), "skipped": list(self.skipped)}

    def table(self) -> str:
        """Aligned text: one row per block."""
        head = ["block", "size", "‖g‖²", "wᵀHw", "RQ", "D", "D⁺", "rank"]
        rows = [head]
        for b in self:
            rows.append(
                [b.name, str(b.size), _fmt(b.g_sq), _fmt(b.wHw), _fmt(b.rayleigh),
                 _fmt(b.coupled), _fmt(b.inverse_coupled), "-" if b.rank is None else str(b.rank)]
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in rows]
        notes = [f"  model: {n}" for n in self.notes] + [f"  {b.name}: {n}" for b in self for n in b.notes]
        return "\n".join(lines + (["notes:"] + notes if notes else []))

    def __repr__(self) -> str:
        return f"Diagnosis({len(self)} blocks)\n{self.table()}"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6e}"


def missing_note(reason: str) -> str:
    return f"D⁺ not computed: {reason}"


def derived_quantities(w_sq, g_sq, wHw, wHpinvw, notes: list[str]):
    """``(RQ, D, D⁺)`` from the block sums, ``None`` where undefined (a note says why).

    Works for floats and for mpmath numbers alike (the arbitrary-precision path uses it).
    """
    rayleigh = coupled = inverse_coupled = None
    if w_sq == 0:
        notes.append("w = 0: the Rayleigh quotient, D and D⁺ are undefined")
        return rayleigh, coupled, inverse_coupled
    rayleigh = wHw / w_sq
    if g_sq == 0:
        notes.append("g = 0: D = RQ/‖g‖² is undefined (stationary block)")
    else:
        coupled = rayleigh / g_sq
    if wHpinvw is not None:
        inverse_coupled = wHpinvw / w_sq * g_sq
    return rayleigh, coupled, inverse_coupled


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6e}"


def missing_note(reason: str) -> str:
    """The note recorded with ``dplus_missing``: ``"D⁺ not computed: <reason>"``."""
    return f"D⁺ not computed: {reason}"
