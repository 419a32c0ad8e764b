"""The analysis engine: symbolic sizes, PyTorch's view rule, and facts through real code."""

from __future__ import annotations

import ast
import textwrap

import pytest

from shapecheck.analysis import analyse
from shapecheck.analysis.dims import Dim, format_shape
from shapecheck.analysis.facts import IntFact, TensorFact
from shapecheck.analysis.interpreter import may_declare
from shapecheck.analysis.layout import (
    Layout,
    faithful_order,
    heads_split_apart,
    plan_view,
    reinterpreted_axis,
)
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules

B, L, H, D = (Dim.symbol(name) for name in "BLHD")


def findings(source: str) -> list[tuple[int, str]]:
    rules = [rule() for rule in all_rules()]
    result = lint_source(textwrap.dedent(source).encode(), "snippet.py", rules)
    return [(d.line, d.code) for d in result.diagnostics]


# --- sizes ------------------------------------------------------------------------------


def test_products_are_normalised_and_divide_back() -> None:
    assert H * D == D * H
    assert (H * D).floordiv(H) == D
    assert (Dim.constant(6) * H).floordiv(Dim.constant(3)) == Dim.constant(2) * H
    assert D.floordiv(H) != D and str(D.floordiv(H)) == "D//H"
    assert Dim.symbol("B") != B  # same name, another size


def _halved_width_and_heads() -> tuple[Dim, Dim, Dim]:
    """Grounding DINO's bi-attention: ``config.encoder_ffn_dim // 2`` wide, in
    ``config.encoder_attention_heads // 2`` heads, each the one over the other wide."""
    width = Dim.symbol("ffn").floordiv(Dim.constant(2))
    heads = Dim.symbol("heads").floordiv(Dim.constant(2))
    return width, heads, width.floordiv(heads)


def test_a_quotient_over_a_quotient_of_it_divides_back() -> None:
    width, heads, depth = _halved_width_and_heads()
    assert width.floordiv(depth) == heads


def test_heads_of_halved_sizes_are_seen_split_apart() -> None:
    width, heads, depth = _halved_width_and_heads()
    moved = heads_split_apart(width, (B, heads, L, depth))
    assert moved is not None and moved.dim == L
    assert heads_split_apart(width, (B, L, heads, depth)) is None


def test_a_width_merged_with_the_heads_is_no_split() -> None:
    """LongT5's ``unshape``: values ``[..., D]`` (their rank unknown) viewed as ``(B, -1,
    H*D)`` merge heads into the width; ``D // (H*D)`` is no count of heads."""
    assert heads_split_apart(D, (B, Dim.symbol("?"), H * D)) is None
    assert heads_split_apart(H * D, (B, H, L, D)) is not None  # the split it resembles


# --- PyTorch's view rule ----------------------------------------------------------------


def transposed() -> Layout:
    permuted = Layout.contiguous(4).permuted([0, 2, 1, 3], ast.Name("x"))
    assert permuted is not None
    return permuted


def test_merging_transposed_axes_is_refused() -> None:
    plan = plan_view((B, L, H, D), transposed(), (B, L, H * D))
    assert plan.merged == (2, 3)


def test_splitting_an_untouched_last_axis_is_allowed() -> None:
    half = D.floordiv(Dim.constant(2))
    plan = plan_view((B, L, H, D), transposed(), (B, L, H, half, Dim.constant(2)))
    assert plan.merged == ()
    assert plan.layout is not None and not plan.layout.is_contiguous


def test_a_head_split_has_one_faithful_order() -> None:
    E = H * D
    assert faithful_order((B, L, E), (B, H, L, D), reorder_old=False) == (0, 2, 1, 3)
    assert faithful_order((B, L, E), (H, B, L, D), reorder_old=False) == (1, 2, 0, 3)
    # the heads-first layout of a merge: move the heads back next to the features first
    assert faithful_order((B, H, L, D), (B, L, E), reorder_old=True) == (0, 2, 1, 3)


def test_a_size_held_as_one_axis_and_as_a_run_of_axes_is_followed() -> None:
    """MaxViT's positions ``h*w``, merged with the heads still in front of them, land in
    ``(h, w)``: they move; with the heads behind them they stay."""
    h, w = Dim.symbol("h"), Dim.symbol("w")
    moved = reinterpreted_axis((B, H, h * w, D), (B, h, w, H * D))
    assert moved is not None and moved.dim == h * w
    assert reinterpreted_axis((B, h * w, H, D), (B, h, w, H * D)) is None
    three = Dim.constant(3)
    split = reinterpreted_axis((B, h, w, three * H * D), (B, H, h * w, three * D))
    assert split is not None and split.dim == h * w


def test_a_run_of_axes_moves_nothing_where_the_sides_count_apart() -> None:
    """Kosmos-2.5's patches of one image, ``[B, rows, columns, d]`` viewed as
    ``(rows * columns, d)``: the view runs only where ``B`` is 1, so nothing is known to move."""
    rows, columns = Dim.symbol("rows"), Dim.symbol("columns")
    assert reinterpreted_axis((B, rows, columns, D), (rows * columns, D)) is None


def test_no_faithful_order_without_proof() -> None:
    E = H * D
    # folding heads into the batch needs B*H split apart: no order of three axes does it
    assert faithful_order((B, L, E), (B * H, L, D), reorder_old=False) is None
    # an unknown size proves nothing
    assert faithful_order((B, L, Dim.symbol("?")), (B, H, L, D), reorder_old=False) is None


def test_equal_sizes_keep_the_order_they_were_written_in() -> None:
    three = Dim.constant(3)  # heads and head_dim both 3: the first written stays first
    assert faithful_order((B, L, three * three), (B, three, L, three), reorder_old=False) == (
        0,
        2,
        1,
        3,
    )


def test_merging_axes_still_adjacent_in_memory_is_allowed() -> None:
    layout = Layout.contiguous(4).permuted([2, 0, 1, 3], ast.Name("x"))
    assert layout is not None
    plan = plan_view((H, B, L, D), layout, (H, B * L, D))
    assert plan.merged == ()


def test_transposing_back_restores_contiguity() -> None:
    back = transposed().permuted([0, 2, 1, 3], ast.Name("y"))
    assert back is not None and back.is_contiguous


def test_expanded_axes_cannot_be_merged() -> None:
    layout = Layout.contiguous(3).expanded([1], 0, ast.Name("x"))
    assert plan_view((B, H, L), layout, (B * H, L)).merged == (0, 1)


def test_unknown_grouping_refuses_only_when_every_merge_is_broken() -> None:
    unknown = Dim.symbol("?")
    assert plan_view((B, L, H, D), transposed(), (B, unknown, unknown)).merged == (1, 2, 3)
    permuted = Layout.contiguous(4).permuted([2, 0, 1, 3], ast.Name("x"))
    assert permuted is not None
    assert plan_view((H, B, L, D), permuted, (unknown, unknown, D)).merged == ()


# --- facts through code -------------------------------------------------------------------


def test_layout_is_followed_across_statements_and_unpacking() -> None:
    assert findings(
        """\
        import torch

        def merge(x, scale):
            b, h, l, d = x.shape
            y, other = x.transpose(1, 2), scale
            y = y * 2.0
            z = y.float()
            return z.view(b, l, h * d)
        """
    ) == [(8, "SC101")]


@pytest.mark.parametrize(
    "fix",
    [
        "z.contiguous().view(b, l, h * d)",
        "z.reshape(b, l, h * d)",
        "z.transpose(1, 2).view(b, h, l * d)",
        "z.clone(memory_format=torch.contiguous_format).view(b, l, h * d)",
    ],
)
def test_what_makes_a_view_legal_again(fix: str) -> None:
    assert not findings(
        f"""\
        import torch

        def merge(x):
            b, h, l, d = x.shape
            z = x.transpose(1, 2)
            return {fix}
        """
    )


@pytest.mark.parametrize("copy", ["z.clone()", "z.clone(memory_format=torch.preserve_format)"])
def test_a_clone_keeps_the_reordered_strides(copy: str) -> None:
    assert findings(
        f"""\
        import torch

        def merge(x):
            b, h, l, d = x.shape
            z = x.transpose(1, 2)
            return {copy}.view(b, l, h * d)
        """
    ) == [(6, "SC101")]


def test_branches_that_disagree_make_the_layout_unknown() -> None:
    assert not findings(
        """\
        import torch

        def merge(x, flag):
            b, h, l, d = x.shape
            if flag:
                x = x.transpose(1, 2)
            return x.view(b, -1, h * d)
        """
    )
    assert findings(
        """\
        import torch

        def merge(x, flag):
            b, h, l, d = x.shape
            if flag:
                x = x.transpose(1, 2)
            else:
                x = x.permute(0, 2, 1, 3)
            return x.view(b, -1, h * d)
        """
    ) == [(9, "SC101")]


def test_an_early_return_keeps_the_other_branch() -> None:
    assert findings(
        """\
        import torch

        def merge(x, flag):
            b, h, l, d = x.shape
            if flag:
                return x
            x = x.transpose(1, 2)
            return x.view(b, l, h * d)
        """
    ) == [(8, "SC101")]


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import torch as th", "th.matmul(q, k.transpose(1, 2))"),
        ("from torch import matmul", "matmul(q, k.transpose(1, 2))"),
        ("import torch", "torch.bmm(q, k.transpose(1, 2))"),
        ("import torch", "q @ k.transpose(1, 2)"),
    ],
)
@pytest.mark.parametrize(
    "softmax",
    [
        ("import torch.nn.functional as F", "F.softmax(scores, dim=-1)"),
        ("from torch.nn import functional", "functional.softmax(scores, dim=-1)"),
        ("import torch", "torch.softmax(scores, -1)"),
        ("import torch", "scores.softmax(-1)"),
    ],
)
def test_import_aliases_reach_the_same_ops(
    imports: tuple[str, str], call: str, softmax: tuple[str, str]
) -> None:
    source = f"""\
{imports}
{softmax[0]}
import torch


def attend(q, k):
    b, h, l, d = q.shape
    b, h, l, d = k.shape
    scores = {call} * d ** -0.5
    return {softmax[1]}
"""
    assert findings(source) == [(9, "SC201")]


@pytest.mark.parametrize(
    ("attempted", "fallback", "resolved"),
    [
        ("from flash_attn import flash_attn_func", "flash_attn_func = None", True),
        (
            "from flash_attn import flash_attn_func",
            "from mypkg.reference import flash_attention as flash_attn_func",
            True,
        ),
        ("import numpy as flash_attn_func", "from flash_attn import flash_attn_func", False),
    ],
)
def test_an_import_error_fallback_keeps_the_name_the_try_imported(
    attempted: str, fallback: str, resolved: bool
) -> None:
    """``try: from flash_attn import f / except ImportError: from .ref import x as f``: the
    fallback stands in for the same API, so ``f`` is still flash-attn's; an import the
    ``try`` did not make is no stand-in."""
    from shapecheck.analysis.imports import collect_imports

    source = f"try:\n    {attempted}\nexcept ImportError:\n    {fallback}\n"
    imports = collect_imports(ast.parse(source), source)
    assert (imports.get("flash_attn_func") == "flash_attn.flash_attn_func") is resolved


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_imports_anywhere_are_read_whatever_ends_the_lines(newline: str) -> None:
    """Only the statements whose lines hold the word ``import`` are walked into: an import
    after a semicolon, in a one-line ``if``, split over lines in a method, is still read, with
    any line ending (``ast`` counts a bare carriage return as one too)."""
    from shapecheck.analysis.imports import collect_imports

    source = newline.join(
        [
            "import torch as th",
            "def f():",
            "    x = 1; import torch.nn.functional as F",
            "    if x: from torch import nn",
            "class C:",
            "    def g(self):",
            "        from einops import (",
            "            rearrange)",
            "",
        ]
    )
    assert collect_imports(ast.parse(source), source) == {
        "th": "torch",
        "F": "torch.nn.functional",
        "nn": "torch.nn",
        "rearrange": "einops.rearrange",
    }


def test_key_transpose_depends_on_rank() -> None:
    source = """\
    import torch

    def attend(q, k):
        n, l, d = k.shape
        return torch.softmax(torch.bmm(q, k.transpose(1, 2)) / d ** 0.5, -1)
    """
    assert not findings(source)
    assert findings(source.replace("n, l, d = k.shape", "b, h, l, d = k.shape")) == [(5, "SC201")]


def test_callers_tell_a_helper_that_its_query_is_scaled() -> None:
    source = """\
    import torch

    class Attention(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.q = torch.nn.Linear(width, width)
            self.k = torch.nn.Linear(width, width)
            self.scaling = width ** -0.5

        def forward(self, x):
            q = self.q(x) * self.scaling
            return self.attend(q, self.k(x))

        def attend(self, q, k):
            return (q @ k.transpose(-2, -1)).softmax(-1)
    """
    assert not findings(source)
    assert findings(source.replace(" * self.scaling", "")) == [(15, "SC301")]


def test_files_without_torch_are_not_analysed() -> None:
    source = "def f(x):\n    return x.transpose(1, 2).view(-1)\n"
    assert analyse(ast.parse(source), source).functions == []


def test_shapes_come_from_views_and_unpacking() -> None:
    source = textwrap.dedent(
        """\
        import torch

        def split(x, heads: int):
            batch, seq, width = x.shape
            return x.view(batch, seq, heads, width // heads).transpose(1, 2)
        """
    )
    [_, function] = analyse(ast.parse(source), source).functions
    returned = [fact for node, fact in function.facts.items() if isinstance(node, ast.Call)]
    last = returned[-1]
    assert isinstance(last, TensorFact) and last.shape is not None
    assert [str(dim) for dim in last.shape] == ["batch", "heads", "seq", "width//heads"]


def test_the_engine_without_shapes_knows_no_shapes() -> None:
    source = textwrap.dedent(
        """\
        import torch

        def merge(x):
            b, h, l, d = x.shape
            return x.transpose(1, 2).view(b, l, h * d)
        """
    )
    module = ast.parse(source)
    with_shapes = [o for f in analyse(module, source).functions for o in f.observations]
    without = analyse(module, source, shapes=False).functions
    assert with_shapes and not any(f.observations for f in without)
    assert all(
        not isinstance(fact, TensorFact) or fact.shape is None
        for function in without
        for fact in function.facts.values()
    )


def _facts_of(source: str, name: str, function_name: str = "split") -> TensorFact:
    text = textwrap.dedent(source)
    [function] = [f for f in analyse(ast.parse(text), text).functions if f.name == function_name]
    [fact] = [fact for _, bound, fact in function.bindings if bound == name][-1:]
    assert isinstance(fact, TensorFact)
    return fact


@pytest.mark.parametrize(
    ("allocation", "expected"),
    [
        ("torch.zeros(len(items), 8, dtype=torch.long)", "[?, 8]"),
        ("torch.full((len(items), 4), 0.5)", "[?, 4]"),
        ("torch.full((len(items), 4), fill_value=0.5)", "[?, 4]"),
        ("x.new_zeros(len(items), 3)", "[?, 3]"),
        ("x.new_full((2, len(items)), -1.0)", "[2, ?]"),
    ],
)
def test_an_allocation_has_as_many_axes_as_sizes_given(allocation: str, expected: str) -> None:
    """A size it cannot read is ``?``; the rank is still the number of sizes (the routers and
    losses of mixture-of-experts code count tokens per expert this way)."""
    source = f"""
        import torch

        def split(x, items):
            y = {allocation}
            return y
        """
    fact = _facts_of(source, "y")
    assert fact.shape is not None and f"[{', '.join(map(str, fact.shape))}]" == expected


def test_an_allocation_of_sizes_spliced_from_an_unknown_keeps_the_rank_unknown() -> None:
    fact = _facts_of("import torch\n\ndef split(x, shape):\n    y = torch.zeros(*shape)\n", "y")
    assert fact.shape is None


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ("config.num_hidden_layers + 1", "[(1+config.num_hidden_layers)]"),
        ("self.window - 1", "[?]"),  # one axis; a difference is named by no size
        ("2 + config.extra", "[(2+config.extra)]"),
        ("items + 1", None),  # a bare name: a tensor as often as an int
        ("config.a + config.b", None),  # no side known to be a size
        ("config.shape", None),  # a lone unknown may be a whole shape
    ],
)
def test_a_size_added_to_an_attribute_allocates_one_axis(size: str, expected: str | None) -> None:
    """Whisper's ``num_layers = config.num_hidden_layers + 1`` then ``nn.Parameter(torch.ones(
    num_layers) / num_layers)``: an attribute plus a size is a size (a sequence plus an int
    raises), so the lone argument is one axis, not a whole shape."""
    source = f"""
        import torch

        def split(self, config, items):
            n = {size}
            y = torch.ones(n)
            return y
        """
    fact = _facts_of(source, "y")
    shown = None if fact.shape is None else f"[{', '.join(map(str, fact.shape))}]"
    assert shown == expected


def test_a_chunk_of_a_linear_output_along_its_last_axis_has_a_share_of_its_width() -> None:
    """``qkv(x).chunk(3, dim=-1)`` of ``x`` of unknown rank: each piece a third as wide
    (LayoutLMv2's fused ``qkv_linear``); along another axis, of an unknown rank, the width
    is not known to stay."""
    source = """
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, dim: int):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)

            def split(self, x):
                q = self.qkv(x).chunk(3, dim=-1)[0]
                first = self.qkv(x).chunk(2, dim=1)[0]
                return q, first
        """
    assert str(_facts_of(source, "q", "Attention.split").known_last) == "dim"
    assert _facts_of(source, "first", "Attention.split").known_last is None


def test_a_bias_of_unknown_shape_keeps_the_width_it_is_added_to() -> None:
    """``q + bias`` where the bias's shape is unknown has ``q``'s width, a size it names, which
    the bias's last size must equal or be 1 to; branches that agree on the width keep it,
    whatever their ranks (LayoutLMv2's ``compute_qkv``)."""
    source = """
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, dim: int):
                super().__init__()
                self.q = nn.Linear(dim, dim)
                self.bias = nn.Parameter(torch.zeros(1, 1, dim))

            def split(self, x, shape, flag: bool):
                biased = self.q(x) + self.bias.view(*shape)
                if flag:
                    either = self.q(x) + self.bias
                else:
                    either = self.q(x)
                joined = either
                return biased, joined
        """
    assert str(_facts_of(source, "biased", "Attention.split").known_last) == "dim"
    joined = _facts_of(source, "joined", "Attention.split")
    assert joined.shape is None and str(joined.known_last) == "dim"


@pytest.mark.parametrize(
    ("ranked", "values", "indices"),
    [
        ("torch.topk(probs, top_k, dim=-1)", "[b, n, top_k]", "[b, n, top_k]"),
        ("probs.topk(2)", "[b, n, 2]", "[b, n, 2]"),
        ("torch.topk(probs, 3, 1)", "[b, 3, e]", "[b, 3, e]"),
        ("probs.sort(dim=1, descending=True)", "[b, n, e]", "[b, n, e]"),
        ("torch.max(probs, dim=-1)", "[b, n]", "[b, n]"),
        ("probs.min(1, keepdim=True)", "[b, 1, e]", "[b, 1, e]"),
        ("(probs.topk(2).values, probs.topk(2).indices)", "[b, n, 2]", "[b, n, 2]"),
        ("probs.topk(top_k, dim=dim)", "[?, ?, ?]", "[?, ?, ?]"),  # an axis it cannot read
        ("probs.sort(dim=dim)", "[b, n, e]", "[b, n, e]"),
    ],
)
def test_rankings_and_extremes_along_an_axis_give_values_and_indices(
    ranked: str, values: str, indices: str
) -> None:
    """A mixture of experts' router: ``weights, experts = torch.topk(probs, top_k, dim=-1)``."""
    source = f"""
        import torch

        def split(logits, top_k, dim):
            b, n, e = logits.shape
            probs = logits.softmax(dim=-1)
            weights, experts = {ranked}
        """
    weights, experts = _facts_of(source, "weights"), _facts_of(source, "experts")
    assert (format_shape(weights.shape), format_shape(experts.shape)) == (values, indices)
    assert (weights.dtype, experts.dtype) == (None, "int64")


@pytest.mark.parametrize(
    ("counted", "shape", "dtype"),
    [
        ("torch.zeros(num_experts)", "[num_experts]", "float32"),
        (
            "torch.histc(chosen.float(), bins=num_experts, min=0, max=num_experts)",
            "[num_experts]",
            "float32",
        ),
        ("chosen.float().histc()", "[100]", "float32"),
        ("torch.bincount(chosen.reshape(-1))", "[?]", "int64"),
        (
            "torch.zeros(num_experts).scatter_add_(0, chosen.reshape(-1), ones)",
            "[num_experts]",
            "float32",
        ),
        (
            "torch.index_fill(torch.zeros(num_experts, 2), 0, chosen, 1.0)",
            "[num_experts, 2]",
            "float32",
        ),
    ],
)
def test_a_routers_counts_per_expert(counted: str, shape: str, dtype: str) -> None:
    """A mixture of experts' load-balancing loss counts tokens per expert: ``num_experts``
    annotated ``int | None`` is a size (a size a caller may leave out), and ``histc``,
    ``bincount`` and the scatters give one count per bin (PyTorch: ``histc`` makes 100 bins
    unless told, of its input's dtype; ``bincount`` int64)."""
    source = f"""
        import torch

        def load_balancing_loss(logits: torch.Tensor, num_experts: int | None = None):
            b, n, e = logits.shape
            _, chosen = torch.topk(logits.softmax(dim=-1), 2, dim=-1)
            ones = torch.ones(b, n, 2)
            counts = {counted}
        """
    counts = _facts_of(source, "counts", "load_balancing_loss")
    assert (format_shape(counts.shape), counts.dtype) == (shape, dtype)


@pytest.mark.parametrize(
    ("computed", "shape", "dtype", "contiguous"),
    [
        ("x.clamp(min=-1e4)", "[b, n, d]", None, True),
        ("torch.clamp(x.transpose(1, 2), max=5.0)", "[b, d, n]", None, False),
        ("x.transpose(1, 2).flip(-1)", "[b, d, n]", None, False),
        ("F.softplus(x)", "[b, n, d]", None, True),
        ("torch.isnan(x.transpose(1, 2))", "[b, d, n]", "bool", False),
        ("mask.long()", "[b, n]", "int64", True),
        ("mask.bool().cumsum(-1)", "[b, n]", "int64", True),
        ("x.transpose(1, 2).cumsum(dim=1)", "[b, d, n]", None, True),
        ("F.one_hot(mask.long(), num_classes=4)", "[b, n, 4]", "int64", True),
        ("F.one_hot(mask.long())", "[b, n, ?]", "int64", True),
        ("torch.multinomial(x[0].softmax(-1), 3)", "[n, 3]", "int64", True),
    ],
)
def test_ops_of_each_value_and_of_indices(
    computed: str, shape: str, dtype: str | None, contiguous: bool
) -> None:
    """What PyTorch gives (each row checked with torch 2.13 on a [2, 3, 4] input): ops of
    each value keep the shape and, allocating like their input, the strides' order
    (``flip`` and ``clamp`` of a transposed tensor are not contiguous); ``cumsum`` writes a
    fresh tensor, int64 from booleans; ``one_hot`` adds an axis; ``multinomial`` draws
    along the last."""
    source = f"""
        import torch
        import torch.nn.functional as F

        def split(x, mask):
            b, n, d = x.shape
            b, n = mask.shape
            result = {computed}
        """
    result = _facts_of(source, "result")
    layout = result.layout
    assert layout is not None
    assert (format_shape(result.shape), result.dtype, layout.is_contiguous) == (
        shape,
        dtype,
        contiguous,
    )


@pytest.mark.parametrize(
    ("computed", "shape"),
    [
        ("F.pad(x, (1, 2))", "[b, h, n, (3+d)]"),
        ("F.pad(x, (0, 0, 1, 0), value=0.0)", "[b, h, (1+n), d]"),
        ("F.pad(x, (d, 0, 2, 2, 1, 1))", "[b, (2+h), (4+n), 2*d]"),
        ("F.pad(x, pads)", "[?, ?, ?, ?]"),  # which axes grow is unknown; the rank is not
        ("F.pad(x, (1, 1, 1, 1, 1, 1, 1, 1, 1, 1))", "?"),  # more pads than axes: raises
        ("x.gather(-1, x.argmax(-1, keepdim=True))", "[b, h, n, 1]"),
        # the index has the input's rank: its own sizes, unnamed
        (
            "torch.gather(x, 2, index)",
            "[index.shape[0], index.shape[1], index.shape[2], index.shape[3]]",
        ),
        ("torch.full_like(x, float('-inf'))", "[b, h, n, d]"),
        ("torch.cdist(x, x[:, :, :2])", "[b, h, n, 2]"),
        ("torch.cdist(x, y)", "[b, h, n, ?]"),
    ],
)
def test_pads_gathers_and_distances(computed: str, shape: str) -> None:
    """What PyTorch gives (each row checked with torch on a [2, 3, 4, 5] input): ``F.pad``
    grows the last axes, the last first; ``gather`` is shaped like its index; ``cdist``
    of ``[*B, P, M]`` and ``[*B, R, M]`` is ``[*B, P, R]``."""
    source = f"""
        import torch
        import torch.nn.functional as F

        def split(x, y, index, pads):
            b, h, n, d = x.shape
            result = {computed}
        """
    assert format_shape(_facts_of(source, "result").shape) == shape


@pytest.mark.parametrize(
    ("indexed", "shape"),
    [
        ("x[keep]", "[?, d]"),  # a mask consumes its axes: one axis, as long as its Trues
        ("x[~keep]", "[?, d]"),
        ("x[:, positions]", "[b, n, d]"),  # integers: their shape where they stand
        ("x[:, torch.zeros(5, 6, dtype=torch.long)]", "[b, 5, 6, d]"),
        ("x[batches, positions]", "[b, n, d]"),  # side by side: broadcast together
        ("x[torch.arange(b), -1]", "[b, d]"),
        ("x[:, i]", "[b, d]"),  # a Python int drops its axis
        ("x[positions.float()]", "?"),  # floats: PyTorch raises
        ("x[batches, :, positions]", "?"),  # apart: moved to the front
        ("x[keep, keep]", "?"),
    ],
)
def test_tensor_indices_put_their_axes_where_they_stand(indexed: str, shape: str) -> None:
    """Advanced indexing (each row checked with torch on a [2, 3, 4] input): x-transformers'
    ``t[batch_arange, prompt_len_arange + offset[..., None], ...]`` in ``align_right``."""
    source = f"""
        import torch

        def split(x, mask, i: int):
            b, n, d = x.shape
            b, n = mask.shape
            keep = mask > 0
            batches = torch.arange(b)[..., None]
            positions = torch.arange(n)
            result = {indexed}
        """
    fact = _facts_of(source, "result")
    assert (format_shape(fact.shape) if fact.shape is not None else "?") == shape


@pytest.mark.parametrize(
    ("resized", "shape"),
    [
        ('F.interpolate(x, size=(h, w), mode="bilinear")', "[b, c, h, w]"),
        ("F.interpolate(x, size=7)", "[b, c, 7, 7]"),
        ("F.interpolate(x, scale_factor=2)", "[b, c, ?, ?]"),
        ('F.interpolate(x, size=y.shape[-2:], mode="nearest")', "[b, c, h2, w2]"),
    ],
)
def test_interpolation_keeps_batch_and_channels(resized: str, shape: str) -> None:
    """PyTorch (checked on [2, 3, 4, 5]): ``size=(6, 7)`` gives [2, 3, 6, 7], ``size=7``
    [2, 3, 7, 7], ``scale_factor=2`` [2, 3, 8, 10]."""
    source = f"""
        import torch
        import torch.nn.functional as F

        def split(x, y, h: int, w: int):
            b, c, hh, ww = x.shape
            n, d, h2, w2 = y.shape
            result = {resized}
        """
    assert format_shape(_facts_of(source, "result").shape) == shape


def test_a_bound_that_is_a_tensor_may_broadcast() -> None:
    """``x.clamp(min=floor)`` with a tensor ``floor`` takes the broadcast shape of both:
    not modelled, so not taken for ``x``'s."""
    source = """
        import torch

        def split(x, floor):
            b, n, d = x.shape
            result = x.clamp(min=floor)
        """
    text = textwrap.dedent(source)
    [function] = [f for f in analyse(ast.parse(text), text).functions if f.name == "split"]
    [result] = [fact for _, name, fact in function.bindings if name == "result"]
    assert not isinstance(result, TensorFact) or result.shape is None


@pytest.mark.parametrize(
    ("test", "tensor"),
    [
        ("mask is not None", False),
        ("mask is None", False),
        ("0 in mask", False),
        ("mask > 0", True),
    ],
)
def test_identity_and_membership_tests_give_no_tensor(test: str, tensor: bool) -> None:
    """``attention_mask is not None`` is a Python bool (``--coverage`` counted it among the
    tensors of unknown rank); ``mask > 0`` a boolean tensor."""
    source = f"""
        import torch

        def split(mask):
            b, n = mask.shape
            result = {test}
        """
    text = textwrap.dedent(source)
    [function] = [f for f in analyse(ast.parse(text), text).functions if f.name == "split"]
    [result] = [fact for _, name, fact in function.bindings if name == "result"]
    assert isinstance(result, TensorFact) is tensor


def test_a_name_bound_on_some_paths_only_is_what_they_bound() -> None:
    """A name no path bound before a branch does not exist where the branch did not run
    (reading it raises), so where it is read it holds what the branch bound: Mixtral's
    ``flat_mask``, made ``if attention_mask is not None`` and read in a later branch of
    that case; a loop's own names after the loop. Unless ``global`` says another scope
    holds it on the other paths."""
    source = """
        import torch

        def split(x, attention_mask=None):
            global cached
            b, n, d = x.shape
            if attention_mask is not None:
                flat_mask = attention_mask.reshape(-1)
                cached = x
            for layer in range(3):
                last = x.transpose(1, 2)
            if attention_mask is not None:
                weights = flat_mask
            after_loop = last
            kept = cached
        """
    text = textwrap.dedent(source)
    [function] = [f for f in analyse(ast.parse(text), text).functions if f.name == "split"]
    bound = {name: fact for _, name, fact in function.bindings}
    shapes = {
        name: format_shape(fact.shape) if isinstance(fact, TensorFact) else None
        for name, fact in bound.items()
    }
    assert (shapes["weights"], shapes["after_loop"]) == ("[?]", "[b, d, n]")
    assert shapes["kept"] is None or shapes["kept"] == "?"


@pytest.mark.parametrize("annotation", ["Attention", '"Attention"', "Optional[Attention]"])
def test_a_handed_modules_layers_compute_in_its_sizes_named_through_it(annotation: str) -> None:
    """diffusers' processors get the module (``attn: Attention``, also as the forward
    reference ``"FluxAttention"``) and call the layers its ``__init__`` stored: the output is
    that layer's, and the class's ``self.heads`` reads as ``attn.heads`` here."""
    source = f"""\
        from typing import Optional

        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, dim: int, heads: int):
                super().__init__()
                self.heads = heads
                self.to_q = nn.Linear(dim, dim)

        class Processor:
            def __call__(self, attn: {annotation}, x: torch.Tensor):
                b, n, _ = x.shape
                query = attn.to_q(x)
                split = query.view(b, n, attn.heads, -1)
        """
    shapes = _shapes_in(source, "Processor.__call__")
    assert shapes["query"] == "[b, n, dim]"
    assert shapes["split"] == "[b, n, attn.heads, dim//attn.heads]"


def test_a_comprehension_over_tensors_binds_its_target_to_what_they_share() -> None:
    """``q, k, v = (t.view(...).transpose(1, 2) for t in (q, k, v))``: each split alike;
    over what it cannot read (``range``), the target stays unknown."""
    source = """\
        import torch

        def split(self, x: torch.Tensor, n_items: int):
            b, n, _ = x.shape
            q, k, v = x.chunk(3, dim=-1)
            q, k, v = (t.view(b, n, 4, -1).transpose(1, 2) for t in (q, k, v))
            stacked = torch.stack([t.unsqueeze(0) for t in (q, k)])
            counted = torch.stack([t.unsqueeze(0) for t in range(n_items)])
        """
    shapes = _shapes_in(source, "split")
    assert shapes["q"] == shapes["v"] == "[b, 4, n, (x.shape[2]//3)//4]"
    assert shapes["stacked"] == "[?, 1, b, 4, n, (x.shape[2]//3)//4]"
    assert shapes["counted"] == "?"


def _shapes_in(source: str, function: str) -> dict[str, str]:
    """The shape of what each name of ``function`` was bound to last, a leading prefix
    written ``*owner.shape[:-k]``."""
    text = textwrap.dedent(source)
    [facts] = [f for f in analyse(ast.parse(text), text).functions if f.name == function]
    shapes = {}
    for _, name, fact in facts.bindings:
        if isinstance(fact, TensorFact) and fact.prefixed is not None:
            prefix, tail = fact.prefixed.prefix, ", ".join(map(str, fact.prefixed.tail))
            shapes[name] = f"[*{prefix.owner}.shape[:-{prefix.dropped}], {tail}]"
        elif isinstance(fact, TensorFact):
            shapes[name] = format_shape(fact.shape)
    return shapes


HELPER_KEEPS_THE_LEADING_SIZES = """\
    import torch
    import torch.nn as nn


    class Conv1D(nn.Module):
        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf

        def forward(self, x):
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)


    def split_heads(x, heads):
        return x.view(*x.shape[:-1], heads, -1)


    class Attention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.c_attn = Conv1D(3 * 64, 64)

        def forward(self, hidden_states: tuple[torch.FloatTensor] | None, x):
            qkv = self.c_attn(hidden_states)
            heads = split_heads(hidden_states, 8)
            x = x.view(2, 3, 4)
            again = split_heads(x, 2)
    """


def test_a_size_handed_unknown_comes_back_as_the_callers_own() -> None:
    """EVA's RoPE: the tokens after the prefix go through a helper, whose parameter's length
    is its own there (unnamed); back in the caller it is the slice's length again, so the
    prefix put back gives the sequence's."""
    source = """\
        import torch


        def rotate(x, freqs):
            return x * freqs


        class Rope(torch.nn.Module):
            def __init__(self, num_prefix_tokens: int = 1):
                super().__init__()
                self.num_prefix_tokens = num_prefix_tokens

            def split(self, q):
                b, h, n, d = q.shape
                npt = self.num_prefix_tokens
                q = torch.cat([q[:, :, :npt, :], rotate(q[:, :, npt:, :], 2.0)], dim=2)
        """
    assert _shapes_in(source, "Rope.split")["q"] == "[b, h, n, d]"


def test_a_size_handed_by_an_unknown_name_comes_back_in_that_name() -> None:
    """PEGASUS-X: ``self._shape(x, seq_len=dim.global_len, bsz=dim.batch_size)`` splits into
    the helper's ``bsz`` and ``seq_len``; back in the caller they are ``dim.batch_size`` and
    ``dim.global_len``, the sizes the caller's own merge writes. A size the caller names by
    the helper's parameter name (``bsz``, its own) stays its own."""
    source = """\
        import torch


        class Attention(torch.nn.Module):
            def __init__(self, num_heads: int, head_dim: int):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = head_dim

            def _shape(self, tensor, seq_len: int, bsz: int):
                return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2)

            def _scaled(self, tensor, bsz: int):
                return tensor * 2

            def forward(self, x, dim, bsz):
                q = self._shape(x, seq_len=dim.global_len, bsz=dim.batch_size)
                own = x.view(bsz, 3, self.num_heads, self.head_dim)
                kept = self._scaled(own, bsz=dim.batch_size)
        """
    shapes = _shapes_in(source, "Attention.forward")
    assert shapes["q"] == "[dim.batch_size, self.num_heads, dim.global_len, self.head_dim]"
    assert shapes["kept"] == "[bsz, 3, self.num_heads, self.head_dim]"


def test_a_helpers_leading_sizes_come_back_in_the_callers_names() -> None:
    """``x.shape[:-1]`` of a helper's parameter is that of the name its caller passed
    (GPT-2's ``Conv1D``, ``size()[:-1] + (nf,)``), never a name of the caller's own that the
    helper's parameter happens to share (``x`` here)."""
    shapes = _shapes_in(HELPER_KEEPS_THE_LEADING_SIZES, "Attention.forward")
    assert shapes["qkv"] == "[*hidden_states.shape[:-1], ?]"
    assert shapes["heads"] == "[*hidden_states.shape[:-1], 8, ?]"
    assert shapes["again"] == "[2, 3, 2, 2]"


def test_a_head_split_after_a_spliced_prefix_learns_the_rank_on_a_guess() -> None:
    """``view(*h.shape[:-1], -1, d).transpose(1, 2)`` (every Hugging Face attention): the
    heads move in front of the sequence, so ``h`` is taken to be [batch, seq, features]."""
    source = """\
        import torch

        def split(self, hidden_states):
            input_shape = hidden_states.shape[:-1]
            q = self.q_proj(hidden_states).view((*input_shape, -1, 4)).transpose(1, 2)
            merged = q.transpose(1, 2).reshape(*input_shape, -1)
        """
    q = _facts_of(source, "q")
    assert q.shape is not None and len(q.shape) == 4 and str(q.shape[3]) == "4"
    assert [str(dim) for dim in (q.shape[0], q.shape[2])] == [
        "hidden_states.shape[0]",
        "hidden_states.shape[1]",
    ]
    assert q.guess == "`hidden_states` has 3 axes, as splitting heads after two of them implies"
    merged = _facts_of(source, "merged")
    assert merged.shape is not None and len(merged.shape) == 3


@pytest.mark.parametrize("view", ["view(hidden_shape)", "view(*hidden_shape)"])
def test_sizes_after_a_prefix_are_read_named_or_spliced(view: str) -> None:
    """BERT's family writes ``.view(*hidden_shape)``, LLaMA's ``.view(hidden_shape)``."""
    source = f"""\
        import torch

        def split(self, hidden_states):
            input_shape = hidden_states.shape[:-1]
            hidden_shape = (*input_shape, -1, 4)
            q = self.q_proj(hidden_states).{view}.transpose(1, 2)
            k = self.k_proj(hidden_states).{view}.transpose(1, 2)
        """
    for name in ("q", "k"):
        fact = _facts_of(source, name)
        assert fact.shape is not None and [str(dim) for dim in fact.shape][2:] == [
            "hidden_states.shape[1]",
            "4",
        ]


def test_a_spliced_prefix_without_a_head_split_says_nothing_about_rank() -> None:
    """LLaMA's rotary embedding reshapes ``*x.shape[:-1]`` of a 4-D tensor: no guess there."""
    source = """\
        import torch

        def split(self, xq):
            pairs = xq.float().reshape(*xq.shape[:-1], -1, 2)
        """
    assert _facts_of(source, "pairs").shape is None


def test_leading_sizes_read_before_their_name_is_bound_again_stay_the_first_tensors() -> None:
    """MaxViT's ``restore_shape = x.shape[:-1]``, then ``x = attn @ v``, then
    ``x.transpose(1, 2).reshape(restore_shape + (-1,))``: the prefix is the input's, never
    that of the tensor ``x`` holds by then (read so, the merge looked like a head split)."""
    source = """\
        import torch

        def split(self, x):
            restore_shape = x.shape[:-1]
            x = torch.zeros(2, 4, 8, 16)
            merged = x.transpose(1, 2).reshape(restore_shape + (-1,))
            read_after = x.reshape(x.shape[:-1] + (-1,))
        """
    assert _facts_of(source, "merged").shape is None
    assert [str(dim) for dim in _facts_of(source, "read_after").shape or ()] == [
        "2",
        "4",
        "8",
        "16",
    ]


@pytest.mark.parametrize(
    "expression",
    ["x / 0.0", "x * 0.0 ** -1", "x * (-4.0) ** 0.5", "x / (0 * d)"],
)
def test_numbers_python_cannot_compute_leave_the_scale_unknown(expression: str) -> None:
    """Found in torch's own sources: a scale of 0 inverted must not crash the analysis."""
    source = (
        "import torch\n\n"
        f"def f(x: torch.Tensor, d: int):\n    return torch.softmax({expression}, -1)\n"
    )
    result = lint_source(source.encode(), "example.py", [rule() for rule in all_rules()])
    assert [d.code for d in result.diagnostics if d.code == "SC000"] == []


def test_a_caller_that_knows_nothing_leaves_the_callee_its_own_facts() -> None:
    """timm's tnt.py: Block.forward hands Attention.forward a value of unknown kind; the
    attention must still be analysed as if called alone (here: the unchecked head split)."""
    source = textwrap.dedent(
        """
        import torch.nn as nn

        class Attention(nn.Module):
            def __init__(self, dim: int, num_heads: int) -> None:
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = dim // num_heads
                self.qkv = nn.Linear(dim, dim * 3)

            def forward(self, x):
                B, N, C = x.shape
                return self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)

        class Block(nn.Module):
            def __init__(self, dim: int, num_heads: int) -> None:
                super().__init__()
                self.attn = Attention(dim, num_heads)

            def forward(self, x):
                return self.attn(unknown_helper(x))
        """
    )
    result = lint_source(source.encode(), "example.py", [rule() for rule in all_rules()])
    assert [(d.line, d.code) for d in result.diagnostics] == [(8, "SC502")]


# --- the questions rules ask ------------------------------------------------------------------

QUERIED = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.loss = nn.CrossEntropyLoss()

        def forward(self, logits, targets):
            probs = logits.softmax(dim=-1)
            first = F.cross_entropy(input=probs, target=targets)
            return first + self.loss(probs.log(), targets)
    """
)


def test_rules_find_calls_by_what_they_call() -> None:
    from shapecheck.analysis import argument

    analysis = analyse(ast.parse(QUERIED), QUERIED)
    [functional] = analysis.calls_to("torch.nn.functional.cross_entropy")
    [module] = analysis.module_calls("torch.nn.CrossEntropyLoss")
    [constructor] = analysis.calls_to("torch.nn.CrossEntropyLoss")
    [log] = analysis.method_calls("log")
    assert (functional.lineno, module.lineno, constructor.lineno, log.lineno) == (13, 14, 9, 14)
    assert list(analysis.calls_to("torch.nn.functional.softmax")) == []
    probs = argument(functional, 0, "input")
    assert isinstance(probs, ast.Name) and probs.id == "probs"
    assert argument(module, 0, "input") is module.args[0] and argument(module, 2, "x") is None
    fact = analysis.fact(probs)
    assert isinstance(fact, TensorFact) and fact.probabilities
    function = analysis.enclosing_function(log)
    holder = analysis.enclosing_class(log)
    assert function is not None and function.name == "forward"
    assert holder is not None and holder.name == "Head"
    assert analysis.enclosing_class(analysis.module.body[0]) is None


def test_a_rank_known_on_one_branch_proves_no_transpose_useless() -> None:
    """`transpose(-1, 3)` swaps nothing only at rank 4: after a branch the analysis could not
    follow, the rank is known on one path only, and a safe fix deleting it could break the
    other."""
    source = """\
        import torch


        def f(x, cache):
            y = x.view(2, 3, 4, 5)
            {branch}
            return y.transpose(-1, 3)
        """
    assert findings(source.format(branch="pass")) == [(7, "SC202")]
    followed = "if cache is not None:\n                y = cache.lookup(y)"
    assert findings(source.format(branch=followed)) == []


EINOPS = textwrap.dedent(
    """\
    import torch
    from einops import rearrange, reduce, repeat


    def split(x, heads: int):
        b, n, e = x.shape
        q = rearrange(x, "b n (h d) -> b h n d", h=heads)
        merged = rearrange(q, "b h n d -> b n (h d)")
        tokens = rearrange(x, "... (two d) -> ... two d", two=2)
        pooled = reduce(x, "b n e -> b e", "mean")
        tiled = repeat(pooled, "b e -> b k e", k=4)
        rotated = torch.view_as_real(torch.view_as_complex(tokens.transpose(-2, -1).contiguous()))
        unknown_rank = rearrange(y, "b n d -> b d n")
    """
)


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("q", "[b, heads, n, e//heads]"),
        ("merged", "[b, n, e]"),
        ("tokens", "[b, n, 2, e//2]"),
        ("pooled", "[b, e]"),
        ("tiled", "[b, 4, e]"),
        ("rotated", "[b, n, e//2, 2]"),
        ("unknown_rank", "[?, ?, ?]"),  # a name bound elsewhere: its rank, not its sizes
    ],
)
def test_einops_patterns_give_shapes(name: str, shape: str) -> None:
    from shapecheck.analysis.dims import format_shape

    [function] = analyse(ast.parse(EINOPS), EINOPS).functions[1:]
    [fact] = [fact for _, bound, fact in function.bindings if bound == name]
    assert isinstance(fact, TensorFact) and format_shape(fact.shape) == shape


@pytest.mark.parametrize("pattern", ["b (h d", "b h) d", "b ((h) d)"])
def test_a_malformed_pattern_is_no_pattern(pattern: str) -> None:
    from shapecheck.analysis.ops.einops import parse_side

    assert parse_side(pattern) is None


def test_a_guessed_rank_proves_no_transpose_useless() -> None:
    """The head split makes ``q`` 4-D on a guess: ``transpose(-1, 3)`` may do something."""
    source = """\
        import torch


        def f(self, hidden_states):
            q = self.q_proj(hidden_states).view((*hidden_states.shape[:-1], -1, 4)).transpose(1, 2)
            return q.transpose(-1, 3)
        """
    assert findings(source) == []


HEADS_BY_METHOD = """\
    import torch
    from torch import nn

    class MultiHeadAttention(nn.Module):
        def __init__(self, d_model, n_head):
            super().__init__()
            self.n_head = n_head
            self.w_q = nn.Linear(d_model, d_model)
            self.w_k = nn.Linear(d_model, d_model)
            self.w_v = nn.Linear(d_model, d_model)

        def forward(self, q, k, v):
            q, k, v = self.w_q(q), self.w_k(k), self.w_v(v)
            q, k, v = self.split(q), self.split(k), self.split(v)
            scores = q @ k.transpose(2, 3) / 8
            return self.concat(scores.softmax(dim=-1) @ v)

        def split(self, tensor):
            batch_size, length, d_model = tensor.size()
            d_tensor = d_model // self.n_head
            return tensor.view(batch_size, length, self.n_head, d_tensor).transpose(1, 2)

        def concat(self, tensor):
            batch_size, head, length, d_tensor = tensor.size()
            return tensor.view(batch_size, length, head * d_tensor)
    """


def test_an_attribute_a_method_sizes_by_is_one_size_in_every_call() -> None:
    """hyunwoongko/transformer before 391c9cd: ``self.split(q)`` and ``self.split(k)`` split
    into the same ``self.n_head`` heads, so the scores keep them and the merge without a
    transpose in ``concat`` is seen."""
    source = textwrap.dedent(HEADS_BY_METHOD)
    [forward] = [
        f for f in analyse(ast.parse(source), source).functions if f.name.endswith("forward")
    ]
    [scores] = [fact for _, name, fact in forward.bindings if name == "scores"]
    assert isinstance(scores, TensorFact) and scores.shape is not None
    assert str(scores.shape[1]) == "self.n_head"
    diagnostics = lint_source(source.encode(), "heads.py", [r() for r in all_rules()]).diagnostics
    assert [(d.code, d.line) for d in diagnostics] == [("SC103", 25)]


def test_an_attribute_is_one_size_in_the_methods_that_leave_it_alone() -> None:
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn

        class M(nn.Module):
            def __init__(self, h):
                super().__init__()
                self.h = h

            def forward(self, x):
                return x.view(2, self.h, -1)

            def same(self, x):
                return x.view(2, self.h, -1)

            def other(self, x):
                self.h = x.heads
                return x.view(2, self.h, -1)
        """
    )
    heads = {}
    for function in analyse(ast.parse(source), source).functions:
        if function.name not in ("M.forward", "M.same", "M.other"):
            continue
        [returned] = [f for node, f in function.facts.items() if isinstance(node, ast.Call)][-1:]
        assert isinstance(returned, TensorFact) and returned.shape is not None
        heads[function.name.removeprefix("M.")] = returned.shape[1]
    assert heads["forward"] == heads["same"] != heads["other"]


def test_a_tensor_the_constructor_stores_is_sized_in_the_attributes_names() -> None:
    """LayoutLMv2's ``q_bias``, ``[1, 1, self.all_head_size]``: as wide as the layers built
    from the same sizes, which the attributes name (one symbol, not one per reading)."""
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn

        class M(nn.Module):
            def __init__(self, hidden_size, num_heads):
                super().__init__()
                self.num_heads = num_heads
                self.head_size = hidden_size // num_heads
                self.all_head_size = self.num_heads * self.head_size
                self.query = nn.Linear(hidden_size, self.all_head_size)
                self.q_bias = nn.Parameter(torch.zeros(1, 1, self.all_head_size))

            def forward(self, x):
                q = self.query(x)
                bias = self.q_bias
                return q
        """
    )
    [forward] = [f for f in analyse(ast.parse(source), source).functions if f.name == "M.forward"]
    facts = {name: fact for _, name, fact in forward.bindings}
    query, bias = facts["q"], facts["bias"]
    assert isinstance(query, TensorFact) and isinstance(bias, TensorFact)
    assert bias.shape is not None
    assert query.last_dim == bias.shape[-1]


# --- timm's attention layers ----------------------------------------------------------------

TIMM_ATTENTION = """\
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads, fused):
        super().__init__()
        assert dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        {layers}
        self.pool = make_pool(dim)

    def forward(self, x):
        B, N, C = x.shape
        {body}
"""

# the layers built on one branch only: `None` on the other, or never stored there
ONE_BRANCH = {
    "none": (
        "if fused:\n            self.q = None\n        else:\n"
        "            self.q = nn.Linear(dim, dim)"
    ),
    "unset": "if not fused:\n            self.q = nn.Linear(dim, dim)",
}


def _timm_findings(layers: str, body: str) -> list[str]:
    text = TIMM_ATTENTION.format(
        layers=layers, body=textwrap.dedent(body).replace("\n", "\n        ")
    )
    rules = [rule() for rule in all_rules()]
    return [d.code for d in lint_source(text.encode(), "snippet.py", rules).diagnostics]


@pytest.mark.parametrize("layers", ONE_BRANCH.values(), ids=ONE_BRANCH)
@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("reshape(B, self.num_heads, N, self.head_dim)", ["SC102"]),
        ("reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_a_layer_built_on_one_branch_is_that_layer_where_it_is_called(
    layers: str, split: str, found: list[str]
) -> None:
    """``self.q = None`` (or nothing) where a fused layer replaces it: where ``self.q(x)`` runs,
    it is the layer the other branch built."""
    assert _timm_findings(layers, f"q = self.q(x).{split}") == found


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("reshape(B, self.num_heads, N + 1, self.head_dim)", ["SC102"]),
        ("reshape(B, N + 1, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_a_size_plus_one_counts_the_tokens_with_a_class_token(split: str, found: list[str]) -> None:
    """``N + 1`` is the size ``cat`` gives the tokens with the class token in front."""
    body = f"""\
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1)
        q = nn.functional.linear(x, torch.ones(C, C)).{split}
        """
    assert _timm_findings("", body) == found


@pytest.mark.parametrize(
    ("merge", "found"),
    [
        ("out.reshape(B, N, self.num_heads * self.head_dim)", ["SC103"]),
        ("out.transpose(1, 2).reshape(B, N, self.num_heads * self.head_dim)", []),
    ],
)
def test_a_merge_counts_the_positions_the_analysis_could_not(merge: str, found: list[str]) -> None:
    """Queries from a layer the analysis does not know have ``?`` positions; a merge into
    ``[B, N, H*D]`` holds as many elements, so there were ``N``."""
    body = f"""\
        q = nn.functional.linear(self.pool(x), torch.ones(C, C))
        q = q.reshape(B, -1, self.num_heads, self.head_dim).transpose(1, 2)
        out = q.softmax(dim=-1)
        merged = {merge}
        """
    assert _timm_findings("", body) == found


def test_a_size_the_code_writes_is_kept_over_one_solved_from_an_unknown() -> None:
    text = TIMM_ATTENTION.format(
        layers="",
        body="q = nn.functional.linear(self.pool(x), torch.ones(C, C))\n"
        "        q = q.reshape(B, -1, C)\n        merged = q.reshape(B, N, C)",
    )
    [forward] = [f for f in analyse(ast.parse(text), text).functions if f.name.endswith("forward")]
    [merged] = [fact for _, name, fact in forward.bindings if name == "merged"]
    assert isinstance(merged, TensorFact)
    assert [str(dim) for dim in merged.shape or ()] == ["B", "N", "C"]


@pytest.mark.parametrize(
    ("left", "right", "shape"),
    [
        ("BHLL", "1???", "BHLL"),  # scores + a bias of unknown sizes keep the scores' shape
        ("BHLL", "LL", "BHLL"),
        ("B1L", "?H?", "BHL"),  # a size 1 broadcasts to whatever the other side is
        ("1?", "??", "??"),  # unknown on both sides: unknown
    ],
)
def test_a_size_known_on_one_side_of_a_broadcast_is_the_result(
    left: str, right: str, shape: str
) -> None:
    from shapecheck.analysis.ops import broadcast_shapes

    sizes = {"B": B, "H": H, "L": L, "1": Dim.constant(1)}

    def parsed(written: str) -> tuple[Dim, ...]:
        return tuple(sizes[c] if c in sizes else Dim.symbol("?") for c in written)

    result = broadcast_shapes(parsed(left), parsed(right))
    assert result is not None
    assert "".join(str(dim) for dim in result) == shape


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("reshape(B, self.num_heads, N, self.head_dim)", ["SC102"]),
        ("reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_a_layer_class_given_or_a_norm_by_default_keeps_the_shape(
    split: str, found: list[str]
) -> None:
    """``norm_layer = norm_layer or nn.LayerNorm`` (timm): the layers it builds keep the shape,
    whichever class it is."""
    layers = (
        "norm_layer = fused or nn.LayerNorm\n        self.norm = norm_layer(dim)\n"
        "        self.k = nn.Linear(dim, dim)"
    )
    assert _timm_findings(layers, f"k = self.k(self.norm(x)).{split}") == found


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("reshape(B, self.num_heads, N, self.head_dim)", ["SC102"]),
        ("reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_layers_built_from_either_width_give_the_width_they_agree_on(
    split: str, found: list[str]
) -> None:
    """IDEFICS's cross-attention keys: ``nn.Linear(kv_dim, dim)`` on one branch, ``nn.Linear(dim,
    dim)`` on the other; either gives ``dim`` features."""
    layers = (
        "if fused:\n            self.k = nn.Linear(2 * dim, dim)\n        else:\n"
        "            self.k = nn.Linear(dim, dim)"
    )
    assert _timm_findings(layers, f"k = self.k(x).{split}") == found


def test_a_sum_with_a_term_of_unknown_value_is_still_an_int() -> None:
    """deberta_v2: ``scale_factor += 1`` after branches that counted differently; the tensor
    made from it stays a tensor built from a Python number (SC601 is true there)."""
    source = textwrap.dedent(
        """\
        import torch

        def f(kinds):
            scale_factor = 1
            if "c2p" in kinds:
                scale_factor += 1
            if "p2c" in kinds:
                scale_factor += 1
            return scale_factor
        """
    )
    [f] = [
        function
        for function in analyse(ast.parse(source), source).functions
        if function.name == "f"
    ]
    [*_, (_, _, last)] = [binding for binding in f.bindings if binding[1] == "scale_factor"]
    assert isinstance(last, IntFact) and str(last.dim) == "?"


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("view(B, self.num_heads, N, self.head_dim)", ["SC102"]),
        ("view(B, N, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_sections_of_a_fused_projection_in_list_arithmetic(split: str, found: list[str]) -> None:
    """timm's parallel blocks: ``torch.split(y, [mlp_dim] + [dim] * 3)`` cuts the MLP's input
    and q, k, v, each ``dim`` wide, from one projection."""
    layers = (
        "self.in_proj = nn.Linear(dim, 4 * dim + 3 * dim)\n"
        "        self.in_split = [4 * dim] + [dim] * 3"
    )
    body = f"""\
        x_mlp, q, k, v = torch.split(self.in_proj(x), self.in_split, dim=-1)
        v = v.{split}
        """
    assert _timm_findings(layers, body) == found


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("view(B, self.heads, -1, self.head_size)", ["SC102"]),
        ("view(B, -1, self.heads, self.head_size).transpose(1, 2)", []),
    ],
)
def test_a_truncated_true_division_of_sizes_is_their_floor_division(
    split: str, found: list[str]
) -> None:
    """BERT's ``int(hidden_size / num_attention_heads)``: a head's width, so the heads times it
    is the width the layers were built with."""
    layers = (
        "self.heads = num_heads\n"
        "        self.head_size = int(dim / num_heads)\n"
        "        self.all_head_size = self.heads * self.head_size\n"
        "        self.k = nn.Linear(dim, self.all_head_size)"
    )
    assert _timm_findings(layers, f"k = self.k(x).{split}") == found


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("reshape(B, self.num_heads, N, self.head_dim)", [(26, "SC102")]),
        ("reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_a_layer_of_the_module_or_another_by_a_flag_is_either_where_it_is_called(
    split: str, found: list[tuple[int, str]]
) -> None:
    """``RMSNorm(dim) if qk_norm else nn.Identity()`` (InternVL): calling it runs the class's
    ``forward`` or the identity, and what both return is known."""
    source = f"""\
        import torch
        import torch.nn as nn


        class RMSNorm(nn.Module):
            def __init__(self, hidden_size):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(hidden_size))

            def forward(self, x):
                return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


        class Attention(nn.Module):
            def __init__(self, dim, num_heads, qk_norm):
                super().__init__()
                assert dim % num_heads == 0
                self.num_heads = num_heads
                self.head_dim = dim // num_heads
                self.q = nn.Linear(dim, dim)
                self.q_norm = RMSNorm(dim) if qk_norm else nn.Identity()

            def forward(self, x):
                B, N, C = x.shape
                q = self.q_norm(self.q(x))
                return q.{split}
        """
    assert findings(source) == found


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("view(B, self.num_heads, N, -1)", ["SC102"]),
        ("view(B, N, self.num_heads, -1).transpose(1, 2)", []),
    ],
)
@pytest.mark.parametrize("default", ["nn.LayerNorm", "LayerNorm"])
def test_a_norm_class_by_default_is_taken_to_keep_the_shape_and_said_so(
    default: str, split: str, found: list[str]
) -> None:
    """``norm_layer=nn.LayerNorm`` (or a project's own ``LayerNorm``): a caller may hand
    another class, taken to keep the shape too, a guess each finding that rests on it says."""
    source = f"""\
        import torch
        import torch.nn as nn
        from timm.layers import LayerNorm


        class Block(nn.Module):
            def __init__(self, dim, num_heads, norm_layer={default}):
                super().__init__()
                self.num_heads = num_heads
                self.norm = norm_layer(dim)
                self.qkv = nn.Linear(dim, 3 * dim)

            def forward(self, x):
                B, N, C = x.shape
                q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
                return v.{split}
        """
    rules = [rule() for rule in all_rules()]
    result = lint_source(textwrap.dedent(source).encode(), "snippet.py", rules)
    assert [d.code for d in result.diagnostics] == found
    assert all(
        d.message.endswith("(assuming `norm_layer` keeps the shape, as its default does)")
        for d in result.diagnostics
    )


def test_a_difference_of_named_sizes_gives_the_whole_back() -> None:
    """``L - n`` (the tokens after a prefix): unknown, as no size names it, but the same for
    every such difference, and with ``n`` put back, ``L`` again."""
    n = Dim.symbol("n")
    rest = L - n
    assert rest.has_unknown and rest == L - n != L - Dim.symbol("n")
    assert rest + n == L and n + rest == L and rest + L != L
    assert (L - Dim.constant(1)) + Dim.constant(1) != L  # less a literal: plain unknown


@pytest.mark.parametrize(
    ("merge", "found"),
    [
        ("reshape(B, N, C)", [(17, "SC103")]),
        ("transpose(1, 2).reshape(B, N, C)", []),
    ],
)
def test_the_prefix_and_the_rotated_rest_are_all_the_tokens(
    merge: str, found: list[tuple[int, str]]
) -> None:
    """EVA's RoPE: ``cat([q[:, :, :npt], rotate(q[:, :, npt:])], dim=2)`` has the ``N``
    tokens it was cut from."""
    source = f"""\
        import torch
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self, dim, num_heads, num_prefix_tokens: int = 1):
                super().__init__()
                self.num_heads = num_heads
                self.num_prefix_tokens = num_prefix_tokens
                self.q = nn.Linear(dim, dim)

            def forward(self, x):
                B, N, C = x.shape
                q = self.q(x).reshape(B, N, self.num_heads, -1).transpose(1, 2)
                npt = self.num_prefix_tokens
                q = torch.cat([q[:, :, :npt, :], q[:, :, npt:, :] * 2], dim=2)
                return q.{merge}
        """
    assert findings(source) == found


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("view(batch_size, self.num_heads, seq_len, self.head_dim)", [(14, "SC102")]),
        ("view(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_a_size_callers_disagree_on_is_what_the_view_leaves(
    split: str, found: list[tuple[int, str]]
) -> None:
    """ProphetNet's ``_shape(tensor, seq_len, batch_size)``, called with the length and with
    ``-1``: either way the view's element count says what ``seq_len`` must be."""
    forward = """\
            def forward(self, hidden_states):
                batch_size, length, _ = hidden_states.size()
                q = self._shape(self.proj(hidden_states), length, batch_size)
                k = self._shape(self.proj(hidden_states), -1, batch_size)
                return q, k
    """
    assert findings(_SHAPE_HELPER.format(split=split, forward=forward)) == found


_SHAPE_HELPER = """\
        import torch
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self, hidden_size, num_heads):
                super().__init__()
                assert hidden_size % num_heads == 0
                self.num_heads = num_heads
                self.head_dim = hidden_size // num_heads
                self.proj = nn.Linear(hidden_size, hidden_size)

            def _shape(self, tensor, seq_len, batch_size):
                return tensor.{split}

{forward}"""


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("view(batch_size, self.num_heads, seq_len, self.head_dim)", [(14, "SC102")]),
        ("view(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_a_split_of_sizes_unrelated_to_its_tensors_is_read_from_the_last_axis(
    split: str, found: list[tuple[int, str]]
) -> None:
    """Mask2Former's ``_shape(tensor, seq_len, batch_size)``, handed the queries' batch with
    the keys of another tensor: the helper's sizes are of unknown relation to its tensor's
    axes, but splitting the features into heads written before another axis moves it."""
    forward = """\
            def forward(self, hidden_states, key_value_states):
                batch_size, length, _ = hidden_states.size()
                _, keys, _ = key_value_states.size()
                q = self._shape(self.proj(hidden_states), length, batch_size)
                k = self._shape(self.proj(key_value_states), -1, batch_size)
                return q, k
    """
    assert findings(_SHAPE_HELPER.format(split=split, forward=forward)) == found


_WINDOWS = """\
    import torch.nn as nn
    import torch.nn.functional as F


    def window_partition(x, window_size: int):
        B, H, W, C = x.shape
        x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
        return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, window_size * window_size, C)


    class WindowAttention(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.num_heads = num_heads
            self.qkv = nn.Linear(dim, 3 * dim)

        def forward(self, x):
            B_, N, C = x.shape
            qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            out = F.scaled_dot_product_attention(q, k, v)
            return out.{merge}


    class Block(nn.Module):
        def __init__(self, dim, num_heads, window_size):
            super().__init__()
            self.window_size = window_size
            self.attn = WindowAttention(dim, num_heads)

        def forward(self, x):
            return self.attn(window_partition(x, self.window_size))
    """


@pytest.mark.parametrize(
    ("merge", "found"),
    [
        ("reshape(B_, N, C)", [(22, "SC103")]),
        ("transpose(1, 2).reshape(B_, N, C)", []),
    ],
)
def test_a_merge_moves_positions_the_code_does_not_name(
    merge: str, found: list[tuple[int, str]]
) -> None:
    """DaViT's windows: the caller hands ``N`` as a size it does not name (``x.shape[1]``).
    Merged before the heads, the positions are read across the heads all the same; the
    finding says it takes ``N`` for more than 1 (along one position nothing moves)."""
    rules = [rule() for rule in all_rules()]
    source = textwrap.dedent(_WINDOWS.format(merge=merge)).encode()
    diagnostics = lint_source(source, "snippet.py", rules).diagnostics
    assert [(d.line, d.code) for d in diagnostics] == found
    assert all(d.message.endswith("(assuming `x.shape[1]` is more than 1)") for d in diagnostics)


@pytest.mark.parametrize(
    ("merge", "found"),
    [
        ("reshape(B, -1, self.num_heads * self.head_dim)", [(16, "SC103")]),
        ("transpose(1, 2).reshape(B, -1, self.num_heads * self.head_dim)", []),
    ],
)
def test_a_merge_moves_positions_of_unknown_number(
    merge: str, found: list[tuple[int, str]]
) -> None:
    """LeViT's ``(attn @ v).reshape(B, -1, dh)``: the positions are a ``-1`` of a tensor of
    unknown rank, one size on both sides of the merge all the same."""
    source = f"""\
        import torch.nn as nn
        import torch.nn.functional as F


        class Attention(nn.Module):
            def __init__(self, dim, num_heads):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = dim // num_heads
                self.q = nn.Linear(dim, dim)

            def forward(self, x):
                B = x.shape[0]
                q = self.q(x).view(B, -1, self.num_heads, self.head_dim).transpose(1, 2)
                out = F.scaled_dot_product_attention(q, q, q)
                out = out.{merge}
                return out
        """
    assert findings(source) == found


def test_a_relative_shift_of_lengths_nobody_names_is_no_head_split() -> None:
    """Transformer-XL's relative shift, as FastSpeech2-Conformer writes it: scores
    ``[b, h, q, p]`` padded, viewed as ``[b, h, p + 1, q]``, a row dropped, viewed back. The
    lengths are read off the scores, named by no code, and exchanging the last two is the
    point: neither view is a head split or merge."""
    source = """\
        import torch
        import torch.nn as nn


        class RelPositionAttention(nn.Module):
            def __init__(self, hidden_size, num_heads):
                super().__init__()
                assert hidden_size % num_heads == 0
                self.num_heads = num_heads
                self.head_dim = hidden_size // num_heads
                self.linear_q = nn.Linear(hidden_size, hidden_size)
                self.linear_pos = nn.Linear(hidden_size, hidden_size, bias=False)

            def shift(self, pos_tensor):
                zero_pad = torch.zeros((*pos_tensor.size()[:3], 1), dtype=pos_tensor.dtype)
                padded = torch.cat([zero_pad, pos_tensor], dim=-1)
                padded = padded.view(
                    *pos_tensor.size()[:2], pos_tensor.size(3) + 1, pos_tensor.size(2)
                )
                return padded[:, :, 1:].view_as(pos_tensor)[:, :, :, : pos_tensor.size(-1) // 2 + 1]

            def forward(self, hidden_states, pos_emb):
                bsz, q_len, _ = hidden_states.size()
                query = self.linear_q(hidden_states).view(bsz, -1, self.num_heads, self.head_dim)
                bsz_pos = pos_emb.size(0)
                pos = self.linear_pos(pos_emb).view(bsz_pos, -1, self.num_heads, self.head_dim)
                matrix_bd = torch.matmul(query.transpose(1, 2), pos.permute(0, 2, 3, 1))
                return torch.softmax(self.shift(matrix_bd) / self.head_dim**0.5, dim=-1)
        """
    assert findings(source) == []


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("view(bsz, self.num_heads, -1, self.head_dim)", [(18, "SC102")]),
        ("view(bsz * self.num_heads, -1, self.head_dim)", [(18, "SC102")]),
        ("view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_a_head_split_of_values_of_unknown_rank(split: str, found: list[tuple[int, str]]) -> None:
    """Cross-attention's keys and values come from ``key_value_states`` (rank unknown) or the
    hidden states: the linear layer's width says the last axis, and a view reads the axes
    before it in order whatever their number, so ``(B, H, -1, D)`` still puts positions where
    the second head's features lie."""
    source = f"""\
        import torch.nn as nn
        import torch.nn.functional as F


        class CrossAttention(nn.Module):
            def __init__(self, embed_dim, num_heads):
                super().__init__()
                assert embed_dim % num_heads == 0
                self.num_heads = num_heads
                self.head_dim = embed_dim // num_heads
                self.k_proj = nn.Linear(embed_dim, embed_dim)

            def forward(self, hidden_states, key_value_states=None):
                bsz = hidden_states.shape[0]
                current = hidden_states if key_value_states is None else key_value_states
                k = self.k_proj(current).view(bsz, -1, self.num_heads, self.head_dim)
                k = k.transpose(1, 2)
                v = self.k_proj(current).{split}
                return F.scaled_dot_product_attention(k, k, v)
        """
    rules = [rule() for rule in all_rules()]
    diagnostics = lint_source(textwrap.dedent(source).encode(), "snippet.py", rules).diagnostics
    assert [(d.line, d.code) for d in diagnostics] == found
    assert all(
        d.message.endswith("(assuming the moved axis has more than one entry)") for d in diagnostics
    )


def test_a_split_into_one_entry_between_the_heads_and_their_size_moves_nothing() -> None:
    """Inkling's short convolution views its kernels ``[..., H*K]`` as ``(B, L, H, 1, K)``:
    the axis of one entry between the heads and their size holds no data of its own."""
    source = """\
        import torch.nn as nn
        import torch.nn.functional as F


        class ShortConv(nn.Module):
            def __init__(self, hidden_size, num_heads):
                super().__init__()
                assert hidden_size % num_heads == 0
                self.num_heads = num_heads
                self.head_size = hidden_size // num_heads
                self.proj = nn.Linear(hidden_size, hidden_size)

            def forward(self, hidden_states, dynamic_input):
                batch_size, seq_len, _ = hidden_states.shape
                kernel = self.proj(dynamic_input)
                kernel = kernel.view(batch_size, seq_len, self.num_heads, 1, self.head_size)
                return F.softmax(kernel, dim=-1)
        """
    assert findings(source) == []


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("reshape(B, self.num_heads, -1, self.head_dim)", [(19, "SC102")]),
        ("reshape(B, -1, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_heads_counted_from_the_width_split_values_of_unknown_rank(
    split: str, found: list[tuple[int, str]]
) -> None:
    """Next-ViT counts its heads from the width (``num_heads = dim // head_dim``) and pools
    the keys' tokens first (rank unknown after the pooling): the width over the head size is
    the heads all the same."""
    source = f"""\
        import torch.nn as nn
        import torch.nn.functional as F


        class Attention(nn.Module):
            def __init__(self, dim, head_dim=32):
                super().__init__()
                assert dim % head_dim == 0
                self.num_heads = dim // head_dim
                self.head_dim = head_dim
                self.q = nn.Linear(dim, dim)
                self.v = nn.Linear(dim, dim)
                self.sr = nn.AvgPool1d(kernel_size=4, stride=4)

            def forward(self, x):
                B, N, C = x.shape
                q = self.q(x).reshape(B, N, self.num_heads, self.head_dim).transpose(1, 2)
                x = self.sr(x.transpose(1, 2)).transpose(1, 2)
                v = self.v(x).{split}
                return F.scaled_dot_product_attention(q, v, v)
        """
    assert findings(source) == found


@pytest.mark.parametrize(
    ("split", "found"),
    [
        ("reshape(bsz, self.num_heads, q_len, self.head_dim)", [(18, "SC102")]),
        ("reshape(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)", []),
    ],
)
def test_tokens_with_their_heads_read_heads_first_are_a_split(
    split: str, found: list[tuple[int, str]]
) -> None:
    """Chameleon and Janus norm each head of every token (``[B*L, H, D]``), then reshape to
    heads first without the swap: more axes after than before, a head split (SC102's), though
    the axis the view moves is the heads."""
    source = f"""\
        import torch.nn as nn
        import torch.nn.functional as F


        class Attention(nn.Module):
            def __init__(self, hidden_size, num_heads):
                super().__init__()
                assert hidden_size % num_heads == 0
                self.num_heads = num_heads
                self.head_dim = hidden_size // num_heads
                self.q_proj = nn.Linear(hidden_size, hidden_size)
                self.q_norm = nn.LayerNorm(self.head_dim)

            def forward(self, hidden_states):
                bsz, q_len, _ = hidden_states.shape
                q = self.q_proj(hidden_states).reshape(-1, self.num_heads, self.head_dim)
                q = self.q_norm(q)
                q = q.{split}
                return F.scaled_dot_product_attention(q, q, q)
        """
    assert findings(source) == found


# --- QK-norm and the layers before the scores (SC301) --------------------------------------

_LATE_NORM = """\
import torch
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.q_norm = Norm(self.head_dim)
        self.k_norm = Norm(self.head_dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return (attn @ v).transpose(1, 2).reshape(B, N, C)

class Norm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
"""


def test_a_layer_of_a_class_defined_further_down_is_followed() -> None:
    # __init__ runs after the whole module is defined: Norm exists then
    assert (17, "SC301") in findings(_LATE_NORM)


def test_a_norm_keeps_the_scale_of_what_it_normalises() -> None:
    source = _LATE_NORM.replace("Norm(self.head_dim)", "nn.LayerNorm(self.head_dim)")
    assert (17, "SC301") in findings(source)
    scaled = source.replace(
        "(q @ k.transpose(-2, -1))", "(q @ k.transpose(-2, -1) * self.head_dim ** -0.5)"
    )
    assert (17, "SC301") not in findings(scaled)


def test_a_norm_class_of_the_module_keeps_the_scale_where_ranks_are_unknown() -> None:
    # Hugging Face's layout: heads split by (*hidden_states.shape[:-1], -1, d), the norm between
    # the view and the transpose; inside the norm x's rank is unknown, so its rsqrt and gain
    # could be scales but for the name of the class
    source = """\
    import torch
    import torch.nn as nn

    class QKNormAttention(nn.Module):
        def __init__(self, hidden_size, num_heads):
            super().__init__()
            self.head_dim = hidden_size // num_heads
            self.q_proj = nn.Linear(hidden_size, hidden_size)
            self.k_proj = nn.Linear(hidden_size, hidden_size)
            self.q_norm = ModelRMSNorm(self.head_dim)
            self.k_norm = ModelRMSNorm(self.head_dim)

        def forward(self, hidden_states):
            hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
            q = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
            k = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
            return torch.matmul(q, k.transpose(2, 3)).softmax(dim=-1)

    class ModelRMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states
    """
    assert findings(source) == [(17, "SC301")]
    # the same class under another name: what it multiplies by may be a scale
    assert findings(source.replace("ModelRMSNorm", "ModelGain")) == []
    # timm writes RmsNorm
    assert findings(source.replace("ModelRMSNorm", "RmsNorm")) == [(17, "SC301")]


def test_a_norm_class_built_in_sizes_of_its_own_keeps_the_scale() -> None:
    # OLMo: one norm over all heads, whose model is then named by its sizes
    # (``ModelRMSNorm(hidden_size=...)``), before the heads are split
    source = """\
    import torch
    import torch.nn as nn

    class ModelRMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            return self.weight * hidden_states * torch.rsqrt(variance + self.variance_epsilon)

    class QKNormAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            heads = config.num_attention_heads
            self.head_dim = getattr(config, "head_dim", config.hidden_size // heads)
            width = config.num_attention_heads * self.head_dim
            self.q_proj = nn.Linear(config.hidden_size, width)
            self.k_proj = nn.Linear(config.hidden_size, width)
            self.q_norm = ModelRMSNorm(width, config.rms_norm_eps)
            self.k_norm = ModelRMSNorm(width, config.rms_norm_eps)

        def forward(self, hidden_states):
            hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
            q = self.q_norm(self.q_proj(hidden_states)).view(hidden_shape).transpose(1, 2)
            k = self.k_norm(self.k_proj(hidden_states)).view(hidden_shape).transpose(1, 2)
            return torch.matmul(q, k.transpose(2, 3)).softmax(dim=-1)
    """
    assert findings(source) == [(29, "SC301")]


_LINEAR_NORM = """\
import torch
import torch.nn as nn

class LinearNorm(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bn = nn.BatchNorm1d(out_features)

    def forward(self, x):
        x = self.linear(x)
        return self.bn(x.flatten(0, 1)).reshape_as(x)

class ConvNorm(nn.Module):
    def __init__(self, in_chs, out_chs):
        super().__init__()
        self.linear = nn.Conv2d(in_chs, out_chs, 1, bias=False)
        self.bn = nn.BatchNorm2d(out_chs)

    def forward(self, x):
        return self.bn(self.linear(x))

class Attention(nn.Module):
    def __init__(self, dim, key_dim, num_heads, use_conv=False):
        super().__init__()
        ln_layer = ConvNorm if use_conv else LinearNorm
        self.num_heads, self.key_dim = num_heads, key_dim
        self.qkv = ln_layer(dim, key_dim * num_heads * 3)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, self.num_heads, -1).split([self.key_dim] * 3, dim=3)
        q, k, v = q.permute(0, 2, 1, 3), k.permute(0, 2, 3, 1), v.permute(0, 2, 1, 3)
        attn = (q @ k).softmax(dim=-1)
        return (attn @ v).transpose(1, 2).reshape(B, N, -1)
"""


def test_batch_norms_keep_the_shape_and_the_scale() -> None:
    source = _LINEAR_NORM.replace("ConvNorm if use_conv else LinearNorm", "LinearNorm")
    assert (34, "SC301") in findings(source)


def test_a_layer_of_a_class_chosen_among_several_runs_each() -> None:
    # LeViT: ``ln_layer = ConvNorm if use_conv else LinearNorm``, then ``ln_layer(...)``
    assert (34, "SC301") in findings(_LINEAR_NORM)


def test_queries_of_one_number_per_position_need_no_scale() -> None:
    # timm's CSATv2: nn.Linear(1, 3) unbound on its last axis gives each position one number
    # of q, k and v: d_k is 1 (the product contracting positions is a bug of another kind)
    source = """\
    import torch.nn as nn

    class ScalarAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(1, 3, bias=False)

        def forward(self, x):
            B, C, H, W = x.shape
            q, k, v = self.qkv(x.flatten(2).transpose(1, 2)).unbind(-1)
            attn = (q @ k.transpose(-1, -2)).softmax(dim=-1)
            return (attn @ v).unsqueeze(-1)
    """
    assert findings(source) == []


def test_cosine_attention_needs_its_temperature_on_either_branch() -> None:
    # XCiT: the fused branch gives SDPA scale=1.0 because q carries the temperature; the branch
    # by hand that forgets it is not excused by that scale=1.0
    source = """\
    import torch.nn as nn
    import torch.nn.functional as F

    class XCA(nn.Module):
        def __init__(self, dim, num_heads, fused_attn):
            super().__init__()
            self.num_heads, self.fused_attn = num_heads, fused_attn
            self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
            self.qkv = nn.Linear(dim, dim * 3)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)
            q, k, v = qkv.permute(2, 0, 3, 4, 1).unbind(0)
            if self.fused_attn:
                q = F.normalize(q, dim=-1) * self.temperature
                k = F.normalize(k, dim=-1)
                return F.scaled_dot_product_attention(q, k, v, scale=1.0)
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
            attn = (q @ k.transpose(-2, -1)) * self.temperature
            return attn.softmax(dim=-1) @ v
    """
    assert not [code for _, code in findings(source) if code == "SC301"]
    untempered = source.replace(" * self.temperature\n            return", "\n            return")
    assert [code for _, code in findings(untempered) if code == "SC301"] == ["SC301"]
    # and with no unit vectors at all: scale=1.0 on q scaled beforehand excuses nothing
    plain = untempered.replace("F.normalize(q, dim=-1)", "q").replace("F.normalize(k, dim=-1)", "k")
    assert [code for _, code in findings(plain) if code == "SC301"] == ["SC301"]


_CAIT_TALKING_HEADS = """\
    import torch.nn as nn

    class TalkingHeadAttn(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.num_heads = num_heads
            self.scale = (dim // num_heads) ** -0.5
            self.qkv = nn.Linear(dim, dim * 3)
            self.proj_l = nn.Linear(num_heads, num_heads)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            attn = (q * self.scale) @ k.transpose(-2, -1)
            attn = self.proj_l(attn.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            attn = attn.softmax(dim=-1)
            return (attn @ v).transpose(1, 2).reshape(B, N, C)
    """


def test_talking_heads_between_named_sizes_keep_the_scores() -> None:
    # CaiT mixes the heads with nn.Linear(num_heads, num_heads) over the head axis moved last;
    # num_heads and N are named apart, which tells the head axis from the keys
    source = _CAIT_TALKING_HEADS
    assert not [code for _, code in findings(source) if code == "SC303"]
    wrong_axis = source.replace("attn.softmax(dim=-1)", "attn.softmax(dim=1)")
    assert (17, "SC303") in findings(wrong_axis)


def test_talking_heads_keep_the_scores_of_a_wrong_key_transpose() -> None:
    # the keys' axis moves with the permutes around the head-mixing layer, so the scores
    # reach the softmax even where a wrong transpose left their sizes unknown (CaiT)
    source = _CAIT_TALKING_HEADS.replace("k.transpose(-2, -1)", "k.transpose(1, 2)")
    assert (15, "SC201") in findings(source)
    assert not findings(source.replace("k.transpose(1, 2)", "k.transpose(-2, -1)"))


def test_heads_mixed_by_a_matrix_product_keep_the_keys_axis() -> None:
    # (scores moved to [b, i, j, h]) @ mix mixes the heads: the keys stay on their axis
    source = """\
    import torch

    def mixed_heads_softmax(q, k, mix):
        dots = torch.einsum("bhid,bhjd->bhij", q, k) * q.size(-1) ** -0.5
        mixed = (dots.permute(0, 2, 3, 1) @ mix).permute(0, 3, 1, 2)
        return mixed.softmax(dim=-1)
    """
    assert not findings(source)
    assert (6, "SC303") in findings(source.replace("softmax(dim=-1)", "softmax(dim=1)"))


def test_pieces_of_a_split_rejoined_by_a_comprehension_keep_the_rank() -> None:
    # Gemma 4's rotary embedding: split the features, rotate each piece, cat them back
    source = """\
    import torch
    import torch.nn as nn

    def rotate(x, cos, sin):
        return x * cos + x.flip(-1) * sin

    def multidimensional_rope(x, cos, sin, ndim: int = 2):
        sizes = [2 * (x.shape[-1] // (2 * ndim))] * ndim
        x_parts = torch.split(x, sizes, dim=-1)
        cos_parts = torch.split(cos, sizes, dim=-1)
        sin_parts = torch.split(sin, sizes, dim=-1)
        y_parts = [rotate(x_parts[i], cos_parts[i], sin_parts[i]) for i in range(ndim)]
        return torch.cat(y_parts, dim=-1)

    class Attention(nn.Module):
        def __init__(self, dim, num_heads, head_dim):
            super().__init__()
            self.num_heads, self.head_dim = num_heads, head_dim
            self.q_proj = nn.Linear(dim, num_heads * head_dim)
            self.k_proj = nn.Linear(dim, num_heads * head_dim)

        def forward(self, x, cos, sin):
            B, N, C = x.shape
            q = self.q_proj(x).view(B, N, self.num_heads, self.head_dim)
            k = self.k_proj(x).view(B, N, self.num_heads, self.head_dim)
            q = multidimensional_rope(q, cos, sin).transpose(1, 2)
            k = multidimensional_rope(k, cos, sin).transpose(1, 2)
            attn = (q @ k.transpose(1, 2)) * self.head_dim ** -0.5
            return attn.softmax(dim=-1)
    """
    assert (28, "SC201") in findings(source)
    assert not findings(source.replace("k.transpose(1, 2)", "k.transpose(-2, -1)"))


def test_keys_of_the_product_of_either_branch_are_checked() -> None:
    # timm's halo attention computes the scores by one product or another, and the softmax
    # after the join reads either: a wrong key transpose on the branch not kept is still found
    source = """\
    import torch.nn as nn

    class HaloAttn(nn.Module):
        def __init__(self, dim_head, scale_pos_embed):
            super().__init__()
            self.scale = dim_head ** -0.5
            self.scale_pos_embed = scale_pos_embed

        def forward(self, q, k, v, pos):
            B, H, L, D = q.shape
            B, H, S, D = k.shape
            if self.scale_pos_embed:
                attn = (q @ k.transpose(-1, -2) + pos) * self.scale
            else:
                attn = (q @ k.transpose(-1, -2)) * self.scale + pos
            return attn.softmax(dim=-1) @ v
    """
    assert not findings(source)
    first = source.replace("(q @ k.transpose(-1, -2) + pos)", "(q @ k.transpose(1, 2) + pos)")
    second = source.replace("(q @ k.transpose(-1, -2)) *", "(q @ k.transpose(1, 2)) *")
    assert [code for _, code in findings(first)] == ["SC201"]
    assert [code for _, code in findings(second)] == ["SC201"]


def test_a_norm_class_default_keeps_the_shape() -> None:
    # timm's SHViT: norm_layer=GroupNorm1, a project's own norm, named like one
    source = """\
    import torch
    import torch.nn as nn
    from timm.layers import GroupNorm1

    class SingleHeadAttention(nn.Module):
        def __init__(self, dim, qk_dim, norm_layer=GroupNorm1):
            super().__init__()
            self.scale = qk_dim ** -0.5
            self.qk_dim = qk_dim
            self.pre_norm = norm_layer(dim)
            self.qkv = nn.Conv2d(dim, qk_dim * 2 + dim, 1)

        def forward(self, x):
            B, C, H, W = x.shape
            qkv = self.qkv(self.pre_norm(x))
            q, k, v = torch.split(qkv, [self.qk_dim, self.qk_dim, C], dim=1)
            q, k, v = q.flatten(2), k.flatten(2), v.flatten(2)
            attn = (q.transpose(-2, -1) @ k) * self.scale
            attn = attn.softmax(dim=-1)
            return (v @ attn.transpose(-2, -1)).reshape(B, C, H, W)
    """
    assert not findings(source)
    assert (19, "SC303") in findings(source.replace("softmax(dim=-1)", "softmax(dim=1)"))


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    global x\n    x = 1\n",
        "def f(): global x\n",
        "def f():\n    y = 1; global x\n",
        "def f():\n    y = 1 ;nonlocal x\n",
        "def f():\n\tif y: global x\n",
        "def f():\n    try: nonlocal x\n    finally: pass\n",
        "def f():\n    y = 1; \\\n  global x\n",
        "def f():\n\x0c    nonlocal x\n",
        "global_pool = 1\nx = global_pool; y = (1 if x else 2)\n",
        "self_nonlocal = 1  # global average pooling\n",
        "def f(x): return x.global_pool\n",
    ],
)
def test_a_declaration_is_found_wherever_a_statement_may_start(source: str) -> None:
    """The text test that spares the walk for ``nonlocal``/``global`` must never miss one
    (the analysis would keep a fact a nested function rebinds), and should pass over names
    that merely contain the word."""
    declared = any(
        isinstance(node, ast.Global | ast.Nonlocal) for node in ast.walk(ast.parse(source))
    )
    assert may_declare(source) == declared


@pytest.mark.parametrize(
    ("split", "heads"),
    [
        ("view(B, self.num_heads, L, -1)", True),  # named heads
        ("view(B, self.h, L, self.d_k)", True),  # the features in self.h pieces of self.d_k
        ("view(2, B * L, -1)", False),  # Doge's router logits, in two halves
    ],
)
def test_a_split_speaks_of_heads_only_where_the_code_tells_heads(split: str, heads: bool) -> None:
    """SC102's message speaks of heads where the view's sizes name them, or where the
    features are cut into a named count of pieces as wide as the last new axis; Doge's router
    logits are split the same way, and are no heads."""
    source = f"""\
        import torch.nn as nn


        class Split(nn.Module):
            def __init__(self, d_model, h):
                super().__init__()
                self.num_heads = h
                self.h = h
                self.d_k = d_model // h
                self.proj = nn.Linear(d_model, d_model)

            def forward(self, x):
                B, L, _ = x.shape
                return self.proj(x).{split}
        """
    assert (_split_message(source) == _HEADS_MIX) is heads


def test_image_windows_are_no_heads() -> None:
    """RF-DETR's ``window_partition`` views a grid of patches as windows: SC102 reports the
    rows read as columns, in terms of axes, not heads."""
    source = """\
        import torch.nn as nn


        class Windows(nn.Module):
            def __init__(self, num_windows):
                super().__init__()
                self.num_windows = num_windows

            def forward(self, grid):
                batch_size, rows, columns, channels = grid.shape
                windows = grid.view(
                    batch_size,
                    self.num_windows,
                    columns // self.num_windows,
                    self.num_windows,
                    rows // self.num_windows,
                    channels,
                )
                return windows.transpose(2, 3)
        """
    assert _split_message(source) == _AXES_MIX


_HEADS_MIX = (
    "heads mix positions and features silently; view with the heads after the sequence axis, "
    "then `.transpose(...)` them forward"
)
_AXES_MIX = (
    "its entries mix with those of other axes silently; view the sizes in the order the data "
    "lies in, then `.transpose(...)` them where they belong"
)


def _split_message(source: str) -> str:
    """What SC102's one finding in ``source`` says goes wrong."""
    rules = [rule() for rule in all_rules()]
    result = lint_source(textwrap.dedent(source).encode(), "snippet.py", rules)
    [message] = [d.message for d in result.diagnostics if d.code == "SC102"]
    return message.split("laid out differently, so ", 1)[1]


NANO_GPT = """\
    import torch
    import torch.nn as nn
    from torch.nn import functional as F


    class GPT(nn.Module):
        def __init__(self, vocab, block_size, width):
            super().__init__()
            self.block_size = block_size
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab, width),
                wpe=nn.Embedding(block_size, width),
            ))
            self.heads = nn.ModuleDict({"lm": nn.Linear(width, vocab)})

        def forward(self, idx):
            b, t = idx.size()
            tok_emb = self.transformer.wte(idx)
            last = tok_emb[:, [-1], :]
            logits = self.heads["lm"](last)
            return logits

        def generate(self, idx, steps):
            for _ in range(steps):
                idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
                logits = self(idx_cond)
                logits = logits[:, -1, :]
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx
"""


def test_a_model_that_calls_itself_and_keeps_layers_by_name_is_known():
    """nanoGPT: layers kept in an ``nn.ModuleDict`` of ``dict(...)`` or of a dict literal are
    read back by attribute and by key, a list of integers indexes as an index tensor
    (``x[:, [-1], :]`` keeps the axis, one long), ``self(x)`` runs the model's own
    ``forward``, and a slice of a tensor of unknown rank has its rank (so ``forward``'s
    ``b, t = idx.size()`` tells ``generate`` that ``idx`` has two axes)."""
    forward = _shapes_in(NANO_GPT, "GPT.forward")
    assert forward["tok_emb"] == "[idx.shape[0], idx.shape[1], width]"
    assert forward["last"] == "[idx.shape[0], 1, width]"
    assert forward["logits"] == "[idx.shape[0], 1, vocab]"
    generate = _shapes_in(NANO_GPT, "GPT.generate")
    assert generate["idx_cond"] == "[idx.shape[0], ?]"
    assert generate["probs"] == "[idx.shape[0], vocab]"
    assert generate["idx_next"] == "[idx.shape[0], 1]"


GROUPED_QUERY_ATTENTION = """\
    import torch
    import torch.nn as nn


    def repeat_kv(hidden_states, n_rep: int):
        batch, kv_heads, slen, head_dim = hidden_states.shape
        if n_rep == 1:
            return hidden_states
        hidden_states = hidden_states[:, :, None].expand(batch, kv_heads, n_rep, slen, head_dim)
        return hidden_states.reshape(batch, kv_heads * n_rep, slen, head_dim)


    def eager_attention_forward(module, query, key, value):
        key_states = repeat_kv(key, module.num_key_value_groups)
        scores = torch.matmul(query, key_states.transpose(2, 3))
        return torch.softmax(scores, dim=-1)


    class Attention(nn.Module):
        def __init__(self, hidden_size, heads, kv_heads):
            super().__init__()
            self.head_dim = hidden_size // heads
            self.num_key_value_groups = heads // kv_heads
            self.q_proj = nn.Linear(hidden_size, heads * self.head_dim)
            self.k_proj = nn.Linear(hidden_size, kv_heads * self.head_dim)
            self.v_proj = nn.Linear(hidden_size, kv_heads * self.head_dim)

        def forward(self, x):
            B, L, _ = x.shape
            q = self.q_proj(x).view(B, L, -1, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(B, L, -1, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(B, L, -1, self.head_dim).transpose(1, 2)
            return eager_attention_forward(self, q, k, v)
    """


def test_self_handed_to_a_function_is_an_instance_of_its_class() -> None:
    """``eager_attention_forward(self, q, k, v)`` reads the layer's sizes through
    ``module``: the keys repeated for each group of queries have the queries' heads."""
    shapes = _shapes_in(GROUPED_QUERY_ATTENTION, "eager_attention_forward")
    assert shapes["key_states"] == "[B, heads, L, self.head_dim]"


def test_a_return_where_a_test_pins_a_size_is_written_as_the_others() -> None:
    """``repeat_kv`` returns its input where ``n_rep == 1``: there ``kv_heads`` is
    ``kv_heads * n_rep``, so both returns are ``[b, kv*n_rep, s, d]``."""
    source = """\
        import torch

        def repeat_kv(x, n_rep: int):
            b, kv, s, d = x.shape
            if n_rep == 1:
                return x
            return x[:, :, None].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)

        def repeat_unless_two(x, n_rep: int):
            b, kv, s, d = x.shape
            if n_rep == 2:
                return x
            return x[:, :, None].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)

        def f(x, n: int):
            b, kv, s, d = x.shape
            repeated = repeat_kv(x, n)
            differs = repeat_unless_two(x, n)
            return repeated, differs

        def g(module, x):
            b, kv, s, d = x.shape
            grouped = repeat_kv(x, module.num_key_value_groups)
            return grouped
        """
    shapes = _shapes_in(source, "f")
    assert shapes["repeated"] == "[b, kv*n, s, d]"
    # where n_rep is 2, kv is not kv * n_rep: the sizes stay apart
    assert shapes["differs"] == "[b, ?, s, d]"
    # a value the caller does not know, tested before it is used as a size: the size it is
    # there (Hugging Face's ``repeat_kv(key, module.num_key_value_groups)``)
    assert _shapes_in(source, "g")["grouped"] == "[b, kv*module.num_key_value_groups, s, d]"


def test_a_loop_over_a_range_binds_an_int_index() -> None:
    """``for idx in range(n)`` (and the first of ``for i, x in enumerate(xs)``) binds an int:
    ``segmentation[idx]`` takes one item, dropping the first axis. Where ``range`` is another
    function, the index is unknown."""
    source = """\
        import torch

        def f(x):
            b, l, d = x.shape
            for idx in range(b):
                item = x[idx]
            for i, row in enumerate(x):
                counted = x[i]
            return item, counted

        def g(x, range):
            b, l, d = x.shape
            for idx in range(b):
                item = x[idx]
            return item
        """
    shapes = _shapes_in(source, "f")
    assert shapes["item"] == shapes["counted"] == "[l, d]"
    assert _shapes_in(source, "g")["item"] == "?"


def test_an_attribute_copied_from_a_size_is_that_size_in_the_layers_tensors() -> None:
    """``self.num_heads = config.num_attention_heads`` after ``config.num_attention_heads``
    sized ``self.head_size``: one size, also in the parameter ``__init__`` makes of it, so a
    bias per head keeps the queries' heads (wav2vec2-BERT's ``pos_bias_u``)."""
    source = """\
        import torch
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.head_size = config.hidden_size // config.num_attention_heads
                self.num_heads = config.num_attention_heads
                self.query = nn.Linear(config.hidden_size, config.hidden_size)
                self.pos_bias = nn.Parameter(torch.zeros(self.num_heads, self.head_size))

            def forward(self, x):
                b, n, _ = x.shape
                q = self.query(x).view(b, n, -1, self.head_size).transpose(1, 2)
                biased = q + self.pos_bias[None, :, None, :]
                return biased
        """
    shapes = _shapes_in(source, "Attention.forward")
    assert shapes["q"] == shapes["biased"] == "[b, self.num_heads, n, self.head_size]"


LAYERS_OF_TWO_WIDTHS = """\
    import torch
    import torch.nn as nn


    class Conv1D(nn.Module):
        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf
            self.weight = nn.Parameter(torch.empty(nx, nf))

        def forward(self, x):
            return torch.matmul(x, self.weight).view(*x.shape[:-1], self.nf)


    class Doubled(nn.Module):
        def __init__(self, nf):
            super().__init__()
            self.nf = nf
            self.nf = 2 * nf  # written twice: not the parameter as it is

        def forward(self, x):
            return x.new_zeros(*x.shape[:-1], self.nf)


    class Attention(nn.Module):
        def __init__(self, embed_dim, inner_dim):
            super().__init__()
            self.q_attn = Conv1D(embed_dim, embed_dim)
            self.k_attn = Conv1D(inner_dim, embed_dim)
            self.doubled = Doubled(embed_dim)

        def forward(self, hidden_states):
            b, t, e = hidden_states.shape
            query = self.q_attn(hidden_states)
            key = self.k_attn(hidden_states)
            other = self.doubled(hidden_states)
    """


def test_a_layers_result_is_in_the_sizes_its_construction_passed() -> None:
    """GPT-2's ``Conv1D(nf, nx)`` stores ``self.nf = nf`` and returns ``[..., self.nf]``:
    built as ``Conv1D(embed_dim, embed_dim)`` its result is ``embed_dim`` wide here, and two
    layers of the class built with two widths return two widths (both were ``self.nf``, the
    callee's name, which means nothing in the caller). An attribute ``__init__`` writes twice
    is not the parameter it was first set to: what it holds stays the callee's."""
    shapes = _shapes_in(LAYERS_OF_TWO_WIDTHS, "Attention.forward")
    assert shapes["query"] == "[b, t, embed_dim]"
    assert shapes["key"] == "[b, t, inner_dim]"
    assert shapes["other"] == "[b, t, 2*nf]"  # its own sizes: not the construction's


ONE_TEST_TWICE = """\
    import torch


    def pick(flag, other, enc):
        x = torch.zeros(2, 3)
        y = torch.zeros(4, 5)
        states = x if flag else y
        if flag:
            on = states + 0
        else:
            off = states + 0
        if flag:
            z = x
        else:
            z = y
        if not flag:
            z_off = z + 0
        current = enc if enc is not None else x
        if enc is None:
            hidden = current + 0
        if other:
            nested = x if flag else y
        if flag:
            after_block = nested + 0
        rebound = x if flag else y
        flag = other
        if flag:
            flag_rebound = rebound + 0
        again = x if other else y
        again = again + 0
        if other:
            name_rebound = again + 0
"""


def test_a_second_branch_on_the_same_test_reads_each_side() -> None:
    """ImageGPT's ``current_states = encoder_hidden_states if is_cross_attention else
    hidden_states``, then ``if is_cross_attention: ... else: ...``: on each side of the
    second test the name is what the first bound there, whether a conditional expression or
    an ``if`` bound it, the test written ``not flag`` or ``x is None``. Not where the test's
    name or the name itself was bound again since, nor after the block that bound it ends."""
    shapes = _shapes_in(ONE_TEST_TWICE, "pick")
    assert shapes["states"] == "[?, ?]"
    assert (shapes["on"], shapes["off"]) == ("[2, 3]", "[4, 5]")
    assert shapes["z_off"] == "[4, 5]"
    assert shapes["hidden"] == "[2, 3]"
    assert shapes["after_block"] == "[?, ?]"
    assert shapes["flag_rebound"] == "[?, ?]"
    assert shapes["name_rebound"] == "[?, ?]"
