"""Attention layers and transformer blocks, with the exact weight constructions of the book.

- :mod:`icl_book.attention.layers` -- the layers written once (embedding, LSA, GLU, readout,
  block-coordinate steps): functions of row tokens and explicit weights, NumPy or torch.
- :mod:`icl_book.attention.lsa` -- linear self-attention: the update, the one-step-GD construction
  and the trainable layer.
- :mod:`icl_book.attention.glu` -- GLU feed-forward layers and the LSA+GLU block.
- :mod:`icl_book.attention.schedule` -- the plan of a deep block-coordinate stack: which features
  (and carriers) each layer of a cycle writes.
- :mod:`icl_book.attention.deep` -- deep stacks of blocks and block-coordinate descent: the exact
  construction's weights, the unconstrained deep transformer and learned block-coordinate descent.

The NumPy functions take column tokens ``(B, D, N+1)``; the torch modules take prompts
``(xs, ys, x_query)`` and work on row tokens ``(B, N+1, D)``; the last token is the query.
"""

from .deep import (
    DeepBCDWeights,
    DeepTransformer,
    LearnedBCD,
    deep_bcd_weights,
    deep_forward,
    deep_predict,
)
from .glu import (
    GLUFeedForward,
    GLULSABlockWeights,
    TokenLayout,
    TransformerBlock,
    glu_embed_prompts,
    glu_lsa_block_forward,
    glu_lsa_block_predict,
    glu_lsa_block_weights,
    glu_token_layout,
    glu_update,
    quadratic_feature_pairs,
    quadratic_features,
)
from .lsa import (
    LinearSelfAttention,
    LSAWeights,
    gd_lsa_weights,
    lsa_forward,
    lsa_predict,
    lsa_query_readout,
    lsa_update,
    token_matrix,
)
from .schedule import bcd_schedule, min_deep_width

__all__ = [
    # lsa
    "LinearSelfAttention",
    "LSAWeights",
    "gd_lsa_weights",
    "lsa_forward",
    "lsa_predict",
    "lsa_query_readout",
    "lsa_update",
    "token_matrix",
    # glu
    "GLUFeedForward",
    "GLULSABlockWeights",
    "TransformerBlock",
    "glu_embed_prompts",
    "glu_lsa_block_forward",
    "glu_lsa_block_predict",
    "glu_lsa_block_weights",
    "glu_token_layout",
    "TokenLayout",
    "glu_update",
    "quadratic_feature_pairs",
    "quadratic_features",
    # deep
    "DeepBCDWeights",
    "DeepTransformer",
    "LearnedBCD",
    "deep_bcd_weights",
    "deep_forward",
    "deep_predict",
    # schedule
    "bcd_schedule",
    "min_deep_width",
]
