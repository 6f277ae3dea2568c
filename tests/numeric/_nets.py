"""Small random networks and a brute-force float64 reference for the numeric tests."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, hessian

ACT = {"relu": nn.ReLU, "leaky": lambda: nn.LeakyReLU(0.1), "tanh": nn.Tanh}


def mlp(widths, *, bias=True, act="relu", seed=0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1], bias=bias, dtype=torch.float64))
        if i < len(widths) - 2:
            layers.append(ACT[act]())
    return nn.Sequential(*layers)


def cnn(channels=(1, 3, 4), *, bias=True, act="relu", seed=0, classes=3) -> nn.Sequential:
    """Conv(3x3) -> act -> MaxPool(2) -> Conv(3x3) -> act -> AvgPool(2) -> Flatten -> Linear, on 1×8×8."""
    torch.manual_seed(seed)
    c0, c1, c2 = channels
    return nn.Sequential(
        nn.Conv2d(c0, c1, 3, padding=1, bias=bias, dtype=torch.float64), ACT[act](), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1, bias=bias, dtype=torch.float64), ACT[act](), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(c2 * 4, classes, bias=bias, dtype=torch.float64),
    )


def data(n, shape, classes, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n, *shape), generator=g, dtype=torch.float64), torch.randint(0, classes, (n,), generator=g)


def block_loss(model, loss_fn, X, y, members):
    """``(f, w)``: the loss as a function of the flattened block ``members`` alone (the other
    parameters held at their values, detached, float64) and the block's flattened value."""
    params = {n: p.detach().to(torch.float64) for n, p in model.named_parameters()}
    shapes = [params[m].shape for m in members]
    sizes = [params[m].numel() for m in members]

    def f(flat):
        p = dict(params)
        p.update({m: t.reshape(s) for m, t, s in zip(members, torch.split(flat, sizes), shapes)})
        return loss_fn(functional_call(model, p, (X,)), y)

    return f, torch.cat([params[m].reshape(-1) for m in members])


def reference_block(model, loss_fn, X, y, members, rtol=1e-10, positions=None):
    """Brute force: the dense block Hessian by ``torch.func.hessian`` on the block alone, numpy pinv.
    ``positions`` (indices into the flattened ``members``) restricts ``w``, ``g`` and ``H`` to a principal
    submatrix: the reference of a block of sub-tensors."""
    f, w = block_loss(model, loss_fn, X, y, members)
    g = grad(f)(w).numpy()
    H = hessian(f)(w).numpy()
    w = w.numpy()
    if positions is not None:
        idx = np.asarray(positions)
        g, H, w = g[idx], H[np.ix_(idx, idx)], w[idx]
    Hp = np.linalg.pinv(H, rcond=rtol, hermitian=True)
    wHw, wHpw, gsq, wsq = w @ H @ w, w @ Hp @ w, g @ g, w @ w
    lam = np.abs(np.linalg.eigvalsh(H))
    kept = lam[lam > rtol * lam.max()] if lam.size and lam.max() > 0 else lam[:0]
    kappa = float(lam.max() / kept.min()) if kept.size else 1.0
    return {"wHw": wHw, "g_sq": gsq, "coupled": wHw / wsq / gsq, "inverse_coupled": wHpw / wsq * gsq,
            "kappa": kappa}


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)
