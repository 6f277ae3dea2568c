"""Calibration of a classifier's top-class probability: the expected calibration error."""

from __future__ import annotations

import torch
from torch import Tensor

from coupled_curvature.base.errors import InvalidInputError


def expected_calibration_error(probs: Tensor, labels: Tensor, *, bins: int = 10) -> float:
    """``ECE = Σ_b (|B_b|/N)·|acc(B_b) − conf(B_b)|`` over ``bins`` equal-width confidence bins.

    ``conf`` is the top-class probability ``max_k p_k``, ``acc`` the fraction of the bin whose top class is
    the label; bin ``b`` holds the confidences in ``((b−1)/bins, b/bins]`` (the first bin also takes 0).
    This is the top-label ("max probability") L1 calibration error.

    >>> p = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]], dtype=torch.float64)
    >>> round(expected_calibration_error(p, torch.tensor([0, 1, 1, 1]), bins=10), 12)
    0.4
    """
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise InvalidInputError(f"bins must be an int ≥ 1, got {bins!r}")
    if probs.dim() != 2 or labels.dim() != 1 or probs.shape[0] != labels.shape[0] or probs.shape[0] == 0:
        raise InvalidInputError(f"need probabilities (N, C) and labels (N,) with N ≥ 1, got {tuple(probs.shape)} "
                                f"and {tuple(labels.shape)}")
    p = probs.detach().to(torch.float64)
    if not bool(torch.isfinite(p).all()) or bool((p < 0).any()):
        raise InvalidInputError("probabilities must be finite and ≥ 0")
    conf, pred = p.max(dim=1)
    hit = (pred == labels).to(torch.float64)
    edges = torch.linspace(0.0, 1.0, bins + 1, dtype=torch.float64)
    which = torch.bucketize(conf, edges[1:-1], right=False)  # conf in (e_{b-1}, e_b] -> b
    total = 0.0
    for b in range(bins):
        m = which == b
        n = int(m.sum())
        if n:
            total += n * abs(float(hit[m].mean()) - float(conf[m].mean()))
    return total / probs.shape[0]


__all__ = ["expected_calibration_error"]
