"""The analysis at the edges of its input: no internal error (D16), no function's findings
dropped for being nested too deeply (D17), and no work per finding that grows with the file
or per function that grows with the module (D18). Complexity is tested by counting the
work, never by timing it."""

from __future__ import annotations

import ast
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

import shapecheck.linter
import shapecheck.show
import shapecheck.source
from shapecheck.analysis import ModuleAnalysis, analyse
from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import Fact, FunctionNode, FunctionRef, RepeatedFact, TensorFact
from shapecheck.analysis.interpreter import Interpreter
from shapecheck.diagnostics import FileResult
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules

Cli = Callable[..., Result]
Write = Callable[[str, str], Path]

RULES = [rule() for rule in all_rules()]


def check(source: str) -> FileResult:
    return lint_source(textwrap.dedent(source).encode(), "snippet.py", RULES)


def codes(source: str) -> list[str]:
    return [diagnostic.code for diagnostic in check(source).diagnostics]


def analysed(source: str) -> ModuleAnalysis:
    text = textwrap.dedent(source)
    return analyse(ast.parse(text), text)


def fact_of(analysis: ModuleAnalysis, written: str) -> Fact | None:
    """The fact of the first expression written exactly so."""
    node = next(
        node
        for node in ast.walk(analysis.module)
        if isinstance(node, ast.expr) and ast.unparse(node) == written
    )
    return analysis.fact(node)


def tensor_of(analysis: ModuleAnalysis, written: str) -> TensorFact:
    fact = fact_of(analysis, written)
    assert isinstance(fact, TensorFact), fact
    return fact


# --- D16: no internal error ---------------------------------------------------------------


@pytest.mark.parametrize(
    "expression", ["x * 10 ** 400", "x.view(2 ** 1024)", "torch.zeros(10 ** 400)"]
)
def test_d16_a_power_beyond_any_float_is_an_unknown_number(expression: str) -> None:
    result = check(f"import torch\ndef f(x):\n    return {expression}\n")
    assert result.complete and result.diagnostics == []
    assert tensor_of(analysed(f"import torch\ndef f(x):\n    return {expression}\n"), expression)


def test_d16_a_huge_integer_written_out_stays_exact() -> None:
    huge = 10**400
    source = f"import torch\ndef f(x):\n    y = x * {huge}\n    return torch.zeros({huge})\n"
    assert check(source).complete
    assert tensor_of(analysed(source), f"torch.zeros({huge})").shape == (Dim.constant(huge),)


def test_d16_a_size_past_the_digits_python_writes_is_said_by_its_length() -> None:
    """A product of two 4,000-digit sizes is exact, but ``str`` refuses its 8,000 digits."""
    source = f"""\
        import torch
        def f():
            n = {"9" * 4000}
            return torch.zeros(3, n * n) @ torch.zeros(2, 4)
        """
    [mismatch] = check(source).diagnostics
    assert mismatch.code == "SC501"
    assert "<a 8000-digit number> and 2 can never be equal" in mismatch.message
    assert tensor_of(analysed(source), "torch.zeros(3, n * n)").shape == (
        Dim.constant(3),
        Dim.constant((10**4000 - 1) ** 2),
    )


def test_d16_a_0d_tensor_takes_the_unknown_shape_of_what_it_divides() -> None:
    """``t1 * 2`` of an unmodelled call is taken for a size, but may be a tensor: divided by
    a 0-d tensor it broadcasts, so the result is not 0-d (its rank is unknown)."""
    source = """\
        import torch
        def forward(x):
            t1 = x.roll(1, -1)
            t2 = t1 * 2
            t3 = t2 / torch.tensor(4.0)
            return t3.transpose(1, 2)
        """
    assert codes(source) == []
    assert tensor_of(analysed(source), "t2 / torch.tensor(4.0)").shape is None


@pytest.mark.parametrize(
    "call", ["movedim(0, 0)", "movedim(-1, 0)", "transpose(0, -1)", "swapaxes(-1, -1)"]
)
def test_d16_a_0d_tensor_takes_dims_minus_one_and_zero(call: str) -> None:
    """PyTorch takes dims -1 and 0 on a 0-d tensor, as if it had one axis: it stays 0-d."""
    source = f"import torch\ndef f():\n    return torch.tensor(2.0).{call}\n"
    assert check(source).complete
    assert tensor_of(analysed(source), f"torch.tensor(2.0).{call}").shape == ()


@pytest.mark.parametrize("call", ["movedim(0, 1)", "transpose(0, 1)", "transpose(2, 2)"])
def test_d16_a_dim_out_of_a_0d_tensors_range_makes_the_result_unknown(call: str) -> None:
    source = f"import torch\ndef f():\n    return torch.tensor(2.0).{call}\n"
    assert codes(source) == []
    assert tensor_of(analysed(source), f"torch.tensor(2.0).{call}").shape is None


@pytest.mark.parametrize(
    "equation", ["ij,jk->ik->ik", "bhid,bhjd->bhij", "ij,jk->...ik", "i..j..,jk->ik"]
)
def test_d16_an_einsum_equation_the_operands_do_not_fit_is_unknown(equation: str) -> None:
    """A malformed equation, or one naming more axes than the operands have: PyTorch raises,
    the analysis knows nothing of the result (and finds no attention scores in it)."""
    source = f"""\
        import torch
        def f():
            a, b = torch.zeros(2, 3), torch.zeros(3, 4)
            return torch.einsum("{equation}", a, b).softmax(-1)
        """
    assert codes(source) == []
    call = f"torch.einsum({equation!r}, a, b)"
    assert tensor_of(analysed(source), call).shape is None


def test_d16_fused_attention_on_0d_tensors() -> None:
    source = """\
        import torch
        import torch.nn.functional as F
        def f(x):
            return F.scaled_dot_product_attention(x.reshape([]), x.reshape([]), x.reshape([]))
        """
    assert codes(source) == []


def test_d16_a_product_of_0d_tensors_is_no_attention() -> None:
    """PyTorch refuses ``@`` on 0-d tensors: no product, so no attention scores for SC301."""
    source = """\
        import torch
        def f():
            return (torch.zeros(()) @ torch.zeros(())).softmax(-1)
        """
    assert codes(source) == []
    assert tensor_of(analysed(source), "torch.zeros(()) @ torch.zeros(())").product is None


def test_d16_many_pieces_are_a_sequence_of_unknown_length() -> None:
    """``chunk(n)`` of a huge ``n`` must not build a tuple of ``n`` facts."""
    source = "import torch\ndef f(x):\n    return x.chunk(100000)\n"
    assert codes(source) == []
    assert isinstance(fact_of(analysed(source), "x.chunk(100000)"), RepeatedFact)


def test_d16_an_internal_error_while_showing_shapes_is_a_message(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> None:
        raise ZeroDivisionError("integer modulo by zero")

    monkeypatch.setattr(shapecheck.show, "analyse", broken)
    write("model.py", "import torch\ndef f(x):\n    return x\n")
    result = cli("--show-shapes", "model.py")
    assert result.exit_code == 2
    assert "model.py: internal error while showing shapes (ZeroDivisionError" in result.output
    assert "Traceback" not in result.output


def test_d16_show_shapes_no_longer_infers_a_0d_shape(cli: Cli, write: Write) -> None:
    write(
        "model.py",
        "import torch\ndef forward(x):\n    t1 = x.roll(1, -1)\n    t2 = t1 * 2\n"
        "    t3 = t2 / torch.tensor(4.0)\n    return t3.transpose(1, 2)\n",
    )
    result = cli("--show-shapes", "model.py")
    assert result.exit_code == 0
    assert "# t3: ?" in result.output


# --- D17: too deep to analyse is said, never dropped ---------------------------------------


def deep(terms: int) -> str:
    """``f``, whose sum of ``terms`` terms nests as deep, and ``g``: one SC401 finding each."""
    return (
        "import torch\n"
        "def f(scores, mask):\n"
        "    y = scores.masked_fill(mask, -1e9)\n"
        f"    return y{' + y' * (terms - 1)}\n"
        "def g(scores, mask):\n"
        "    return scores.masked_fill(mask, -1e9)\n"
    )


def test_d17_a_function_too_deep_to_analyse_gets_an_sc000_and_the_others_keep_theirs() -> None:
    assert codes(deep(300)) == ["SC401", "SC401"]  # deep, but within Python's stack
    result = check(deep(2000))
    found = [(d.line, d.column, d.code, d.message) for d in result.diagnostics]
    assert (2, 1, "SC000", "cannot analyse `f`: too deeply nested") in found
    assert [(line, code) for line, _, code, _ in found] == [(2, "SC000"), (6, "SC401")]
    assert not result.complete  # how deep it may go depends on the stack: never cached


def test_d17_deep_top_level_code_gets_an_sc000() -> None:
    source = "import torch\ny = torch.zeros(3)\nz = y" + " + y" * 2000 + "\n"
    [problem] = check(source).diagnostics
    assert (problem.code, problem.message) == (
        "SC000",
        "cannot analyse the top-level code: too deeply nested",
    )


def test_d17_a_call_into_a_function_too_deep_is_an_unmodelled_call() -> None:
    """``h`` calls ``f``: ``h`` itself is analysed (its finding kept), only ``f`` is not."""
    source = (
        deep(2000) + "def h(scores, mask):\n    return f(scores, mask).masked_fill(mask, -1e9)\n"
    )
    found = [(d.line, d.code) for d in check(source).diagnostics]
    assert found == [(2, "SC000"), (6, "SC401"), (8, "SC401")]


def test_d17_the_linter_exits_2_naming_the_function(cli: Cli, write: Write) -> None:
    write("deep.py", deep(2000))
    result = cli("--no-cache", "deep.py")
    assert result.exit_code == 2
    assert "deep.py:2:1: SC000 cannot analyse `f`: too deeply nested" in result.output
    assert "deep.py:6:" in result.output


def test_d17_show_shapes_says_the_function_could_not_be_analysed(cli: Cli, write: Write) -> None:
    write("deep.py", deep(2000))
    result = cli("--show-shapes", "deep.py")
    assert result.exit_code == 2
    assert "deep.py:2:1: cannot analyse `f`: too deeply nested" in result.output
    assert "deep.py:5 g" in result.output  # the listing of the function it could analyse
    only_f = cli("--show-shapes", "deep.py:f")
    assert only_f.exit_code == 2
    assert "cannot analyse `f`: too deeply nested" in only_f.output
    assert "functions: none" not in only_f.output


def test_d17_coverage_names_a_function_too_deep_and_exits_2(cli: Cli, write: Write) -> None:
    write("deep.py", deep(2000))
    result = cli("--coverage", "deep.py")
    assert result.exit_code == 2
    assert "deep.py:2:1: cannot analyse `f`: too deeply nested" in result.output


# --- D26: out-of-range dims, recursion -----------------------------------------------------


def test_d26_an_axis_out_of_range_is_no_swap_of_an_axis_with_itself() -> None:
    """``x.view(-1)`` is 1-D: ``transpose(1, 2)`` raises IndexError, it does not do nothing."""
    source = "import torch\ndef f(x):\n    return x.view(-1).transpose(1, 2)\n"
    assert codes(source) == []
    assert tensor_of(analysed(source), "x.view(-1).transpose(1, 2)").shape is None


def test_d26_an_identity_order_of_another_rank_is_no_identity() -> None:
    """``permute(0, 1)`` of a 1-D tensor raises: it does not keep every axis in place."""
    assert codes("import torch\ndef f(x):\n    return x.view(-1).permute(0, 1)\n") == []


def test_d26_a_recursive_call_tells_nothing_of_the_parameters() -> None:
    """The only call of ``f`` is its own, with a 1-D tensor: what its callers pass is not
    known, so ``transpose(1, 2)`` is not taken to swap an axis of a 1-D tensor."""
    source = """\
        import torch
        def f(x, n):
            if n == 0:
                return x.transpose(1, 2)
            return f(x.view(-1), n - 1)
        """
    analysis = analysed(source)
    assert tensor_of(analysis, "x.transpose(1, 2)").shape is None
    assert codes(source) == []


# --- D18: work per finding and per function ------------------------------------------------


def sc101(count: int) -> str:
    return "import torch\n" + "".join(
        f"def f{i}(x, B, L, H, D):\n"
        "    y = x.view(B, H, L, D).transpose(1, 2)\n"
        "    return y.view(B, L, H * D)\n"
        for i in range(count)
    )


def test_d18_a_finding_does_not_split_the_whole_file_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The code a rule quotes comes from the lines split once per file
    (``ast.get_source_segment`` splits the whole text on every call)."""
    splits: Counter[str] = Counter()

    def counted(name: str, split: Callable[..., Any]) -> Callable[..., Any]:
        def counting(*args: Any, **kwargs: Any) -> Any:
            splits[name] += 1
            return split(*args, **kwargs)

        return counting

    monkeypatch.setattr(ast, "_splitlines_no_ff", counted("ast", ast._splitlines_no_ff))  # type: ignore[attr-defined]
    lines = shapecheck.source.physical_lines
    monkeypatch.setattr(shapecheck.source, "physical_lines", counted("shapecheck", lines))
    few = [d.code for d in check(sc101(2)).diagnostics]
    splits_for_few = dict(splits)
    splits.clear()
    many = [d.code for d in check(sc101(20)).diagnostics]
    assert (few, many) == (["SC101"] * 2, ["SC101"] * 20)
    assert dict(splits) == splits_for_few


def test_d18_findings_on_one_line_read_its_code_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten findings on one line share its anchor's code, tokenized once."""
    read: list[str] = []
    without_comments = shapecheck.linter._without_comments

    def counting(code: str) -> str:
        read.append(code)
        return without_comments(code)

    monkeypatch.setattr(shapecheck.linter, "_without_comments", counting)
    statements = "; ".join(
        f"y{i} = x.view(B, H, L, D).transpose(1, 2).view(B, L, H * D)" for i in range(10)
    )
    result = check(f"import torch\ndef f(x, B, L, H, D):\n    {statements}\n")
    assert [d.code for d in result.diagnostics] == ["SC101"] * 10
    assert len({d.anchor for d in result.diagnostics}) == 1
    assert len(read) == 1


def test_d18_a_function_closes_over_what_it_reads_not_the_whole_module() -> None:
    """Each ``def`` copied every name bound before it: n functions cost n² in time and
    memory. A closure holds the names the function's code mentions."""
    helpers = "".join(f"def f{i}(x):\n    return x\n" for i in range(50))
    source = (
        "import torch\nSCALE = 0.5\n"
        + helpers
        + "def scaled(x):\n    return x * SCALE\n"
        + "def last(x):\n    return f49(x) + scaled(x)\n"
    )
    analysis = analysed(source)
    helper, scaled = fact_of(analysis, "f49"), fact_of(analysis, "scaled")
    assert isinstance(helper, FunctionRef) and isinstance(scaled, FunctionRef)
    assert helper.closure == ()
    assert [name for name, _ in scaled.closure] == ["SCALE"]


def test_d18_a_function_starts_from_what_it_reads_of_the_globals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every function started from a copy of all the module's globals (n functions, n²)."""
    started: dict[str, set[str]] = {}
    run_function = Interpreter.run_function

    def recording(self: Interpreter, node: FunctionNode, *args: Any) -> Fact:
        started[node.name] = set(self.env)
        return run_function(self, node, *args)

    monkeypatch.setattr(Interpreter, "run_function", recording)
    helpers = "".join(f"def f{i}(x):\n    return x\n" for i in range(50))
    analysed("import torch\nSCALE = 0.5\n" + helpers + "def last(x):\n    return x * SCALE\n")
    assert started["last"] == {"SCALE"}
    assert all(started[f"f{i}"] == set() for i in range(50))
