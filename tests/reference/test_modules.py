"""The reference modules: same numbers as PyTorch's own attention, clear errors on bad shapes."""

from __future__ import annotations

from typing import Annotated

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("jaxtyping")
pytest.importorskip("beartype")

import torch.nn.functional as F  # noqa: E402
from beartype.vale import Is  # noqa: E402
from jaxtyping import TypeCheckError  # noqa: E402

from shapecheck.reference import (  # noqa: E402
    MultiHeadAttention,
    OutputLayer,
    SelfAttention,
    TransformerEmbedding,
    scaled_dot_product_attention,
    set_runtime_checks,
)
from shapecheck.reference.checking import shape_checked  # noqa: E402
from tests.conftest import run_python  # noqa: E402
from tests.reference import gap  # noqa: E402

BATCH, Q_LEN, K_LEN, HEADS, D_K, D_V = 2, 5, 7, 3, 4, 6
D_MODEL = HEADS * D_K

DEVICE_PRECISIONS = [
    ("cpu", torch.float64, 1e-10),
    ("cpu", torch.float32, 1e-5),
    ("cpu", torch.bfloat16, 5e-2),
    ("cuda", torch.float32, 1e-4),
    ("cuda", torch.float16, 1e-2),
    ("cuda", torch.bfloat16, 5e-2),
]
"""(device, dtype, tolerance): fp64/fp32 tight, reduced precision loose; wider than the other
reference tests' ``precision``: devices and the reduced precisions too."""
DEVICE_PRECISION_IDS = [
    f"{device}-{str(dtype).removeprefix('torch.')}" for device, dtype, _ in DEVICE_PRECISIONS
]


@pytest.fixture(params=DEVICE_PRECISIONS, ids=DEVICE_PRECISION_IDS)
def device_precision(request: pytest.FixtureRequest) -> tuple[str, torch.dtype, float]:
    device, dtype, tolerance = request.param
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return device, dtype, tolerance


def torch_mha(ours: MultiHeadAttention) -> torch.nn.MultiheadAttention:
    """nn.MultiheadAttention holding exactly our weights."""
    theirs = torch.nn.MultiheadAttention(ours.d_model, ours.num_heads, batch_first=True)
    theirs = theirs.to(device=ours.wq.weight.device, dtype=ours.wq.weight.dtype)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.wq.weight, ours.wk.weight, ours.wv.weight]))
        assert theirs.in_proj_bias is not None
        theirs.in_proj_bias.copy_(torch.cat([ours.wq.bias, ours.wk.bias, ours.wv.bias]))
        theirs.out_proj.weight.copy_(ours.fc_out.weight)
        theirs.out_proj.bias.copy_(ours.fc_out.bias)
    return theirs.eval()


@pytest.mark.parametrize("case", ["self", "cross", "bool-mask", "key-padding", "causal"])
def test_multi_head_attention_matches_torch(
    device_precision: tuple[str, torch.dtype, float], case: str
) -> None:
    device, dtype, tolerance = device_precision
    ours = MultiHeadAttention(D_MODEL, HEADS).to(device=device, dtype=dtype).eval()
    theirs = torch_mha(ours)
    k_len = Q_LEN if case in ("self", "causal") else K_LEN
    query = torch.randn(BATCH, Q_LEN, D_MODEL, device=device, dtype=dtype)
    memory = (
        query if k_len == Q_LEN else torch.randn(BATCH, k_len, D_MODEL, device=device, dtype=dtype)
    )
    mask = None
    kwargs: dict[str, object] = {}
    if case == "bool-mask":
        mask = torch.rand(Q_LEN, k_len, device=device) > 0.3
        mask[:, 0] = True  # every query sees at least one key
        kwargs = {"attn_mask": ~mask}
    elif case == "key-padding":
        mask = torch.ones(BATCH, k_len, dtype=torch.bool, device=device)
        mask[0, -3:] = False
        kwargs = {"key_padding_mask": ~mask}
    elif case == "causal":
        visible = torch.ones(Q_LEN, Q_LEN, dtype=torch.bool, device=device).tril()
        kwargs = {"attn_mask": ~visible}
    with torch.no_grad():
        expected, _ = theirs(query, memory, memory, need_weights=False, **kwargs)
        actual = ours(query, memory, memory, mask=mask, is_causal=case == "causal")
    assert gap(actual, expected) <= tolerance


@pytest.mark.parametrize("mask_kind", ["bool", "float", "key-padding"])
def test_multi_head_attention_is_the_reference_function_per_head(
    device_precision: tuple[str, torch.dtype, float], mask_kind: str
) -> None:
    """The module (PyTorch's fused kernel inside) equals the written-out formula, causal too."""
    device, dtype, tolerance = device_precision
    module = MultiHeadAttention(D_MODEL, HEADS).to(device=device, dtype=dtype).eval()
    x = torch.randn(BATCH, Q_LEN, D_MODEL, device=device, dtype=dtype)
    if mask_kind == "bool":
        mask = torch.rand(BATCH, 1, Q_LEN, Q_LEN, device=device) > 0.3
        mask[..., 0] = True
        per_head = mask
    elif mask_kind == "float":
        mask = torch.randn(Q_LEN, Q_LEN, device=device, dtype=dtype)
        per_head = mask
    else:
        mask = torch.ones(BATCH, Q_LEN, dtype=torch.bool, device=device)
        mask[1, 2:] = False
        per_head = mask[:, None, None, :]

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(BATCH, Q_LEN, HEADS, D_K).transpose(1, 2)

    with torch.no_grad():
        attended = scaled_dot_product_attention(
            heads(module.wq(x)), heads(module.wk(x)), heads(module.wv(x)), per_head, is_causal=True
        )
        expected = module.fc_out(attended.transpose(1, 2).reshape(BATCH, Q_LEN, D_MODEL))
        actual = module(x, x, x, mask=mask, is_causal=True)
    assert gap(actual, expected) <= tolerance


@pytest.mark.parametrize(
    "case", ["plain", "bool-mask", "float-mask", "causal-square", "causal-wide", "scale", "3d"]
)
def test_scaled_dot_product_attention_matches_torch(
    device_precision: tuple[str, torch.dtype, float], case: str
) -> None:
    device, dtype, tolerance = device_precision
    batch = (BATCH * HEADS,) if case == "3d" else (BATCH, HEADS)
    q_len = K_LEN if case == "causal-square" else Q_LEN
    q = torch.randn(*batch, q_len, D_K, device=device, dtype=dtype)
    k = torch.randn(*batch, K_LEN, D_K, device=device, dtype=dtype)
    v = torch.randn(*batch, K_LEN, D_V, device=device, dtype=dtype)
    mask = None
    kwargs: dict[str, object] = {}
    if case == "bool-mask":
        mask = torch.rand(BATCH, 1, q_len, K_LEN, device=device) > 0.3
        mask[..., 0] = True
    elif case == "float-mask":
        mask = torch.randn(q_len, K_LEN, device=device, dtype=dtype)
    elif case.startswith("causal"):
        kwargs = {"is_causal": True}
    elif case == "scale":
        kwargs = {"scale": 0.37}
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)
    actual = scaled_dot_product_attention(q, k, v, mask, **kwargs)  # type: ignore[arg-type]
    assert gap(actual, expected) <= tolerance


def test_self_attention_is_sdpa_of_the_projections(
    device_precision: tuple[str, torch.dtype, float],
) -> None:
    device, dtype, tolerance = device_precision
    module = SelfAttention(D_MODEL, D_K, D_V).to(device=device, dtype=dtype)
    inputs = torch.randn(BATCH, Q_LEN, D_MODEL, device=device, dtype=dtype)
    with torch.no_grad():
        expected = F.scaled_dot_product_attention(
            inputs @ module.WQ, inputs @ module.WK, inputs @ module.WV
        )
        actual = module(inputs)
    assert actual.shape == (BATCH, Q_LEN, D_V)
    assert gap(actual, expected) <= tolerance


def test_embedding_adds_learned_positions_and_refuses_long_sequences() -> None:
    embedding = TransformerEmbedding(vocab_size=11, hidden_dim=D_MODEL, max_len=6)
    tokens = torch.randint(0, 11, (BATCH, 4))
    with torch.no_grad():
        expected = embedding.token(tokens) + embedding.position[0, :4]
        assert gap(embedding(tokens), expected) == 0.0
    with pytest.raises(ValueError, match="sequence length 7 exceeds max_len=6"):
        embedding(torch.randint(0, 11, (BATCH, 7)))


def test_output_layer_returns_logits_and_probabilities_separately() -> None:
    layer = OutputLayer(D_MODEL, vocab_size=11)
    x = torch.randn(BATCH, Q_LEN, D_MODEL)
    logits = layer(x)
    probabilities = layer.probabilities(x)
    assert torch.allclose(probabilities, logits.softmax(-1))
    assert torch.allclose(probabilities.sum(-1), torch.ones(BATCH, Q_LEN))
    assert not torch.allclose(logits.sum(-1), torch.ones(BATCH, Q_LEN))


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: scaled_dot_product_attention(*_qkv(k_features=D_K + 1)), "key"),
        (lambda: scaled_dot_product_attention(*_qkv(v_len=K_LEN + 1)), "value"),
        (
            lambda: MultiHeadAttention(D_MODEL, HEADS)(
                *_mha_inputs(key_len=K_LEN, value_len=K_LEN + 1)
            ),
            "value",
        ),
        (lambda: SelfAttention(D_MODEL, D_K, D_V)(torch.randn(BATCH, Q_LEN)), "inputs"),
        (lambda: TransformerEmbedding(11, D_MODEL)(torch.randn(BATCH, Q_LEN)), "tokens"),
        (lambda: OutputLayer(D_MODEL, 11)(torch.randn(Q_LEN, D_MODEL)), "x"),
    ],
    ids=[
        "sdpa-d_k",
        "sdpa-k_len",
        "mha-k_len",
        "self-attention-rank",
        "embedding-dtype",
        "output-rank",
    ],
)
def test_wrong_shapes_fail_at_the_call_naming_the_argument(call: object, argument: str) -> None:
    assert callable(call)
    with pytest.raises(TypeCheckError, match=f"parameter '{argument}'"):
        call()


def test_wrong_width_names_the_axis() -> None:
    module = MultiHeadAttention(D_MODEL, HEADS)
    x = torch.randn(BATCH, Q_LEN, D_MODEL + 2)
    with pytest.raises(
        ValueError, match=r"^query: last axis 14, this module was built with d_model=12$"
    ):
        module(x, x, x)


_checked_shapes: list[tuple[int, ...]] = []


def _count_check(tensor: torch.Tensor) -> bool:
    _checked_shapes.append(tuple(tensor.shape))
    return True


@shape_checked
def _doubled(x: Annotated[torch.Tensor, Is[_count_check]]) -> torch.Tensor:
    return 2 * x


def test_a_signature_that_passed_is_trusted_and_a_new_one_is_checked() -> None:
    _checked_shapes.clear()
    _doubled(torch.ones(2))
    assert set(_checked_shapes) == {(2,)}  # jaxtyping and beartype may each look
    first_check = len(_checked_shapes)
    _doubled(torch.ones(2))  # the same shape and dtype: trusted, not checked again
    assert len(_checked_shapes) == first_check
    _doubled(torch.ones(3))
    _doubled(torch.ones(3, dtype=torch.float64))
    assert _checked_shapes.count((3,)) == 2 * first_check
    q, k, v = _qkv()
    assert gap(scaled_dot_product_attention(q, k, v), scaled_dot_product_attention(q, k, v)) == 0
    with pytest.raises(TypeCheckError):
        scaled_dot_product_attention(*_qkv(k_features=D_K + 1))


def test_the_switch_turns_checks_off() -> None:
    set_runtime_checks(False)
    with pytest.raises(RuntimeError):  # PyTorch's own error, later and less clear
        scaled_dot_product_attention(*_qkv(k_features=D_K + 1))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_checks_off_compiles_with_fullgraph(backend: str) -> None:
    set_runtime_checks(False)
    module = MultiHeadAttention(D_MODEL, HEADS).eval()
    query, key, value = _mha_inputs(key_len=K_LEN, value_len=K_LEN)
    compiled = torch.compile(module, fullgraph=True, backend=backend)
    with torch.no_grad():
        assert gap(compiled(query, key, value), module(query, key, value)) == 0.0
    sdpa = torch.compile(scaled_dot_product_attention, fullgraph=True, backend=backend)
    q, k, v = _qkv()
    assert (
        gap(sdpa(q, k, v, is_causal=True), F.scaled_dot_product_attention(q, k, v, is_causal=True))
        < 1e-5
    )


def test_shapecheck_reports_nothing_in_the_reference_modules() -> None:
    process = run_python("-m", "shapecheck", "shapecheck/reference")
    assert process.returncode == 0, process.stdout


def _qkv(
    k_features: int = D_K, v_len: int = K_LEN
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.randn(BATCH, HEADS, Q_LEN, D_K),
        torch.randn(BATCH, HEADS, K_LEN, k_features),
        torch.randn(BATCH, HEADS, v_len, D_V),
    )


def _mha_inputs(key_len: int, value_len: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.randn(BATCH, Q_LEN, D_MODEL),
        torch.randn(BATCH, key_len, D_MODEL),
        torch.randn(BATCH, value_len, D_MODEL),
    )
