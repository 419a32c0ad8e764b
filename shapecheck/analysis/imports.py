"""Import aliases: which local names stand for which torch modules and functions."""

from __future__ import annotations

import ast
import bisect
from collections.abc import Iterator, Sequence

# Spellings that reach the same function; the analysis knows each op by its canonical name.
_CANONICAL = {
    "torch.functional.einsum": "torch.einsum",
    "torch.special.softmax": "torch.softmax",
    "torch.nn.modules.linear.Linear": "torch.nn.Linear",
    "torch.nn.parameter.Parameter": "torch.nn.Parameter",
}


def canonical(qualified: str) -> str:
    return _CANONICAL.get(qualified, qualified)


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else ``None``."""
    if isinstance(node, ast.Name):  # by far the most asked
        return node.id
    if not isinstance(node, ast.Attribute):  # (a call, a subscript: no list to build)
        return None
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def imported_name(node: ast.expr, imports: dict[str, str]) -> str | None:
    """What ``node`` (``nn.Module``, ``th.sqrt``) names through ``imports``, qualified
    (``torch.nn.Module``); ``None`` for anything else."""
    name = dotted_name(node)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    bound = imports.get(head)
    return ".".join(filter(None, (bound, rest))) if bound is not None else None


def call_name(node: ast.AST) -> str | None:
    """The name a call calls, after its last dot: ``view`` for ``x.view(...)``, ``cat`` for
    ``cat(...)``; ``None`` for anything else."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def collect_imports(module: ast.Module, text: str) -> dict[str, str]:
    """Map each name bound by an import anywhere in ``module`` (whose code is ``text``) to
    what it imports.

    ``import torch as th`` binds ``th -> torch``; ``import torch.nn.functional as F`` binds
    ``F -> torch.nn.functional``; ``import torch.nn`` binds ``torch -> torch``;
    ``from torch import nn, matmul`` binds ``nn -> torch.nn`` and ``matmul -> torch.matmul``.
    Relative and star imports bind nothing. Only statements are walked, never expressions.
    A fallback in an ``except`` handler (``except ImportError: from .reference import
    flash_attention as flash_attn_func``) stands in for the import its ``try`` attempted, so
    a name the ``try`` bound keeps that meaning. Only the statements whose lines hold the word
    ``import`` are walked into (most functions hold none).
    """
    aliases: dict[str, str] = {}
    lines = _lines_naming_import(text)
    for statement, fallback in statements(module.body, definitions=True, lines=lines):
        bound: list[tuple[str, str]] = []
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                top = alias.name.split(".")[0]
                bound.append((alias.asname or top, alias.name if alias.asname else top))
        elif isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            for alias in statement.names:
                if alias.name != "*":
                    bound.append((alias.asname or alias.name, f"{statement.module}.{alias.name}"))
        for name, imported in bound:
            if fallback:
                aliases.setdefault(name, imported)
            else:
                aliases[name] = imported
    return aliases


COMPOUND_STATEMENTS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.TryStar,
    ast.Match,
)
"""The statements that hold blocks of statements (every other one holds none)."""


def _lines_naming_import(text: str) -> list[int] | None:
    """The numbers of the lines of ``text`` that hold the word ``import``, in order: every
    import statement lies on one of them (``None``: the text holds a carriage return, which
    ``ast`` counts as a line end, and this count does not)."""
    if "\r" in text:
        return None
    lines: list[int] = []
    line, counted = 1, 0
    at = text.find("import")
    while at >= 0:  # (a search for the text, not a regular expression: a tenth of the time)
        line += text.count("\n", counted, at)
        counted = at
        if not lines or lines[-1] != line:
            lines.append(line)  # (in a longer word too, ``imports``: a line more to walk)
        at = text.find("import", at + 6)
    return lines


def statements(
    body: Sequence[ast.stmt],
    *,
    definitions: bool,
    fallback: bool = False,
    lines: Sequence[int] | None = None,
) -> Iterator[tuple[ast.stmt, bool]]:
    """Every statement of ``body`` and of the blocks inside it (inside functions and classes
    too, with ``definitions``), each with whether it sits in an ``except`` handler; with
    ``lines`` (sorted numbers), only the statements that span one of them."""
    # (a stack of blocks, not a generator per block: every statement would pass up through
    # one generator per level it is nested at)
    pending: list[tuple[Iterator[ast.stmt], bool]] = [(iter(body), fallback)]
    while pending:
        block, within = pending[-1]
        statement = next(block, None)
        if statement is None:
            pending.pop()
            continue
        if lines is not None:
            first = bisect.bisect_left(lines, statement.lineno)
            end = statement.end_lineno or statement.lineno
            if first == len(lines) or lines[first] > end:
                continue  # none of its lines: nor those of the blocks it holds
        yield statement, within
        if not isinstance(statement, COMPOUND_STATEMENTS) or (
            not definitions
            and isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        ):
            continue
        handlers = [handler.body for handler in getattr(statement, "handlers", ())]
        inner = [
            (iter(nested), within or any(nested is h for h in handlers))
            for nested in nested_blocks(statement)
        ]
        pending += reversed(inner)  # the first block next


def nested_blocks(statement: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists a compound statement holds (bodies, branches, handlers, cases)."""
    if not isinstance(statement, COMPOUND_STATEMENTS):
        return  # most statements: asked of every one, in every walk
    for name in ("body", "orelse", "finalbody"):
        block = getattr(statement, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(statement, "handlers", ()):
        yield handler.body
    for case in getattr(statement, "cases", ()):
        yield case.body
