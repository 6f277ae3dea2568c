"""Records keyed by block name, in partition order: the container of every per-block result
(:class:`~coupled_curvature.numeric.core.results.Diagnosis`; the spectral profile can share it).

>>> from collections import namedtuple
>>> R = namedtuple("R", "name value")
>>> r = ByBlock([R("a", 1), R("b", 2)])
>>> r["b"].value, len(r), r.names(), [x.name for x in r]
(2, 2, ['a', 'b'], ['a', 'b'])
>>> r["c"]
Traceback (most recent call last):
...
KeyError: "no block 'c'; blocks are: a, b"
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

__all__ = ["ByBlock"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


B = TypeVar("B", bound=_Named)


class ByBlock(Generic[B]):
    """Per-block records by name (``result["0.weight"]``), iterated in partition order. A class that keeps its
    records otherwise (a dataclass field) overrides :meth:`by_name` and gets the same lookup.
    """

    def __init__(self, blocks: Sequence[B]) -> None:
        self._blocks = {b.name: b for b in blocks}

    def by_name(self) -> Mapping[str, B]:
        """The records keyed by block name, in partition order."""
        return self._blocks

    def __getitem__(self, name: str) -> B:
        blocks = self.by_name()
        try:
            return blocks[name]
        except KeyError:
            raise KeyError(f"no block {name!r}; blocks are: {', '.join(blocks)}") from None

    def __iter__(self) -> Iterator[B]:
        return iter(self.by_name().values())

    def __len__(self) -> int:
        return len(self.by_name())

    def names(self) -> list[str]:
        return list(self.by_name())
