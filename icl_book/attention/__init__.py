"""Attention layers and transformer blocks, with the exact weight constructions of the book.

- :mod:`icl_book.attention.lsa` -- linear self-attention and the one-step-GD construction (chapter 2).
- :mod:`icl_book.attention.glu` -- GLU feed-forward layers and the LSA+GLU block (chapter 5).
- :mod:`icl_book.attention.deep` -- deep stacks performing block-coordinate descent (chapter 6).

Each chapter's section below re-exports its public names.
"""

__all__: list[str] = []

# --- lsa: linear self-attention and the one-step GD construction (chapter 2) ---
from .lsa import (  # noqa: E402
    LinearSelfAttention,
    gd_lsa_weights,
    lsa_forward,
    lsa_predict,
    token_matrix,
)

__all__ += ["LinearSelfAttention", "gd_lsa_weights", "lsa_forward", "lsa_predict", "token_matrix"]

# --- glu: GLU feed-forward layers and the LSA+GLU block (chapter 5) ---
from .glu import (  # noqa: E402
    GLUFeedForward,
    GLULSABlockWeights,
    TransformerBlock,
    glu_embed_prompts,
    glu_lsa_block_forward,
    glu_lsa_block_predict,
    glu_lsa_block_weights,
    glu_token_layout,
    lsa_tokens,
    quadratic_feature_pairs,
    quadratic_features,
)

__all__ += [
    "GLUFeedForward",
    "GLULSABlockWeights",
    "TransformerBlock",
    "glu_embed_prompts",
    "glu_lsa_block_forward",
    "glu_lsa_block_predict",
    "glu_lsa_block_weights",
    "glu_token_layout",
    "lsa_tokens",
    "quadratic_feature_pairs",
    "quadratic_features",
]

# --- depth: deep stacks performing block-coordinate descent (chapter 6) ---
from .deep import (  # noqa: E402
    DeepBCDWeights,
    DeepTransformer,
    LearnedBCD,
    bcd_schedule,
    deep_bcd_weights,
    deep_forward,
    deep_predict,
    min_deep_width,
)

__all__ += [
    "DeepBCDWeights",
    "DeepTransformer",
    "LearnedBCD",
    "bcd_schedule",
    "deep_bcd_weights",
    "deep_forward",
    "deep_predict",
    "min_deep_width",
]
