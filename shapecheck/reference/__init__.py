"""Reference attention modules: correct, shape-annotated, checked at run time.

Runtime half of shapecheck (``pip install "torch-shapecheck[torch]"``): the linter never
imports it. Shapes are jaxtyping annotations checked by beartype, once per call signature;
``set_runtime_checks(False)`` turns the checks off (production, ``torch.compile``).
"""

from shapecheck.extras import require_torch_extra

require_torch_extra("shapecheck.reference")  # one line saying what to install, not a traceback

from shapecheck.reference.attention import (
    MultiHeadAttention,
    SelfAttention,
    causal_mask,
    flash_attention,
    scaled_dot_product_attention,
)
from shapecheck.reference.cache import KVCache
from shapecheck.reference.checking import runtime_checks_enabled, set_runtime_checks
from shapecheck.reference.layers import OutputLayer, TransformerEmbedding
from shapecheck.reference.rotary import apply_rotary, rotary_tables

__all__ = [
    "KVCache",
    "MultiHeadAttention",
    "OutputLayer",
    "SelfAttention",
    "TransformerEmbedding",
    "apply_rotary",
    "causal_mask",
    "flash_attention",
    "rotary_tables",
    "runtime_checks_enabled",
    "scaled_dot_product_attention",
    "set_runtime_checks",
]
