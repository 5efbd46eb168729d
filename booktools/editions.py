"""Plain-notebook editions of the chapters: what Colab and Jupyter open.

``python -m booktools.editions build [--root DIR] [--build-dir DIR] [--out DIR]`` (``make editions``) writes
``notebooks/NN_slug.ipynb`` for every chapter ``chapters/NN_slug.ipynb``;
``python -m booktools.editions check`` fails when a committed edition differs from what ``build`` would write;
``python -m booktools.editions install-cells`` writes the Colab install cell
(:func:`booktools.install_cell.install_cell`: the wheel of this package version on the book's site) into the
first code cell of every chapter and its executed notebook.

An edition is the executed chapter notebook (outputs copied, nothing re-executed) whose Markdown a stock
notebook renderer shows as the book does:

- MyST is parsed with myst-parser's own Markdown parser (markdown-it-py tokens) and written back as
  CommonMark: ``{prf:...}`` directives become block quotes opening with "**Theorem 3.1 (Title).**",
  ``{exercise}`` numbered as in the book, admonitions become block quotes, ``(label)=`` targets vanish;
- references (``{prf:ref}``, ``{ref}``, ``{numref}``, ``{eq}``, ``{doc}``, ``{py:...}``) become the book's
  own numbers and titles, linked to the web page; citations become author-year text with a reference list
  at the end; ``{glue:}`` roles become the glued text stored in the executed notebook;
- the book's MathJax macros (``_config.yml``) are expanded, labelled equations get ``\\tag{n}``;
- figure captions (``mystnb.figure`` cell metadata) follow their figure as "*Fig. 3.2.* caption";
- solutions are collapsed: prose in ``<details>``, code cells ``source_hidden`` and Colab form cells,
  shipped without their outputs (Colab would show them under the hidden code).

Numbers, titles, anchors and the site address come from the book's index
(:class:`booktools.book_index.BookIndex`: ``_build/book-index.json``, or that of a ``--build-dir`` of
your own, read again into a temporary folder when missing or stale), so they are those of the web
pages. Any construct the converter does not know raises :class:`EditionError`, a reference the index
does not resolve :class:`booktools.book_index.BookIndexError`: nothing MyST-specific passes through
silently.

One job: the MyST-to-CommonMark conversion of a chapter notebook: the converter's block and inline
writers share one state across cells (the open solution, the citations so far), which the notebook
assembly reads to cut cells at solution boundaries and end with the reference list.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

import nbformat
import yaml

from booktools import add_root_option, find_root
from booktools.book_index import BookIndex, bibliography_anchor, load_index
from booktools.chapters import chapter_notebooks, solution_chunks
from booktools.install_cell import write_install_cells
from booktools.myst import SOLUTION_TITLE

__all__ = [
    "EditionError",
    "myst_leftovers",
    "Converter",
    "edition_path",
    "build_editions",
    "stale_editions",
]

EDITION_DIR = "notebooks"
ADMONITIONS = {
    "note", "warning", "tip", "important", "hint", "caution", "attention", "danger", "error",
    "seealso", "admonition", "margin", "sidebar", "topic",
}  # fmt: skip
MYST_EXTENSIONS = {
    "amsmath", "colon_fence", "deflist", "dollarmath", "html_image", "linkify", "substitution",
}  # fmt: skip
CONTROL_WORD = re.compile(r"\\([A-Za-z]+)")
MD_SPECIAL = re.compile(r"([\\`*\[\]$|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|<(?=[A-Za-z/!?]))")


class EditionError(ValueError):
    """A construct in a chapter that the edition cannot express."""


# --------------------------------------------------------------------------------------------------------
# Markdown of MyST tokens
# --------------------------------------------------------------------------------------------------------
def _parser():
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    return create_md_parser(MdParserConfig(enable_extensions=MYST_EXTENSIONS), RendererHTML)


def _escape(text: str) -> str:
    return MD_SPECIAL.sub(r"\\\1", text)


def _split_directive(token) -> tuple[str, str, dict, str]:
    """``(name, argument, options, body)`` of a directive fence: the directive syntax of MyST (options as
    ``:key: value`` lines or a ``---`` YAML block at the top of the body)."""
    info = token.info.strip()
    name, _, arg = info.partition(" ")
    name = name[1:-1]
    lines = token.content.split("\n")
    options: dict = {}
    if lines and lines[0].strip() == "---":
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        options = yaml.safe_load("\n".join(lines[1:end])) or {}
        lines = lines[end + 1 :]
    else:
        while lines and lines[0].startswith(":"):
            key, _, value = lines.pop(0)[1:].partition(":")
            options[key.strip()] = value.strip()
    return name, arg.strip(), options, "\n".join(lines).strip("\n")


class _Solution:
    def __init__(self, label: str, title: str):
        self.label, self.title = label, title


class Converter:
    """Converts one chapter notebook into its edition (see the module docstring)."""

    def __init__(
        self, index: BookIndex, doc: str, glue: dict[str, str], folder: Path | None = None
    ):
        """``glue``: this chapter's glued values; ``folder``: where the other chapters' executed
        notebooks are, for a value glued in another chapter (``{glue:}`05_glu_kernel_regression.ipynb::key```)."""
        self.index, self.doc, self.glue, self.folder = index, doc, glue, folder
        self._other_glue: dict[str, dict[str, str]] = {}
        self.md = _parser()
        self.cited: list[str] = []
        self.solution: _Solution | None = None
        self.sections = list(index.section_numbers(doc))
        self.seen_title = False

    # ---- math ----
    def math(self, tex: str) -> str:
        def expand(m):
            name = m[1]
            if name in self.index.macros:
                value = self.index.macros[name]
                nxt = m.string[m.end() : m.end() + 1]
                return value + (" " if nxt.isalpha() else "")
            return m[0]

        for _ in range(5):  # macros defined through macros
            new = CONTROL_WORD.sub(expand, tex)
            if new == tex:
                break
            tex = new
        return tex

    # ---- inline ----
    def inline(self, tokens) -> str:
        out: list[str] = []
        links: list[str] = []
        for t in tokens:
            kind = t.type
            if kind == "text":
                out.append(_escape(t.content))
            elif kind == "softbreak":
                out.append("\n")
            elif kind == "hardbreak":
                out.append("  \n")
            elif kind in ("strong_open", "strong_close"):
                out.append("**")
            elif kind in ("em_open", "em_close"):
                out.append("*")
            elif kind in ("s_open", "s_close"):
                out.append("~~")
            elif kind == "code_inline":
                fence = "``" if "`" in t.content else "`"
                out.append(f"{fence}{t.content}{fence}")
            elif kind == "math_inline":
                out.append("$" + " ".join(self.math(t.content).split("\n")) + "$")
            elif kind == "math_inline_double":
                out.append("$$" + " ".join(self.math(t.content).split("\n")) + "$$")
            elif kind == "link_open":
                href = self.href(t.attrGet("href") or "")
                links.append(href)
                out.append("[")
            elif kind == "link_close":
                out.append(f"]({links.pop()})")
            elif kind == "image":
                src = t.attrGet("src") or ""
                if not re.match(r"[a-z]+:", src):
                    raise EditionError(
                        f"{self.doc}: relative image {src!r} has no place in a notebook"
                    )
                out.append(f"![{_escape(t.content)}]({src})")
            elif kind == "html_inline":
                out.append(t.content)
            elif kind == "myst_role":
                out.append(self.role(t.meta["name"], t.content))
            else:
                raise EditionError(f"{self.doc}: inline token {kind!r} is not converted")
        return "".join(out)

    def href(self, href: str) -> str:
        if re.match(r"[a-z][a-z0-9+.-]*:", href):
            return href
        path, _, anchor = href.partition("#")
        if not path:
            return self.index.url(self.doc, anchor)
        doc = self.index.document(path, self.doc)
        if self.index.has_document(doc):
            return self.index.url(doc, anchor)
        return self.index.ref(path)[1]  # MyST's [text](label) form

    def role(self, name: str, content: str) -> str:
        text, target = None, content
        m = re.fullmatch(r"(?s)(.*?)\s*<([^<>]+)>", content)
        if m and name not in ("math",) and not name.startswith("glue"):
            text, target = m[1], m[2]

        def link(label_text, url):
            return f"[{_escape(label_text)}]({url})"

        if name == "prf:ref":
            found, url = self.index.proof(target)
            return link(text or found, url)
        if name == "ref":
            found, url = self.index.ref(target)
            return link(text or found, url)
        if name == "numref":
            found, url = self.index.numref(target, text)
            return link(found, url)
        if name == "eq":
            number, url = self.index.equation(target)
            return link(text or f"({number})", url)
        if name == "doc":
            found, url = self.index.doc(target, self.doc)
            return link(text or found, url)
        if name.startswith("py:"):
            short = target.startswith("~")
            target = target.lstrip("~")
            shown = target.rsplit(".", 1)[-1] if short else target
            if name in ("py:func", "py:meth") and not text:
                shown += "()"
            return f"[`{text or shown}`]({self.index.python(target)})"
        if name in ("cite", "cite:p", "cite:t", "cite:ps", "cite:ts", "cite:alp", "cite:author"):
            return self.cite(name, target)
        if name in ("glue:", "glue", "glue:text", "glue:md", "glue:any"):
            ref, fmt = content, ""
            if name == "glue:text":  # [doc::]key[:format]
                other, sep, rest = content.rpartition("::")
                key, _, fmt = rest.partition(":")
                ref = other + sep + key
            value = self._glued(ref)
            if fmt:
                value = format(float(value), fmt)
            return value if name == "glue:md" else _escape(value)
        if name == "math":
            return f"${self.math(content)}$"
        if name in ("sub", "sup"):
            return f"<{name}>{_escape(content)}</{name}>"
        if name == "abbr":
            return _escape(content)
        raise EditionError(f"{self.doc}: role {{{name}}} is not converted")

    def _glued(self, ref: str) -> str:
        """The text glued under ``key``, or under ``doc::key`` in another chapter's notebook."""
        other, _, key = ref.rpartition("::")
        if not other:
            if key not in self.glue:
                raise EditionError(f"{self.doc}: no glued value {key!r} in the executed notebook")
            return self.glue[key]
        if self.folder is None:
            raise EditionError(f"{self.doc}: {ref!r} is glued in another chapter; no folder given")
        if other not in self._other_glue:
            # the book names the notebook as Sphinx needs it (05_glu_kernel_regression.ipynb::key)
            path = self.folder / (other if other.endswith(".ipynb") else f"{other}.ipynb")
            if not path.exists():
                raise EditionError(
                    f"{self.doc}: {ref!r} names a notebook that does not exist ({path})"
                )
            self._other_glue[other] = _glue_values(nbformat.read(path, as_version=4))
        if key not in self._other_glue[other]:
            raise EditionError(
                f"{self.doc}: no glued value {key!r} in {other.removesuffix('.ipynb')}"
            )
        return self._other_glue[other][key]

    # ---- citations ----
    def _author_year(self, key: str) -> tuple[str, str]:
        from pybtex.richtext import Text

        entry = self.index.bib.get(key)
        if entry is None:
            raise EditionError(f"{self.doc}: unknown citation key {key!r}")
        people = entry.persons.get("author") or entry.persons.get("editor") or []

        def last(p):
            return Text.from_latex(" ".join(p.prelast_names + p.last_names)).render_as("text")

        if not people:
            who = Text.from_latex(entry.fields.get("title", key)).render_as("text")
        elif len(people) == 1:
            who = last(people[0])
        elif len(people) == 2:
            who = f"{last(people[0])} and {last(people[1])}"
        else:
            who = f"{last(people[0])} *et al.*"
        return who, entry.fields.get("year", "n.d.")

    def cite(self, name: str, content: str) -> str:
        keys = [k.strip() for k in content.split(",") if k.strip()]
        parts = []
        for key in keys:
            who, year = self._author_year(key)
            if key not in self.cited:
                self.cited.append(key)
            # The web book's entry, not an in-notebook anchor: Colab does not follow those
            # (googlecolab/colabtools#3983). _config.yml's bibtex_cite_id gives the stable id.
            anchor = f"({self.index.url('chapters/bibliography', bibliography_anchor(key))})"
            if name in ("cite:t", "cite:ts"):
                parts.append(f"{who} [[{year}]{anchor}]")
            elif name == "cite:author":
                parts.append(who)
            else:
                parts.append(f"[{who}, {year}]{anchor}")
        if name in ("cite:t", "cite:ts", "cite:author"):
            return ", ".join(parts)
        if name == "cite:alp":
            return "; ".join(parts)
        return "[" + "; ".join(parts) + "]"

    def references(self) -> str | None:
        if not self.cited:
            return None
        from pybtex.database import BibliographyData
        from pybtex.plugin import find_plugin

        style = find_plugin("pybtex.style.formatting", "plain")()
        data = BibliographyData({k: self.index.bib[k] for k in self.cited})
        formatted = {
            e.key: _escape(" ".join(e.text.render_as("text").split()))
            for e in style.format_entries(data.entries.values())
        }
        keys = sorted(self.cited, key=lambda k: self._author_year(k)[0].replace("*", "").lower())
        lines = ["## References", ""]
        for key in keys:
            who, year = self._author_year(key)
            lines.append(f"- {who}, {year}. {formatted[key]}")
        lines += [
            "",
            f"*The book's full bibliography: <{self.index.url('chapters/bibliography')}>.*",
        ]
        return "\n".join(lines)

    # ---- blocks ----
    def blocks(self, text: str) -> str:
        tokens = self.md.parse(text)
        chunks = self._blocks(tokens, 0, len(tokens))
        return "\n\n".join(c for c in chunks if c.strip())

    def _blocks(self, tokens, i, end) -> list[str]:
        out: list[str] = []
        while i < end:
            t = tokens[i]
            kind = t.type
            if kind == "paragraph_open":
                out.append(self.inline(tokens[i + 1].children))
                i += 3
            elif kind == "heading_open":
                level = int(t.tag[1])
                text = self.inline(tokens[i + 1].children)
                out.append(self.heading(level, text))
                i += 3
            elif kind in ("bullet_list_open", "ordered_list_open"):
                close = self._close(tokens, i)
                out.append(self.list_(tokens, i, close))
                i = close + 1
            elif kind == "blockquote_open":
                close = self._close(tokens, i)
                out.append(_quote("\n\n".join(self._blocks(tokens, i + 1, close))))
                i = close + 1
            elif kind == "table_open":
                close = self._close(tokens, i)
                out.append(self.table(tokens, i, close))
                i = close + 1
            elif kind in ("fence", "colon_fence"):
                out.append(self.fence(t))
                i += 1
            elif kind == "code_block":
                out.append("```\n" + t.content.rstrip("\n") + "\n```")
                i += 1
            elif kind == "math_block":
                out.append("$$\n" + self.math(t.content.strip()) + "\n$$")
                i += 1
            elif kind == "math_block_label":
                number, _ = self.index.equation(t.info)
                out.append("$$\n" + self.math(t.content.strip()) + f"\n\\tag{{{number}}}\n$$")
                i += 1
            elif kind == "amsmath":
                out.append("$$\n" + self.math(t.content.strip()) + "\n$$")
                i += 1
            elif kind in ("myst_target", "myst_line_comment", "front_matter"):
                i += 1
            elif kind == "myst_block_break":
                out.append("---")
                i += 1
            elif kind == "hr":
                out.append("---")
                i += 1
            elif kind == "html_block":
                out.append(t.content.rstrip("\n"))
                i += 1
            elif kind == "dl_open":
                close = self._close(tokens, i)
                out.append(self.deflist(tokens, i, close))
                i = close + 1
            else:
                raise EditionError(f"{self.doc}: block token {kind!r} is not converted")
        return out

    @staticmethod
    def _close(tokens, i) -> int:
        level = tokens[i].level
        for j in range(i + 1, len(tokens)):
            if tokens[j].level == level and tokens[j].nesting == -1:
                return j
        raise EditionError("unbalanced tokens")

    def heading(self, level: int, text: str) -> str:
        if level == 1 and not self.seen_title:
            self.seen_title = True
            number = self.index.chapter_number(self.doc)
            return f"# {number + '. ' if number else ''}{text}"
        if level >= 2 and self.sections:
            _, number = self.sections.pop(0)
            text = f"{number}. {text}" if number else text
        return "#" * level + " " + text

    def list_(self, tokens, i, close) -> str:
        ordered = tokens[i].type == "ordered_list_open"
        start = int(tokens[i].attrGet("start") or 1)
        items, j, n = [], i + 1, start
        while j < close:
            item_close = self._close(tokens, j)
            body = "\n\n".join(self._blocks(tokens, j + 1, item_close))
            marker = f"{n}. " if ordered else "- "
            pad = " " * len(marker)
            lines = body.split("\n")
            items.append(
                marker + lines[0] + "".join("\n" + (pad + ln if ln else "") for ln in lines[1:])
            )
            j, n = item_close + 1, n + 1
        tight = all(tok.hidden for tok in tokens[i:close] if tok.type == "paragraph_open")
        return ("\n" if tight else "\n\n").join(items)

    def table(self, tokens, i, close) -> str:
        rows, row, aligns = [], None, []
        for t in tokens[i:close]:
            if t.type == "tr_open":
                row = []
            elif t.type in ("th_open", "td_open"):
                style = t.attrGet("style") or ""
                if t.type == "th_open":
                    aligns.append(style.replace("text-align:", ""))
            elif t.type == "inline":
                row.append(self.inline(t.children).replace("\n", " "))
            elif t.type == "tr_close":
                rows.append(row)
        sep = [{"left": ":--", "right": "--:", "center": ":-:"}.get(a, "---") for a in aligns]
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join(sep) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return "\n".join(lines)

    def deflist(self, tokens, i, close) -> str:
        out, j = [], i + 1
        while j < close:
            t = tokens[j]
            c = self._close(tokens, j)
            if t.type == "dt_open":
                out.append("**" + self.inline(tokens[j + 1].children) + "**")
            elif t.type == "dd_open":
                out.append(_quote("\n\n".join(self._blocks(tokens, j + 1, c))))
            j = c + 1
        return "\n\n".join(out)

    # ---- directives ----
    def fence(self, token) -> str:
        info = token.info.strip()
        if not (info.startswith("{") and "}" in info):
            lang = info or ""
            return f"```{lang}\n{token.content.rstrip(chr(10))}\n```"
        name, arg, options, body = _split_directive(token)
        if name.startswith("prf:"):
            return self.proof_block(name[4:], arg, options, body)
        if name == "exercise":
            label = options.get("label", "")
            text = self.index.exercise(label)[0] if label else "Exercise"
            title = f"**{text}" + (f" ({self.inline_text(arg)})" if arg else "") + ".**"
            return _quote(self._lead(title, self.blocks(body)))
        if name == "solution-start":
            if self.solution is not None:
                raise EditionError(f"{self.doc}: solution-start inside a solution")
            ex = self.index.exercise(arg)
            if ex is None:
                raise EditionError(f"{self.doc}: solution-start names no exercise: {arg!r}")
            self.solution = _Solution(arg, f"Solution to {ex[0]}")
            return ""
        if name == "solution-end":
            if self.solution is None:
                raise EditionError(f"{self.doc}: solution-end without solution-start")
            self.solution = None
            return ""
        if name == "solution":
            ex = self.index.exercise(arg)
            return _details(f"Solution to {ex[0] if ex else arg}", self.blocks(body))
        if name in ADMONITIONS:
            title = arg if name in ("admonition", "topic", "sidebar") and arg else name.title()
            if name == "seealso":
                title = "See also"
            if options.get("class", "") and "dropdown" in str(options.get("class")):
                return _details(self.inline_text(title), self.blocks(body))
            return _quote(self._lead(f"**{self.inline_text(title)}.**", self.blocks(body)))
        if name == "dropdown":
            return _details(self.inline_text(arg or "Details"), self.blocks(body))
        if name in ("tab-set", "grid", "card", "div", "container"):
            return self.blocks(body)
        if name in ("tab-item", "grid-item", "grid-item-card"):
            return (
                f"**{self.inline_text(arg)}**\n\n" + self.blocks(body) if arg else self.blocks(body)
            )
        if name in ("code-block", "code", "sourcecode"):
            return f"```{arg}\n{body}\n```"
        if name == "math":
            tex = self.math(body.strip())
            label = options.get("label")
            if label:
                tex += f"\n\\tag{{{self.index.equation(label)[0]}}}"
            return f"$$\n{tex}\n$$"
        if name in ("toctree", "tableofcontents", "bibliography", "raw", "only", "index"):
            return ""
        raise EditionError(f"{self.doc}: directive {{{name}}} is not converted")

    def inline_text(self, text: str) -> str:
        tokens = self.md.parseInline(text)
        return self.inline(tokens[0].children) if tokens else ""

    @staticmethod
    def _lead(head: str, body: str) -> str:
        """``head`` in front of the first paragraph of ``body`` (or as its own paragraph)."""
        if body and not body.startswith(("$$", "-", "#", ">", "|", "```", "<", "1.")):
            return f"{head} {body}"
        return head + ("\n\n" + body if body else "")

    def proof_block(self, kind: str, arg: str, options: dict, body: str) -> str:
        label = options.get("label", "")
        if kind == "proof":
            head = "*Proof.*" if not arg else f"*Proof ({self.inline_text(arg)}).*"
            text = self._lead(head, self.blocks(body))
            return _quote(text + " ∎")
        if label and self.index.is_proof(label):
            text, _ = self.index.proof(label)
        else:
            text = kind.title()
        head = f"**{text}" + (f" ({self.inline_text(arg)})" if arg else "") + ".**"
        return _quote(self._lead(head, self.blocks(body)))


def _quote(text: str) -> str:
    """A Markdown block quote; display math goes on one line, since notebook renderers extract ``$$``
    before parsing Markdown and would otherwise see the ``>`` markers inside the TeX."""
    lines, out, math = text.split("\n"), [], None
    for line in lines:
        if math is not None:
            math.append(line.strip())
            if line.strip().endswith("$$"):
                out.append(" ".join(math))
                math = None
        elif line.strip().startswith("$$") and not (
            line.strip().endswith("$$") and len(line.strip()) > 2
        ):
            math = [line.strip()]
        else:
            out.append(line)
    if math is not None:
        raise EditionError("unterminated display math in a block quote")
    return "\n".join(("> " + ln) if ln else ">" for ln in out)


def _details(summary: str, body: str) -> str:
    return f"<details>\n<summary>{summary}</summary>\n\n{body}\n\n</details>"


# --------------------------------------------------------------------------------------------------------
# What must never reach an edition
# --------------------------------------------------------------------------------------------------------
LEFTOVERS = {
    "MyST role": re.compile(r"\{[A-Za-z][\w:.+-]*\}`"),
    "MyST directive fence": re.compile(r"^[>\s]*(```+|~~~+)\s*\{", re.M),
    "colon fence": re.compile(r"^[>\s]*:::", re.M),
    "directive option": re.compile(r"^[>\s]*:[a-z][\w-]*:(\s|$)", re.M),
    "(label)= target": re.compile(r"^[>\s]*\([\w.:-]+\)=\s*$", re.M),
    "equation label": re.compile(r"\$\$\s*\([\w.:-]+\)"),
    "unresolved reference (??)": re.compile(r"\?\?"),
    "jupytext/MyST comment": re.compile(r"^[>\s]*%\s", re.M),
}


def myst_leftovers(markdown: str, macros) -> list[str]:
    """What in a Markdown cell only the book understands: roles, directives, targets, labels, ``??``
    and the book's own macros (a stock MathJax has no ``\\E``)."""
    found = [
        f"{what}: {m[0].strip()!r}" for what, rx in LEFTOVERS.items() for m in rx.finditer(markdown)
    ]
    found += [f"book macro \\{m[1]}" for m in CONTROL_WORD.finditer(markdown) if m[1] in macros]
    return found


# --------------------------------------------------------------------------------------------------------
# Notebooks
# --------------------------------------------------------------------------------------------------------
def edition_path(root: Path, chapter: Path) -> Path:
    return Path(root) / EDITION_DIR / Path(chapter).name


def _glue_values(nb) -> dict[str, str]:
    values = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            scrap = out.get("metadata", {}).get("scrapbook")
            if scrap:
                prefix = scrap.get("mime_prefix", "")
                data = out.get("data", {})
                text = data.get(prefix + "text/plain", data.get("text/plain"))
                if text is not None:
                    values[scrap["name"]] = "".join(text)
    return values


def _strip_glue_outputs(outputs: list) -> list:
    return [o for o in outputs if "scrapbook" not in o.get("metadata", {})]


def convert(index: BookIndex, chapter: Path) -> nbformat.NotebookNode:
    """The edition of one executed chapter notebook."""
    chapter = Path(chapter)
    src = nbformat.read(chapter, as_version=4)
    return convert_notebook(index, src, chapter.stem, folder=chapter.parent)


def convert_notebook(
    index: BookIndex, src, stem: str, folder: Path | None = None
) -> nbformat.NotebookNode:
    """The edition of the executed notebook ``src`` of chapter ``chapters/<stem>`` (``folder``: where
    the other chapters' executed notebooks are, for values glued there)."""
    doc = f"chapters/{stem}"
    conv = Converter(index, doc, _glue_values(src), folder)
    new = nbformat.v4.new_notebook()
    new.metadata = {
        k: copy.deepcopy(v) for k, v in src.metadata.items() if k in ("kernelspec", "language_info")
    }
    new.metadata["colab"] = {"provenance": [], "toc_visible": True}
    new.metadata["icl_edition"] = {"source": f"{doc}.ipynb", "web": index.url(doc)}
    cells = []

    def markdown(text: str, solution: _Solution | None, **meta):
        if not text.strip():
            return
        if solution is not None:
            text = _details(solution.title, text)
        cell = nbformat.v4.new_markdown_cell(text)
        if solution is not None:
            meta = {**meta, "solution": solution.label}
        if meta:
            cell.metadata["icl_edition"] = meta
        cells.append(cell)

    for cell in src.cells:
        if cell.cell_type == "markdown":
            # Split at solution boundaries so that each part is collapsed (or not) on its own.
            parts: list[tuple[_Solution | None, list[str]]] = [(conv.solution, [])]
            for chunk in solution_chunks(cell.source):
                before = conv.solution
                text = conv.blocks(chunk)
                if conv.solution is not before:  # a solution boundary
                    parts.append((conv.solution, []))
                if text.strip():
                    parts[-1][1].append(text)
            for sol, texts in parts:
                markdown("\n\n".join(texts), sol)
            continue
        if cell.cell_type != "code":
            cells.append(copy.deepcopy(cell))
            continue
        code = nbformat.v4.new_code_cell(cell.source)
        code.outputs = _strip_glue_outputs(copy.deepcopy(cell.get("outputs", [])))
        code.execution_count = cell.get("execution_count")
        meta = copy.deepcopy(dict(cell.metadata))
        mystnb = meta.pop("mystnb", {}) or {}
        tags = meta.get("tags", [])
        if "remove-input" in tags or "hide-input" in tags:
            meta.setdefault("jupyter", {})["source_hidden"] = True
        if "remove-output" in tags:
            code.outputs = []
        if "hide-output" in tags:
            meta.setdefault("jupyter", {})["outputs_hidden"] = True
        if conv.solution is not None:
            # Colab shows a form cell's outputs even while its code is hidden: a solution's printed
            # table would give the answer away, so the edition ships it unrun (run it to see).
            code.outputs, code.execution_count = [], None
            code.source = SOLUTION_TITLE + "\n" + code.source
            meta.setdefault("jupyter", {})["source_hidden"] = True
            meta["cellView"] = "form"
            meta["icl_edition"] = {"solution": conv.solution.label}
        code.metadata = meta
        cells.append(code)
        figure = mystnb.get("figure") or {}
        if figure.get("caption"):
            name = figure.get("name", "")
            found = index._fignumber(name, {"figure"}) if name else None
            head = f"*{index.numfig_text('figure', found[2])}.*" if found else ""
            caption = conv.inline_text(figure["caption"])
            markdown(f"{head} {caption}".strip(), conv.solution, figure=name)
    if conv.solution is not None:
        raise EditionError(f"{doc}: solution of {conv.solution.label} never ends")
    refs = conv.references()
    if refs:
        markdown(refs, None)
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:03d}"
    new.cells = cells
    return new


def _dumps(nb) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def build_editions(root: Path, index: BookIndex, out: Path | None = None) -> dict[Path, str]:
    """The text of every edition, by the path it belongs at (nothing written)."""
    out = Path(out) if out else Path(root) / EDITION_DIR
    return {out / ch.name: _dumps(convert(index, ch)) for ch in chapter_notebooks(root)}


def stale_editions(root: Path, index: BookIndex) -> list[str]:
    """Problems of the committed editions: missing, stale, or without a chapter."""
    problems = []
    wanted = build_editions(root, index)
    for path, text in wanted.items():
        rel = path.relative_to(root)
        if not path.exists():
            problems.append(f"{rel}: missing (run `make editions`)")
        elif path.read_text() != text:
            problems.append(f"{rel}: stale against chapters/{path.name} (run `make editions`)")
    for path in sorted((Path(root) / EDITION_DIR).glob("*.ipynb")):
        if path not in wanted:
            problems.append(f"{path.relative_to(root)}: no chapter of that name")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m booktools.editions", description=__doc__.split("\n")[0]
    )
    parser.add_argument("command", choices=["build", "check", "install-cells"])
    parser.add_argument(
        "chapters",
        nargs="*",
        help="install-cells only: chapter prefixes (00, 01_hermite; default all)",
    )
    add_root_option(parser)
    parser.add_argument(
        "--build-dir", type=Path, default=None, help="a book build (default ROOT/_build)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write (default ROOT/notebooks)"
    )
    args = parser.parse_args(argv)
    root = find_root(args.root)
    if args.command == "install-cells":
        for path in write_install_cells(root, args.chapters or None):
            print(f"wrote {path}")
        return 0
    index = load_index(root, args.build_dir)
    if args.command == "check":
        problems = stale_editions(root, index)
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    for path, text in build_editions(root, index, args.out).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
