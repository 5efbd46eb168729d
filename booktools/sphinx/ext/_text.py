"""TeX as plain text: index entries and titles cannot hold typeset math."""

from __future__ import annotations

import re

from docutils import nodes

_TEX_SYMBOLS = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ϵ",
    "varepsilon": "ε",
    "eta": "η",
    "theta": "θ",
    "kappa": "κ",
    "lambda": "λ",
    "mu": "μ",
    "nu": "ν",
    "xi": "ξ",
    "pi": "π",
    "rho": "ρ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "ϕ",
    "varphi": "φ",
    "chi": "χ",
    "psi": "ψ",
    "omega": "ω",
    "Gamma": "Γ",
    "Delta": "Δ",
    "Theta": "Θ",
    "Lambda": "Λ",
    "Sigma": "Σ",
    "Phi": "Φ",
    "Psi": "Ψ",
    "Omega": "Ω",
    "star": "⋆",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "approx": "≈",
    "sim": "∼",
    "to": "→",
    "infty": "∞",
    "cdot": "·",
    "times": "×",
    "sum": "Σ",
    "in": "∈",
    "top": "⊤",
    "R": "ℝ",
    "E": "𝔼",
    "ell": "ℓ",
    "pm": "±",
    "eICL": "e_ICL",
    "eIDG": "e_IDG",
    "Normal": "𝒩",
    "frac": "",
    "sqrt": "√",
    "mid": "|",
    "lVert": "‖",
    "rVert": "‖",
    "Vert": "‖",
    "langle": "⟨",
    "rangle": "⟩",
}  # the same table as _static/icl-search.js (search snippets)


def _group(arg: str) -> str:
    arg = arg.strip()
    return f"({arg})" if len(arg) > 1 else arg


def tex_to_text(tex: str) -> str:
    """A readable plain-text form of inline TeX: ``\\mu_1`` → ``μ_1``, ``\\Gamma`` → ``Γ``; other
    commands lose their backslash (``\\He_k`` → ``He_k``), braces and spacing commands go."""
    text = re.sub(r"\\(?:left|right|big|Big|bigl|bigr|,|;|!|quad|qquad)(?![a-zA-Z])", "", tex)
    text = re.sub(
        r"\\(?:mathrm|mathbf|mathit|mathcal|mathbb|operatorname|text|textrm)\{([^{}]*)\}",
        r"\1",
        text,
    )
    text = re.sub(
        r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}",
        lambda m: f"{_group(m.group(1))}/{_group(m.group(2))}",
        text,
    )
    text = re.sub(r"\\([a-zA-Z]+)", lambda m: _TEX_SYMBOLS.get(m.group(1), m.group(1)), text)
    text = re.sub(r"([_^])\{([^{}]*)\}", lambda m: m.group(1) + _group(m.group(2)), text)
    return re.sub(r"\s+", " ", re.sub(r"[{}\\&]", "", text)).strip()


def plain_text(node) -> str:
    """A node's text with its math as :func:`tex_to_text` writes it."""
    if isinstance(node, nodes.math):
        return tex_to_text(node.astext())
    if isinstance(node, nodes.Text):
        return str(node)
    return "".join(plain_text(child) for child in node.children)
