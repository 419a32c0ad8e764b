"""``flash_attention``: the ``[batch, seq, heads, head_dim]`` layout of ``flash_attn_func`` and
xformers, equal to F.sdpa on ``transpose(1, 2)`` inputs (grouped-query attention too), causal
at the bottom right as flash-attn; F.sdpa's own layout refused where the shapes show it. F.sdpa
given the flash layout without the transpose gives other numbers (the evidence for rule SC105)."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("jaxtyping")
pytest.importorskip("beartype")

import torch.nn.functional as F  # noqa: E402
from jaxtyping import TypeCheckError  # noqa: E402
from torch.nn.attention.bias import causal_lower_right  # noqa: E402

from shapecheck.reference import flash_attention, set_runtime_checks  # noqa: E402
from tests.reference import gap  # noqa: E402

BATCH, Q_LEN, K_LEN, HEADS, KV_HEADS, D_K, D_V = 2, 5, 7, 4, 2, 6, 3


def flash_inputs(
    dtype: torch.dtype, q_len: int, k_len: int, kv_heads: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v in ``[batch, seq, heads, head_dim]``."""
    return (
        torch.randn(BATCH, q_len, HEADS, D_K, dtype=dtype),
        torch.randn(BATCH, k_len, kv_heads, D_K, dtype=dtype),
        torch.randn(BATCH, k_len, kv_heads, D_V, dtype=dtype),
    )


@pytest.mark.parametrize("case", ["plain", "causal-square", "scale"])
@pytest.mark.parametrize("kv_heads", [HEADS, KV_HEADS], ids=["mha", "gqa"])
def test_flash_layout_is_sdpa_on_transposed_inputs(
    precision: tuple[torch.dtype, float], case: str, kv_heads: int
) -> None:
    dtype, tolerance = precision
    k_len = Q_LEN if case == "causal-square" else K_LEN
    q, k, v = flash_inputs(dtype, Q_LEN, k_len, kv_heads)
    causal = case == "causal-square"
    scale = 0.37 if case == "scale" else None
    expected = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        is_causal=causal,
        scale=scale,
        enable_gqa=kv_heads != HEADS,
    ).transpose(1, 2)
    actual = flash_attention(q, k, v, softmax_scale=scale, causal=causal, num_heads=HEADS)
    assert actual.shape == (BATCH, Q_LEN, HEADS, D_V)
    assert gap(actual, expected) <= tolerance
    if kv_heads == HEADS and not causal:
        # F.sdpa handed the flash layout as is attends over heads, for each position
        over_heads = F.scaled_dot_product_attention(q, k[:, :Q_LEN], v[:, :Q_LEN], scale=scale)
        assert gap(over_heads, flash_attention(q, k[:, :Q_LEN], v[:, :Q_LEN], 0.0, scale)) > 0.1


@pytest.mark.parametrize("kv_heads", [HEADS, KV_HEADS], ids=["mha", "gqa"])
def test_flash_causal_is_bottom_right_as_flash_attn(
    precision: tuple[torch.dtype, float], kv_heads: int
) -> None:
    """With fewer queries than keys, ``causal=True`` lets query ``i`` see the keys up to
    ``k_len - q_len + i`` (torch's ``causal_lower_right``), not F.sdpa's ``is_causal`` rows."""
    dtype, tolerance = precision
    q, k, v = flash_inputs(dtype, Q_LEN, K_LEN, kv_heads)
    transposed = [t.transpose(1, 2) for t in (q, k, v)]
    gqa = kv_heads != HEADS
    expected = F.scaled_dot_product_attention(
        *transposed, attn_mask=causal_lower_right(Q_LEN, K_LEN), enable_gqa=gqa
    ).transpose(1, 2)
    actual = flash_attention(q, k, v, causal=True)
    assert gap(actual, expected) <= tolerance
    top_left = F.scaled_dot_product_attention(*transposed, is_causal=True, enable_gqa=gqa)
    assert gap(top_left.transpose(1, 2), expected) > 0.1


def test_flash_output_is_contiguous_so_heads_merge_with_view() -> None:
    q, k, v = flash_inputs(torch.float32, Q_LEN, K_LEN, KV_HEADS)
    out = flash_attention(q, k, v)
    assert out.is_contiguous()
    assert torch.equal(out.view(BATCH, Q_LEN, HEADS * D_V), out.flatten(2))


def sdpa_layout() -> list[torch.Tensor]:
    """q, k, v in ``[batch, heads, seq, head_dim]``, the layout refused where it shows."""
    return [
        torch.randn(BATCH, HEADS, Q_LEN, D_K),
        torch.randn(BATCH, KV_HEADS, K_LEN, D_K),
        torch.randn(BATCH, KV_HEADS, K_LEN, D_V),
    ]


TRANSPOSED_HINT = (
    ": query, key and value look like [batch, heads, seq, head_dim] (F.sdpa's layout); this "
    "function takes [batch, seq, heads, head_dim]: pass them through .transpose(1, 2)"
)
ERRORS = {
    "sdpa-layout-with-num_heads": (
        lambda: flash_attention(*sdpa_layout(), num_heads=HEADS),
        "query: 5 heads on axis 2 of [batch, q_len, heads, d_k], expected num_heads=4"
        + TRANSPOSED_HINT,
    ),
    "sdpa-layout-without-num_heads": (
        lambda: flash_attention(*sdpa_layout()),
        "key: 7 heads on axis 2 of [batch, k_len, kv_heads, d_k], expected a divisor of "
        "query's 5 (grouped-query attention)" + TRANSPOSED_HINT,
    ),
    "other-num_heads": (
        lambda: flash_attention(*flash_inputs(torch.float32, Q_LEN, K_LEN, KV_HEADS), num_heads=8),
        "query: 4 heads on axis 2 of [batch, q_len, heads, d_k], expected num_heads=8",
    ),
    "kv-heads-that-do-not-divide": (
        lambda: flash_attention(*flash_inputs(torch.float32, Q_LEN, K_LEN, 3)),
        "key: 3 heads on axis 2 of [batch, k_len, kv_heads, d_k], expected a divisor of "
        "query's 4 (grouped-query attention)",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_name_the_argument_and_say_expected_and_actual(case: str) -> None:
    call, message = ERRORS[case]
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


def test_sdpa_layout_passes_through_transpose() -> None:
    """What the refusal asks for: the same tensors through ``.transpose(1, 2)`` are accepted
    and give F.sdpa's numbers on the original tensors."""
    inputs = sdpa_layout()
    out = flash_attention(*(t.transpose(1, 2) for t in inputs), num_heads=HEADS)
    expected = F.scaled_dot_product_attention(*inputs, enable_gqa=True)
    assert gap(out.transpose(1, 2), expected) <= 1e-5


def test_a_wrong_feature_size_fails_at_the_call() -> None:
    q, k, v = flash_inputs(torch.float32, Q_LEN, K_LEN, HEADS)
    with pytest.raises(TypeCheckError, match="parameter 'key'"):
        flash_attention(q, k[..., :-1], v)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_flash_attention_compiles_with_fullgraph(backend: str) -> None:
    set_runtime_checks(False)
    torch.compiler.reset()  # earlier tests' compilations count towards dynamo's recompile limit
    q, k, v = flash_inputs(torch.float32, Q_LEN, K_LEN, KV_HEADS)
    compiled = torch.compile(flash_attention, fullgraph=True, backend=backend)
    assert gap(compiled(q, k, v, causal=True), flash_attention(q, k, v, causal=True)) == 0.0
