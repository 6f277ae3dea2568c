"""Model-level aggregates of a :class:`~coupled_curvature.numeric.core.results.Diagnosis`.

``D`` and ``D⁺`` are per block; a model-level number needs an aggregation, and the
:class:`Summary` states which blocks went into each one:

* ``d_median``: the median of ``D`` over the blocks where ``D`` is defined and the block is not
  T10-degenerate (``wᵀg ≈ 0``, where ``D ≈ 0`` says nothing): the blocks in ``d_blocks``;
* ``d_geometric_mean = exp(mean log D)`` over the blocks of ``d_blocks`` with ``D > 0``
  (``d_positive``; ``D`` is scale-free, so a geometric mean fits; ``D ≤ 0`` cannot enter it);
* ``dplus_median``, ``dplus_geometric_mean``: the same for ``D⁺`` over the blocks with ``D⁺``
  defined (``dplus_blocks``) and, for the geometric mean, ``D⁺ > 0`` (``dplus_positive``).

An aggregate over no block is ``None``. Values are float64 (mpmath results are rounded).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coupled_curvature.numeric.core.results import Diagnosis

__all__ = ["Summary", "summarize"]

AGGREGATION = ("median and geometric mean over blocks with the value defined, T10-degenerate blocks (wᵀg ≈ 0) "
               "left out of D's; the geometric mean only over positive values")


@dataclass(frozen=True)
class Summary:
    """Aggregates of one diagnosis; ``aggregation`` says how they were taken (module docstring).

    ``dplus_missing``: blocks without ``D⁺`` (not asked for, above ``max_dense``, ``w = 0``);
    ``dplus_unconverged``: Krylov blocks whose ``D⁺`` estimate did not converge (their ``D⁺`` is
    ``None``, so they are also in ``dplus_missing`` and not in the ``D⁺`` aggregates); ``scale_invariant``: T10-degenerate blocks; ``d_undefined``: blocks
    with ``D`` undefined (``w = 0`` or ``g = 0``).
    """

    blocks: int
    parameters: int
    d_blocks: tuple[str, ...]
    d_positive: tuple[str, ...]
    d_median: float | None
    d_geometric_mean: float | None
    dplus_blocks: tuple[str, ...]
    dplus_positive: tuple[str, ...]
    dplus_median: float | None
    dplus_geometric_mean: float | None
    d_undefined: tuple[str, ...]
    dplus_missing: tuple[str, ...]
    dplus_unconverged: tuple[str, ...]
    scale_invariant: tuple[str, ...]
    aggregation: str = AGGREGATION

    def lines(self) -> list[str]:
        """The summary as short text lines (each under 100 columns)."""
        def f(x: float | None) -> str:
            return "-" if x is None else f"{x:.6e}"

        def some(names: tuple[str, ...]) -> str:
            return "none" if not names else ", ".join(names[:4]) + (f", … ({len(names)})" if len(names) > 4 else "")

        return [f"{self.blocks} blocks, {self.parameters} parameters",
                f"D:  median {f(self.d_median)} over {len(self.d_blocks)} blocks, geometric mean "
                f"{f(self.d_geometric_mean)} over {len(self.d_positive)}",
                f"D⁺: median {f(self.dplus_median)} over {len(self.dplus_blocks)} blocks, geometric mean "
                f"{f(self.dplus_geometric_mean)} over {len(self.dplus_positive)}",
                f"D⁺ missing: {some(self.dplus_missing)}; unconverged: {some(self.dplus_unconverged)}",
                f"T10-degenerate (wᵀg ≈ 0): {some(self.scale_invariant)}"]


def _aggregate(values: dict[str, float]) -> tuple[tuple[str, ...], float | None, float | None]:
    positive = tuple(b for b, v in values.items() if v > 0)
    median = statistics.median(values.values()) if values else None
    geo = math.exp(math.fsum(math.log(values[b]) for b in positive) / len(positive)) if positive else None
    return positive, median, geo


def summarize(diagnosis: Diagnosis) -> Summary:
    """The :class:`Summary` of ``diagnosis``: ``median(D)``, ``exp(mean log D)`` (``D > 0``) and the
    same for ``D⁺``, over the blocks the module docstring names, plus the blocks to watch.

    >>> from coupled_curvature.numeric.core.results import BlockDiagnosis, Diagnosis
    >>> a = BlockDiagnosis("a", ("a",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, 4.0, 1.0, 2, 0.0)
    >>> b = BlockDiagnosis("b", ("b",), 3, 1.0, 1.0, 0.5, 8.0, 8.0, 8.0, None, None, None, None)
    >>> s = summarize(Diagnosis([a, b], {}))
    >>> s.parameters, s.d_median, s.d_geometric_mean, s.dplus_median, s.dplus_missing
    (5, 5.0, 4.0, 1.0, ('b',))
    """
    blocks = list(diagnosis)
    d = {b.name: float(b.coupled) for b in blocks if b.coupled is not None and not b.scale_invariant}
    dp = {b.name: float(b.inverse_coupled) for b in blocks if b.inverse_coupled is not None}
    d_pos, d_med, d_geo = _aggregate(d)
    dp_pos, dp_med, dp_geo = _aggregate(dp)
    return Summary(
        blocks=len(blocks), parameters=sum(b.size for b in blocks),
        d_blocks=tuple(d), d_positive=d_pos, d_median=d_med, d_geometric_mean=d_geo,
        dplus_blocks=tuple(dp), dplus_positive=dp_pos, dplus_median=dp_med, dplus_geometric_mean=dp_geo,
        d_undefined=tuple(b.name for b in blocks if b.coupled is None),
        dplus_missing=tuple(b.name for b in blocks if b.inverse_coupled is None),
        dplus_unconverged=tuple(b.name for b in blocks if b.krylov_converged is False),
        scale_invariant=tuple(b.name for b in blocks if b.scale_invariant),
    )
