"""The published results the report cites, as facts (authors, title, venue, year), and the
bibliography of those cited.

A citation is a key of :data:`REFERENCES`; a proof step names the keys of the results its sentence
uses (:class:`.proof_text.Said`), and :func:`bibliography` lists them once, in order of first citation.

>>> [r.label for r in bibliography(["penrose1955", "mackay1992", "penrose1955"])]
['Penrose 1955', 'MacKay 1992']
>>> bibliography(["no-such-key"])
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: unknown reference 'no-such-key'; known: penrose1955, mackay1992, mcallester1999, buchberger1965, dinh2017
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["Reference", "REFERENCES", "bibliography"]


@dataclass(frozen=True)
class Reference:
    """One cited result: ``key`` (as cited), ``label`` (as printed, author and year), the entry's text."""

    key: str
    label: str
    text: str


REFERENCES: dict[str, Reference] = {r.key: r for r in (
    Reference("penrose1955", "Penrose 1955", "R. Penrose. A generalized inverse for matrices. Proceedings of the "
                                             "Cambridge Philosophical Society 51(3), 406–413, 1955."),
    Reference("mackay1992", "MacKay 1992", "D. J. C. MacKay. A practical Bayesian framework for backpropagation "
                                           "networks. Neural Computation 4(3), 448–472, 1992."),
    Reference("mcallester1999", "McAllester 1999", "D. A. McAllester. PAC-Bayesian model averaging. Proceedings of "
                                                   "the Twelfth Annual Conference on Computational Learning Theory "
                                                   "(COLT), 1999."),
    Reference("buchberger1965", "Buchberger 1965", "B. Buchberger. Ein Algorithmus zum Auffinden der Basiselemente "
                                                   "des Restklassenringes nach einem nulldimensionalen Polynomideal. "
                                                   "PhD thesis, University of Innsbruck, 1965."),
    Reference("dinh2017", "Dinh et al. 2017", "L. Dinh, R. Pascanu, S. Bengio and Y. Bengio. Sharp minima can "
                                              "generalize for deep nets. Proceedings of the 34th International "
                                              "Conference on Machine Learning (ICML), 2017."),
)}


def bibliography(keys: Iterable[str]) -> list[Reference]:
    """The references of ``keys``, each once, in order of first citation; an unknown key is an error."""
    out: list[Reference] = []
    for k in keys:
        if k not in REFERENCES:
            raise InvalidInputError(f"unknown reference {k!r}; known: {', '.join(REFERENCES)}")
        if REFERENCES[k] not in out:
            out.append(REFERENCES[k])
    return out
