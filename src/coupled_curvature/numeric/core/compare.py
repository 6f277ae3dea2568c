"""Comparing two diagnoses, block by block (the number tolerances it uses are in :mod:`~..linalg.tolerance`).

:func:`compare`, the core of every invariance check, gives for two diagnoses of the same blocks,
per block and measure (``D``, ``D+``, ``RQ``, ``g_sq``, ``wHw``: the
:data:`~coupled_curvature.numeric.core.results.BLOCK_MEASURES`), the :func:`relative_change`.
Under a layer rescaling ``D`` and ``D⁺`` stay put (T3) while ``RQ``, ``‖g‖²`` and ``wᵀHw`` move
by ``c^{∓2}``; under a non-uniform neuron scaling ``D`` moves too (T5). (It imports the results
module when it runs: the results module imports from here.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, SupportsFloat

import torch  # noqa: F401  (the doctest below uses it)

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.core.by_block import ByBlock
from coupled_curvature.numeric.linalg.tolerance import relative_change

if TYPE_CHECKING:
    from coupled_curvature.numeric.core.results import Diagnosis

__all__ = ["BlockChange", "Comparison", "compare"]


@dataclass(frozen=True)
class BlockChange:
    """Relative changes of one block's measures; ``None`` where either side is undefined."""

    name: str
    size: int
    D: float | None
    D_plus: float | None
    RQ: float | None
    g_sq: float | None
    wHw: float | None

    def of(self, measure: str) -> float | None:
        """The change of ``measure`` (a key of ``BLOCK_MEASURES``: ``"D"``, ``"D+"``, …)."""
        return getattr(self, _attribute(measure))


@dataclass(frozen=True)
class Comparison(ByBlock[BlockChange]):
    """:func:`compare`'s result: one :class:`BlockChange` per block, in ``before``'s order."""

    blocks: tuple[BlockChange, ...]

    def by_name(self) -> Mapping[str, BlockChange]:
        return {b.name: b for b in self.blocks}

    def max_change(self, measure: str) -> float | None:
        """``max_b |after_b − before_b| / |before_b|`` over the blocks where ``measure`` is defined on
        both sides (``None`` if it is defined on none).

        >>> from coupled_curvature.numeric.core.results import BlockDiagnosis, Diagnosis
        >>> a = BlockDiagnosis("w", ("w",), 2, 4.0, 1.0, 0.5, 8.0, 2.0, 2.0, None, None, None, None)
        >>> b = BlockDiagnosis("w", ("w",), 2, 16.0, 0.25, 0.5, 8.0, 0.5, 2.0, None, None, None, None)
        >>> c = compare(Diagnosis([a], {}), Diagnosis([b], {}))
        >>> c.max_change("D"), c.max_change("RQ"), c.max_change("D+")
        (0.0, 0.75, None)
        """
        values = [v for v in (b.of(measure) for b in self.blocks) if v is not None]
        return max(values) if values else None

    def table(self) -> str:
        """Aligned text: one row per block, the relative change of each measure (``-``: undefined)."""
        from coupled_curvature.numeric.core.results import BLOCK_MEASURES

        head = ["block", "size", *(f"Δ{m}" for m in BLOCK_MEASURES)]
        rows = [head] + [[b.name, str(b.size), *("-" if b.of(m) is None else f"{b.of(m):.3e}" for m in BLOCK_MEASURES)]
                         for b in self.blocks]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
        return "\n".join(lines + ["Δ: relative change |after − before| / |before|"])


def _attribute(measure: str) -> str:
    from coupled_curvature.numeric.core.results import BLOCK_MEASURES

    if measure not in BLOCK_MEASURES:
        raise InvalidInputError(f"unknown measure {measure!r}; pass one of {', '.join(map(repr, BLOCK_MEASURES))}")
    return "D_plus" if measure == "D+" else measure


def compare(before: Diagnosis, after: Diagnosis) -> Comparison:
    """Per block, ``|after − before| / |before|`` of ``D``, ``D⁺``, ``RQ``, ``‖g‖²`` and ``wᵀHw``.

    Both diagnoses must have the same blocks (names and sizes, in any order); otherwise an
    ``InvalidInputError`` names the difference. A measure undefined on either side has change
    ``None``; one that is 0 before and not after has change ``inf``.

    Args:
        before: the diagnosis of the original model.
        after: the diagnosis of the transformed one, with the same blocks.

    Returns:
        Comparison: per block the relative change of each
        measure (``None`` where undefined), with ``max_change(measure)``.

    Raises:
        InvalidInputError: the two diagnoses do not have the same blocks (names and sizes).

    See also:
        :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`,
        :func:`~coupled_curvature.numeric.certify.invariance.certify_invariance` (certified changes).

    >>> import torch
    >>> from coupled_curvature.numeric import diagnose, layer_rescale
    >>> torch.manual_seed(0) and None
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).double()
    >>> X, y = torch.randn(16, 3), torch.randint(0, 2, (16,))
    >>> loss = torch.nn.CrossEntropyLoss()
    >>> c = compare(diagnose(net, loss, (X, y)), diagnose(layer_rescale(net, 0, 4.0), loss, (X, y)))
    >>> c.max_change("D") < 1e-10, c.max_change("RQ") > 0.9
    (True, True)
    """
    from coupled_curvature.numeric.core.results import BLOCK_MEASURES, Diagnosis

    for name, d in (("before", before), ("after", after)):
        if not isinstance(d, Diagnosis):
            raise InvalidInputError(f"compare needs two Diagnosis results (from diagnose); {name} is "
                                    f"{type(d).__name__}")
    a = {b.name: b.size for b in before}
    b = {x.name: x.size for x in after}
    if a != b:
        only_a, only_b = [n for n in a if n not in b], [n for n in b if n not in a]
        sizes = [f"{n} ({a[n]} vs {b[n]})" for n in a if n in b and a[n] != b[n]]
        parts = [f"only in before: {', '.join(only_a)}" if only_a else "",
                 f"only in after: {', '.join(only_b)}" if only_b else "",
                 f"sizes differ: {', '.join(sizes)}" if sizes else ""]
        raise InvalidInputError("compare needs two diagnoses of the same blocks; "
                                + "; ".join(p for p in parts if p)
                                + ". Diagnose models of the same architecture with the same blocks= partition")
    changes = []
    for x in before:
        y = after[x.name]
        ch = {_attribute(m): relative_change(_float(getattr(x, f)), _float(getattr(y, f)))
              for m, f in BLOCK_MEASURES.items()}
        changes.append(BlockChange(name=x.name, size=x.size, **ch))
    return Comparison(tuple(changes))


def _float(x: SupportsFloat | None) -> float | None:
    return None if x is None else float(x)
