"""Run a computation beside a training loop without leaving a trace in it: every random stream
(torch CPU and CUDA, numpy's global one, Python's ``random``), the modules' train/eval flags and
autograd's grad mode are as they were afterwards, also on error.

>>> import random
>>> import numpy as np
>>> import torch
>>> random.seed(1); np.random.seed(1); torch.manual_seed(1) and None
>>> with isolated_rng():
...     _ = random.random(), np.random.rand(), torch.rand(1)
>>> random.random() == random.Random(1).random(), float(np.random.rand()) == np.random.RandomState(1).rand()
(True, True)
>>> torch.rand(1).item() == torch.rand(1, generator=torch.Generator().manual_seed(1)).item()
True
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

__all__ = ["eval_mode", "isolated_rng", "random_states"]


@contextlib.contextmanager
def isolated_rng() -> Iterator[None]:
    """Save every random stream's state on entry and restore it on exit."""
    py_state = random.getstate()
    np_state = np.random.get_state()
    cpu_state = torch.random.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() \
        else None
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
        torch.random.set_rng_state(cpu_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


def random_states() -> tuple[bytes, bytes, object]:
    """The process-wide random streams' states (torch CPU, numpy's global one, Python's ``random``),
    comparable with ``==``: a computation that draws from none leaves them equal.

    >>> before = random_states()
    >>> _ = torch.zeros(3).sum()
    >>> random_states() == before
    True
    >>> _ = np.random.rand()
    >>> random_states() == before
    False
    """
    np_state = np.random.get_state()
    return bytes(torch.random.get_rng_state().numpy()), np_state[1].tobytes() + repr(np_state[2:]).encode(), \
        random.getstate()


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode with gradients enabled, every module's own ``training`` flag restored after.

    >>> net = torch.nn.Sequential(torch.nn.Dropout(), torch.nn.Linear(2, 2)).train()
    >>> net[1].eval() and None
    >>> with eval_mode(net):
    ...     net.training, torch.is_grad_enabled()
    (False, True)
    >>> net.training, net[0].training, net[1].training
    (True, True, False)
    """
    flags = [(m, m.training) for m in model.modules()]
    try:
        model.eval()
        with torch.enable_grad():
            yield
    finally:
        for m, flag in flags:
            m.training = flag
