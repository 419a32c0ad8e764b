"""The reference modules speak torch's API: torch's mask names and polarities, need_weights,
grouped-query attention, a converter from nn.MultiheadAttention, torch's fully masked rows, and
errors that name the wrong argument. Each equality is checked against torch's own modules and
shown to fail when the thing it checks is wrong (a flipped mask, another head order)."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("jaxtyping")
pytest.importorskip("beartype")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from shapecheck.reference import (  # noqa: E402
    MultiHeadAttention,
    scaled_dot_product_attention,
    set_runtime_checks,
)
from tests.reference import gap  # noqa: E402

BATCH, Q_LEN, K_LEN, HEADS, KV_HEADS, D_K = 2, 5, 7, 4, 2, 3
D_MODEL = HEADS * D_K


def torch_module(dtype: torch.dtype, **options: object) -> nn.MultiheadAttention:
    """A random nn.MultiheadAttention, biases random too (torch initialises them to zero)."""
    module = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True, **options).to(dtype)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if name.endswith("bias"):
                parameter.normal_()
    return module.eval()


def blocked_somewhere(*shape: int) -> torch.Tensor:
    """A boolean mask in torch's MHA polarity (True = do NOT attend) that leaves key 0 to every
    query, so no row is fully blocked (torch's module gives NaN for those)."""
    blocked = torch.rand(*shape) > 0.6
    blocked[..., 0] = False
    return blocked


def inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(BATCH, Q_LEN, D_MODEL, dtype=dtype), torch.randn(
        BATCH, K_LEN, D_MODEL, dtype=dtype
    )


MHA_MASKS = {
    "none": lambda dtype: {},
    "key-padding-bool": lambda dtype: {"key_padding_mask": blocked_somewhere(BATCH, K_LEN)},
    "key-padding-float": lambda dtype: {"key_padding_mask": torch.randn(BATCH, K_LEN, dtype=dtype)},
    "attn-mask-bool": lambda dtype: {"attn_mask": blocked_somewhere(Q_LEN, K_LEN)},
    "attn-mask-per-head": lambda dtype: {
        "attn_mask": blocked_somewhere(BATCH * HEADS, Q_LEN, K_LEN)
    },
    "attn-mask-float": lambda dtype: {"attn_mask": torch.randn(Q_LEN, K_LEN, dtype=dtype)},
    "both-bool": lambda dtype: {
        "attn_mask": blocked_somewhere(Q_LEN, K_LEN),
        "key_padding_mask": blocked_somewhere(BATCH, K_LEN),
    },
    "bool-and-float": lambda dtype: {
        "attn_mask": torch.randn(Q_LEN, K_LEN, dtype=dtype),
        "key_padding_mask": blocked_somewhere(BATCH, K_LEN),
    },
}


def flipped(masks: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same masks read in the other polarity: booleans inverted (floats have none)."""
    return {name: ~mask if mask.dtype == torch.bool else mask for name, mask in masks.items()}


@pytest.mark.parametrize("case", list(MHA_MASKS))
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")  # bool-and-float
def test_torch_masks_in_torch_polarity_give_nn_multihead_attentions_numbers(
    precision: tuple[torch.dtype, float], case: str, need_weights: bool
) -> None:
    dtype, tolerance = precision
    theirs = torch_module(dtype)
    ours = MultiHeadAttention.from_torch(theirs)
    query, memory = inputs(dtype)
    masks = MHA_MASKS[case](dtype)
    with torch.no_grad():
        expected, expected_weights = theirs(
            query, memory, memory, need_weights=need_weights, **masks
        )
        actual, weights = ours(query, memory, memory, need_weights=need_weights, **masks)
        assert gap(actual, expected) <= tolerance
        if need_weights:
            assert gap(weights, expected_weights) <= tolerance
        else:
            assert weights is None and expected_weights is None
        if any(mask.dtype == torch.bool for mask in masks.values()):
            # the comparison sees the polarity: the other one gives other numbers
            other, _ = ours(query, memory, memory, need_weights=need_weights, **flipped(masks))
            assert gap(other, expected) > 1e-3


def test_per_head_attn_mask_is_batch_major_as_torch(precision: tuple[torch.dtype, float]) -> None:
    """``[batch * heads, q_len, k_len]`` row ``b * heads + h`` is batch b's head h."""
    dtype, tolerance = precision
    theirs = torch_module(dtype)
    ours = MultiHeadAttention.from_torch(theirs)
    query, memory = inputs(dtype)
    blocked = blocked_somewhere(BATCH * HEADS, Q_LEN, K_LEN)
    head_major = blocked.view(BATCH, HEADS, Q_LEN, K_LEN).transpose(0, 1).reshape_as(blocked)
    with torch.no_grad():
        expected, _ = theirs(query, memory, memory, attn_mask=blocked, need_weights=False)
        assert gap(ours(query, memory, memory, attn_mask=blocked), expected) <= tolerance
        assert gap(ours(query, memory, memory, attn_mask=head_major), expected) > 1e-3


@pytest.mark.parametrize("average", [True, False])
def test_need_weights_returns_torchs_tuple_and_weights(
    precision: tuple[torch.dtype, float], average: bool
) -> None:
    dtype, tolerance = precision
    theirs = torch_module(dtype)
    ours = MultiHeadAttention.from_torch(theirs)
    query, memory = inputs(dtype)
    blocked = blocked_somewhere(BATCH, K_LEN)
    with torch.no_grad():
        expected, expected_weights = theirs(
            query,
            memory,
            memory,
            key_padding_mask=blocked,
            need_weights=True,
            average_attn_weights=average,
        )
        actual, weights = ours(
            query,
            memory,
            memory,
            key_padding_mask=blocked,
            need_weights=True,
            average_attn_weights=average,
        )
        alone = ours(query, memory, memory, key_padding_mask=blocked)
    assert isinstance(alone, torch.Tensor)  # need_weights not given: the output alone
    assert gap(alone, expected) <= tolerance
    assert gap(actual, expected) <= tolerance
    assert weights.shape == ((BATCH, Q_LEN, K_LEN) if average else (BATCH, HEADS, Q_LEN, K_LEN))
    assert gap(weights, expected_weights) <= tolerance
    padded = blocked[:, None, :] if average else blocked[:, None, None, :]
    assert float(weights.masked_select(padded.expand_as(weights)).abs().max()) == 0.0
    assert gap(weights.sum(-1), torch.ones_like(weights.sum(-1))) <= tolerance


def test_own_mask_is_true_where_attending(precision: tuple[torch.dtype, float]) -> None:
    """``mask=`` reads True as *attend*: the inverse of torch's masks gives torch's numbers."""
    dtype, tolerance = precision
    theirs = torch_module(dtype)
    ours = MultiHeadAttention.from_torch(theirs)
    query, memory = inputs(dtype)
    padding, blocked = blocked_somewhere(BATCH, K_LEN), blocked_somewhere(Q_LEN, K_LEN)
    with torch.no_grad():
        for torch_masks, keep in [
            ({"key_padding_mask": padding}, ~padding),
            ({"attn_mask": blocked}, ~blocked),
        ]:
            expected, _ = theirs(query, memory, memory, need_weights=False, **torch_masks)
            assert gap(ours(query, memory, memory, mask=keep), expected) <= tolerance
            assert gap(ours(query, memory, memory, mask=~keep), expected) > 1e-3


def test_is_causal_applies_the_causal_mask_and_agrees_with_torchs_hint(
    precision: tuple[torch.dtype, float],
) -> None:
    """torch's module needs the causal ``attn_mask`` with its ``is_causal`` hint; ours applies
    the mask itself, with or without it."""
    dtype, tolerance = precision
    theirs = torch_module(dtype)
    ours = MultiHeadAttention.from_torch(theirs)
    x, _ = inputs(dtype)
    future = torch.ones(Q_LEN, Q_LEN, dtype=torch.bool).triu(1)
    with torch.no_grad():
        expected, _ = theirs(x, x, x, attn_mask=future, is_causal=True, need_weights=False)
        assert gap(ours(x, x, x, is_causal=True), expected) <= tolerance
        assert gap(ours(x, x, x, attn_mask=future, is_causal=True), expected) <= tolerance
        assert gap(ours(x, x, x), expected) > 1e-3


@pytest.mark.parametrize(
    "options",
    [{}, {"bias": False}, {"kdim": 5, "vdim": 6}, {"kdim": 5, "vdim": 6, "bias": False}],
    ids=["fused", "no-bias", "kdim-vdim", "kdim-vdim-no-bias"],
)
def test_from_torch_copies_the_weights(
    precision: tuple[torch.dtype, float], options: dict[str, object]
) -> None:
    dtype, tolerance = precision
    theirs = torch_module(dtype, **options)
    ours = MultiHeadAttention.from_torch(theirs)
    query = torch.randn(BATCH, Q_LEN, D_MODEL, dtype=dtype)
    key = torch.randn(BATCH, K_LEN, theirs.kdim, dtype=dtype)
    value = torch.randn(BATCH, K_LEN, theirs.vdim, dtype=dtype)
    unconverted = MultiHeadAttention(
        D_MODEL, HEADS, bias=theirs.in_proj_bias is not None, kdim=theirs.kdim, vdim=theirs.vdim
    ).to(dtype)
    with torch.no_grad():
        expected, _ = theirs(query, key, value, need_weights=False)
        assert gap(ours(query, key, value), expected) <= tolerance
        assert gap(unconverted(query, key, value), expected) > 1e-3
    assert (ours.fc_out.bias is None) == ("bias" in options)


def test_from_torch_keeps_dropout_and_training_mode() -> None:
    theirs = nn.MultiheadAttention(D_MODEL, HEADS, dropout=0.25, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.training and ours.dropout == 0.25
    assert not MultiHeadAttention.from_torch(theirs.eval()).training


@pytest.mark.parametrize("option", ["add_bias_kv", "add_zero_attn"])
def test_from_torch_refuses_what_it_cannot_copy(option: str) -> None:
    theirs = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True, **{option: True})
    with pytest.raises(ValueError, match="add_bias_kv=True and add_zero_attn=True"):
        MultiHeadAttention.from_torch(theirs)


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal"])
def test_grouped_query_attention_is_torchs_enable_gqa(
    precision: tuple[torch.dtype, float], mask_kind: str
) -> None:
    dtype, tolerance = precision
    query = torch.randn(BATCH, HEADS, Q_LEN, D_K, dtype=dtype)
    key = torch.randn(BATCH, KV_HEADS, K_LEN, D_K, dtype=dtype)
    value = torch.randn(BATCH, KV_HEADS, K_LEN, D_K + 1, dtype=dtype)
    mask = {
        "none": None,
        "bool": ~blocked_somewhere(BATCH, 1, Q_LEN, K_LEN),
        "float": torch.randn(Q_LEN, K_LEN, dtype=dtype),
        "causal": None,
    }[mask_kind]
    causal = mask_kind == "causal"
    expected = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, is_causal=causal, enable_gqa=True
    )
    actual = scaled_dot_product_attention(
        query, key, value, mask, is_causal=causal, enable_gqa=True
    )
    assert gap(actual, expected) <= tolerance
    # heads repeated as a block (repeat) instead of each in place (repeat_interleave) differ
    groups = HEADS // KV_HEADS
    tiled = scaled_dot_product_attention(
        query, key.repeat(1, groups, 1, 1), value.repeat(1, groups, 1, 1), mask, is_causal=causal
    )
    assert gap(tiled, expected) > 1e-3


@pytest.mark.parametrize("need_weights", [False, True])
def test_num_kv_heads_is_grouped_query_attention_of_the_projections(
    precision: tuple[torch.dtype, float], need_weights: bool
) -> None:
    dtype, tolerance = precision
    module = MultiHeadAttention(D_MODEL, HEADS, num_kv_heads=KV_HEADS).to(dtype).eval()
    assert module.wk.out_features == module.wv.out_features == KV_HEADS * D_K
    query, memory = inputs(dtype)
    padding = blocked_somewhere(BATCH, K_LEN)

    def heads(x: torch.Tensor, count: int) -> torch.Tensor:
        return x.unflatten(-1, (count, D_K)).transpose(1, 2)

    with torch.no_grad():
        attended = F.scaled_dot_product_attention(
            heads(module.wq(query), HEADS),
            heads(module.wk(memory), KV_HEADS),
            heads(module.wv(memory), KV_HEADS),
            attn_mask=~padding[:, None, None, :],
            enable_gqa=True,
        )
        expected = module.fc_out(attended.transpose(1, 2).flatten(2))
        actual, _ = module(
            query, memory, memory, key_padding_mask=padding, need_weights=need_weights
        )
    assert gap(actual, expected) <= tolerance


@pytest.mark.parametrize(
    ("key_heads", "enable_gqa", "message"),
    [
        (KV_HEADS, False, r"key: batch axes \[2, 2\], expected query's \[2, 4\] \(grouped-query"),
        (3, True, r"key: batch axes \[2, 3\], expected query's \[2, 4\] with a number of heads"),
        (3, False, r"key: batch axes \[2, 3\], expected query's \[2, 4\]$"),
    ],
    ids=["fewer-heads-without-enable-gqa", "heads-that-do-not-divide", "other-heads"],
)
def test_key_heads_that_do_not_fit_are_named(
    key_heads: int, enable_gqa: bool, message: str
) -> None:
    query = torch.randn(BATCH, HEADS, Q_LEN, D_K)
    key = torch.randn(BATCH, key_heads, K_LEN, D_K)
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(query, key, key, enable_gqa=enable_gqa)


def test_num_kv_heads_must_divide_num_heads() -> None:
    with pytest.raises(
        ValueError, match=r"num_heads \(4\) must be divisible by num_kv_heads \(3\)"
    ):
        MultiHeadAttention(D_MODEL, HEADS, num_kv_heads=3)


@pytest.mark.parametrize(
    "encoding", ["bool", "minus-inf", "causal-and-bool"], ids=lambda encoding: encoding
)
def test_fully_masked_row_is_zero_as_torchs_sdpa(
    precision: tuple[torch.dtype, float], encoding: str
) -> None:
    dtype, tolerance = precision
    query = torch.randn(BATCH, HEADS, Q_LEN, D_K, dtype=dtype)
    key = torch.randn(BATCH, HEADS, K_LEN, D_K, dtype=dtype)
    value = torch.randn(BATCH, HEADS, K_LEN, D_K, dtype=dtype)
    allowed = ~blocked_somewhere(Q_LEN, K_LEN)
    allowed[2] = False  # query 2 attends to nothing
    mask: torch.Tensor = allowed
    if encoding == "minus-inf":
        mask = torch.zeros(Q_LEN, K_LEN, dtype=dtype).masked_fill(~allowed, float("-inf"))
    causal = encoding == "causal-and-bool"
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=causal)
    actual = scaled_dot_product_attention(query, key, value, mask, is_causal=causal)
    assert gap(actual, expected) <= tolerance
    assert float(actual[..., 2, :].abs().max()) == 0.0
    # the mean of value, what a fill with the dtype's minimum gives, is something else
    assert gap(value.mean(dim=-2), actual[..., 2, :]) > 1e-3


def test_a_finite_minimum_is_not_blocked(precision: tuple[torch.dtype, float]) -> None:
    """A float mask of finfo.min everywhere leaves the row uniform: the mean of value, as
    torch's F.sdpa gives too."""
    dtype, tolerance = precision
    query = torch.randn(BATCH, Q_LEN, D_K, dtype=dtype)
    key = torch.randn(BATCH, K_LEN, D_K, dtype=dtype)
    value = torch.randn(BATCH, K_LEN, D_K, dtype=dtype)
    mask = torch.zeros(Q_LEN, K_LEN, dtype=dtype)
    mask[2] = torch.finfo(dtype).min
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    actual = scaled_dot_product_attention(query, key, value, mask)
    assert gap(actual, expected) <= tolerance
    assert gap(actual[:, 2], value.mean(dim=1)) <= tolerance


def test_fully_masked_row_has_finite_gradients() -> None:
    query = torch.randn(Q_LEN, D_K, requires_grad=True)
    key = torch.randn(K_LEN, D_K, requires_grad=True)
    mask = torch.zeros(Q_LEN, K_LEN).masked_fill(torch.rand(Q_LEN, K_LEN) > 0.5, float("-inf"))
    mask[2] = float("-inf")
    scaled_dot_product_attention(query, key, key, mask).sum().backward()
    assert query.grad is not None and key.grad is not None
    assert bool(query.grad.isfinite().all()) and bool(key.grad.isfinite().all())
    assert float(query.grad[2].abs().max()) == 0.0  # a query that sees nothing learns nothing


def test_fully_masked_row_in_the_module_is_torchs_sdpa_not_nan(
    precision: tuple[torch.dtype, float],
) -> None:
    """torch's module gives NaN in eval mode (and with weights), zeros in training mode without
    weights, the F.sdpa path; ours always the latter: the row's output is fc_out's bias."""
    dtype, tolerance = precision
    theirs = torch_module(dtype)
    ours = MultiHeadAttention.from_torch(theirs)
    query, memory = inputs(dtype)
    padding = blocked_somewhere(BATCH, K_LEN)
    padding[1] = True  # batch 1 has no key at all
    with torch.no_grad():
        # with the weights computed, as torch's NaN needs them (SC603 rightly sees them unused)
        in_eval, _ = theirs(  # shapecheck: ignore[SC603]
            query, memory, memory, key_padding_mask=padding
        )
        assert bool(in_eval[1].isnan().all()) and bool(in_eval[0].isfinite().all())
        expected, _ = theirs.train()(
            query, memory, memory, key_padding_mask=padding, need_weights=False
        )
        actual, weights = ours(query, memory, memory, key_padding_mask=padding, need_weights=True)
        assert gap(actual[1], ours.fc_out.bias.expand(Q_LEN, D_MODEL)) == 0.0
    assert gap(actual, expected) <= tolerance
    assert float(weights[1].abs().max()) == 0.0


def test_float32_mask_on_float16_query_is_accepted_as_torch() -> None:
    torch.manual_seed(0)
    query, key, value = (torch.randn(BATCH, HEADS, Q_LEN, D_K).half() for _ in range(3))
    mask = torch.randn(Q_LEN, Q_LEN)
    mask[2] = -1e9  # beyond float16's range, finite in float32: uniform weights, as in torch
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    actual = scaled_dot_product_attention(query, key, value, mask)
    assert actual.dtype == torch.float16
    assert gap(actual, expected) <= 2e-3
    module = MultiHeadAttention(D_MODEL, HEADS).half().eval()
    x = torch.randn(BATCH, Q_LEN, D_MODEL).half()
    with torch.no_grad():
        out, weights = module(x, x, x, attn_mask=mask, need_weights=True)
        assert gap(out, module(x, x, x, attn_mask=mask)) <= 2e-3
    assert out.dtype == weights.dtype == torch.float16


def test_masks_are_passed_by_keyword_so_a_positional_one_has_no_polarity_to_guess() -> None:
    """torch's fourth positional argument is a key padding mask (True = ignore); reading it as
    ``mask`` (True = attend) would flip it silently, so no mask is positional."""
    module = MultiHeadAttention(D_MODEL, HEADS)
    query, memory = inputs(torch.float32)
    with pytest.raises(TypeError, match="positional"):
        module(query, memory, memory, blocked_somewhere(BATCH, K_LEN))


def test_one_polarity_per_call() -> None:
    module = MultiHeadAttention(D_MODEL, HEADS)
    query, memory = inputs(torch.float32)
    padding = blocked_somewhere(BATCH, K_LEN)
    with pytest.raises(ValueError, match=re.escape("pass mask= (True = attend) or")):
        module(query, memory, memory, mask=~padding, key_padding_mask=padding)


MODULE_ERRORS = {
    "query-width": (
        lambda m, q, kv: m(q[..., :-1], kv, kv),
        "query: last axis 11, this module was built with d_model=12",
    ),
    "key-width": (
        lambda m, q, kv: m(q, kv[..., :-1], kv),
        "key: last axis 11, this module was built with d_model=12",
    ),
    "key-padding-length": (
        lambda m, q, kv: m(
            q, kv, kv, key_padding_mask=torch.zeros(BATCH, K_LEN - 1, dtype=torch.bool)
        ),
        "key_padding_mask: shape [2, 6], expected [batch, k_len] = [2, 7]",
    ),
    "attn-mask-length": (
        lambda m, q, kv: m(q, kv, kv, attn_mask=torch.zeros(Q_LEN, K_LEN - 1, dtype=torch.bool)),
        "attn_mask: shape [5, 6], expected [q_len, k_len] = [5, 7] "
        "or [batch * heads, q_len, k_len] = [8, 5, 7]",
    ),
    "mask-length": (
        lambda m, q, kv: m(
            q, kv, kv, mask=torch.ones(BATCH, 1, Q_LEN, K_LEN - 1, dtype=torch.bool)
        ),
        "mask: shape [2, 1, 5, 6] does not broadcast to [batch, heads, q_len, k_len] = "
        "[2, 4, 5, 7], nor is it key padding [batch, k_len] = [2, 7]",
    ),
}


@pytest.mark.parametrize("case", list(MODULE_ERRORS))
def test_errors_name_the_argument_and_say_expected_and_actual(case: str) -> None:
    call, message = MODULE_ERRORS[case]
    module = MultiHeadAttention(D_MODEL, HEADS)
    query, memory = inputs(torch.float32)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call(module, query, memory)


def test_a_width_error_names_kdim_when_the_module_was_built_with_one() -> None:
    module = MultiHeadAttention(D_MODEL, HEADS, kdim=5, vdim=6)
    query = torch.randn(BATCH, Q_LEN, D_MODEL)
    key, value = torch.randn(BATCH, K_LEN, 5), torch.randn(BATCH, K_LEN, 6)
    module(query, key, value)
    with pytest.raises(
        ValueError, match=r"^value: last axis 5, this module was built with vdim=6$"
    ):
        module(query, key, key)


def test_a_two_dimensional_mask_that_could_be_either_is_refused() -> None:
    module = MultiHeadAttention(D_MODEL, HEADS)
    x = torch.randn(Q_LEN, Q_LEN, D_MODEL)  # batch == q_len == k_len
    keep = ~blocked_somewhere(Q_LEN, Q_LEN)
    with pytest.raises(ValueError, match=r"mask: shape \[5, 5\] is both key padding"):
        module(x, x, x, mask=keep)
    # said explicitly, each reading is accepted and they differ
    padding = module(x, x, x, mask=keep[:, None, None, :])
    per_query = module(x, x, x, mask=keep[None])
    assert gap(padding, per_query) > 1e-3


SEQUENCE_FIRST = {
    "key_padding_mask": {"key_padding_mask": torch.zeros(BATCH, Q_LEN, dtype=torch.bool)},
    "mask": {"mask": torch.ones(BATCH, Q_LEN, dtype=torch.bool)},
    "attn_mask": {"attn_mask": torch.zeros(Q_LEN, Q_LEN, dtype=torch.bool)},
}


@pytest.mark.parametrize("name", list(SEQUENCE_FIRST))
def test_sequence_first_input_is_told_apart_by_its_mask(name: str) -> None:
    module = MultiHeadAttention(D_MODEL, HEADS)
    batch_first = torch.randn(BATCH, Q_LEN, D_MODEL)
    sequence_first = batch_first.transpose(0, 1)  # [seq, batch, d_model], as torch's default
    masks = SEQUENCE_FIRST[name]
    module(batch_first, batch_first, batch_first, **masks)  # the layout it was made for
    with pytest.raises(ValueError, match=rf"^{name}: .* look sequence-first"):
        module(sequence_first, sequence_first, sequence_first, **masks)


def test_enable_gqa_needs_a_heads_axis() -> None:
    flat = torch.randn(Q_LEN, D_K)
    with pytest.raises(ValueError, match=r"^query: 2-D, but enable_gqa repeats key/value heads"):
        scaled_dot_product_attention(flat, flat, flat, enable_gqa=True)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_masks_weights_and_kv_heads_compile_with_fullgraph(backend: str) -> None:
    set_runtime_checks(False)
    module = MultiHeadAttention(D_MODEL, HEADS, num_kv_heads=KV_HEADS).eval()
    compiled = torch.compile(module, fullgraph=True, backend=backend)
    query, memory = inputs(torch.float32)
    masks = {"key_padding_mask": blocked_somewhere(BATCH, K_LEN), "is_causal": True}
    with torch.no_grad():
        assert (
            gap(compiled(query, memory, memory, **masks), module(query, memory, memory, **masks))
            == 0.0
        )
        out, weights = compiled(query, memory, memory, need_weights=True, **masks)
        expected, expected_weights = module(query, memory, memory, need_weights=True, **masks)
    assert gap(out, expected) == 0.0 and gap(weights, expected_weights) == 0.0
