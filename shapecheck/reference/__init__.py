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
    scaled_dot_product_attention,
)
from shapecheck.reference.checking import runtime_checks_enabled, set_runtime_checks
from shapecheck.reference.layers import OutputLayer, TransformerEmbedding

__all__ = [
    "MultiHeadAttention",
    "OutputLayer",
    "SelfAttention",
    "TransformerEmbedding",
    "runtime_checks_enabled",
    "scaled_dot_product_attention",
    "set_runtime_checks",
]
