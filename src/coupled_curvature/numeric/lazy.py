"""Lazy public names of a package: its ``__getattr__`` and ``__dir__`` import a name's module when the name
is first used, so that importing the package alone costs nothing (no torch).

>>> get, names = lazy_exports("json", {"dumps_alias": ("", "dumps"), "JSONDecoder": "decoder"})
>>> get("dumps_alias")([1]), get("JSONDecoder").__module__
('[1]', 'json.decoder')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, table: Mapping[str, str | tuple[str, str]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``table[name] = submodule`` (the attribute of that name) or
    ``(submodule, attribute)`` (an empty submodule is the package itself)."""

    def get(name: str) -> Any:
        if name in table:
            entry = table[name]
            module, attr = (entry, name) if isinstance(entry, str) else entry
            return getattr(importlib.import_module(f"{package}.{module}" if module else package), attr)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def names() -> list[str]:
        module = importlib.import_module(package)
        return sorted(set(vars(module)) | set(table))

    return get, names
