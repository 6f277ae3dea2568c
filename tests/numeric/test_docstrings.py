"""Every runnable example in the numeric modules' docstrings runs and prints what it says."""

import doctest
import importlib
import pkgutil

import pytest

import coupled_curvature.numeric as numeric

MODULES = sorted(info.name for info in pkgutil.iter_modules(numeric.__path__, "coupled_curvature.numeric."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
