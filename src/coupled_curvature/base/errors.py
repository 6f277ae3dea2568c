"""The package's one family of errors; each message says what to do next."""

from __future__ import annotations

import importlib
from types import ModuleType


class CoupledCurvatureError(Exception):
    """Base class of every error raised on purpose by coupled-curvature."""


class InvalidInputError(CoupledCurvatureError, ValueError):
    """An argument (model, data, loss, option) cannot be used as given."""


class UnsupportedModelError(CoupledCurvatureError, TypeError):
    """The model's structure is outside what an operation supports."""


class TrainModeError(InvalidInputError):
    """The model is in train mode with modules whose output depends on the mode."""


class MissingExtraError(CoupledCurvatureError, ImportError):
    """An optional dependency (a pip extra such as ``coupled-curvature[pandas]``) is not installed."""

    @classmethod
    def require(cls, module: str, needed_by: str, extra: str, instead: str) -> ModuleType:
        """``module`` imported, or this error naming the extra to install and what works without it.

        >>> MissingExtraError.require("json", "this example", "none", "nothing").__name__
        'json'
        """
        try:
            return importlib.import_module(module)
        except ImportError:
            raise cls(f"{needed_by} needs {module}, an optional extra: pip install 'coupled-curvature[{extra}]' "
                      f"(or pip install {module}); {instead}") from None


class NotSerializableError(CoupledCurvatureError, TypeError):
    """Data to be written as JSON holds an object that is not a number, string, list or dict."""
