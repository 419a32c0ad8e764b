"""Parse only what can matter: a cheap look at each file before libcst parses it.

libcst's parser is the cost every libcst linter pays (about ten times ``ast``). Most of a
model file cannot produce a finding: model registries, config plumbing, weight-loading
helpers. :func:`relevant_source` finds them with ``ast`` and blanks their lines, keeping every
line where it was, so libcst parses less and every position stays exact.

A top-level statement, or a method of a top-level class, is kept when

- it could produce an observation itself: it names an op in :data:`TRIGGERS` or uses ``@``,
  ``//`` or ``%`` (the ops whose transfer functions observe something, or make a fact that
  one needs: softmax weights, tensors built from numbers, jaxtyping shapes);
- a kept statement reads a name it binds (a helper, a class, a constant);
- it calls a kept function or class by name (its arguments are facts the callee learns in
  the analysis' second pass; a constructor call can be checked against the class' sizes); or,
- for a method of a kept class: it is special (``__init__`` builds the class model,
  ``forward`` runs when the module is called), kept code reads its name as an attribute, or
  it calls a kept method.

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
class _Unit:
    """A top-level statement, or one method of a top-level class (``owner`` is its class's
    unit): what it binds, reads and calls, and whether it triggers."""

    node: ast.stmt
    always: bool = False
    owner: _Unit | None = None
    binds: set[str] = field(default_factory=set)
    reads: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)
    """Attribute names read or called (``self.attend``, ``x.view``)."""
    triggers: bool = False

    @property
    def lines(self) -> range:
        decorators = getattr(self.node, "decorator_list", [])
        first = min([self.node.lineno, *(decorator.lineno for decorator in decorators)])
        end = self.node.end_lineno or self.node.lineno
        return range(first, end + 1)

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "")


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
    units = [unit for index, node in enumerate(tree.body) for unit in _units(node, index == 0)]
    kept = _kept(units)
    if not any(unit.triggers for unit in kept):
        return None
    dropped = {line for unit in set(units) - kept if _droppable(unit, kept) for line in unit.lines}
    protected = {line for unit in kept if unit.owner is not None for line in unit.lines}
    protected |= {line for unit in kept if unit.owner is None for line in _own_lines(unit)}
    protected |= {line for unit in kept for line in _body_left(unit, units, kept)}
    dropped -= protected  # `a = 1; b = 2` share a line
    if not dropped:
        return text
    lines = physical_lines(text)
    for line in dropped:
        original = lines[line - 1]
        lines[line - 1] = original[len(original.rstrip("\r\n")) :]
    return "".join(lines)


def _units(node: ast.stmt, first: bool) -> list[_Unit]:
    """The statement's unit, then, for a class, one unit per method defined in its body."""
    docstring = first and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    unit = _Unit(node, always=docstring or _imports(node), binds=set(_binds(node)))
    methods = _methods(node)
    _scan(unit, node, skip=methods)
    units = [unit]
    for method in methods:
        inner = _Unit(method, owner=unit)
        _scan(inner, method, skip=[])
        units.append(inner)
    return units


def _methods(node: ast.stmt) -> list[ast.stmt]:
    """A class's methods (each on lines of its own: a ``def`` never shares the class's line)."""
    if not isinstance(node, ast.ClassDef):
        return []
    return [s for s in node.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]


def _scan(unit: _Unit, node: ast.AST, skip: list[ast.stmt]) -> None:
    for child in _walk(node, skip):
        if isinstance(child, ast.Name):
            if isinstance(child.ctx, ast.Load):
                unit.reads.add(child.id)
        elif isinstance(child, ast.Attribute):
            unit.attributes.add(child.attr)
            unit.triggers = unit.triggers or child.attr in TRIGGERS
        elif isinstance(child, ast.Call | ast.Subscript):
            called = child.func if isinstance(child, ast.Call) else child.value
            if isinstance(called, ast.Name):
                unit.triggers = unit.triggers or called.id in TRIGGERS
                if isinstance(child, ast.Call):
                    unit.calls.add(called.id)
        elif isinstance(child, ast.BinOp | ast.AugAssign):
            unit.triggers = unit.triggers or isinstance(child.op, _TRIGGER_OPERATORS)


def _walk(node: ast.AST, skip: list[ast.stmt]) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter the nodes in ``skip`` (methods scanned on their own)."""
    skipped = {id(method) for method in skip}
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        pending.extend(c for c in ast.iter_child_nodes(current) if id(c) not in skipped)


def _own_lines(unit: _Unit) -> set[int]:
    """A statement's lines, less those of its methods (each a unit of its own)."""
    lines = set(unit.lines)
    for method in _methods(unit.node):
        lines -= set(_Unit(method).lines)
    return lines


def _body_left(shell: _Unit, units: list[_Unit], kept: set[_Unit]) -> range:
    """A kept class whose body would be left empty keeps its first method's text: a class
    needs a statement. That method can matter to nothing (else it were kept)."""
    node = shell.node
    if not isinstance(node, ast.ClassDef) or len(_methods(node)) < len(node.body):
        return range(0)
    methods = [unit for unit in units if unit.owner is shell]
    if any(method in kept for method in methods):
        return range(0)
    return methods[0].lines


def _droppable(unit: _Unit, kept: set[_Unit]) -> bool:
    """A method of a dropped class goes with its class's lines; others by their own."""
    return unit.owner is None or unit.owner in kept


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


def _kept(units: list[_Unit]) -> set[_Unit]:
    """The triggering units, closed over what they read and what calls into them.

    A statement is needed when a kept unit reads a name it binds, or when it calls a kept
    function or class. A class is kept with its shell (bases, class attributes) and the
    methods that can matter: special ones (``__init__`` builds the class model, ``forward``
    runs when the module is called), those whose name kept code reads as an attribute
    (``self.attend(...)``, ``self.apply(self._init_weights)``) and those that call one.
    """
    kept: set[_Unit] = set()
    read: set[str] = set()
    bound: set[str] = set()
    attributes: set[str] = set()
    kept_methods: set[str] = set()

    def keep(unit: _Unit) -> None:
        kept.add(unit)
        read.update(unit.reads)
        bound.update(unit.binds)
        attributes.update(unit.attributes)
        if unit.owner is not None:
            kept_methods.add(unit.name)
            if unit.owner not in kept:
                keep(unit.owner)

    for unit in units:
        if unit.always:
            kept.add(unit)  # imports: what they bind is looked up, never a reason to keep
        elif unit.triggers:
            keep(unit)
    grown = True
    while grown:
        grown = False
        for unit in units:
            if unit in kept or not _needed(unit, kept, read, bound, attributes, kept_methods):
                continue
            keep(unit)
            grown = True
    return kept


def _needed(
    unit: _Unit,
    kept: set[_Unit],
    read: set[str],
    bound: set[str],
    attributes: set[str],
    kept_methods: set[str],
) -> bool:
    if bool(unit.binds & read or unit.calls & bound):
        return True
    if unit.owner is None or unit.owner not in kept:
        return False
    name = unit.name
    special = (name.startswith("__") and name.endswith("__")) or name == "forward"
    return special or name in attributes or bool(unit.attributes & kept_methods)
