"""``shapecheck --show-shapes file.py[:Class.method]``: a function annotated with the shapes
the analysis infers, the way a person writes them in the margin.

    12 |         q = self.wq(x).view(B, -1, H, D).transpose(1, 2)  # q: [B, H, L, D]
"""

from __future__ import annotations

import ast
from collections import defaultdict

from shapecheck.analysis import analyse
from shapecheck.analysis.dims import format_shape
from shapecheck.analysis.facts import Fact, FunctionNode, IntFact, TensorFact
from shapecheck.analysis.interpreter import FunctionFacts
from shapecheck.diagnostics import Diagnostic
from shapecheck.source import Source, physical_lines

_NOTE_COLUMN = 60


def show_shapes(source: Source, selector: str | None) -> tuple[str, list[Diagnostic]]:
    """The annotated listing of the functions ``selector`` names (every function if ``None``),
    and an SC000 for each of them the analysis could not follow.

    Raises ``LookupError`` naming the functions there are when ``selector`` matches none.
    """
    analysis = analyse(source.module, source.text)
    defined = [
        function for function in analysis.functions if isinstance(function.node, FunctionNode)
    ]
    too_deep = [part for part in analysis.too_deep if isinstance(part.node, FunctionNode)]
    functions = [function for function in defined if selector in (None, function.name)]
    problems = [part.diagnostic(source.path) for part in too_deep if selector in (None, part.name)]
    if not functions and not problems:
        names = sorted(
            [*(function.name for function in defined), *(part.name for part in too_deep)]
        )
        known = ", ".join(names) if names else "none (the file does not use torch?)"
        raise LookupError(f"{source.path}: no function {selector!r}; functions: {known}")
    lines = [line.rstrip("\r\n") for line in physical_lines(source.text)]
    listing = "\n\n".join(_listing(source.path, lines, function) for function in functions)
    return listing, problems


def _listing(path: str, lines: list[str], function: FunctionFacts) -> str:
    node = function.node
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    notes: dict[int, list[str]] = defaultdict(list)
    for target, name, fact in function.bindings:
        note = _describe(name, fact)
        if note is not None:
            notes[getattr(target, "lineno", node.lineno)].append(note)
    out = [f"{path}:{node.lineno} {function.name}"]
    for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
        text = lines[number - 1].rstrip() if number <= len(lines) else ""
        row = f"{number:>5} | {text}"
        if notes.get(number):
            row = f"{row:<{_NOTE_COLUMN}}  # {'; '.join(notes[number])}"
        out.append(row)
    return "\n".join(out)


def _describe(name: str, fact: Fact) -> str | None:
    if isinstance(fact, TensorFact):
        return f"{name}: {format_shape(fact.shape)}"
    if isinstance(fact, IntFact) and str(fact.dim) != name:
        return f"{name} = {fact.dim}"
    return None
