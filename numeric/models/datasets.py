"""Real datasets bundled with scikit-learn, standardised, with a deterministic split."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from coupled_curvature.errors import InvalidInputError

DATASETS = ("digits", "breast_cancer", "wine")


@dataclass(frozen=True)
class Dataset:
    """Float64 standardised features (train statistics) and integer labels."""

    name: str
    X_train: Tensor
    y_train: Tensor
    X_test: Tensor
    y_test: Tensor
    n_classes: int

    @property
    def n_features(self) -> int:
        return int(self.X_train[0].numel())

    @property
    def train(self) -> tuple[Tensor, Tensor]:
        return self.X_train, self.y_train

    @property
    def test(self) -> tuple[Tensor, Tensor]:
        return self.X_test, self.y_test


def load(name: str, *, test_fraction: float = 0.2, seed: int = 0, image: bool = False) -> Dataset:
    """Load ``digits`` (1797×64, 10 classes), ``breast_cancer`` (569×30, 2) or ``wine`` (178×13, 3).

    Features are standardised with the training split's mean and standard deviation
    (``x -> (x − μ)/σ``, ``σ = 1`` for constant features). The split is stratified and
    fixed by ``seed``. ``image=True`` reshapes digits to ``(N, 1, 8, 8)``.

    >>> d = load("wine")
    >>> d.X_train.shape[1], d.n_classes, d.X_train.dtype
    (13, 3, torch.float64)
    """
    from sklearn import datasets as skd
    from sklearn.model_selection import train_test_split

    loaders = {
        "digits": skd.load_digits,
        "breast_cancer": skd.load_breast_cancer,
        "wine": skd.load_wine,
    }
    if name not in loaders:
        raise InvalidInputError(f"unknown dataset {name!r}; available: {', '.join(DATASETS)}")
    if not 0.0 < test_fraction < 1.0:
        raise InvalidInputError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if image and name != "digits":
        raise InvalidInputError("image=True is only available for digits (8×8 images)")
    bunch = loaders[name]()
    X = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int64)
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    mu = X_tr.mean(axis=0)
    sd = X_tr.std(axis=0)
    sd[sd == 0.0] = 1.0
    X_tr, X_te = (X_tr - mu) / sd, (X_te - mu) / sd
    shape = (-1, 1, 8, 8) if image else (-1, X.shape[1])
    return Dataset(
        name=name,
        X_train=torch.from_numpy(X_tr.reshape(shape).copy()),
        y_train=torch.from_numpy(y_tr),
        X_test=torch.from_numpy(X_te.reshape(shape).copy()),
        y_test=torch.from_numpy(y_te),
        n_classes=int(y.max()) + 1,
    )


def digits(**kw) -> Dataset:
    """The 8×8 handwritten digits (1797 samples, 64 features, 10 classes); see :func:`load`."""
    return load("digits", **kw)


def breast_cancer(**kw) -> Dataset:
    """Wisconsin breast cancer (569 samples, 30 features, 2 classes); see :func:`load`."""
    return load("breast_cancer", **kw)


def wine(**kw) -> Dataset:
    """Wine recognition (178 samples, 13 features, 3 classes); see :func:`load`."""
    return load("wine", **kw)
