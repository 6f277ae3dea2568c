"""How a derivation step is established: :class:`MethodKind` and :class:`StepMethod`.

* ``exact``       -- ``expand``/``cancel``/``Poly(...).is_zero`` on ``lhs - rhs``: rational-function identity;
* ``groebner``    -- ideal membership decided by reduction modulo a Gröbner basis;
* ``certificate`` -- a plain-data certificate accepted by the independent checker;
* ``rewrite``     -- a named rewrite rule (a declared hypothesis), whose name the method carries.

A method prints as its kind, and a rewrite as ``rewrite:<rule>``; the rule is a field, never
read back out of that text.

>>> StepMethod.of("exact"), StepMethod.rewrite("penrose")
(StepMethod(kind=<MethodKind.EXACT: 'exact'>, rule=None), StepMethod(kind=<MethodKind.REWRITE: 'rewrite'>, rule='penrose'))
>>> str(StepMethod.rewrite("penrose")), StepMethod.rewrite("penrose").rule
('rewrite:penrose', 'penrose')
>>> StepMethod.of("numeric")
Traceback (most recent call last):
...
ValueError: unknown step method 'numeric'; use one of exact, groebner, certificate (a rewrite: StepMethod.rewrite(rule))
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["MethodKind", "StepMethod"]


class MethodKind(str, Enum):
    """The kind of a step's method; a ``str`` enum, equal to its value."""

    EXACT = "exact"
    GROEBNER = "groebner"
    CERTIFICATE = "certificate"
    REWRITE = "rewrite"


_PLAIN = (MethodKind.EXACT, MethodKind.GROEBNER, MethodKind.CERTIFICATE)


@dataclass(frozen=True)
class StepMethod:
    """A step's method: its :class:`MethodKind` and, for a rewrite (only), the rule's name."""

    kind: MethodKind
    rule: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, MethodKind):
            raise ValueError(f"StepMethod.kind must be a MethodKind, got {self.kind!r}")
        if (self.kind is MethodKind.REWRITE) != bool(self.rule):
            raise ValueError("a rewrite names its rule, and only a rewrite has one")

    @classmethod
    def of(cls, kind: str | MethodKind) -> StepMethod:
        """The method of a plain kind (``"exact"``, ``"groebner"``, ``"certificate"``)."""
        if isinstance(kind, MethodKind) and kind in _PLAIN:
            return cls(kind)
        if isinstance(kind, str) and kind in {k.value for k in _PLAIN}:
            return cls(MethodKind(kind))
        raise ValueError(f"unknown step method {kind!r}; use one of {', '.join(k.value for k in _PLAIN)} "
                         "(a rewrite: StepMethod.rewrite(rule))")

    @classmethod
    def rewrite(cls, rule: str) -> StepMethod:
        """The method of a step that applies the rewrite rule named ``rule``."""
        return cls(MethodKind.REWRITE, rule)

    def __str__(self) -> str:
        return f"rewrite:{self.rule}" if self.kind is MethodKind.REWRITE else self.kind.value

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)
