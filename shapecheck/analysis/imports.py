"""Import aliases: which local names stand for which torch modules and functions."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

# Spellings that reach the same function; the analysis knows each op by its canonical name.
_CANONICAL = {
    "torch.functional.einsum": "torch.einsum",
    "torch.special.softmax": "torch.softmax",
    "torch.nn.modules.linear.Linear": "torch.nn.Linear",
    "torch.nn.parameter.Parameter": "torch.nn.Parameter",
}


def canonical(qualified: str) -> str:
    return _CANONICAL.get(qualified, qualified)


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else ``None``."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def collect_imports(module: cst.Module) -> dict[str, str]:
    """Map each name bound by an import anywhere in ``module`` to what it imports.

    ``import torch as th`` binds ``th -> torch``; ``import torch.nn.functional as F`` binds
    ``F -> torch.nn.functional``; ``import torch.nn`` binds ``torch -> torch``;
    ``from torch import nn, matmul`` binds ``nn -> torch.nn`` and ``matmul -> torch.matmul``.
    Relative and star imports bind nothing. Only statements are walked, never expressions.
    """
    aliases: dict[str, str] = {}
    for statement in _small_statements(module):
        if isinstance(statement, cst.Import):
            _bind_import(statement, aliases)
        elif isinstance(statement, cst.ImportFrom):
            _bind_import_from(statement, aliases)
    return aliases


_BLOCKS = (
    cst.BaseCompoundStatement,
    cst.BaseSuite,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)


def _small_statements(node: cst.CSTNode) -> Iterator[cst.BaseSmallStatement]:
    for child in node.children:
        if isinstance(child, cst.SimpleStatementLine | cst.SimpleStatementSuite):
            yield from child.body
        elif isinstance(child, _BLOCKS):
            yield from _small_statements(child)


def _bind_import(node: cst.Import, aliases: dict[str, str]) -> None:
    for alias in node.names:
        target = dotted_name(alias.name)
        if target is None:
            continue
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            aliases[alias.asname.name.value] = target
        else:
            top = target.split(".")[0]
            aliases[top] = top


def _bind_import_from(node: cst.ImportFrom, aliases: dict[str, str]) -> None:
    if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
        return
    base = dotted_name(node.module)
    if base is None:
        return
    for alias in node.names:
        name = dotted_name(alias.name)
        if name is None:
            continue
        local = name
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        aliases[local] = f"{base}.{name}"
