"""Parse only what can matter: a cheap look at each file before libcst parses it.

libcst's parser is the cost every libcst linter pays (about ten times ``ast``). Most of a
model file cannot produce a finding: model registries, config plumbing, weight-loading
helpers. :func:`relevant_source` finds them with ``ast`` and blanks their lines, keeping every
line where it was, so libcst parses less and every position stays exact.

A top-level statement is kept when

- it could produce an observation itself: it names an op in :data:`TRIGGERS` or uses ``@``,
  ``//`` or ``%`` (the ops whose transfer functions observe something, or make a fact that
  one needs: softmax weights, tensors built from numbers, jaxtyping shapes);
- a kept statement reads a name it binds (a helper, a class, a constant), or
- it calls a kept function or class by name (its arguments are facts the callee learns in
  the analysis' second pass; a constructor call can be checked against the class' sizes).

Imports and the module docstring are always kept. Everything else, including all facts it
computes, is unreachable from any observation, so findings are the same with and without
the pre-scan (a test holds them identical on the fixtures and on PyTorch's own ``nn``).
A file that never mentions ``torch`` is not parsed by libcst at all (the analysis skips
modules that do not import it); ``ast`` still checks its syntax, so SC000 is reported as
before.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from shapecheck.source import physical_lines

TRIGGERS = frozenset(
    {
        # reordering and reinterpreting memory (SC101-SC103, SC202, SC502)
        *("view", "reshape", "view_as", "reshape_as", "flatten", "unflatten"),
        *("transpose", "swapaxes", "swapdims", "permute", "movedim", "moveaxis"),
        *("t", "T", "mT"),
        # attention: products, softmax, masks, fused kernels (SC2xx-SC4xx, SC501, SC503)
        *("matmul", "bmm", "mm", "baddbmm", "einsum", "linear", "Linear"),
        *("softmax", "Softmax", "masked_fill", "where"),
        *("scaled_dot_product_attention", "MultiheadAttention"),
        # tensors from Python numbers (SC601), losses (SC602)
        *("tensor", "cross_entropy", "CrossEntropyLoss"),
        # jaxtyping annotations (SC504)
        *("Float", "Int", "Bool", "Shaped", "Num", "Real", "Inexact", "Integer", "Complex"),
        *("UInt", "Key", "jaxtyped"),
    }
)
"""Names that make a statement worth analysing: as an attribute (``x.view``, ``F.softmax``),
a called name (``softmax(x)``) or an annotation (``Float[Tensor, "b n"]``); a variable that
happens to be called ``t`` or ``tensor`` is not one."""

_TRIGGER_OPERATORS = (ast.MatMult, ast.FloorDiv, ast.Mod)


@dataclass(eq=False)
class _Statement:
    """One top-level statement: what it binds, reads and calls, and whether it triggers."""

    node: ast.stmt
    always: bool
    binds: set[str] = field(default_factory=set)
    reads: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)
    triggers: bool = False

    @property
    def lines(self) -> range:
        decorators = getattr(self.node, "decorator_list", [])
        first = min([self.node.lineno, *(decorator.lineno for decorator in decorators)])
        end = self.node.end_lineno or self.node.lineno
        return range(first, end + 1)


def relevant_source(text: str) -> str | None:
    """``text`` with the statements no finding can come from blanked, or ``None`` when no
    statement can produce one. Text ``ast`` cannot parse is returned whole: the libcst parse
    reports it as SC000."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    if "torch" not in text:
        return None
    statements = [_scan(node, index == 0) for index, node in enumerate(tree.body)]
    kept = _kept(statements)
    if not any(statement.triggers for statement in kept):
        return None
    kept_lines = {line for statement in kept for line in statement.lines}
    dropped = {
        line
        for statement in set(statements) - set(kept)
        for line in statement.lines
        if line not in kept_lines  # `a = 1; b = 2` share a line
    }
    if not dropped:
        return text
    lines = physical_lines(text)
    for line in dropped:
        original = lines[line - 1]
        lines[line - 1] = original[len(original.rstrip("\r\n")) :]
    return "".join(lines)


def _scan(node: ast.stmt, first: bool) -> _Statement:
    docstring = first and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    statement = _Statement(node, always=docstring or _imports(node), binds=set(_binds(node)))
    triggers = False
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            if isinstance(child.ctx, ast.Load):
                statement.reads.add(child.id)
        elif isinstance(child, ast.Attribute):
            triggers = triggers or child.attr in TRIGGERS
        elif isinstance(child, ast.Call | ast.Subscript):
            called = child.func if isinstance(child, ast.Call) else child.value
            if isinstance(called, ast.Name):
                triggers = triggers or called.id in TRIGGERS
                if isinstance(child, ast.Call):
                    statement.calls.add(called.id)
        elif isinstance(child, ast.BinOp | ast.AugAssign):
            triggers = triggers or isinstance(child.op, _TRIGGER_OPERATORS)
    statement.triggers = triggers
    return statement


_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _binds(node: ast.AST) -> Iterator[str]:
    """Module-level names ``node`` binds: not the locals of its functions or comprehensions."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name
        return
    if isinstance(node, ast.alias):
        yield (node.asname or node.name).split(".")[0]
    elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        yield node.id
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, _SCOPES):
            yield from _binds(child)


def _imports(node: ast.stmt) -> bool:
    """An import at module level, also inside ``try``/``if``: the analysis resolves them all."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.If | ast.Try | ast.TryStar | ast.With):
        blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
        blocks += [handler.body for handler in getattr(node, "handlers", [])]
        return any(_imports(inner) for block in blocks for inner in block)
    return False


def _kept(statements: list[_Statement]) -> list[_Statement]:
    """The triggering statements, closed over the names they read and the calls into them."""
    kept = [s for s in statements if s.triggers or s.always]
    rest = [s for s in statements if not (s.triggers or s.always)]
    read = set().union(*(s.reads for s in kept))
    bound = set().union(*(s.binds for s in kept if s.triggers))
    grown = True
    while grown:
        grown = False
        for statement in list(rest):
            if statement.binds & read or statement.calls & bound:
                kept.append(statement)
                rest.remove(statement)
                read |= statement.reads
                bound |= statement.binds
                grown = True
    return kept
