"""Bibliography labels in the in-text author–year style, sorted by that label."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field

import pybtex.plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle
from pybtex.style.template import first_of, optional, tag


def short_title(entry) -> str:
    """The entry's ``shorttitle``, else the first five words of its title (with "…" if cut)."""
    if "shorttitle" in entry.fields:
        return Text.from_latex(entry.fields["shorttitle"]).render_as("text")
    words = Text.from_latex(entry.fields.get("title", "")).render_as("text").split()
    return " ".join(words[:5]) + ("…" if len(words) > 5 else "")


def _short_title_node():
    from sphinxcontrib.bibtex.style.template import node

    @node
    def short_title_text(children, data):
        assert not children
        return Text(short_title(data["entry"]))

    return short_title_text


@functools.cache
def _reference_styles():
    """The referencing style (in-text) and its person style, built on sphinxcontrib-bibtex's author-year."""
    from sphinxcontrib.bibtex.style.referencing import PersonStyle
    from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
    from sphinxcontrib.bibtex.style.template import names

    short_title_text = _short_title_node()

    @dataclass
    class ShortTitlePersonStyle(PersonStyle):
        """Authors as sphinxcontrib-bibtex writes them; no authors or editors: the short title."""

        def author_or_editor_or_title(self, full: bool):
            other = None if full else self.other
            kwargs = dict(sep=self.sep, sep2=self.sep2, last_sep=self.last_sep, other=other)
            return first_of[
                optional[names("author", **kwargs)],
                optional[names("editor", **kwargs)],
                tag("em")[short_title_text],
            ]

    @dataclass
    class IclAuthorYearReferenceStyle(AuthorYearReferenceStyle):
        person: PersonStyle = field(default_factory=ShortTitlePersonStyle)

    return IclAuthorYearReferenceStyle


def author_year_label(entry, reference_style=None) -> str:
    """The entry's in-text author–year reference as plain text, e.g. ``Lu et al., 2025``."""
    from sphinxcontrib.bibtex.style.template import join, year

    style = reference_style or _reference_styles()()
    template = join(sep=style.author_year_sep)[
        style.person.author_or_editor_or_title(full=False), year
    ]
    return template.format_data({"entry": entry, "style": style}).render_as("text")


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels as the in-text citations read; equal labels get a, b, … (``Lu et al., 2025a``)."""

    def format_labels(self, sorted_entries):
        style = _reference_styles()()
        labels = [author_year_label(entry, style) for entry in sorted_entries]
        counts, seen = Counter(labels), Counter()
        for label in labels:
            if counts[label] > 1:
                seen[label] += 1
                yield label + "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            else:
                yield label


class AuthorYearSortingStyle(BaseSortingStyle):
    """Sorted by the label's text (first author's surname or short title), then year and title."""

    def sorting_key(self, entry):
        style = _reference_styles()()
        label = author_year_label(entry, style).lower().removeprefix("von ")
        return (label, entry.fields.get("year", ""), entry.fields.get("title", "").lower())


class AuthorYearStyle(UnsrtStyle):
    """pybtex's unsrt entries with author–year labels, sorted by label."""

    default_label_style = "icl_author_year"
    default_sorting_style = "icl_author_year"


def _register_bibliography_styles():
    from sphinxcontrib.bibtex.plugin import register_plugin

    pybtex.plugin.register_plugin("pybtex.style.labels", "icl_author_year", AuthorYearLabelStyle)
    pybtex.plugin.register_plugin("pybtex.style.sorting", "icl_author_year", AuthorYearSortingStyle)
    pybtex.plugin.register_plugin("pybtex.style.formatting", "icl_author_year", AuthorYearStyle)
    register_plugin(
        "sphinxcontrib.bibtex.style.referencing", "icl_author_year", _reference_styles()
    )


def register(app):
    """Register the style ``icl_author_year`` with pybtex and sphinxcontrib-bibtex."""
    _register_bibliography_styles()
