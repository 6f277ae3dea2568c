"""Real datasets bundled with scikit-learn, standardised, with a deterministic split."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from coupled_curvature.base.errors import InvalidInputError

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

    Args:
        name: ``"digits"``, ``"breast_cancer"`` or ``"wine"``.
        test_fraction: the test split's share, in ``(0, 1)``.
        seed: the split's seed.
        image: reshape digits to ``(N, 1, 8, 8)``.

    Returns:
        Dataset: float64 tensors, the train and test splits.

    Raises:
        InvalidInputError: an unknown name, a fraction out of range, or ``image`` for a dataset that is not digits.

    See also:
        :func:`~coupled_curvature.numeric.models.training.train_mlp`.

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


def moons(*, n_samples: int = 3000, noise: float = 0.2, flip: float = 0.0, test_fraction: float = 0.3,
          seed: int = 0) -> Dataset:
    """Two interleaving half-moons (2 features, 2 classes), standardised, with label-flip noise.

    ``make_moons(n_samples, noise)`` drawn from ``seed``; a stratified split with ``test_fraction``; then a
    fraction ``flip`` of the **training** labels, chosen from ``seed``, is replaced by the other class (the
    test labels stay clean, so test error measures the learned function). Features are standardised with the
    training split's statistics, as :func:`load` does.

    >>> d = moons(n_samples=200, flip=0.3, seed=1)
    >>> d.X_train.shape, d.n_classes, d.X_train.dtype
    (torch.Size([140, 2]), 2, torch.float64)
    """
    from sklearn.datasets import make_moons
    from sklearn.model_selection import train_test_split

    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 10:
        raise InvalidInputError(f"n_samples must be an int ≥ 10, got {n_samples!r}")
    if not (np.isfinite(noise) and noise >= 0.0):
        raise InvalidInputError(f"noise must be a finite number ≥ 0, got {noise!r}")
    if not 0.0 <= flip < 0.5:
        raise InvalidInputError(f"flip must be in [0, 0.5) (at 0.5 the labels carry no signal), got {flip!r}")
    if not 0.0 < test_fraction < 1.0:
        raise InvalidInputError(f"test_fraction must be in (0, 1), got {test_fraction}")
    X, y = make_moons(n_samples=n_samples, noise=noise, random_state=seed)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=test_fraction, random_state=seed, stratify=y)
    rng = np.random.default_rng(seed)
    flipped = rng.permutation(len(y_tr))[: int(round(flip * len(y_tr)))]
    y_tr = y_tr.copy()
    y_tr[flipped] = 1 - y_tr[flipped]
    mu, sd = X_tr.mean(axis=0), X_tr.std(axis=0)
    return Dataset(
        name=f"moons(flip={flip:g})",
        X_train=torch.from_numpy(((X_tr - mu) / sd).astype(np.float64)),
        y_train=torch.from_numpy(y_tr.astype(np.int64)),
        X_test=torch.from_numpy(((X_te - mu) / sd).astype(np.float64)),
        y_test=torch.from_numpy(y_te.astype(np.int64)),
        n_classes=2,
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
