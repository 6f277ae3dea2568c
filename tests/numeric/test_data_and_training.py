"""Bundled datasets and deterministic float64 training."""

import pytest
import torch

from coupled_curvature.base.errors import InvalidInputError
from coupled_curvature.numeric.models.datasets import DATASETS, load
from coupled_curvature.numeric.models.factory import make_mlp
from coupled_curvature.numeric.models.training import train_mlp


@pytest.mark.parametrize("name, n, features, classes", [("digits", 1797, 64, 10), ("breast_cancer", 569, 30, 2), ("wine", 178, 13, 3)])
def test_datasets_shapes_split_and_standardisation(name, n, features, classes):
    d = load(name)
    assert len(d.X_train) + len(d.X_test) == n and d.n_features == features and d.n_classes == classes
    assert d.X_train.dtype == torch.float64 and d.y_train.dtype == torch.int64
    mu, sd = d.X_train.mean(0), d.X_train.std(0, unbiased=False)
    assert float(mu.abs().max()) < 1e-10
    assert torch.all(((sd - 1).abs() < 1e-10) | (sd == 0))
    again = load(name)
    assert torch.equal(d.X_test, again.X_test) and torch.equal(d.y_train, again.y_train)
    other = load(name, seed=1)
    assert not torch.equal(d.y_train, other.y_train)  # the seed moves the split


def test_dataset_errors_and_image_mode():
    with pytest.raises(InvalidInputError, match=", ".join(DATASETS)):
        load("mnist")
    assert load("digits", image=True).X_train.shape[1:] == (1, 8, 8)
    with pytest.raises(InvalidInputError, match="digits"):
        load("wine", image=True)


def test_training_is_deterministic_and_learns():
    d = load("wine")
    a = train_mlp(d, (8, 8), seed=3, epochs=60)
    b = train_mlp(d, (8, 8), seed=3, epochs=60)
    c = train_mlp(d, (8, 8), seed=4, epochs=60)
    pa, pb, pc = (list(r.model.parameters()) for r in (a, b, c))
    assert all(torch.equal(x, y) for x, y in zip(pa, pb))
    assert not all(torch.equal(x, y) for x, y in zip(pa, pc))
    assert a.train_acc > 0.9 and pa[0].dtype == torch.float64
    assert "60 epochs" in a.criterion


def test_make_mlp_does_not_touch_global_rng():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    make_mlp(4, [5], 2, seed=9)
    assert torch.equal(torch.rand(3), expected)
    with pytest.raises(InvalidInputError, match="activation"):
        make_mlp(4, [5], 2, activation="swish")
