"""numeric/factors/outputs.py: the square roots of the loss's output Hessian against closed forms
(softmax cross-entropy ``(diag p − ppᵀ)·weight``, MSE ``2/(NK)·I``), with negative controls."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from coupled_curvature.numeric.core.inputs import prepare_batches
from coupled_curvature.numeric.core.objective import Objective
from coupled_curvature.numeric.factors.outputs import output_factors


def _objective(loss_fn, n=6, k=4, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    net = nn.Linear(3, k).double()
    with torch.no_grad():
        net.weight.copy_(scale * torch.randn(k, 3, generator=g, dtype=torch.float64))
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, k, (n,), generator=g) if isinstance(loss_fn, nn.CrossEntropyLoss) else \
        torch.randn(n, k, generator=g, dtype=torch.float64)
    return Objective(net, loss_fn, prepare_batches((X, y), loss_fn))


@pytest.mark.parametrize("scale", [1.0, 3.0])  # 3: eigenvalues of S_n down to 1e-6 of the largest
def test_cross_entropy_root_reproduces_the_softmax_hessian(scale):
    of = output_factors(_objective(nn.CrossEntropyLoss(), scale=scale), 0)
    p = torch.softmax(of.F, dim=1)
    S = (torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1)) / p.shape[0]
    top = float(S.abs().max())
    assert of.rows == 3  # C − 1
    assert float((of.A.transpose(1, 2) @ of.A - S).abs().max()) <= 1e-14 * top
    # A_nᵀs_n = e_n up to the eigenvectors' conditioning, ε·max|μ|/gap (gaps down to 5e-8 at scale 3)
    assert of.s is not None
    top_e = float(of.e.abs().max())
    assert float((torch.einsum("nrk,nr->nk", of.A, of.s) - of.e).abs().max()) <= 1e-10 * top_e
    assert float((torch.einsum("nrk,nr->nk", of.A, of.s.flip(0)) - of.e).abs().max()) > 1e-3 * top_e
    wrong = of.A.flip(0)  # negative control: another sample's root
    assert float((wrong.transpose(1, 2) @ wrong - S).abs().max()) > 1e-4 * top


def test_mse_root_is_the_scaled_identity():
    of = output_factors(_objective(nn.MSELoss(), n=5, k=3), 0)
    assert of.rows == 3 and bool(of.keep.all())
    eye = 2.0 / (5 * 3) * torch.eye(3, dtype=torch.float64).expand(5, 3, 3)
    assert torch.allclose(of.A.transpose(1, 2) @ of.A, eye, atol=1e-15)


def test_coupled_and_indefinite_losses_are_refused():
    def coupled(F, y):  # (Σ_n F_n)²: the output Hessian couples every pair of samples
        return (F.sum(dim=0) ** 2).sum()

    with pytest.raises(ValueError, match="couples samples"):
        output_factors(_objective(coupled), 0)
    with pytest.raises(ValueError, match="indefinite"):
        output_factors(_objective(lambda F, y: -(F**2).sum()), 0)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_batch_of_confident_samples_is_not_refused_for_round_off(reduction):
    """Every sample confident (margins ≈ 40): S_n's eigenvalues are ≤ 1e-17·ω, below its round-off ε·ω;
    the cut is judged against ω (one sample's weight in the loss), so the root is built, and it still
    reproduces S_n to round-off. Negative control: judged against max|μ| alone, as before, the same
    batch is refused as indefinite."""
    from coupled_curvature.numeric.factors import outputs

    loss_fn = nn.CrossEntropyLoss(reduction=reduction)
    ob = _objective(loss_fn, n=8, k=4, seed=3)
    with torch.no_grad():  # logits 40·onehot(class of sample): every sample confident
        ob.model.weight.zero_(); ob.model.bias.zero_()
    cls = torch.arange(8) % 4
    ob.model.forward = lambda x: 40.0 * nn.functional.one_hot(cls, 4).to(x.dtype) + 0.0 * x[:, :1]
    ob = Objective(ob.model, loss_fn, ob.batches, reduction)
    ob.batches[0].y.copy_(cls)
    of = output_factors(ob, 0)
    p = torch.softmax(of.F, dim=1)
    omega = ob.sample_weight(0)
    assert omega == (1 / 8 if reduction == "mean" else 1.0)
    S = omega * (torch.diag_embed(p) - p.unsqueeze(2) * p.unsqueeze(1))
    mu = torch.linalg.eigvalsh(S)
    assert float(mu.abs().max()) < 1e-9 * omega  # the batch's own scale is far below ω
    assert float((of.A.transpose(1, 2) @ of.A - S).abs().max()) <= 1e3 * 2.2e-16 * omega
    saved = outputs._square_root
    try:
        outputs._square_root = lambda S, e, w: saved(S, e, 0.0)
        with pytest.raises(ValueError, match="indefinite"):
            output_factors(ob, 0)
    finally:
        outputs._square_root = saved
