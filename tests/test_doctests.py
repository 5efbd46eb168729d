"""Every docstring example of the package runs and prints what it says (the API page shows them)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import icl_book

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(icl_book.__path__, prefix="icl_book.")
    if not info.name.rsplit(".", 1)[-1].startswith("_")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
