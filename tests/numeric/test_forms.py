"""numeric/factors/forms.py: both sides of ``H = BᵀB`` against numpy's pseudo-inverse of ``BᵀB``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coupled_curvature.numeric.factors.forms import columns_gram, factor_side, factor_spectrum, reproduces_wHw


def _low_rank(m, n, rank, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, rank, generator=g, dtype=torch.float64) @ torch.randn(rank, n, generator=g,
                                                                                  dtype=torch.float64)


@pytest.mark.parametrize("m,n,rank", [(6, 15, 4), (15, 6, 4), (8, 8, 8), (700, 30, 12)])
def test_both_sides_give_numpys_pinv_form(m, n, rank):
    B = _low_rank(m, n, rank, seed=m + n)
    w = torch.randn(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    H = (B.T @ B).numpy()
    ref = float(w.numpy() @ np.linalg.pinv(H, rcond=1e-10, hermitian=True) @ w.numpy())
    forms = {side: factor_spectrum(side, B @ B.T if side == "gram" else columns_gram(B), B @ w, w).form(1e-10)
             for side in ("gram", "factor")}
    for side, f in forms.items():
        assert f.rank == rank, side
        assert abs(f.value - ref) <= 1e-8 * abs(ref), (side, f.value, ref)
    assert factor_side(n, m) == ("factor" if n <= m else "gram")
    # negative control: the weights of another vector give another value
    other = factor_spectrum("gram", B @ B.T, B @ w.flip(0), w.flip(0)).form(1e-10)
    assert abs(other.value - ref) > 1e-6 * abs(ref)


def test_columns_gram_takes_dsyrk_for_wide_blocks_and_the_check_fails_when_it_should():
    B = torch.randn(40, 600, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert torch.allclose(columns_gram(B), B.T @ B, rtol=1e-12, atol=1e-12)
    w = torch.randn(600, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    u = B @ w
    assert reproduces_wHw(float(u @ u), float(w @ columns_gram(B) @ w))
    assert not reproduces_wHw(float(u @ u) * (1 + 1e-7), float(w @ columns_gram(B) @ w))
