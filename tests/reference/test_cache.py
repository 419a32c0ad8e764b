"""Decoding with a KV cache: the causal mask aligned at the bottom right equals torch's
``causal_lower_right`` and a written-out reference; a prompt then one token at a time equals one
causal call over the whole sequence; and F.sdpa's ``is_causal=True`` (top left) over a cache
lets a one-token query see key 0 only (the evidence for rule SC702)."""

from __future__ import annotations

import math
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("jaxtyping")
pytest.importorskip("beartype")

import torch.nn.functional as F  # noqa: E402
from jaxtyping import TypeCheckError  # noqa: E402
from torch.nn.attention.bias import causal_lower_right, causal_upper_left  # noqa: E402
from torch.testing import assert_close  # noqa: E402

from shapecheck.reference import (  # noqa: E402
    KVCache,
    MultiHeadAttention,
    apply_rotary,
    causal_mask,
    rotary_tables,
    scaled_dot_product_attention,
)
from tests.reference import gap  # noqa: E402

BATCH, HEADS, KV_HEADS, D_K, D_V = 2, 4, 2, 6, 5
D_MODEL = HEADS * D_K
STEPS = (3, 2, 1, 1)  # a prompt of 3 positions, then 2, then one at a time
SEQ = sum(STEPS)


def step_bounds() -> list[tuple[int, int]]:
    """``(start, end)`` of each decoding step's positions."""
    ends = [sum(STEPS[: index + 1]) for index in range(len(STEPS))]
    return list(zip([0, *ends[:-1]], ends, strict=True))


def written_out_decode(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Query ``i`` of ``q_len`` is at absolute position ``k_len - q_len + i`` and attends, one
    row at a time, to the keys at positions ``0`` through it."""
    q_len, k_len = query.size(-2), key.size(-2)
    rows = []
    for i in range(q_len):
        seen = k_len - q_len + i + 1
        scores = query[..., i : i + 1, :] @ key[..., :seen, :].mT / math.sqrt(query.size(-1))
        rows.append(scores.softmax(dim=-1) @ value[..., :seen, :])
    return torch.cat(rows, dim=-2)


@pytest.mark.parametrize(("q_len", "k_len"), [(3, 7), (7, 7), (1, 5), (7, 3)])
def test_causal_mask_in_both_alignments_is_written_out(q_len: int, k_len: int) -> None:
    for aligned, offset in (("top_left", 0), ("bottom_right", k_len - q_len)):
        expected = torch.tensor(
            [[j <= i + offset for j in range(k_len)] for i in range(q_len)], dtype=torch.bool
        )
        assert torch.equal(causal_mask(q_len, k_len, aligned=aligned), expected)
    top_left = causal_mask(q_len, k_len, aligned="top_left")
    bottom_right = causal_mask(q_len, k_len, aligned="bottom_right")
    assert torch.equal(top_left, bottom_right) == (q_len == k_len)


@pytest.mark.parametrize(("q_len", "k_len"), [(3, 7), (1, 7), (7, 7)])
@pytest.mark.parametrize("kv_heads", [HEADS, KV_HEADS], ids=["mha", "gqa"])
def test_bottom_right_is_torchs_causal_lower_right_and_the_written_out_decode(
    precision: tuple[torch.dtype, float], q_len: int, k_len: int, kv_heads: int
) -> None:
    dtype, tolerance = precision
    query = torch.randn(BATCH, HEADS, q_len, D_K, dtype=dtype)
    key = torch.randn(BATCH, kv_heads, k_len, D_K, dtype=dtype)
    value = torch.randn(BATCH, kv_heads, k_len, D_V, dtype=dtype)
    gqa = kv_heads != HEADS
    expected = F.scaled_dot_product_attention(
        query, key, value, attn_mask=causal_lower_right(q_len, k_len), enable_gqa=gqa
    )
    visible = causal_mask(q_len, k_len, aligned="bottom_right")
    actual = scaled_dot_product_attention(query, key, value, visible, enable_gqa=gqa)
    assert gap(actual, expected) <= tolerance
    groups = HEADS // kv_heads
    repeated = (t.repeat_interleave(groups, dim=1) for t in (key, value))
    assert gap(written_out_decode(query, *repeated), expected) <= tolerance
    # torch's bias objects are accepted as F.sdpa accepts them
    given_torchs = scaled_dot_product_attention(
        query, key, value, causal_lower_right(q_len, k_len), enable_gqa=gqa
    )
    assert gap(given_torchs, expected) <= tolerance
    upper_left = scaled_dot_product_attention(
        query, key, value, causal_upper_left(q_len, k_len), enable_gqa=gqa
    )
    is_causal = F.scaled_dot_product_attention(query, key, value, is_causal=True, enable_gqa=gqa)
    assert gap(upper_left, is_causal) <= tolerance
    if q_len != k_len:
        assert gap(upper_left, expected) > 0.1


def test_sdpas_is_causal_over_a_cache_lets_a_new_token_see_key_zero_only() -> None:
    """Rule SC702's evidence: F.sdpa's causal mask is aligned at the top left, so a one-token
    query after six cached positions attends to key 0 alone (its output is value 0), not to the
    seven keys it should see. Measured: 1.65 from the bottom-right reference (seed 0)."""
    query = torch.randn(BATCH, HEADS, 1, D_K)
    key = torch.randn(BATCH, HEADS, 7, D_K)
    value = torch.randn(BATCH, HEADS, 7, D_V)
    top_left = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    assert_close(top_left, value[..., :1, :])
    assert_close(scaled_dot_product_attention(query, key, value, is_causal=True), top_left)
    decoded = written_out_decode(query, key, value)
    assert_close(decoded, F.scaled_dot_product_attention(query, key, value))  # sees every key
    assert gap(top_left, decoded) > 1.0


def test_kv_cache_appends_along_the_sequence_axis() -> None:
    cache = KVCache()
    assert cache.length == 0
    keys = torch.randn(BATCH, KV_HEADS, SEQ, D_K)
    values = torch.randn(BATCH, KV_HEADS, SEQ, D_V)
    for start, end in step_bounds():
        all_keys, all_values = cache.update(keys[..., start:end, :], values[..., start:end, :])
        assert cache.length == end
        assert torch.equal(all_keys, keys[..., :end, :])
        assert torch.equal(all_values, values[..., :end, :])
    assert cache.key is not None and torch.equal(cache.key, keys)


CACHE_ERRORS = {
    "other-heads": (
        lambda: (torch.randn(BATCH, HEADS, 1, D_K), torch.randn(BATCH, HEADS, 1, D_V)),
        "key: shape [2, 4, 1, 6], expected [batch, kv_heads, new_len, d_k] = [2, 2, new_len, 6] "
        "as the cached keys",
    ),
    "other-value-width": (
        lambda: (torch.randn(BATCH, KV_HEADS, 1, D_K), torch.randn(BATCH, KV_HEADS, 1, D_V + 1)),
        "value: shape [2, 2, 1, 6], expected [batch, kv_heads, new_len, d_v] = [2, 2, new_len, 5] "
        "as the cached values",
    ),
    "other-dtype": (
        lambda: (
            torch.randn(BATCH, KV_HEADS, 1, D_K).half(),
            torch.randn(BATCH, KV_HEADS, 1, D_V).half(),
        ),
        "key: torch.float16 on cpu, expected the cached keys' torch.float32 on cpu",
    ),
}


@pytest.mark.parametrize("case", list(CACHE_ERRORS))
def test_a_step_unlike_the_cached_ones_is_refused_and_the_cache_kept(case: str) -> None:
    make_step, message = CACHE_ERRORS[case]
    cache = KVCache()
    cache.update(torch.randn(BATCH, KV_HEADS, 3, D_K), torch.randn(BATCH, KV_HEADS, 3, D_V))
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        cache.update(*make_step())
    assert cache.length == 3


def test_keys_and_values_of_different_lengths_fail_at_the_call() -> None:
    with pytest.raises(TypeCheckError, match="parameter 'value'"):
        KVCache().update(torch.randn(BATCH, KV_HEADS, 2, D_K), torch.randn(BATCH, KV_HEADS, 3, D_V))


def test_prefill_then_decode_with_rotary_and_gqa_is_one_causal_call(
    precision: tuple[torch.dtype, float],
) -> None:
    """Functions only: rotate at absolute positions, append to the cache, attend with the
    bottom-right mask. Two bugs give other numbers: F.sdpa's ``is_causal=True`` over the cache
    (rule SC702) and positions restarted at 0 in each step (a cache offset forgotten)."""
    dtype, tolerance = precision
    query = torch.randn(BATCH, HEADS, SEQ, D_K, dtype=dtype)
    key = torch.randn(BATCH, KV_HEADS, SEQ, D_K, dtype=dtype)
    value = torch.randn(BATCH, KV_HEADS, SEQ, D_V, dtype=dtype)

    def rotate(x: torch.Tensor, start_pos: int) -> torch.Tensor:
        cos, sin = rotary_tables(D_K, x.size(-2), start_pos=start_pos, dtype=dtype)
        return apply_rotary(x, cos, sin, interleaved=False)

    expected = F.scaled_dot_product_attention(
        rotate(query, 0), rotate(key, 0), value, is_causal=True, enable_gqa=True
    )

    def decode(*, aligned: str, restart_positions: bool) -> torch.Tensor:
        cache, rows = KVCache(), []
        for start, end in step_bounds():
            position = 0 if restart_positions else start
            q = rotate(query[..., start:end, :], position)
            k, v = cache.update(rotate(key[..., start:end, :], position), value[..., start:end, :])
            if aligned == "top_left":
                rows.append(scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
            else:
                visible = causal_mask(end - start, end, aligned="bottom_right")
                rows.append(scaled_dot_product_attention(q, k, v, visible, enable_gqa=True))
        return torch.cat(rows, dim=-2)

    assert gap(decode(aligned="bottom_right", restart_positions=False), expected) <= tolerance
    assert gap(decode(aligned="top_left", restart_positions=False), expected) > 0.1
    assert gap(decode(aligned="bottom_right", restart_positions=True), expected) > 0.1


@pytest.mark.parametrize("rotary", [None, "half_split", "interleaved"])
@pytest.mark.parametrize("kv_heads", [HEADS, KV_HEADS], ids=["mha", "gqa"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_module_with_a_cache_decodes_as_one_causal_call(
    precision: tuple[torch.dtype, float], rotary: str | None, kv_heads: int, need_weights: bool
) -> None:
    dtype, tolerance = precision
    module = MultiHeadAttention(
        D_MODEL,
        HEADS,
        num_kv_heads=kv_heads,
        rotary=rotary,  # type: ignore[arg-type]
    )
    module = module.to(dtype).eval()
    x = torch.randn(BATCH, SEQ, D_MODEL, dtype=dtype)
    cache = KVCache()
    with torch.no_grad():
        expected, expected_weights = module(x, x, x, is_causal=True, need_weights=True)
        for start, end in step_bounds():
            step = x[:, start:end]
            out, weights = module(
                step, step, step, is_causal=True, cache=cache, need_weights=need_weights
            )
            assert gap(out, expected[:, start:end]) <= tolerance
            if need_weights:
                assert gap(weights, expected_weights[:, start:end, :end]) <= tolerance
            else:
                assert weights is None
        assert cache.length == SEQ
        assert cache.key is not None and cache.key.shape == (BATCH, kv_heads, SEQ, D_K)
        # without is_causal every step sees every cached key, which one call over all does not
        cache = KVCache()
        module(x[:, :3], x[:, :3], x[:, :3], cache=cache)
        step = x[:, 3:5]
        assert gap(module(step, step, step, cache=cache), expected[:, 3:5]) > 1e-3


def test_module_masks_span_every_cached_key(precision: tuple[torch.dtype, float]) -> None:
    """With a cache, ``key_padding_mask`` is ``[batch, k_len]`` over all cached positions: a
    left-padded prompt decodes as one call with the whole mask."""
    dtype, tolerance = precision
    module = MultiHeadAttention(D_MODEL, HEADS, num_kv_heads=KV_HEADS, rotary="half_split")
    module = module.to(dtype).eval()
    x = torch.randn(BATCH, SEQ, D_MODEL, dtype=dtype)
    padding = torch.zeros(BATCH, SEQ, dtype=torch.bool)
    padding[1, :2] = True  # batch 1's prompt is left-padded by two positions
    cache = KVCache()
    with torch.no_grad():
        expected = module(x, x, x, key_padding_mask=padding, is_causal=True)
        for start, end in step_bounds():
            step = x[:, start:end]
            out = module(
                step, step, step, key_padding_mask=padding[:, :end], is_causal=True, cache=cache
            )
            assert gap(out, expected[:, start:end]) <= tolerance
        unpadded = module(x, x, x, is_causal=True)
    assert gap(unpadded[1], expected[1]) > 1e-3


MODULE_ERRORS = {
    "key-of-other-length": (
        lambda m, x, cache: m(x[:, :1], x[:, :2], x[:, :2], cache=cache),
        "key: 2 positions, expected query's 1: with a cache, key and value are the new tokens' "
        "own (self-attention), appended to the cache",
    ),
    "padding-of-the-new-positions-only": (
        lambda m, x, cache: m(
            x[:, :1],
            x[:, :1],
            x[:, :1],
            key_padding_mask=torch.zeros(BATCH, 1, dtype=torch.bool),
            cache=cache,
        ),
        "key_padding_mask: shape [2, 1], expected [batch, k_len] = [2, 4]",
    ),
}


@pytest.mark.parametrize("case", list(MODULE_ERRORS))
def test_module_cache_errors_name_the_argument_and_keep_the_cache(case: str) -> None:
    call, message = MODULE_ERRORS[case]
    module = MultiHeadAttention(D_MODEL, HEADS, num_kv_heads=KV_HEADS)
    x = torch.randn(BATCH, SEQ, D_MODEL)
    cache = KVCache()
    module(x[:, :3], x[:, :3], x[:, :3], cache=cache)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call(module, x, cache)
    assert cache.length == 3


def test_alignment_and_torch_bias_errors_name_the_argument() -> None:
    with pytest.raises(
        ValueError, match=r"^aligned: 'bottom-right', expected 'top_left' or 'bottom_right'$"
    ):
        causal_mask(2, 5, aligned="bottom-right")  # type: ignore[arg-type]
    query, key = torch.randn(HEADS, 3, D_K), torch.randn(HEADS, 5, D_K)
    with pytest.raises(
        ValueError,
        match=re.escape("attn_mask: a causal bias for [q_len, k_len] = [2, 5], expected [3, 5]"),
    ):
        scaled_dot_product_attention(query, key, key, causal_lower_right(2, 5))
