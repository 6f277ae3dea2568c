"""The package's one family of errors; each message says what to do next."""

from __future__ import annotations


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


class NotSerializableError(CoupledCurvatureError, TypeError):
    """Data to be written as JSON holds an object that is not a number, string, list or dict."""
