"""What shapecheck says of a value where the code names it: the one describer behind
``--show-shapes`` (text and JSON) and the language server's hover and inlay hints.

A :class:`Description` is a value's shape (or size), its role in attention, memory layout
and dtype, from the facts the analysis bound (``shapecheck.analysis``). A :class:`Note` is a
description at a place: a parameter, an assignment's target or a ``return``.

Names are per scope: a shape is written only in names the reader can find from the function
it is shown in (its own, those of the functions around it, the module's, and for a method its
class's ``__init__`` parameters, the sizes the analysis models the class from). The analysis
follows calls, so a helper's parameter may hold its caller's ``[batch, seq, width]``; there
it reads ``[n, s, d]`` where the helper names those sizes (``n, s, d = t.shape``), else
``?``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import TypeGuard

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.dims import Dim, Quotient, Symbol
from shapecheck.analysis.facts import (
    Fact,
    FunctionNode,
    IntFact,
    ScalarFact,
    Scale,
    ShapePrefix,
    TensorFact,
    TupleFact,
)
from shapecheck.analysis.interpreter import FunctionFacts
from shapecheck.analysis.layout import Layout
from shapecheck.analysis.ops.masks import WEAK_FILL
from shapecheck.record import record
from shapecheck.source import Lines

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_LONGEST_NAME = 60
"""An expression named in a hover is cut to this many characters."""


@record
class Description:
    """What is known of one value, each part as a person writes it (``None``: not known)."""

    name: str
    """What the code calls it: ``q``, ``self.scale``, ``return``, ``k.transpose(1, 2)``."""
    kind: str
    """``tensor``, ``size`` (an ``int`` that sizes tensors) or ``number`` (a scale)."""
    axes: tuple[str, ...] | None = None
    """A tensor's sizes; first ``...``, ``*batch`` or ``*h.shape[:-1]`` where more axes of
    unknown number lead; ``None``: rank unknown."""
    value: str | None = None
    """A size or number, in sizes: ``num_heads``, ``1/sqrt(self.head_dim)``."""
    role: str | None = None
    layout: str | None = None
    dtype: str | None = None
    caveats: tuple[str, ...] = ()
    """What the facts rest on: a guess, or paths the analysis could not follow."""

    @property
    def shape(self) -> str:
        """``[B, H, L, D]``; ``?`` when the rank is unknown."""
        return "?" if self.axes is None else "[" + ", ".join(self.axes) + "]"

    @property
    def summary(self) -> str:
        """``q: [B, H, L, D]``, ``head_dim = d_model//num_heads``."""
        if self.kind == "tensor":
            return f"{self.name}: {self.shape}"
        if self.kind == "size" and self.value == self.name:
            return f"{self.name}: a size"
        return f"{self.name} = {self.value}"

    @property
    def text(self) -> str:
        """One line: the summary and the role (``--show-shapes``, an inlay hint's tooltip)."""
        return self.summary + (f" · {self.role}" if self.role else "")

    def markdown(self) -> str:
        """A hover: the summary as code and the role, then the layout, dtype and caveats."""
        head = f"`{self.summary}`" + (f" · {self.role}" if self.role else "")
        details = [
            *([f"layout: {self.layout}"] if self.layout else []),
            *([f"dtype: {self.dtype}"] if self.dtype else []),
            *self.caveats,
        ]
        return head + ("\n\n" + " · ".join(details) if details else "")

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "shape": list(self.axes) if self.axes is not None else None,
            "value": self.value,
            "role": self.role,
            "layout": self.layout,
            "dtype": self.dtype,
            "caveats": list(self.caveats),
        }


@record
class Note:
    """A description at a place in the file: lines from 1, columns in characters from 0."""

    site: str
    """``parameter``, ``assignment``, ``return``, or (a hover) any other ``expression``."""
    line: int
    column: int
    end_line: int
    end_column: int
    description: Description


class FileShapes:
    """What can be said of the values of one analysed file."""

    def __init__(self, analysis: ModuleAnalysis) -> None:
        self.analysis = analysis
        self.lines = Lines(analysis.text)
        self._scopes: dict[FunctionNode | ast.Module, _Scope] = {}

    def notes(self, function: FunctionFacts) -> list[Note]:
        """What a listing says of ``function``: its parameters, assignments and returns whose
        value is a tensor or a size it does not already name, in the order of the code."""
        found = [note for note in self._bindings(function) if _worth_saying(note.description)]
        found += self._returns(function)
        return sorted(found, key=lambda note: (note.line, note.column))

    def assignments(self) -> Iterator[Note]:
        """Every assignment of a tensor whose rank is known, in every function (inlay hints)."""
        for function in self.analysis.functions:
            for note in self._bindings(function):
                described = note.description
                if note.site == "assignment" and described.kind == "tensor" and described.axes:
                    yield note

    def at(self, line: int, column: int) -> Note | None:
        """What is said of the innermost value at a place (line from 1, column in characters
        from 0): a name bound there, or any tensor, size or scale expression the analysis
        evaluated (a name where it is read, a call, a ``return``)."""
        best: tuple[tuple[int, int], Note] | None = None
        for function in self.analysis.functions:
            for note in self._places(function, line, column):
                extent = (note.end_line - note.line, note.end_column - note.column)
                if best is None or extent < best[0]:
                    best = (extent, note)
        return None if best is None else best[1]

    # --- where the notes come from --------------------------------------------------------

    def _bindings(
        self, function: FunctionFacts, place: tuple[int, int] | None = None
    ) -> Iterator[Note]:
        """A note for each parameter and assignment target of ``function`` (at ``place``
        only, when given) whose value is worth describing."""
        scope = self._scope(function)
        for target, name, fact in function.bindings:
            if isinstance(target, ast.arg):  # the name, not its annotation
                line, column, _, _ = self.lines.span(target)
                span, site = (line, column, line, column + len(target.arg)), "parameter"
            elif isinstance(target, ast.expr):
                span, site = self.lines.span(target), "assignment"
            else:
                continue
            if place is None or _holds(span, place):
                described = _describe(name, fact, scope, self.lines)
                if described is not None:
                    yield Note(site, *span, described)

    def _returns(
        self, function: FunctionFacts, place: tuple[int, int] | None = None
    ) -> Iterator[Note]:
        """Each ``return`` of a tensor or size (at ``place`` only, when given); of a tuple,
        each element (``return[0]``), where the element is written."""
        scope = self._scope(function)
        for statement in _own_returns(function.node):
            value = statement.value
            fact = function.facts.get(value) if value is not None else None
            parts: list[tuple[str, Fact | None, ast.AST]] = [("return", fact, statement)]
            if isinstance(fact, TupleFact):
                written: list[ast.AST] = list(value.elts) if isinstance(value, ast.Tuple) else []
                if len(written) != len(fact.items):
                    written = [statement] * len(fact.items)
                parts = [
                    (f"return[{index}]", item, where)
                    for index, (item, where) in enumerate(zip(fact.items, written, strict=True))
                ]
            for name, item, where in parts:
                span = self.lines.span(where)
                if place is not None and not _holds(span, place):
                    continue
                described = _describe(name, item, scope, self.lines)
                if described is not None:
                    yield Note("return", *span, described)

    def _places(self, function: FunctionFacts, line: int, column: int) -> Iterator[Note]:
        """What a hover at a place can be on in ``function``: a binding, a ``return``, or an
        expression it evaluated."""
        place = (line, column)
        yield from self._bindings(function, place)
        yield from self._returns(function, place)
        scope = self._scope(function)
        for node, fact in function.facts.items():
            if not isinstance(node, ast.expr) or not node.lineno <= line <= (node.end_lineno or 0):
                continue
            span = self.lines.span(node)
            if _holds(span, place):
                name = _shortened(self.lines.flattened(node))
                described = _describe(name, fact, scope, self.lines)
                if described is not None:
                    yield Note("expression", *span, described)

    def _scope(self, function: FunctionFacts) -> _Scope:
        node = function.node
        if node not in self._scopes:
            self._scopes[node] = _Scope.of(function, self.analysis, self._module_names)
        return self._scopes[node]

    @cached_property
    def _module_names(self) -> frozenset[str]:
        return frozenset(_bound_names(self.analysis.module.body))


def _worth_saying(described: Description) -> bool:
    """A listing leaves out a size that is just the name it is bound to (``batch``)."""
    return described.kind != "size" or described.value != described.name


def _holds(span: tuple[int, int, int, int], place: tuple[int, int]) -> bool:
    return span[:2] <= place <= span[2:]


def _shortened(code: str) -> str:
    return code if len(code) <= _LONGEST_NAME else code[: _LONGEST_NAME - 1] + "…"


def _own_returns(node: FunctionNode | ast.Module) -> Iterator[ast.Return]:
    """The ``return`` statements of ``node`` itself, not of the functions defined in it."""
    if isinstance(node, ast.Module):
        return
    stack: list[ast.AST] = list(node.body)
    while stack:
        child = stack.pop()
        if isinstance(child, ast.Return):
            yield child
        elif not isinstance(child, FunctionNode | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(child))


# --- names per scope -------------------------------------------------------------------------


@record
class _Scope:
    """The names a reader finds from one function, and, for each size another function named
    (a caller's ``batch``), the name this one gives it (``n``) if it gives it one."""

    names: frozenset[str]
    aliases: dict[Symbol, str]

    @staticmethod
    def of(function: FunctionFacts, analysis: ModuleAnalysis, module: frozenset[str]) -> _Scope:
        names = set(module)
        node = function.node
        if isinstance(node, FunctionNode):
            for holder in (node, *analysis.holders(node)):
                if isinstance(holder, FunctionNode):
                    names |= _bound_names([holder.args, *holder.body])
                    names |= _annotation_names(holder)
            names |= _constructor_parameters(analysis.parent(node))
        aliases: dict[Symbol, str] = {}
        for _, name, fact in function.bindings:
            if isinstance(fact, IntFact) and fact.dim.coefficient == 1:
                match fact.dim.factors:
                    case (Symbol() as symbol,) if not _sees(names, symbol.name):
                        aliases.setdefault(symbol, name)
        return _Scope(frozenset(names), aliases)

    def dim(self, dim: Dim) -> Dim:
        """``dim`` in this scope's names: a size named elsewhere becomes its name here or
        ``?``."""
        result = Dim.constant(dim.coefficient)
        for atom in dim.factors:
            result = result * self._atom(atom)
        return result

    def _atom(self, atom: Symbol | Quotient) -> Dim:
        if isinstance(atom, Symbol):
            if _sees(self.names, atom.name):
                return Dim.of(atom)
            alias = self.aliases.get(atom)
            return Dim.of(Symbol(alias, atom.serial)) if alias else Dim.symbol("?")
        if atom.label and _sees(self.names, atom.label):
            return Dim.of(atom)  # shown by its label (``self.head_dim``), readable here
        numerator, denominator = self.dim(atom.numerator), self.dim(atom.denominator)
        if (numerator.has_unknown or denominator.has_unknown) and not (
            atom.numerator.has_unknown or atom.denominator.has_unknown
        ):
            return Dim.symbol("?")  # sizes named elsewhere divided: not `?//?`, just unknown
        return Dim.of(Quotient(numerator, denominator, atom.origin))

    def written(self, text: str) -> str | None:
        """Code as written (a mask's name), if its names are this scope's."""
        return text if all(_sees(self.names, n) for n in _IDENTIFIER.findall(text)) else None


def _sees(names: frozenset[str] | set[str], written: str) -> bool:
    """Is a size written so (``batch``, ``self.head_dim``, ``x.shape[0]``, ``?``) readable
    where ``names`` are bound? Its first name must be one of them."""
    root = _IDENTIFIER.match(written)
    return root is None or root.group() in names


def _bound_names(nodes: Iterable[ast.AST]) -> set[str]:
    """The names a scope binds, given its parameters and statements: not the names bound in
    the functions and classes defined in it (only theirs)."""
    names: set[str] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        match node:
            case (
                ast.FunctionDef(name=name)
                | ast.AsyncFunctionDef(name=name)
                | ast.ClassDef(name=name)
            ):
                names.add(name)
                continue
            case ast.Lambda():
                continue
            case ast.Name(id=name, ctx=ast.Store()) | ast.arg(arg=name):
                names.add(name)
            case ast.alias(name=imported, asname=alias):
                names.add(alias or imported.partition(".")[0])
            case ast.ExceptHandler(name=str() as name) | ast.MatchAs(name=str() as name):
                names.add(name)
            case ast.Global(names=declared) | ast.Nonlocal(names=declared):
                names.update(declared)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _constructor_parameters(holder: ast.AST | None) -> set[str]:
    """For a method, its class's ``__init__`` parameters: the module's sizes (``d_model``),
    from which the analysis models every method, and which its reader finds in the class."""
    if not isinstance(holder, ast.ClassDef):
        return set()
    return {
        arg.arg
        for node in holder.body
        if isinstance(node, FunctionNode) and node.name == "__init__"
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
    }


def _annotation_names(function: FunctionNode) -> set[str]:
    """The sizes a function's jaxtyping annotations name (``"batch seq d_model"``)."""
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    every += [star for star in (arguments.vararg, arguments.kwarg) if star is not None]
    annotations = [arg.annotation for arg in every if arg.annotation is not None]
    annotations += [function.returns] if function.returns is not None else []
    return {
        name
        for annotation in annotations
        for node in ast.walk(annotation)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for name in _IDENTIFIER.findall(node.value)
    }


# --- the describer ---------------------------------------------------------------------------


def _describe(name: str, fact: Fact | None, scope: _Scope, lines: Lines) -> Description | None:
    """What to say of ``fact`` bound to (or computed as) ``name``; ``None``: nothing worth
    saying (not a tensor, size or scale)."""
    if isinstance(fact, TensorFact):
        return Description(
            name,
            "tensor",
            axes=_axes(fact, scope),
            role=_role(fact, scope),
            layout=_layout(fact.layout, lines),
            dtype=fact.dtype,
            caveats=_caveats(fact),
        )
    if isinstance(fact, IntFact):
        return Description(name, "size", value=str(scope.dim(fact.dim)))
    if isinstance(fact, ScalarFact) and fact.scale is not None and fact.scale.base.factors:
        return Description(name, "number", value=_scale(fact.scale, scope))
    return None


def _axes(fact: TensorFact, scope: _Scope) -> tuple[str, ...] | None:
    if fact.shape is not None:
        return tuple(str(scope.dim(dim)) for dim in fact.shape)
    if fact.prefixed is not None:  # [*batch, seq, d]: leading axes of unknown number
        tail = (str(scope.dim(dim)) for dim in fact.prefixed.tail)
        return (_leading(fact.prefixed.prefix), *tail)
    last = scope.dim(fact.known_last) if fact.known_last is not None else None
    if last is not None and not last.has_unknown:  # an nn.Linear's output: [..., out_features]
        return ("...", str(last))
    return None


def _leading(prefix: ShapePrefix) -> str:
    """The leading axes as written: jaxtyping's ``*batch``, or ``*h.shape[:-1]``."""
    if prefix.owner.startswith("*"):
        return prefix.owner.split("@", 1)[0]  # "*batch@1": one *batch per call
    sizes = (
        f"{prefix.owner}.shape[:-{prefix.dropped}]" if prefix.dropped else f"{prefix.owner}.shape"
    )
    return f"*{sizes}"


def _masks(fill: ScalarFact | None) -> TypeGuard[ScalarFact]:
    """Does a product with the number ``fill`` make an additive mask: a literal below -1, or
    one large enough to mask when subtracted (``(1 - mask) * -1e4``, ``mask * 1e9``)? A
    scale is a product with a number too (``q * self.scale``, ``x * 0.5``, ``x * -1``)."""
    value = fill.value if fill is not None else None
    return value is not None and (value < -1 or value >= WEAK_FILL)


def _role(fact: TensorFact, scope: _Scope) -> str | None:
    """What the tensor is in attention (scores and how they were scaled, weights, a mask and
    its polarity, ...), as one phrase."""
    parts: list[str] = []
    if fact.weights:
        parts.append("attention weights (a softmax of scores)")
        if fact.masked_weights is not None:
            parts.append("masked after the softmax")
    elif fact.is_scores:
        parts.append(f"attention scores, {_scaling(fact, scope)}")
    elif fact.product is not None and fact.product.left.weights:
        parts.append("attention output (weights · values)")
    elif fact.probabilities:
        parts.append("probabilities (a softmax)")
    elif fact.polarity is not None:
        parts.append(f"boolean mask, True = {fact.polarity}")
    elif _masks(fact.fill):
        parts.append(f"additive mask (fill {fact.fill.value:g})")
    elif fact.is_linear_weight:
        parts.append("nn.Linear weight [out_features, in_features]")
    elif fact.is_parameter:
        parts.append("learned parameter")
    masks = sorted(filter(None, map(scope.written, fact.masked_with)))
    if masks:
        parts.append("masked with " + ", ".join(f"`{mask}`" for mask in masks))
    if fact.tiled is not None:
        tiling = fact.tiled
        copies, of = scope.dim(tiling.copies), scope.dim(tiling.of)
        parts.append(f"axis {tiling.axis} holds {copies} copies of {of} entries, one after another")
    if fact.from_number is not None:
        parts.append("built from a Python number")
    return ", ".join(parts) or None


def _scaling(fact: TensorFact, scope: _Scope) -> str:
    if fact.scaling is None:
        return "scaled by what, the analysis cannot tell"
    if not fact.scaling:
        return "not scaled"
    factors = [
        _scale(evidence.factor, scope) if evidence.factor else "an unknown factor"
        for evidence in fact.scaling
    ]
    return "scaled by " + ", then by ".join(factors)


def _scale(scale: Scale, scope: _Scope) -> str:
    """``coefficient * base ** exponent`` as written by hand: ``1/sqrt(head_dim)``, ``0.125``."""
    base = scope.dim(scale.base)
    if base.value is not None or scale.exponent == 0:
        number = float(base.value) if base.value is not None else 1.0
        return f"{scale.coefficient * number**scale.exponent:g}"
    written = str(base)
    grouped = f"({written})" if "*" in written or "//" in written else written
    magnitude = abs(scale.exponent)
    power = (
        f"sqrt({written})"
        if magnitude == 0.5
        else grouped
        if magnitude == 1
        else f"{grouped}**{magnitude:g}"
    )
    coefficient = f"{scale.coefficient:g}"
    if scale.exponent < 0:
        return f"{coefficient}/{power}"
    return power if scale.coefficient == 1 else f"{coefficient}*{power}"


def _layout(layout: Layout | None, lines: Lines) -> str | None:
    """``contiguous``, or which op left it not (and where): what decides whether ``view``
    works."""
    if layout is None:
        return None
    if layout.is_contiguous:
        return "contiguous"
    cause = layout.reordered_by
    if not isinstance(cause, ast.expr):
        return "not contiguous"
    code = lines.segment(cause)
    if isinstance(cause, ast.Call) and isinstance(cause.func, ast.Attribute):
        code = code[len(lines.segment(cause.func.value)) :]  # the op, not its receiver
    return f"not contiguous (`{_shortened(' '.join(code.split()))}`, line {cause.lineno})"


def _caveats(fact: TensorFact) -> tuple[str, ...]:
    return (
        *(["known on some paths only"] if fact.uncertain else []),
        *([f"assuming {fact.guess}"] if fact.guess else []),
    )
