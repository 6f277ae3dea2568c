"""Shared checks of the reliability suite: the error names a fix, the model is untouched, no NaN."""

from __future__ import annotations

import math
import re

import torch
from torch import nn

#: words a message uses when it tells the user what to do next
FIX = re.compile(r"\b(pass|use|call|drop|materialize|remove|load)\b", re.IGNORECASE)


def net(widths=(3, 4, 2), *, dtype=torch.float64, seed=0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1], dtype=dtype))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def batch(n=8, features=3, classes=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, features, generator=g, dtype=torch.float64), torch.randint(0, classes, (n,), generator=g)


def snapshot(model: nn.Module) -> dict:
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    flags = {k: p.requires_grad for k, p in model.named_parameters()}
    return {"state": state, "flags": flags, "training": model.training}


def assert_unchanged(model: nn.Module, snap: dict) -> None:
    now = model.state_dict()
    assert set(now) == set(snap["state"])
    for k, v in snap["state"].items():
        assert now[k].dtype == v.dtype and torch.equal(now[k], v), f"{k} changed"
    assert {k: p.requires_grad for k, p in model.named_parameters()} == snap["flags"]
    assert model.training == snap["training"]


def assert_names_fix(excinfo) -> None:
    message = str(excinfo.value)
    assert FIX.search(message), f"the message does not say what to do: {message!r}"
    assert "Traceback" not in message


def assert_finite(result) -> None:
    """Every number of a Diagnosis (or a float) is finite or None: never NaN or inf."""
    if isinstance(result, float):
        assert math.isfinite(result)
        return
    for block in result:
        for field in ("w_sq", "g_sq", "w_dot_g", "wHw", "rayleigh", "coupled", "wHpinvw", "inverse_coupled", "cutoff"):
            value = getattr(block, field)
            assert value is None or math.isfinite(float(value)), f"{block.name}.{field} = {value}"
