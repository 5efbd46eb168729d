"""Proofs: ∎ at the end of every proof, and the proof index by chapter, with numbers and titles."""

from __future__ import annotations

from docutils import nodes

from ._text import plain_text

QED = "∎"


def _qed_marks(app, doctree):
    from sphinx_proof.nodes import proof_node

    for proof in doctree.findall(proof_node):
        body = proof[0] if len(proof) and isinstance(proof[0], nodes.Element) else proof
        mark = nodes.inline("", QED, classes=["icl-qed"])
        last = body[-1] if len(body) else None
        if isinstance(last, nodes.paragraph):
            last += nodes.Text(" ")
            last += mark
        else:
            body += nodes.paragraph("", "", mark, classes=["icl-qed-line"])


def _proof_titles(app, doctree):
    """Remember each labelled proof-type node's title (sphinx-proof keeps only its label)."""
    proofs = getattr(app.env, "proof_list", {})
    for node in doctree.findall(nodes.Element):
        label = node.get("label") if "realtype" in node.attributes else None
        if label in proofs and proofs[label]["docname"] == app.env.docname:
            title = next(iter(node.findall(nodes.title)), None)
            text = plain_text(title).strip() if title is not None else ""
            if text.startswith("(") and text.endswith(")"):  # sphinx-proof's title format " (%t)"
                text = text[1:-1]
            proofs[label]["icl_title"] = text


def reading_order(env) -> list[str]:
    """Every document of the book in the order of its table of contents."""
    order, stack = [], [env.config.root_doc]
    while stack:
        doc = stack.pop(0)
        if doc in order:
            continue
        order.append(doc)
        stack[0:0] = env.toctree_includes.get(doc, [])
    return order


def chapter_heading(env, docname: str) -> str:
    """``Chapter 1. Hermite expansions …`` for a numbered chapter, else the page's title."""
    title = plain_text(env.titles[docname]) if docname in env.titles else docname
    number = env.toc_secnumbers.get(docname, {}).get("")
    return f"Chapter {'.'.join(map(str, number))}. {title}" if number else title


def _proof_index_class():
    from sphinx.domains import Index, IndexEntry

    class ProofIndex(Index):
        """sphinx-proof's index (same name, so the page stays ``prf-prf.html``), made readable: one
        group per chapter in reading order, each entry "Theorem 1.2" with the result's title."""

        name = "prf"
        localname = "Index of definitions, theorems and other results"
        shortname = "Results"

        def generate(self, docnames=None):
            env = self.domain.env
            proofs = getattr(env, "proof_list", {})
            by_doc: dict[str, list] = {}
            for label, info in proofs.items():
                doc = info["docname"]
                number = env.toc_fignumbers.get(doc, {}).get(info["countertype"], {}).get(label)
                kind = info["realtype"].title()
                name = f"{kind} {'.'.join(map(str, number))}" if number else kind
                by_doc.setdefault(doc, []).append(
                    (
                        number or (),
                        IndexEntry(name, 0, doc, label, info.get("icl_title", ""), "", ""),
                    )
                )
            order = {doc: i for i, doc in enumerate(reading_order(env))}
            content = []
            for doc in sorted(by_doc, key=lambda d: (order.get(d, len(order)), d)):
                entries = [entry for _, entry in sorted(by_doc[doc], key=lambda t: t[0])]
                content.append((chapter_heading(env, doc), entries))
            return content, False

    return ProofIndex


def register(app):
    """Connect this part's handlers; the proof index replaces sphinx-proof's."""
    app.connect("doctree-read", _qed_marks)
    app.connect("doctree-read", _proof_titles)
    from sphinx_proof.domain import ProofDomain

    ProofDomain.indices = {_proof_index_class()}
