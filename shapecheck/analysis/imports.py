"""Import aliases: which local names stand for which torch modules and functions."""

from __future__ import annotations

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
    Relative and star imports bind nothing.
    """
    collector = _ImportCollector()
    module.visit(collector)
    return collector.aliases


class _ImportCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            target = dotted_name(alias.name)
            if target is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = target
            else:
                top = target.split(".")[0]
                self.aliases[top] = top
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return False
        base = dotted_name(node.module)
        if base is None:
            return False
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{base}.{name}"
        return False
