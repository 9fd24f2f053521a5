"""Every docstring example of the library runs and gives what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import bpc

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(bpc.__path__, "bpc.")
    if not m.name.startswith(("bpc.adapters", "bpc.__main__"))
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{result.failed} failing example(s) in {name}"
