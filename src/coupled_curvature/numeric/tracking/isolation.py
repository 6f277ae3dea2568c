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
import types
from collections import OrderedDict
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

__all__ = ["eval_mode", "hooks_detached", "isolated_rng", "random_states"]

#: the module hook tables a forward or backward pass runs
_HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


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
    assert isinstance(np_state, tuple), "the legacy state (get_state's default) is a tuple"
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


@contextlib.contextmanager
def hooks_detached(model: nn.Module) -> Iterator[list[str]]:
    """``model`` with the users' forward and backward hooks taken off its modules (yields the names of
    the modules that had some), every hook table put back as it was on exit, also on error. Torch's
    own hooks that are part of the computation (``weight_norm``, ``spectral_norm``) stay.

    The tracker computes inside this, so that a hook that observes training (counting calls, storing
    activations) does not see the tracker's passes.

    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    >>> calls = []
    >>> handle = net[0].register_forward_hook(lambda m, i, o: calls.append(1))
    >>> with hooks_detached(net) as names:
    ...     _ = net(torch.zeros(1, 2))
    >>> names, calls
    (['0'], [])
    >>> _ = net(torch.zeros(1, 2)); calls
    [1]
    """
    saved: list[tuple[nn.Module, str, OrderedDict]] = []
    names: list[str] = []
    try:
        for name, module in model.named_modules():
            for table in _HOOK_TABLES:
                hooks = getattr(module, table, None)
                if not hooks or all(_torch_own(h) for h in hooks.values()):
                    continue
                saved.append((module, table, hooks))
                setattr(module, table, OrderedDict((k, h) for k, h in hooks.items() if _torch_own(h)))
                if (name or type(module).__name__) not in names:
                    names.append(name or type(module).__name__)
        yield names
    finally:
        for module, table, hooks in reversed(saved):
            setattr(module, table, hooks)


def _torch_own(hook: object) -> bool:
    """Whether ``hook`` is one of torch's own (an object of a ``torch.*`` class, or a torch function)."""
    owner = hook.__module__ if isinstance(hook, types.FunctionType) else type(hook).__module__
    return isinstance(owner, str) and owner.startswith("torch.")
