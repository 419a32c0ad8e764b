"""jaxtyping annotations: each form of the dimension grammar as the analysis reads it, the shapes
parameters get from them, and what contradicts them."""

from __future__ import annotations

import ast
import textwrap

import pytest

from shapecheck.analysis import analyse
from shapecheck.analysis.annotations import (
    AxisSpec,
    Bindings,
    ShapeSpec,
    contradiction,
    declared,
    evaluate,
    format_value,
    parse_shape,
)
from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import PrefixedShape, TensorFact

B, S, D, H = (Dim.symbol(name) for name in ("b", "s", "d", "h"))


def spec(text: str) -> ShapeSpec:
    parsed = parse_shape(text)
    assert parsed is not None, text
    return parsed


# --- the grammar ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "axis"),
    [
        ("batch", AxisSpec("name", "batch")),
        ("3", AxisSpec("fixed", size=3)),
        ("channels=3", AxisSpec("fixed", size=3)),
        ("rows=n", AxisSpec("name", "n")),
        ("_", AxisSpec("any")),
        ("_seq", AxisSpec("any")),
        ("?leaf", AxisSpec("any")),
        ("#batch", AxisSpec("name", "batch", broadcast=True)),
        ("#3", AxisSpec("fixed", size=3, broadcast=True)),
        ("h*d", AxisSpec("expression", "h*d")),
        ("d_model//h", AxisSpec("expression", "d_model//h")),
        ("dim-1", AxisSpec("expression", "dim-1")),
        ("#2*n", AxisSpec("expression", "2*n", broadcast=True)),
        ("*batch", AxisSpec("variadic", "batch")),
        ("...", AxisSpec("variadic")),
        ("*_", AxisSpec("variadic")),
        ("#*batch", AxisSpec("variadic")),
        ("*#batch", AxisSpec("variadic")),
        ("*?batch", AxisSpec("variadic")),
    ],
)
def test_each_axis_form_is_read_as_jaxtyping_reads_it(text: str, axis: AxisSpec) -> None:
    assert spec(f"b {text}").axes == (AxisSpec("name", "b"), axis)


@pytest.mark.parametrize(
    "text",
    ["*a *b", "... *b", "##n", "**n", "__n", "*3", "_4", "#_", "*h*d", "_h*d", "n#", "...x", "a,b"],
)
def test_annotations_jaxtyping_rejects_are_none(text: str) -> None:
    assert parse_shape(text) is None


def test_an_empty_annotation_is_a_scalar() -> None:
    assert spec("").axes == () and spec(" ").variadic is None


# --- symbolic sizes ----------------------------------------------------------------------------


def test_expressions_are_evaluated_from_bound_names() -> None:
    bindings = Bindings(sizes={"h": H, "d": D, "n": S})
    assert evaluate("h*d", bindings) == H * D
    assert evaluate("(h*d)//h", bindings) == D
    assert evaluate("2*n", bindings) == Dim.constant(2) * S
    assert evaluate("2+3", bindings) == Dim.constant(5)


@pytest.mark.parametrize("text", ["n-1", "h+d", "d/2", "min(h,d)", "q*d", "h*", "n//0"])
def test_what_sizes_cannot_write_is_no_size(text: str) -> None:
    assert evaluate(text, Bindings(sizes={"h": H, "d": D, "n": S})) is None


# --- what a parameter holds --------------------------------------------------------------------


def test_a_parameter_binds_its_names_and_evaluates_expressions() -> None:
    bindings = Bindings()
    shape = declared(spec("b 3 _ #n h d h*d"), bindings)
    assert isinstance(shape, tuple) and len(shape) == 7
    b, three, anything, broadcast, h, d, merged = shape
    assert three == Dim.constant(3) and merged == h * d
    assert anything.has_unknown and broadcast.has_unknown  # #n may be 1 or n
    assert bindings.sizes == {"b": b, "h": h, "d": d}


def test_one_star_name_is_one_prefix_and_every_ellipsis_another() -> None:
    bindings = Bindings()
    q, k = declared(spec("*batch l d"), bindings), declared(spec("*batch s d"), bindings)
    x, y = declared(spec("... d"), bindings), declared(spec("... d"), bindings)
    assert isinstance(q, PrefixedShape) and isinstance(k, PrefixedShape)
    assert isinstance(x, PrefixedShape) and isinstance(y, PrefixedShape)
    assert q.prefix == k.prefix and q.tail[-1] == k.tail[-1]
    assert x.prefix != y.prefix != q.prefix
    assert format_value(q) == "[*batch, l, d]" and format_value(x) == "[..., d]"


def test_two_functions_star_names_are_apart() -> None:
    first = declared(spec("*batch d"), Bindings())
    second = declared(spec("*batch d"), Bindings())
    assert isinstance(first, PrefixedShape) and isinstance(second, PrefixedShape)
    assert first.prefix != second.prefix


def test_a_variadic_after_the_first_axis_leaves_the_rank_unknown() -> None:
    assert declared(spec("b *rest d"), Bindings()) is None


# --- contradictions ----------------------------------------------------------------------------


def test_a_star_name_binds_the_axes_it_covers() -> None:
    bindings = Bindings()
    assert contradiction(spec("*batch l d"), (B, H, S, D), bindings) is None
    assert bindings.variadics["batch"] == (B, H)
    reason = contradiction(spec("*batch s d"), (B, S, D), bindings)
    assert reason is not None and "1 axis where there were 2" in reason


def test_the_last_axes_after_a_prefix_are_checked_from_the_end() -> None:
    x = declared(spec("*batch s t"), bindings := Bindings())
    assert isinstance(x, PrefixedShape)
    reason = contradiction(spec("*batch t s"), x, bindings.copy())
    assert reason == "axis -2 holds s (s) where the annotation says t"
    assert contradiction(spec("*batch s t"), x, bindings.copy()) is None
    assert contradiction(spec("... t"), x, bindings.copy()) is None


def test_a_prefix_needs_as_many_axes_as_before() -> None:
    x = declared(spec("*batch n"), bindings := Bindings())
    assert isinstance(x, PrefixedShape)
    reason = contradiction(spec("*batch"), x, bindings.copy())
    assert reason is not None and "1 axis where there were 0" in reason
    assert contradiction(spec("*other"), x, bindings.copy()) is None


def test_a_prefix_of_unknown_length_proves_nothing_about_other_axes() -> None:
    x = declared(spec("*batch n"), bindings := Bindings())
    assert isinstance(x, PrefixedShape)
    assert contradiction(spec("*batch"), (B,), bindings.copy()) is None  # batch may be (B,)
    assert contradiction(spec("b c n"), x, bindings.copy()) is None  # batch may be (b, c)
    reason = contradiction(spec("n"), PrefixedShape(x.prefix, (S, D)), bindings.copy())
    assert reason == "at least 2 axes where the annotation has 1"


def test_broadcastable_axes_take_one_and_check_other_literals() -> None:
    assert contradiction(spec("b #3"), (B, Dim.constant(1)), Bindings()) is None
    assert contradiction(spec("b #3"), (B, S), Bindings()) is None  # S may be 1
    reason = contradiction(spec("b #3"), (B, Dim.constant(4)), Bindings())
    assert reason == "axis 1 is 4 where the annotation says 3"
    bindings = Bindings(sizes={"n": Dim.constant(2)})
    assert contradiction(spec("#n"), (Dim.constant(1),), bindings) is None
    assert contradiction(spec("#n"), (Dim.constant(5),), bindings) is not None


def test_an_expression_is_contradicted_by_a_size_off_by_named_factors() -> None:
    bindings = Bindings(sizes={"b": B, "s": S, "h": H, "d": D})
    reason = contradiction(spec("b s h*d"), (B, S, D), bindings.copy())
    assert reason is not None and "axis 2 is d where the annotation says h*d" in reason
    assert contradiction(spec("b s h*d"), (B, S, H * D), bindings.copy()) is None
    reason = contradiction(spec("b 2*s"), (B, S), bindings.copy())
    assert reason == "axis 1 is s where the annotation says 2*s"


def test_an_expression_and_an_independent_name_may_be_equal() -> None:
    d_model = Dim.symbol("d_model")
    bindings = Bindings(sizes={"b": B, "h": H, "d": D, "d_model": d_model})
    assert contradiction(spec("b h*d"), (B, d_model), bindings.copy()) is None
    assert contradiction(spec("b d_model//h"), (B, D), bindings.copy()) is None
    assert contradiction(spec("b n-1"), (B, S), bindings.copy()) is None


# --- the analysis follows annotated tensors ----------------------------------------------------


def returned(body: str) -> str:
    """The shape the analysis finds for the value ``f`` returns."""
    source = textwrap.dedent(
        """
        import torch
        from jaxtyping import Float
        from torch import Tensor

        """
    ) + textwrap.dedent(body)
    module = ast.parse(source)
    analysis = analyse(module, source)
    function = next(node for node in module.body if isinstance(node, ast.FunctionDef))
    statement = function.body[-1]
    assert isinstance(statement, ast.Return) and statement.value is not None
    fact = analysis.fact(statement.value)
    if not isinstance(fact, TensorFact):
        return "?"
    value = fact.shape if fact.shape is not None else fact.prefixed
    return "?" if value is None else format_value(value)


@pytest.mark.parametrize(
    ("expression", "shape"),
    [
        ("x.transpose(-2, -1)", "[*batch, d, s]"),
        ("x.mT.softmax(dim=-1)", "[*batch, d, s]"),
        ("x.transpose(0, 1)", "?"),  # the prefix's axes: not known
        ("x @ x.mT", "[*batch, s, s]"),
        ("x.mT @ y", "[*batch, d, e]"),
        ("x.sum(dim=-1)", "[*batch, s]"),
        ("x.amax(-2, keepdim=True)", "[*batch, 1, d]"),
        ("x.sum()", "[]"),
        ("x.view(*x.shape[:-1], 2, -1)", "[*x.shape[:-1], 2, d//2]"),
        ("x.view(*x.shape[:-2], x.size(-2) * x.shape[-1])", "[*batch, d*s]"),
    ],
)
def test_a_star_name_is_followed_through_ops_on_the_last_axes(expression: str, shape: str) -> None:
    signature = 'def f(x: Float[Tensor, "*batch s d"], y: Float[Tensor, "*batch s e"]):'
    assert returned(f"{signature}\n    return {expression}\n") == shape


@pytest.mark.parametrize(
    ("expression", "shape"),
    [
        ("x.mean(dim=1)", "[b, d]"),
        ("torch.sum(x, dim=(0, -1))", "[s]"),
        ("x.std(dim=-1, keepdim=True)", "[b, s, 1]"),
        ("x.logsumexp(-1)", "[b, s]"),
        ("x.any()", "[]"),
        ("x.argmax(dim=-1)", "[b, s]"),
        ("x.sum(dim=None, keepdim=True)", "[1, 1, 1]"),
        ("x.sum(dim=3)", "?"),  # PyTorch raises
        ("x.sum(dim=(1, 1))", "?"),
        ("x.sum(dim=x.size(1))", "?"),  # not a literal axis
    ],
)
def test_reductions_drop_or_keep_the_axes_they_reduce(expression: str, shape: str) -> None:
    assert returned(f'def f(x: Float[Tensor, "b s d"]):\n    return {expression}\n') == shape


def test_a_rank_learned_from_the_code_keeps_the_annotated_last_axes() -> None:
    body = (
        'def f(x: Float[Tensor, "*batch s t"]):\n'
        '    y = einops.rearrange(x, "b s t -> b t s")\n'
        "    return x\n"
    )
    assert returned(f"import einops\n{body}") == "[x.shape[0], s, t]"
