"""Tied weights: the names each parameter of a model goes by, and the refusal to change a tensor that another
module also uses (a symmetry map would change that use too).

>>> net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
>>> net[1].weight = net[0].weight
>>> sorted(parameter_owners(net)[id(net[0].weight)])
['0.weight', '1.weight']
>>> check_untied(parameter_owners(net)[id(net[0].weight)], "0.weight", "is shared with")
Traceback (most recent call last):
...
coupled_curvature.base.errors.InvalidInputError: '0.weight' is shared with ['1.weight']: changing it would change ...
"""

from __future__ import annotations

from collections.abc import Set

from torch import nn

from coupled_curvature.base.errors import InvalidInputError

__all__ = ["check_untied", "parameter_owners"]


def parameter_owners(model: nn.Module) -> dict[int, set[str]]:
    """Every name each parameter of ``model`` goes by (several for a tied one), keyed by the parameter's ``id``."""
    owners: dict[int, set[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        owners.setdefault(id(param), set()).add(name)
    return owners


def check_untied(names: Set[str], own: str, how: str) -> None:
    """Refuse (``InvalidInputError``) a tensor known as ``own`` that also goes by other ``names``; ``how`` says
    how it is shared (``"is shared with"``, ``"shares a parameter with"``)."""
    others = names - {own}
    if others:
        raise InvalidInputError(f"{own!r} {how} {sorted(others)}: changing it would change those too; untie the "
                                "weights first")
