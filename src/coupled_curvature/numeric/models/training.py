"""Deterministic float64 training under a seed: the one loop (:func:`fit`) and the MLP recipe."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.models.datasets import Dataset
from coupled_curvature.numeric.models.factory import make_mlp
from coupled_curvature.numeric.core.progress import Progress

def fit(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, epochs: int, seed: int, lr: float = 3e-3,
        batch_size: int = 128, weight_decay: float = 0.0,
        on_epoch: Callable[[int, float], bool | None] | None = None) -> int:
    """Adam on mean cross-entropy, the one training loop of the package; returns the epochs run.

    Deterministic: the minibatch order of every epoch comes from ``torch.Generator`` seeded with
    ``seed + 1`` (the initialisation uses ``seed``). Models with BatchNorm skip a final minibatch of
    one sample (batch statistics need two). After each epoch ``on_epoch(epoch, last_batch_loss)``
    is called; a true result stops training there. The model's train/eval mode is left as given.

    >>> from coupled_curvature.numeric.models.factory import make_mlp
    >>> net = make_mlp(3, [4], 2, seed=0)
    >>> X, y = torch.randn(10, 3, dtype=torch.float64), torch.tensor([0, 1] * 5)
    >>> fit(net, X, y, epochs=5, seed=0, on_epoch=lambda e, loss: e == 2)
    2
    """
    if epochs < 0 or batch_size < 1 or not lr > 0:
        raise InvalidInputError(f"need epochs ≥ 0, batch_size ≥ 1 and lr > 0; got {epochs}, {batch_size}, {lr}")
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed + 1)
    batchnorm = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    loss = torch.tensor(float("nan"))
    for epoch in range(1, epochs + 1):
        order = torch.randperm(len(X), generator=gen)
        for start in range(0, len(X), batch_size):
            idx = order[start : start + batch_size]
            if batchnorm and len(idx) < 2:
                continue
            opt.zero_grad()
            loss = loss_fn(model(X[idx]), y[idx])
            loss.backward()
            opt.step()
        if on_epoch is not None and on_epoch(epoch, float(loss.detach())):
            return epoch
    return epochs


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

    Args:
        data: a :class:`~coupled_curvature.numeric.models.datasets.Dataset` (:func:`load_dataset`).
        hidden: the hidden widths.
        bias: give every Linear a bias.
        activation: the activation's name.
        seed: the seed of the initialisation and the minibatch order.
        epochs: the number of passes over the training split.
        lr: Adam's learning rate.
        batch_size: the minibatch size.
        weight_decay: Adam's weight decay.
        progress: print a line per epoch.

    Returns:
        TrainedModel: the model, its final train and test
        losses and accuracies, and the criterion it was trained to.

    Raises:
        InvalidInputError: a count or rate out of range.

    See also:
        :func:`make_mlp`, :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`.

    >>> from coupled_curvature.numeric.models.datasets import load
    >>> r = train_mlp(load("wine"), hidden=(8,), epochs=5)
    >>> 0.0 <= r.test_acc <= 1.0
    True
    """
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise InvalidInputError("epochs and batch_size must be ≥ 1 and lr > 0")
    X, y = data.X_train.reshape(len(data.X_train), -1), data.y_train
    model = make_mlp(X.shape[1], hidden, data.n_classes, bias=bias, activation=activation, seed=seed)
    loss_fn = nn.CrossEntropyLoss()
    bar = Progress(f"training {data.name} mlp{list(hidden)} seed={seed}: epoch", epochs, enabled=progress)
    fit(model, X, y, epochs=epochs, seed=seed, lr=lr, batch_size=batch_size, weight_decay=weight_decay,
        on_epoch=lambda epoch, loss: bar.update(epoch, f"batch loss {loss:.4f}"))
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
