"""``ccurv experiment transformers``: sharpness measures, ``D``, ``D⁺`` and the gauge-fixed ``D`` under attention's
symmetries (T13) on small trained transformers.

Each kind of :data:`~coupled_curvature.numeric.models.tiny_transformers.TINY_TRANSFORMERS` is trained (seeded)
and swept by :func:`~coupled_curvature.numeric.studies.explorer_attention.attention_matrix` over the measures of
:data:`STUDY_MEASURES`: raw sharpness (top eigenvalue, trace, fixed-radius ε-sharpness), adaptive sharpness
(worst case), ``D`` and ``D⁺`` on tensor blocks and on per-head blocks, and gauge-fixed (T14). A kind that needs
the ``transformers`` package is skipped, with the reason, when it is absent.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Sequence
from typing import Any

from coupled_curvature.numeric.models.tiny_transformers import TINY_TRANSFORMERS, tiny_transformer
from coupled_curvature.numeric.studies.explorer_attention import attention_matrix
from coupled_curvature.numeric.studies.explorer_attention_predictions import ATTENTION_SYMMETRIES

__all__ = ["STUDY_MEASURES", "transformer_study"]

STUDY_MEASURES = ("top_eig", "trace", "sam", "adaptive_worst", "D", "Dplus", "D[head]", "Dplus[head]", "D[gauge]",
                  "Dplus[gauge]")
_DENSE = {m: {"max_dense": 1024} for m in ("trace", "D", "Dplus", "D[head]", "Dplus[head]", "D[gauge]", "Dplus[gauge]")}


def transformer_study(kinds: Sequence[str] = tuple(TINY_TRANSFORMERS), *, seed: int = 0, steps: int = 30,
                      quick: bool = False, measures: Sequence[str] = STUDY_MEASURES,
                      progress: Callable[[str], None] | None = None) -> dict:
    """``{"models": [...], "measures", "symmetries", "seed", "quick"}``: per kind its description, cells
    (:meth:`Cell.to_dict`), function gaps and seconds, or ``{"kind", "skipped": reason}``.

    >>> r = transformer_study(["mha"], steps=2, quick=True, measures=["D[gauge]"])
    >>> [c["agrees"] for c in r["models"][0]["cells"]]
    [True, True, True, True, True]
    """
    say = progress or (lambda s: None)
    models: list[dict[str, Any]] = []
    for kind in kinds:
        if TINY_TRANSFORMERS[kind] and importlib.util.find_spec("transformers") is None:
            models.append({"kind": kind, "skipped": "transformers is not installed (pip install 'coupled-curvature[hf]')"})
            continue
        start = time.perf_counter()
        say(f"{kind}: training ({steps} Adam steps, seed {seed})")
        target = tiny_transformer(kind, seed=seed, steps=steps)
        mx = attention_matrix(target, list(measures), ATTENTION_SYMMETRIES, options=_DENSE, seed=seed, quick=quick,
                              progress=say)
        models.append({"kind": kind, "description": target.description, "attn": target.attn,
                       "cells": [c.to_dict() for c in mx.cells], "function_gaps": mx.gaps,
                       "seconds": time.perf_counter() - start})
    return {"models": models, "measures": list(measures), "symmetries": list(ATTENTION_SYMMETRIES), "seed": seed,
            "quick": quick, "steps": steps}
