"""Small reference networks and deterministic float64 training under a seed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from coupled_curvature.errors import InvalidInputError
from coupled_curvature.numeric.datasets import Dataset
from coupled_curvature.numeric.progress import Progress

_ACTIVATIONS = {"relu": nn.ReLU, "leaky_relu": nn.LeakyReLU, "identity": nn.Identity, "tanh": nn.Tanh}


def make_mlp(
    in_features: int,
    hidden: Sequence[int],
    out_features: int,
    *,
    bias: bool = True,
    activation: str = "relu",
    seed: int = 0,
) -> nn.Sequential:
    """``Linear -> act -> … -> Linear`` in float64, initialised from ``seed`` (global RNG untouched).

    >>> make_mlp(4, [8, 8], 3)[0].weight.shape
    torch.Size([8, 4])
    """
    if activation not in _ACTIVATIONS:
        raise InvalidInputError(f"unknown activation {activation!r}; available: {', '.join(_ACTIVATIONS)}")
    if not hidden or any(int(h) <= 0 for h in hidden):
        raise InvalidInputError(f"hidden widths must be positive, got {list(hidden)}")
    widths = [in_features, *map(int, hidden), out_features]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        for i in range(len(widths) - 1):
            layers.append(nn.Linear(widths[i], widths[i + 1], bias=bias, dtype=torch.float64))
            if i < len(widths) - 2:
                layers.append(_ACTIVATIONS[activation]())
        return nn.Sequential(*layers)


@dataclass
class TrainedModel:
    """A trained model and the stated criterion it was trained to."""

    model: nn.Module
    train_loss: float
    test_loss: float
    train_acc: float
    test_acc: float
    criterion: str


def accuracy(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(X).argmax(dim=1) == y).double().mean())


def train_mlp(
    data: Dataset,
    hidden: Sequence[int] = (64, 64, 64),
    *,
    bias: bool = True,
    activation: str = "relu",
    seed: int = 0,
    epochs: int = 60,
    lr: float = 3e-3,
    batch_size: int = 128,
    weight_decay: float = 0.0,
    progress: bool = False,
) -> TrainedModel:
    """Train an MLP with Adam on cross-entropy for a fixed number of epochs, in float64.

    Deterministic: the initialisation and the minibatch order come only from ``seed``,
    so the same call gives bit-identical weights.

    >>> from coupled_curvature.numeric.datasets import load
    >>> r = train_mlp(load("wine"), hidden=(8,), epochs=5)
    >>> 0.0 <= r.test_acc <= 1.0
    True
    """
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise InvalidInputError("epochs and batch_size must be ≥ 1 and lr > 0")
    X, y = data.X_train.reshape(len(data.X_train), -1), data.y_train
    model = make_mlp(X.shape[1], hidden, data.n_classes, bias=bias, activation=activation, seed=seed)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed + 1)
    bar = Progress(f"training {data.name} mlp{list(hidden)} seed={seed}: epoch", epochs, enabled=progress)
    for epoch in range(epochs):
        order = torch.randperm(len(X), generator=gen)
        for start in range(0, len(X), batch_size):
            idx = order[start : start + batch_size]
            opt.zero_grad()
            loss = loss_fn(model(X[idx]), y[idx])
            loss.backward()
            opt.step()
        bar.update(epoch + 1, f"batch loss {float(loss.detach()):.4f}")
    Xt = data.X_test.reshape(len(data.X_test), -1)
    with torch.no_grad():
        train_loss = float(loss_fn(model(X), y))
        test_loss = float(loss_fn(model(Xt), data.y_test))
    return TrainedModel(
        model=model,
        train_loss=train_loss,
        test_loss=test_loss,
        train_acc=accuracy(model, X, y),
        test_acc=accuracy(model, Xt, data.y_test),
        criterion=f"Adam lr={lr}, batch {batch_size}, {epochs} epochs, weight decay {weight_decay}",
    )
