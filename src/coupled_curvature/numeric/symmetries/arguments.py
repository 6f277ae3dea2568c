"""The array arguments of the symmetry maps (matrices, factors, permutations) read as tensors, in whatever
array-like form they are passed: a tensor, a numpy array or a (nested) sequence.

>>> array_argument([[1, 0], [0, 1]]).dtype in INTEGER_DTYPES, array_argument("two") is None
(True, True)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["INTEGER_DTYPES", "array_argument"]

#: the integer dtypes an index or a count may come in (bool is not one of them)
INTEGER_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def array_argument(values: object) -> Tensor | None:
    """``values`` as a tensor (a tensor detached, on its device), or None when it is not array-like (a string, a
    ragged list, an object); the callers check its dtype and shape."""
    try:
        return values.detach() if isinstance(values, Tensor) else torch.as_tensor(np.asarray(values))
    except (TypeError, ValueError, RuntimeError):
        return None
