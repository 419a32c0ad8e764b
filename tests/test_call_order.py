"""Callers are interpreted before what they call (``shapecheck.analysis.order``): each
function once, knowing what every caller hands it, and what a caller learnt from its own
callers reaches the functions it calls."""

from __future__ import annotations

import ast
import textwrap

import pytest

from shapecheck.analysis import analyse, definitions
from shapecheck.analysis.facts import FunctionNode, ModuleFact
from shapecheck.analysis.interpreter import Interpreter
from shapecheck.analysis.order import callers_first
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules


def findings(source: str) -> list[tuple[int, str]]:
    code = textwrap.dedent(source)
    result = lint_source(code.encode(), "example.py", [rule() for rule in all_rules()])
    return [(d.line, d.code) for d in result.diagnostics]


def order_of(source: str) -> list[str]:
    """The qualified names of the module's functions and methods, in the order interpreted."""
    code = textwrap.dedent(source)
    functions: list[tuple[FunctionNode, str]] = []

    def collect(body: list[ast.stmt], prefix: str) -> None:
        for definition in definitions(body):  # as ``analyse`` lists them
            if isinstance(definition, ast.ClassDef):
                collect(definition.body, f"{prefix}{definition.name}.")
            else:
                functions.append((definition, prefix + definition.name))

    collect(ast.parse(code).body, "")
    return [functions[index][1] for index in callers_first(functions, code)]


LAYERS = """\
import torch


def scores(q, k):
    return q @ k.transpose(-2, -1)


class Attention(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.q = torch.nn.Linear(width, width)

    def split(self, x):
        return x

    def forward(self, x):
        q = self.split(self.q(x))
        return scores(q, q).softmax(-1)


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.attn = Attention(width)

    def forward(self, x):
        return self.attn(x)
"""


def test_callers_come_before_what_they_call() -> None:
    """A helper after the method that names it, a layer's methods after the class that
    builds it; the rest in the order written."""
    assert order_of(LAYERS) == [
        "Attention.__init__",
        "Block.__init__",
        "Block.forward",
        "Attention.forward",
        "scores",
        "Attention.split",
    ]


def test_calls_that_go_round_keep_the_order_written() -> None:
    source = """\
    def even(n):
        return n == 0 or odd(n - 1)

    def odd(n):
        return n != 0 and even(n - 1)

    def main():
        return odd(3)
    """
    assert order_of(source) == ["main", "even", "odd"]


def test_a_method_that_names_itself_waits_for_no_one() -> None:
    """``forward`` calling ``super().forward`` mentions its own name: waiting for every
    ``forward`` would make each wait for itself. It waits for no ``forward`` (the base's
    then runs first and again once the subclass's has called it)."""
    source = """\
    class Base:
        def forward(self, x):
            return self.helper(x)

        def helper(self, x):
            return x


    class Child(Base):
        def forward(self, x):
            return super().forward(x)
    """
    assert order_of(source) == ["Base.forward", "Base.helper", "Child.forward"]


def interpretations(source: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often each function of ``source`` is interpreted as itself (not inlined)."""
    counts: dict[str, int] = {}
    original = Interpreter.run_function

    def counting(self: Interpreter, node: FunctionNode, *args: object) -> object:
        if self.record:
            counts[node.name] = counts.get(node.name, 0) + 1
        return original(self, node, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Interpreter, "run_function", counting)
    code = textwrap.dedent(source)
    analyse(ast.parse(code), code)
    return counts


CHAIN = """\
import torch


def project(x, wq, wk):
    q = (x @ wq) * wq.shape[-1] ** -0.5
    return attend(q, x @ wk)


def attend(q, k):
    return weights(q, k)


def weights(q, k):
    return (q @ k.transpose(-2, -1)).softmax(-1)
"""


def test_each_function_is_interpreted_once_after_its_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = interpretations(CHAIN, monkeypatch)
    assert counts == {"project": 1, "attend": 1, "weights": 1}


def test_a_constructor_is_read_once_for_its_model_and_its_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The class's model reads ``__init__`` (what ``self`` holds), and that reading, recorded,
    is what the rules check there: no second reading as a function. The check in it still
    reports (SC502 on the layer it builds), and ``forward`` still sees the layers."""
    source = """\
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.attn = nn.MultiheadAttention(100, 3)
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]
    """
    readings: list[bool] = []
    original = Interpreter.run_function

    def counting(self: Interpreter, node: FunctionNode, *args: object) -> object:
        if node.name == "__init__":
            readings.append(self.record)
        return original(self, node, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Interpreter, "run_function", counting)
    assert findings(source) == [(7, "SC502")]
    assert readings == [True]


def test_an_inherited_constructor_is_checked_as_its_own_class_reads_it() -> None:
    """A subclass without ``__init__`` has its model read from its base's; that reading is
    the subclass's (its own ``make_attn``: 128 features wide), never what the rules check in
    the base's ``__init__``, which its own class's model read (64)."""
    source = textwrap.dedent(
        """\
        import torch.nn as nn


        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = self.make_attn()

            def make_attn(self):
                return nn.Linear(64, 8)


        class Wide(Base):
            def make_attn(self):
                return nn.Linear(128, 8)
        """
    )
    module = ast.parse(source)
    analysis = analyse(module, source)
    made = next(
        node
        for node in ast.walk(module)
        if isinstance(node, ast.Call) and ast.unparse(node) == "self.make_attn()"
    )
    fact = analysis.fact(made)
    assert isinstance(fact, ModuleFact) and fact.kind == "torch.nn.Linear"
    assert fact.in_features is not None and fact.in_features.value == 64


def test_a_function_placed_before_a_caller_is_interpreted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Calls that go round: the one written first learns its callers' facts only once they
    have run, so it runs again; the other runs once."""
    source = """\
    import torch

    def attend(q, k, depth):
        if depth:
            return scaled(q, k, depth - 1)
        return (q @ k.transpose(-2, -1)).softmax(-1)

    def scaled(q, k, depth):
        return attend(q * q.shape[-1] ** -0.5, k, depth)
    """
    counts = interpretations(source, monkeypatch)
    assert counts == {"attend": 2, "scaled": 1}
    assert findings(source) == []


def test_what_a_caller_learnt_from_its_callers_reaches_what_it_calls() -> None:
    """``weights`` is handed the query ``project`` scaled, through ``attend``: no SC301 (the
    unsafe fix would scale it twice). Unscaled, it is reported there."""
    assert findings(CHAIN) == []
    assert findings(CHAIN.replace(" * wq.shape[-1] ** -0.5", "")) == [(14, "SC301")]
