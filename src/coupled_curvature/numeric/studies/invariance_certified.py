"""``ccurv experiment invariance --certify``: the invariance table's T3 claim certified per net.

For each trained net, one layer rescaling with the non-dyadic factor ``c = 37/10`` between its first two
weight layers is applied exactly in ball arithmetic (:func:`~coupled_curvature.numeric.certify.invariance.
certify_invariance`, ``D`` only, at ``prec`` bits) on the net's measurement samples. The row gains:

- ``cert_D_zero``: every block's ``D(Tθ) − D(θ)`` ball contains 0;
- ``cert_D_width``: the largest width of those balls relative to ``|D(θ)|`` (a certified bound on the
  relative change the engine could have missed);
- ``cert_RQ_moves``: the ``RQ`` change ball of the rescaled layer's weight excludes 0 (the raw quantity
  certainly moved);
- ``cert_note``: why a net is not certified (for example BatchNorm with batch statistics), else ``None``;
- ``cert_prec``, ``cert_c`` and ``cert_seconds``.
"""

from __future__ import annotations

import time
from fractions import Fraction

from torch import nn

from coupled_curvature.base.errors import CoupledCurvatureError
from coupled_curvature.numeric.layer_capabilities import layer_capabilities
from coupled_curvature.numeric.models.cache import ModelCache, config_key

__all__ = ["CERTIFIED_FACTOR", "certified_fields"]

#: the rescaling factor: not a dyadic rational, so the rescaled weights are not float64 numbers
CERTIFIED_FACTOR = Fraction(37, 10)


def _first_weight_layer(model: nn.Module) -> str | None:
    for name, m in model.named_modules():
        if "chain" in layer_capabilities(m).symmetry:
            return name
    return None


def certified_fields(model: nn.Module, X, y, model_key: str, cache: ModelCache, *, prec: int = 256,
                     batch_statistics: bool = False) -> dict:
    """The ``cert_*`` fields of one net (see the module docstring), cached under ``model_key``.

    >>> import torch
    >>> from coupled_curvature.numeric.models.factory import make_mlp
    >>> net = make_mlp(3, [4], 2, seed=0)
    >>> X, y = torch.randn(8, 3, dtype=torch.float64), torch.tensor([0, 1] * 4)
    >>> f = certified_fields(net, X, y, "doc", ModelCache(None), prec=128)
    >>> f["cert_D_zero"], f["cert_RQ_moves"], f["cert_D_width"] < 1e-30
    (True, True, True)
    """
    from coupled_curvature.numeric.certify.invariance import certify_invariance

    key = config_key({"kind": "invariance-certified", "model": model_key, "prec": prec, "c": str(CERTIFIED_FACTOR),
                      "samples": int(X.shape[0]), "version": 1})
    stored = cache.load_row(key, "fields")
    if stored is not None:
        return stored
    base = {"cert_prec": prec, "cert_c": str(CERTIFIED_FACTOR), "cert_D_zero": None, "cert_D_width": None,
            "cert_RQ_moves": None, "cert_note": None}
    t0 = time.perf_counter()
    first = _first_weight_layer(model)
    if batch_statistics:
        fields = {**base, "cert_note": "BatchNorm with batch statistics (the T10 setting) is outside the certified "
                                       "engine, which takes eval-mode BatchNorm only"}
    elif first is None:
        fields = {**base, "cert_note": "no Linear or Conv layer to rescale"}
    else:
        try:
            inv = certify_invariance(model, nn.CrossEntropyLoss(), (X, y), ("layer_rescale", 0, CERTIFIED_FACTOR),
                                     prec=prec, inverse=False)
        except CoupledCurvatureError as err:
            fields = {**base, "cert_note": f"refused: {err}"}
        else:
            changes = [b for b in inv if b.coupled_change is not None]
            widths = [b.coupled_change_relative for b in changes if b.coupled_change_relative is not None]
            rq = inv[f"{first}.weight"].rayleigh_change if f"{first}.weight" in inv.names() else None
            missing = [b.name for b in inv if b.coupled_change is None]
            fields = {**base, "cert_D_zero": bool(changes) and all(b.coupled_change is not None and 0 in b.coupled_change for b in changes),
                      "cert_D_width": max(widths) if widths else None,
                      "cert_RQ_moves": None if rq is None else bool(rq.excludes_zero()),
                      "cert_note": f"no D ball for {', '.join(missing)} (see certify's reasons)" if missing else None}
    fields["cert_seconds"] = time.perf_counter() - t0
    cache.store_row(key, fields, "fields")
    return fields
