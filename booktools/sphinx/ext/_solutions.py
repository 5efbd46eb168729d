"""The book's code cells without nbgrader's solution markers."""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.transforms import SphinxTransform

SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)


def strip_solution_markers(source: str) -> str:
    """``source`` without its ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines."""
    return SOLUTION_MARKER.sub("", source)


class _SolutionMarkers(SphinxTransform):
    """Drop the markers from the code of notebook cells (myst-nb's ``cell_input`` containers)."""

    default_priority = 700

    def apply(self, **kwargs):
        for box in self.document.findall(nodes.container):
            if "cell_input" not in box["classes"]:
                continue
            for block in box.findall(nodes.literal_block):
                text = block.astext()
                clean = strip_solution_markers(text)
                if clean != text:
                    block.children = []
                    block += nodes.Text(clean)
                    block.rawsource = clean


def register(app):
    """Add this part's transform."""
    app.add_transform(_SolutionMarkers)
