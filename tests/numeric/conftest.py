"""Fixtures shared by the numeric tests."""

import pytest

from coupled_curvature.numeric.core.threads import torch_threads


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny float64 problems: on the shared 2-core machine one thread
    is much faster than two there (about 100x for tiny float64 convolutions under load)."""
    with torch_threads(1):
        yield


@pytest.fixture
def prec256():
    """arb's working precision at 256 bits for one test (the certified engine's default), restored after."""
    from flint import ctx

    saved = ctx.prec
    ctx.prec = 256
    yield
    ctx.prec = saved
