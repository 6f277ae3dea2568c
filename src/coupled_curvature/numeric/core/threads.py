"""Run a block of work with a set number of torch intra-op threads."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["torch_threads"]


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``max(1, n)`` torch intra-op threads, restored after (also on error). Small nets
    run on one thread: on a busy 2-core machine, two threads per tiny op cost far more in
    synchronisation than they gain, and one thread gives the same bits on every machine.

    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(old)
