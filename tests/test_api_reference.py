"""The API reference page documents every public name of the package (`__all__` of every module)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import icl_book

from .conftest import ROOT

API_PAGE = ROOT / "_build" / "html" / "chapters" / "api.html"


def public_names() -> list[str]:
    """``module.name`` for every name in every ``__all__``, under the module that defines it."""
    names = set()
    for info in pkgutil.walk_packages(icl_book.__path__, "icl_book."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            home = getattr(obj, "__module__", None) or module.__name__
            if not home.startswith(
                "icl_book"
            ):  # a constant such as a tuple: documented where listed
                home = module.__name__
            names.add(f"{home}.{name}")
    return sorted(names)


def test_every_public_name_is_documented():
    if not API_PAGE.exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    html = API_PAGE.read_text(encoding="utf-8")
    missing = [name for name in public_names() if f'id="{name}"' not in html]
    assert missing == [], f"public names missing from the API reference: {missing}"


def test_the_check_sees_the_package():
    names = public_names()
    assert "icl_book.estimators.ols_predict" in names
    assert "icl_book.tasks.sample_linear_prompts" in names


def test_no_description_is_shown_as_a_type():
    """Napoleon reads the first line of an attribute's ``#:`` comment or a property's docstring as
    ``type: description`` when it holds a colon outside code and roles: "Smallest ridge accepted: below
    it ..." rendered as "Type: Smallest ridge accepted". The package never writes such types, so no
    ``Type`` field may appear on the page."""
    if not API_PAGE.exists():
        pytest.fail("the book is not built: run `make html` (make test builds it first)")
    import re

    html = API_PAGE.read_text(encoding="utf-8")
    shown = [
        re.sub(r"<[^>]+>", "", html[m.end() : m.end() + 200]).split("\n")[2:3]
        for m in re.finditer(r'<dt class="field-(?:odd|even)">Type<', html)
    ]
    assert shown == [], f"descriptions rendered as types (rephrase without 'x: y'): {shown}"
