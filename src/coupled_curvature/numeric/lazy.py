"""Lazy public names of a package: its ``__getattr__`` and ``__dir__`` import a name's module when the name
is first used, so that importing the package alone costs nothing (no torch).

>>> get, names = lazy_exports("json", {"dumps_alias": ("", "dumps")})
>>> get("dumps_alias")([1])
'[1]'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, table: Mapping[str, tuple[str, str]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``table[name] = (submodule, attribute)`` (an empty
    submodule is the package itself)."""

    def get(name: str) -> Any:
        if name in table:
            module, attr = table[name]
            return getattr(importlib.import_module(f"{package}.{module}" if module else package), attr)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def names() -> list[str]:
        module = importlib.import_module(package)
        return sorted(set(vars(module)) | set(table))

    return get, names
