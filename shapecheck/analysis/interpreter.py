"""Abstract interpretation of one function body, statement by statement.

The interpreter keeps an environment from names (and ``self.attr`` paths) to facts, evaluates
every expression to a fact with the transfer functions of :mod:`shapecheck.analysis.ops`, and
joins environments where control flow merges. It never runs the code it reads.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import re
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeGuard

from shapecheck.analysis.annotations import (
    Bindings,
    ShapeSpec,
    contradiction,
    declared,
    parse_shape,
)
from shapecheck.analysis.dims import Dim, Symbol, named_by_code, substitute, symbols_in
from shapecheck.analysis.facts import (
    ACTIVATIONS,
    CALLABLES,
    MAX_TEXTS,
    NONE,
    NORMS,
    OPPOSITE_POLARITY,
    SAME_SHAPE,
    SHAPE_PRESERVING,
    UNKNOWN,
    Choice,
    ClassRef,
    DtypeOf,
    Fact,
    FunctionNode,
    FunctionRef,
    ImportedName,
    InstanceFact,
    IntFact,
    ModuleFact,
    NamedFacts,
    NoneFact,
    Partial,
    PrefixedShape,
    PrefixedSizes,
    QualifiedName,
    RepeatedFact,
    ScalarFact,
    ScaleEvidence,
    ShapePrefix,
    SizeFact,
    TensorFact,
    Text,
    TupleFact,
    Unknown,
    scale_of,
    sizes_substituted,
    text_of,
)
from shapecheck.analysis.imports import canonical, dotted_name, statements
from shapecheck.analysis.lattice import Family, flow, join
from shapecheck.analysis.layout import FREE, Layout
from shapecheck.analysis.observations import (
    AnnotationMismatch,
    DivisibilityCheck,
    IndivisibleSizes,
    Observation,
    SizeDivision,
)
from shapecheck.analysis.ops import (
    FUNCTIONS,
    MODULE_CALLS,
    TENSOR_FUNCTIONS,
    TENSOR_METHODS,
    Argument,
    OpCall,
    as_tensor,
    broadcast_shapes,
    items_of,
    string_literal,
)
from shapecheck.analysis.ops.arithmetic import arithmetic
from shapecheck.analysis.ops.axes import last_two_swapped, reversed_axes
from shapecheck.analysis.ops.constructors import moved_with_module
from shapecheck.analysis.ops.einops import input_rank
from shapecheck.analysis.ops.masks import combined, negated
from shapecheck.analysis.ops.products import matrix_product
from shapecheck.analysis.ops.views import unbound
from shapecheck.analysis.usage import (
    RANK_QUERIES,
    SHOWING_FUNCTIONS,
    SHOWING_METHODS,
    SIZE_USE,
    Evidence,
    ParameterUses,
    RankByUse,
    addend_uses,
    alternative_uses,
    decide,
    fixed,
    function_uses,
    gathered,
    gathered_uses,
    index_uses,
    literal_int,
    method_uses,
    partner_uses,
    rank_tests,
    shape_index_uses,
    shape_owner,
    size_name,
    unpacking_uses,
)
from shapecheck.record import record, replace

if TYPE_CHECKING:
    from shapecheck.analysis.imported import ProjectScope

PARAMETER_SCALING: tuple[ScaleEvidence, ...] | None = ()
"""What a function knows about the scaling of tensors passed in: nothing was applied to them
that the function can see, so they count as unscaled."""

INLINE_DEPTH = 2
"""How deep calls to functions of the same module are followed."""

_NUMBER_ANNOTATIONS = {"int", "float", "bool", "str"}
_BUILTINS = frozenset(
    {"float", "int", "len", "getattr", "map", "dict", "range", "enumerate", "list", "tuple"}
)
"""Built-in functions the analysis follows (others are unknown names)."""
_NORM_AND_ACTIVATION_NAMES = frozenset(name.rsplit(".", 1)[1] for name in (*NORMS, *ACTIVATIONS))
"""Class names of layers that keep the shape and that callers swap for one another."""
_NORM_CLASS = re.compile(r"(RMS|Layer|Group|Batch)Norm", re.IGNORECASE)
"""A project's own norm class, by its name (``Qwen3RMSNorm``, ``CohereLayerNorm``,
``LayerNorm2d``, timm's ``RmsNorm``): what its ``forward`` multiplies by (``rsqrt`` of the
variance, the gain) is the normalisation, not a scale of attention scores (see
``products.normalised``)."""
_MODULE_RETURNS_ITSELF = {
    "to",
    "cuda",
    "cpu",
    "float",
    "half",
    "double",
    "bfloat16",
    "train",
    "eval",
    "requires_grad_",
}
_SCALAR_FUNCTIONS = ("math.", "numpy.sqrt", "numpy.power", "numpy.log")
_KEEPS_RANK = frozenset({"torch.nn.Linear", "torch.nn.Softmax", SAME_SHAPE, *SHAPE_PRESERVING})
"""Layers whose output has their input's rank (``nn.Sequential`` learns a rank through them)."""


@dataclass
class ClassModel:
    """What ``__init__`` stores on ``self``, and the class's methods."""

    name: str
    attributes: dict[str, Fact] = field(default_factory=dict)
    methods: dict[str, FunctionNode] = field(default_factory=dict)
    divisions: list[tuple[str, str]] = field(default_factory=list)
    """``(numerator, denominator)`` parameters of ``__init__`` that it divides."""
    held_sizes: dict[str, Dim] = field(default_factory=dict)
    """The symbol of each attribute used as a size that ``__init__`` stored saying nothing
    more of it (``self.n_head = n_head``): one size in every method and every call."""
    layers: tuple[Fact, ...] | None = None
    """An ``nn.Sequential`` subclass with no ``forward`` of its own: the layers it applies,
    in the order ``__init__`` registered them (``self.add_module("c", nn.Conv2d(...))``,
    ``self.bn = ...``: SHViT's ``Conv2dNorm``)."""


@dataclass
class ModuleContext:
    """What every function of a module shares: imports, functions, classes."""

    imports: dict[str, str]
    shapes: bool = True
    declares: bool = True
    """Whether the module may declare names ``global`` or ``nonlocal`` (see
    :func:`may_declare`; most have neither: no walk)."""
    functions: dict[str, FunctionNode] = field(default_factory=dict)
    classes: dict[str, ClassModel] = field(default_factory=dict)
    class_names: frozenset[str] = frozenset()
    """The module's top-level classes, known before their models are built: an ``__init__``
    may build a layer of a class defined further down, which exists when it runs."""
    project: ProjectScope | None = None
    """What the names its imports bind are in the project's other files (``None``: the
    module alone); see :mod:`~shapecheck.analysis.imported`."""
    call_sites: dict[FunctionNode, list[dict[str, Fact] | None]] = field(default_factory=dict)
    """Arguments at each call of a module function (``None``: not mappable, e.g. ``*args``)."""
    call_sites_frozen: bool = False
    parameter_facts: dict[FunctionNode, dict[str, Fact]] = field(default_factory=dict)
    """What the callers agreed each parameter was when the function was last interpreted."""
    handed_by: dict[FunctionNode, str] = field(default_factory=dict)
    """Functions whose call sites include another module's (see ``ProjectScope.callers``)."""
    attribute_names: dict[ast.Attribute, ast.Name] = field(default_factory=dict)
    """The name after the dot of each ``x.attr`` an op is anchored at (see ``attribute_name``)."""
    inlined: dict[tuple[object, ...], tuple[Fact, Mapping[str, RankByUse]]] = field(
        default_factory=dict
    )
    """What a call into the module returned, by callee and argument facts, with the ranks the
    callee's uses showed for its parameters: following a call records nothing, so the same
    call gives the same answer (``k`` and ``v`` through ``repeat_kv``)."""
    constructors: dict[FunctionNode, Interpreter] = field(default_factory=dict)
    """Each of the module's ``__init__``s as the model of its class read it, recording: what
    its job finds, where no call hands it arguments (one reading instead of two)."""

    stored_parameters: dict[FunctionNode, Mapping[str, str]] = field(default_factory=dict)
    """Per ``__init__``, the parameters it stores as attributes, as they are (``self.nf =
    nf``): parameter -> attribute."""
    declarations: dict[FunctionNode, tuple[frozenset[str], frozenset[str]]] = field(
        default_factory=dict
    )
    """Per function, the names it and the functions nested in it declare ``nonlocal``, and
    those they declare ``global`` or ``nonlocal``."""

    def rebound_elsewhere(self, function: FunctionNode) -> frozenset[str]:
        """Names of ``function`` that a nested function may rebind (``nonlocal y``): any call
        may change them."""
        return self._declared(function)[0]

    def declared_outside(self, function: FunctionNode) -> frozenset[str]:
        """Names ``function`` binds in another scope (``global x``): on a path that does not
        bind them, they hold that scope's value."""
        return self._declared(function)[1]

    def _declared(self, function: FunctionNode) -> tuple[frozenset[str], frozenset[str]]:
        """Found once per function, however often it is followed."""
        if not self.declares:
            return frozenset(), frozenset()
        found = self.declarations.get(function)
        if found is None:
            rebound: set[str] = set()
            elsewhere: set[str] = set()
            for statement in function.body:
                for node in ast.walk(statement):
                    if isinstance(node, ast.Nonlocal):
                        rebound.update(node.names)
                    elif isinstance(node, ast.Global):
                        elsewhere.update(node.names)
            found = frozenset(rebound), frozenset(rebound | elsewhere)
            self.declarations[function] = found
        return found

    read_names: dict[FunctionNode, tuple[str, ...]] = field(default_factory=dict)
    """Per function, the names and dotted paths it may read (see ``visible``)."""

    def visible(self, function: FunctionNode, scope: Mapping[str, Fact]) -> dict[str, Fact]:
        """What ``function`` can read of ``scope`` (a closure, the module's globals): the names
        its code mentions, and the tensor a shape prefix among them is read from again. Only
        that is copied: the whole scope, copied into every function, costs the square of the
        module's size."""
        lines = (function.end_lineno or function.lineno) - function.lineno + 1
        if len(scope) <= _NAMES_PER_LINE * lines:
            return dict(scope)  # cheaper than finding what the function mentions
        names = self.read_names.get(function)
        if names is None:
            names = tuple(dict.fromkeys(_mentioned(function)))
            self.read_names[function] = names
        seen: dict[str, Fact] = {}
        for name in names:
            fact = scope.get(name)
            if fact is None:
                continue
            seen[name] = fact
            owner = _shape_owner(fact)
            if owner is not None and owner in scope:
                seen.setdefault(owner, scope[owner])
        return seen

    def attribute_name(self, node: ast.Attribute) -> ast.Name:
        """``attr`` in ``x.attr`` as a node of its own: ``ast`` gives it no position, and a finding
        about ``x.transpose(1, 2).view(...)`` points at ``view``. One node per attribute, so an
        observation made twice is the same observation."""
        name = self.attribute_names.get(node)
        if name is None:
            end_line, end_column = node.end_lineno, node.end_col_offset
            assert end_line is not None and end_column is not None
            start = end_column - len(node.attr.encode("utf-8"))
            name = ast.Name(node.attr, ast.Load())
            name.lineno, name.col_offset, name.end_lineno, name.end_col_offset = (
                end_line,
                start,
                end_line,
                end_column,
            )
            self.attribute_names[node] = name
        return name


@dataclass
class FunctionFacts:
    """The result of interpreting one function: facts per expression, observations."""

    node: FunctionNode | ast.Module
    name: str
    facts: dict[ast.AST, Fact]
    observations: list[Observation]
    bindings: list[tuple[ast.AST, str, Fact]]
    """``(target, name, fact)`` for every parameter and assignment, in order."""


class Interpreter:
    """Interprets one function body (or a module's top-level code)."""

    def __init__(
        self,
        context: ModuleContext,
        *,
        class_model: ClassModel | None = None,
        record: bool = True,
        depth: int = 0,
        builds: bool = False,
    ) -> None:
        self.context = context
        self.class_model = class_model
        self.record = record
        self.depth = depth
        self.builds = builds
        """Reading ``__init__`` to build ``class_model`` (the layers it constructs are modelled
        in their sizes), not again as a function once the model is built."""
        self.env: dict[str, Fact] = {}
        self.paths: dict[str, set[str]] = {}
        """Every dotted key (``self.proj``) the environment has held, by its first name:
        forgetting ``x`` forgets ``x.*`` without a scan of all the names (a module may bind
        thousands), and the many names no dotted key starts with cost one lookup."""
        self.facts: dict[ast.AST, Fact] = {}
        self.observations: list[Observation] = []
        self.symbols: dict[str, Dim] = {}
        self.returns: list[tuple[Fact, Mapping[Dim, int]]] = []
        """What each ``return`` returned, with the sizes its branch tests pin (``n_rep == 1``)."""
        self.pinned: dict[Dim, int] = {}
        """The sizes the enclosing branches' tests pin to a number (``if n_rep == 1:``)."""
        self.copied: dict[str, str] = {}
        """``target -> source`` for assignments of an unknown name (``self.h = h``)."""
        self.bindings: list[tuple[ast.AST, str, Fact]] = []
        self.divisions: list[tuple[str, str]] = []
        """``a // b`` of plain names, as written."""
        self.function: FunctionNode | None = None
        """The function interpreted (``None``: the module's top-level code)."""
        self.annotation_sizes = Bindings()
        """jaxtyping dimension names (and ``*names``) bound by the parameters' annotations."""
        self.return_spec: ShapeSpec | None = None
        self.nested: list[tuple[FunctionNode, dict[str, Fact]]] = []
        self.half_precision_branches = 0
        """How many enclosing branches test for float16 (``x.dtype == torch.float16``)."""
        self.rebound_elsewhere: frozenset[str] = frozenset()
        """Names a nested function rebinds (``nonlocal y``): any call may change them."""
        self.assigned: set[str] = set()
        """The names this function assigns (``self.h`` included)."""
        self.rebindings: Counter[str] = Counter()
        """How many times each name was bound again (see ``ShapePrefix.binding``)."""
        self.bound: list[str] = []
        """Every name bound, in order: those a block bound are the ones after its start."""
        self.conditionals: dict[str, Conditional] = {}
        """Names bound on either side of a test, by name (see :class:`Conditional`); those of
        a block are dropped when it ends, where another path joins."""
        self.chose: tuple[ast.IfExp, Fact, Fact] | None = None
        """The last conditional expression evaluated, with what each side gave."""
        self.passed: dict[str, list[TensorFact]] = {}
        """Parameters handed in with an unknown rank, by name: the fact each started from and
        the facts learned from it as the code showed more (see ``holds_passed``)."""
        self.followed: set[ast.arg] = set()
        """The parameters of the function interpreted whose rank is followed (``rank_of``):
        not those of a function it calls, nor of one that called it."""
        self.tested: dict[str, list[ast.Name]] = {}
        """Where each parameter of unknown rank was tested with ``is`` or ``in`` (``mask is
        not None``), which asks nothing of its shape: given the rank learned later."""
        self.uses = ParameterUses()
        self.statement: ast.stmt | None = None
        self.call_sites: list[tuple[FunctionNode, dict[str, Fact] | None]] = []
        """Arguments at each call of a module function, for ``ModuleContext.call_sites`` once
        this interpretation is the one kept (see ``read_again``)."""

    @property
    def in_constructor(self) -> bool:
        """Interpreting an ``__init__``."""
        return self.function is not None and self.function.name == "__init__"

    # --- OpContext -------------------------------------------------------------------------

    def observe(self, observation: Observation) -> None:
        if self.record:
            self.observations.append(observation)

    @property
    def precision_aware(self) -> bool:
        return self.half_precision_branches > 0

    def size(self, fact: Fact, node: ast.expr) -> Dim | None:
        if isinstance(fact, IntFact):
            return None if fact.dim.value == -1 else fact.dim
        key = dotted_name(node)
        if key is None or isinstance(fact, SizeFact | TupleFact | ModuleFact | QualifiedName):
            return None
        if isinstance(fact, TensorFact) and fact.rank not in (None, 0):
            return None
        if isinstance(node, ast.Name) and self.holds_passed(key, fact):
            self._used_as_size(node, fact)
        return self.symbol(key)

    def _used_as_size(self, node: ast.Name, fact: Fact) -> None:
        """A parameter of unknown rank used as a size (``x.view(b, n, heads, -1)``): an int
        here and from here on, and from the start where the function is read again for it
        (BigBird's ``to_block_size``, read before). A tensor there would be a 0-d one, which
        PyTorch takes as an int."""
        key = node.id
        self.uses.note(key, SIZE_USE)
        shown = self.uses.rank(key)  # (not where another use showed axes)
        if shown is not None and shown.as_size and self.env.get(key) is fact:
            self.env[key] = size = IntFact(self.symbol(key))
            self.uses.learned(key, self.statement)
            if self.record and node in self.facts:
                self.facts[node] = size

    def symbol(self, key: str) -> Dim:
        """The same symbolic size every time this function names it the same way; for an
        attribute of ``self`` the function leaves alone, every time the class's methods name
        it (``self.split(q)`` and ``self.split(k)`` split into the same ``self.n_head``)."""
        if key not in self.symbols:
            attribute = key.removeprefix("self.")
            model = self.class_model
            source = self.copied.get(key)
            if source in self.symbols and source not in self.assigned:
                # self.num_heads = config.num_attention_heads, that already a size: one size
                self.symbols[key] = self.symbols[source]
            elif model is None or attribute == key or key in self.assigned:
                self.symbols[key] = Dim.symbol(key)
            elif "." in attribute:  # ``self.config.n_head``: what ``__init__`` read of it
                self.symbols[key] = model.held_sizes.get(attribute) or Dim.symbol(key)
            else:
                if attribute not in model.held_sizes:
                    model.held_sizes[attribute] = Dim.symbol(key)
                self.symbols[key] = model.held_sizes[attribute]
        return self.symbols[key]

    # --- entry points ------------------------------------------------------------------------

    def run_function(
        self,
        node: FunctionNode,
        arguments: Mapping[str, Fact] | None = None,
        shown: Mapping[str, RankByUse] | None = None,
    ) -> Fact:
        """Interpret ``node``'s body; ``arguments`` overrides the parameters' facts, and
        ``shown`` gives parameters the rank their uses showed (see ``read_again``)."""
        self.function = node
        self.rebound_elsewhere = self.context.rebound_elsewhere(node)
        constructor = node.name == "__init__"
        for param in parameters(node):
            name = param.name
            if arguments is not None and name in arguments:
                self.env[name] = arguments[name]
            elif name not in ("self", "cls"):
                fact = self._parameter_fact(param)
                # a constructor's untyped parameters are sizes and options, not tensors
                self.env[name] = UNKNOWN if constructor and isinstance(fact, TensorFact) else fact
            if name in self.rebound_elsewhere and name in self.env:
                self.env[name] = _uncertain(self.env[name])
            elif self.context.shapes and name in self.env:
                self._passed_in(param.node, self.env[name], shown.get(name) if shown else None)
            if self.record and name in self.env:
                self.bindings.append((param.node, name, self.env[name]))
        if node.returns is not None:
            self.return_spec = self._shape_spec(node.returns)
        self.run_block(node.body)
        if not self.returns:
            return UNKNOWN
        result, pinned = self.returns[0]
        for other, other_pinned in self.returns[1:]:
            result = join(*_reconciled(result, pinned, other, other_pinned))
            pinned = {
                size: number for size, number in pinned.items() if other_pinned.get(size) == number
            }
        return result

    def run_block(self, statements: Sequence[ast.stmt]) -> bool:
        """Interpret statements in order; ``False`` once control cannot fall through."""
        outer = self.conditionals
        self.conditionals = dict(outer) if outer else {}
        try:
            return all(self._statement(statement) for statement in statements)
        finally:
            self.conditionals = outer

    def result(self, node: FunctionNode | ast.Module, name: str) -> FunctionFacts:
        return FunctionFacts(node, name, self.facts, self.observations, self.bindings)

    # --- statements ---------------------------------------------------------------------------

    def _statement(self, statement: ast.stmt) -> bool:
        self.statement = statement
        match statement:
            case ast.Expr(value=value):
                self.eval(value)
            case ast.Assign(targets=targets, value=value):
                self._assign(targets, value)
            case ast.AnnAssign(target=target, annotation=annotation, value=value) if (
                value is not None
            ):
                self._assign([target], value)
                spec = self._shape_spec(annotation)
                if spec is not None:
                    assigned = self.facts.get(value, UNKNOWN)
                    self._check_annotation(value, assigned, spec, self.annotation_sizes.copy())
            case ast.AugAssign(target=target, op=operator, value=value):
                self._augmented(statement, target, operator, value)
            case ast.Return(value=value):
                returned = self.eval(value) if value is not None else UNKNOWN
                if value is not None and self.return_spec is not None:
                    self._check_annotation(
                        value, returned, self.return_spec, self.annotation_sizes.copy()
                    )
                self.returns.append((returned, dict(self.pinned)))
                return False
            case ast.Raise() | ast.Continue() | ast.Break():
                return False
            case ast.Delete(targets=deleted):
                for gone in deleted:
                    self._forget(gone)
            case ast.If():
                return self._if(statement)
            case ast.For() | ast.AsyncFor() | ast.While():
                self._loop(statement)
            case ast.With(items=items, body=body) | ast.AsyncWith(items=items, body=body):
                for item in items:
                    self.eval(item.context_expr)
                    if item.optional_vars is not None:
                        self._bind(item.optional_vars, UNKNOWN)
                return self.run_block(body)
            case ast.Try() | ast.TryStar():
                self._try(statement)
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                self._define(statement)
            case ast.Assert(test=test):
                self.eval(test)
                self._narrowed(rank_tests(test)[0])
                self._asserted_alike(test)
                self.observe(DivisibilityCheck(_names_in(test)))
            case ast.ClassDef(name=class_name):
                self._forget_name(class_name)  # its body is analysed as methods
            case ast.Match():
                for name in _assigned_names(statement):
                    self._forget_name(name)
        return True

    def _assign(self, targets: list[ast.expr], value: ast.expr) -> None:
        if self.context.shapes and isinstance(value, ast.Tuple | ast.List | ast.Subscript):
            # b, n, h = *x.shape, heads and n, d = x.shape[1:]: x's rank before it is read
            for target in targets:
                shown = unpacking_uses(target, value)
                if shown is not None and isinstance(shown[0], ast.Name):
                    self._shows(shown[0], self.env.get(shown[0].id), shown[1])
                self._name_spliced(target, value)
        fact = self.eval(value)
        source = dotted_name(value) if isinstance(fact, Unknown) else None
        for target in targets:
            if self._unpack_shape(target, value):
                continue
            self._bind(target, fact)
            key = dotted_name(target)
            if key is not None and source is not None:
                self.copied[key] = source
            elif key is not None:
                self.copied.pop(key, None)  # bound again: no longer a copy
        chose, self.chose = self.chose, None
        if isinstance(value, ast.IfExp) and chose is not None and chose[0] is value:
            tested = _tested_name(value.test)
            keys = [key for target in targets if (key := dotted_name(target)) is not None]
            if tested is not None:
                self._bound_by_test(tested, {key: chose[1:] for key in keys})

    def _augmented(
        self,
        statement: ast.AugAssign,
        target: ast.expr,
        operator: ast.operator,
        value: ast.expr,
    ) -> None:
        current = self.eval(target)
        other = self.eval(value)
        symbol = _ARITHMETIC.get(type(operator))
        if symbol in ("+", "-") and self.context.shapes:
            _, other = self._partners(target, current, value, other, addend_uses)
        result: Fact = UNKNOWN
        if symbol is not None:
            result = arithmetic(self, statement, symbol, current, other)
        self._bind(target, result)

    def _if(self, statement: ast.If) -> bool:
        self.eval(statement.test)
        if any(isinstance(line, ast.Raise) for line in statement.body):
            self.observe(DivisibilityCheck(_names_in(statement.test)))
        holds, fails = rank_tests(statement.test)
        before, assigned, bound = dict(self.env), set(self.assigned), len(self.bound)
        test_of = _tested_name(statement.test)
        sides = self._sides_of(test_of) if test_of is not None else {}
        branches: list[tuple[dict[str, Fact], dict[str, TensorFact]]] = []
        guard = 1 if _tests_half_precision(statement.test) else 0
        self.half_precision_branches += guard
        self.env.update((name, side[0]) for name, side in sides.items())
        narrowed = self._narrowed(holds)
        outer_pins = self.pinned
        self.pinned = {**outer_pins, **self._pinned_by(statement.test)}
        body_falls_through = self.run_block(statement.body)
        self.pinned = outer_pins
        if body_falls_through:
            branches.append((self.env, narrowed))
        self.env = dict(before)
        self.env.update((name, side[1]) for name, side in sides.items())
        narrowed = self._narrowed(fails)
        falls_through = self.run_block(statement.orelse)  # ``elif`` is an ``if`` in ``orelse``
        self.half_precision_branches -= guard
        if falls_through:
            branches.append((self.env, narrowed))
        if not branches:
            self.env = before
            return False
        if len(branches) == 2:  # either may have run: a tested rank holds on one only
            for env, tested in branches:
                for key, fact in tested.items():
                    if env.get(key) is fact:
                        env[key] = before[key]
        self.env = self._joined(before, assigned, [env for env, _ in branches])
        if len(branches) == 2:
            body, orelse = branches[0][0], branches[1][0]
            for name, side in sides.items():
                if body.get(name) is side[0] and orelse.get(name) is side[1]:
                    self.env[name] = before[name]  # untouched: the same choice as before
            if test_of is not None:
                chosen = {
                    name: (body[name], orelse[name])
                    for name in dict.fromkeys(self.bound[bound:])
                    if name in body
                    and name in orelse
                    and name not in sides
                    and body[name] != orelse[name]
                }
                self._bound_by_test(test_of, chosen)
        return True

    def _bound_by_test(
        self, tested: tuple[tuple[str, str], bool], sides: Mapping[str, tuple[Fact, Fact]]
    ) -> None:
        """Remember the names bound on either side of a test (``tested``, as
        :func:`_tested_name` reads it; ``sides``: name -> what it is where the test holds,
        and where it fails), now bound to their join."""
        key, holds = tested
        for name, (when, otherwise) in sides.items():
            joined = self.env.get(name)
            if joined is None or name == key[1]:
                continue
            if not holds:
                when, otherwise = otherwise, when
            self.conditionals[name] = Conditional(
                key, self.rebindings[key[1]], when, otherwise, joined
            )

    def _sides_of(self, tested: tuple[tuple[str, str], bool]) -> dict[str, tuple[Fact, Fact]]:
        """The names bound on either side of the same test earlier and not bound since, with
        what each is where the test (``tested``) holds and where it fails: ``states =
        encoder_states if is_cross else hidden_states`` is ``hidden_states`` under ``if not
        is_cross:``."""
        key, holds = tested
        return {
            name: (bound.holds, bound.fails) if holds else (bound.fails, bound.holds)
            for name, bound in self.conditionals.items()
            if bound.test == key
            and bound.binding == self.rebindings[key[1]]
            and self.env.get(name) is bound.joined
        }

    def _pinned_by(self, test: ast.expr) -> dict[Dim, int]:
        """``n_rep == 1`` (a size the code names, against a number other than 0): that size,
        where the test holds, is the number."""
        if not _is_equality(test):
            return {}
        name, number = test.left, test.comparators[0]
        if isinstance(name, ast.Constant):
            name, number = number, name
        if (
            not isinstance(number, ast.Constant)
            or type(number.value) is not int
            or not number.value
        ):
            return {}
        written = dotted_name(name)
        if written is None:
            return {}
        size = self.env.get(written)
        if isinstance(size, Unknown):
            # a value of its caller's not yet used as a size (``repeat_kv(key,
            # module.num_key_value_groups)``): the size it is where the function uses it so
            size = IntFact(self.symbol(written))
        if not isinstance(size, IntFact) or not size.dim.factors or size.dim.has_unknown:
            return {}
        return {size.dim: number.value}

    def _narrowed(self, tests: list[tuple[str, int]]) -> dict[str, TensorFact]:
        """Where a rank test holds (``x.ndim == 3``, see ``usage.rank_tests``), the tensors of
        unknown rank it tests, bound to that rank: what each is bound to now."""
        narrowed: dict[str, TensorFact] = {}
        for key, rank in tests if self.context.shapes else ():
            fact = self.env.get(key)
            if isinstance(fact, TensorFact) and fact.shape is None:
                shaped = self._shaped(key, fact, RankByUse(rank))
                self.env[key] = narrowed[key] = replace(shaped, rank_of=None)
        return narrowed

    def _asserted_alike(self, test: ast.expr) -> None:
        """``assert query.size() == key.size()`` (Longformer's sliding-window scores): past
        it, a tensor of unknown rank has the other's shape."""
        if not _is_equality(test):
            return
        sides = [_shape_receiver(side) for side in (test.left, *test.comparators)]
        keys = [dotted_name(side) if side is not None else None for side in sides]
        facts = [self.env.get(key) if key is not None else None for key in keys]
        for key, fact, other in ((keys[0], facts[0], facts[1]), (keys[1], facts[1], facts[0])):
            if (
                key is not None
                and isinstance(fact, TensorFact)
                and fact.shape is None
                and isinstance(other, TensorFact)
                and other.shape is not None
            ):
                layout = fact.layout.materialise(len(other.shape)) if fact.layout else None
                alike = replace(
                    fact,
                    shape=other.shape,
                    layout=layout,
                    unknown_rank=None,
                    rank_of=None,
                    known_last=None,
                    prefixed=None,
                )
                self._learned(key, fact, alike)

    def _loop(self, statement: ast.For | ast.AsyncFor | ast.While) -> None:
        if isinstance(statement, ast.While):
            self.eval(statement.test)
        else:
            self.eval(statement.iter)
            self._bind(statement.target, self._loop_item(statement.iter, statement.target))
        before, assigned = dict(self.env), set(self.assigned)
        self.run_block(statement.body)
        self.env = self._joined(before, assigned, [before, self.env])
        self.run_block(statement.orelse)

    def _loop_item(self, iterable: ast.expr, target: ast.expr) -> Fact:
        """What a ``for`` loop binds each time round: an int from ``range(...)`` (an index:
        ``segmentation[idx]`` takes one item), and as the first of two names from
        ``enumerate(...)``; else unknown. The int is a size of its own for each loop (its
        value changes as the loop runs)."""
        if not isinstance(iterable, ast.Call) or not isinstance(iterable.func, ast.Name):
            return UNKNOWN
        called = self._name(iterable.func.id)
        name = called.name if isinstance(called, QualifiedName) else None
        if name == "builtins.range" and isinstance(target, ast.Name):
            return IntFact(Dim.symbol(target.id))
        if (
            name == "builtins.enumerate"
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 2
            and isinstance(index := target.elts[0], ast.Name)
        ):
            return TupleFact((IntFact(Dim.symbol(index.id)), UNKNOWN))
        return UNKNOWN

    def _try(self, statement: ast.Try | ast.TryStar) -> None:
        before, assigned = dict(self.env), set(self.assigned)
        outcomes: list[dict[str, Fact]] = []
        if self.run_block(statement.body) and self.run_block(statement.orelse):
            outcomes.append(self.env)
        for handler in statement.handlers:
            joined = self._joined(before, assigned, [before, *outcomes])
            self.env = joined if outcomes else dict(before)
            if handler.name is not None:
                self._forget_name(handler.name)
                self.env[handler.name] = UNKNOWN
            if self.run_block(handler.body):
                outcomes.append(self.env)
        self.env = self._joined(before, assigned, outcomes) if outcomes else before
        self.run_block(statement.finalbody)

    def _joined(
        self, before: dict[str, Fact], assigned: set[str], branches: list[dict[str, Fact]]
    ) -> dict[str, Fact]:
        """The branches' environments joined (``assigned``: the names bound before them).
        What some branches bind and nothing bound before does not exist on the other paths:
        where the code reads it, it is what those branches bound. So with a function's local
        name (a mask flattened ``if attention_mask is not None``, read on that branch later), and
        with an attribute of ``self`` (``if qkv_separate: self.q = nn.Linear(...)``). A
        parameter whose rank a use showed on some branches, held as passed in on the others,
        keeps it (as where the function is read again with it known from the start)."""
        joined = self._joined_environments(before, assigned, branches)
        for key in self.passed:
            versions = [branch.get(key) for branch in branches]
            learned = {
                id(fact): fact
                for fact in versions
                if isinstance(fact, TensorFact) and fact.shape is not None
            }
            if len(learned) == 1 and all(self.holds_passed(key, fact) for fact in versions):
                # the tensor passed in, its rank shown on some paths: the same tensor on all
                joined[key] = next(iter(learned.values()))
        return joined

    def _joined_environments(
        self, before: dict[str, Fact], assigned: set[str], branches: list[dict[str, Fact]]
    ) -> dict[str, Fact]:
        model = self.class_model
        stored = set().union(*(branch.keys() - before.keys() for branch in branches))
        if not stored:
            return _join_environments(branches)
        function = self.function  # (at the top level, a builtin may hold the name)
        declared = self.context.declared_outside(function) if function else frozenset()
        never_set = {
            key
            for key in stored
            if (function and "." not in key and key not in assigned and key not in declared)
            or (
                model is not None
                and key.startswith("self.")
                and key.count(".") == 1
                and key[5:] not in model.attributes
                and key[5:] not in model.methods
            )
        }
        return _join_environments(branches, never_set)

    def _define(self, node: FunctionNode) -> None:
        closure = self.context.visible(node, self.env)
        self.env[node.name] = FunctionRef(node, tuple(closure.items()), enclosed=bool(self.env))
        if self.record:
            self.nested.append((node, closure))

    # --- binding ----------------------------------------------------------------------------

    def _bind(self, target: ast.expr, fact: Fact) -> None:
        if isinstance(target, ast.Attribute) and target.attr == "data":
            holder = self.env.get(dotted_name(target.value) or "")
            if isinstance(holder, TensorFact):  # y.data = w: y itself now holds w's values
                replaced = as_tensor(fact) or replace(holder, shape=None, layout=None)
                self._changed_in_place(target.value, holder, replaced)
                return
        if isinstance(target, ast.Name) and target.id in self.rebound_elsewhere:
            fact = _uncertain(fact)
        if isinstance(target, ast.Name | ast.Attribute):
            key = dotted_name(target)
            if key is None:
                self.eval(target)
                return
            self._forget_name(key)
            self.env[key] = fact
            if "." in key:
                self._note_path(key)
            if self.record:
                self.bindings.append((target, key, fact))
        elif isinstance(target, ast.Tuple | ast.List):
            elements = target.elts
            items: Sequence[Fact] | None = None
            starred = any(isinstance(element, ast.Starred) for element in elements)
            if isinstance(fact, TupleFact) and not starred:
                items = fact.items
            elif isinstance(fact, SizeFact) and not starred:
                items = [IntFact(dim) for dim in fact.dims]
            elif isinstance(fact, RepeatedFact) and not starred:
                items = [fact.item] * len(elements)
            elif isinstance(fact, TensorFact) and not starred:
                items = _iterated(fact, target)
            if items is None or len(items) != len(elements):
                # an unknown unpacked stays unknown for the same reason
                items = [fact if isinstance(fact, Unknown) else UNKNOWN] * len(elements)
            for element, item in zip(elements, items, strict=True):
                self._bind(element, item)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, UNKNOWN)
        else:
            self.eval(target)  # x[i] = v: the tensor keeps its facts
            if isinstance(target, ast.Subscript):
                self._item_replaced(target, fact)

    def _item_replaced(self, target: ast.Subscript, fact: Fact) -> None:
        """``reps[1] = n``, ``shape[-1] = d``: a list of values or sizes with one item
        replaced (at an index the analysis cannot read: none of them known)."""
        key = dotted_name(target.value)
        holder = self.env.get(key) if key is not None else None
        if key is None or not isinstance(holder, TupleFact | SizeFact):
            return
        items: list[Fact] = (
            list(holder.items)
            if isinstance(holder, TupleFact)
            else [IntFact(dim) for dim in holder.dims]
        )
        index = _single_index(target)
        if index is None or not -len(items) <= index < len(items):
            self.env[key] = UNKNOWN
            return
        items[index] = fact
        if isinstance(holder, TupleFact):
            self.env[key] = TupleFact(tuple(items))
        else:
            sizes = [item.dim if isinstance(item, IntFact) else Dim.symbol("?") for item in items]
            self.env[key] = SizeFact(tuple(sizes))

    def inherit(self, function: FunctionNode, scope: Mapping[str, Fact]) -> None:
        """Start ``function`` from what it can read of ``scope`` (a closure, the module's
        globals)."""
        facts = self.context.visible(function, scope)
        self.env.update(facts)
        for name in facts:
            if "." in name:
                self._note_path(name)

    def _note_path(self, key: str) -> None:
        self.paths.setdefault(key.partition(".")[0], set()).add(key)

    def _forget_name(self, key: str) -> None:
        under = self.paths.get(key.partition(".")[0])
        if under:
            prefix = key + "."
            for name in [name for name in under if name.startswith(prefix)]:
                self.env.pop(name, None)
        self.env.pop(key, None)
        self.symbols.pop(key, None)
        self.assigned.add(key)
        self.rebindings[key] += 1
        self.bound.append(key)

    def _forget(self, target: ast.expr) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._forget(element)
            return
        key = dotted_name(target)
        if key is not None:
            self._forget_name(key)

    def _unpack_shape(self, target: ast.expr, value: ast.expr) -> bool:
        """``B, L, E = x.shape`` (or ``x.size()``): learn x's rank, name its sizes;
        ``B, L = x.shape[:2]``: name x's first sizes, whatever its rank."""
        if isinstance(value, ast.Subscript):
            return self._unpack_leading(target, value)
        receiver = _shape_receiver(value)
        if receiver is None or not isinstance(target, ast.Tuple | ast.List):
            return False
        elements = target.elts
        if any(isinstance(element, ast.Starred) for element in elements):
            return False
        key = dotted_name(receiver)
        tensor = self.env.get(key) if key is not None else None
        if key is None or not isinstance(tensor, TensorFact):
            return False
        shown = unpacking_uses(target, value)
        if shown is not None:  # the rank of ``key``, and of the parameter whose rank it has
            self._shows(receiver, tensor, shown[1], learn=False)
        shape = self._named_sizes(receiver, key, tensor, elements).shape
        if shape is None or len(shape) != len(elements):
            return False
        for element, dim in zip(elements, shape, strict=True):
            self._bind(element, IntFact(dim))
        return True

    def _named_sizes(
        self, receiver: ast.expr, key: str, tensor: TensorFact, elements: list[ast.expr]
    ) -> TensorFact:
        """``key``, bound to ``tensor``, with the sizes the names ``elements`` unpack from its
        shape: its rank learned if unknown, sizes no use named yet named."""
        axes = [f"{key}.shape[{axis}]" for axis in range(len(elements))]
        if tensor.shape is None:
            shape = tuple(map(self._size_named, elements, axes))
            last = self.env.get(dotted_name(elements[-1]) or "")
            if tensor.known_last is not None and not isinstance(last, IntFact):
                shape = (*shape[:-1], tensor.known_last)  # the width a linear layer took
            layout = tensor.layout.materialise(len(shape)) if tensor.layout else None
            tensor = self._learned(key, tensor, replace(tensor, shape=shape, layout=layout))
        elif len(tensor.shape) == len(elements):
            # an unnamed size a use showed, which the code names now, is named: the very
            # size (never a second symbol for one axis)
            for element, dim in zip(elements, tensor.shape, strict=True):
                if size_name(element) is not None:
                    named_by_code(dim)
            if any(dim.has_unknown for dim in tensor.shape):
                # the rank, and nothing more (``x.ndim == 3`` held): the names are the sizes,
                # as of a tensor of unknown rank; a size nobody knew beside known ones (a
                # concatenation's) is the tensor's own, unnamed: named, rules would take it
                # for different from every other
                rank_only = all(dim.has_unknown for dim in tensor.shape)
                shape = tuple(
                    self._size_named(element, axis)
                    if rank_only
                    else Dim.unnamed(axis, nameable=False)
                    if dim.has_unknown
                    else dim
                    for element, axis, dim in zip(elements, axes, tensor.shape, strict=True)
                )
                tensor = self._learned(key, tensor, replace(tensor, shape=shape))
        if self.record and self.context.shapes and receiver in self.facts:
            self.facts[receiver] = tensor  # the tensor read there is the one now known
        assert tensor.shape is not None
        return tensor

    def _name_spliced(self, target: ast.expr, value: ast.expr) -> None:
        """``b, h, n, _, j = *q.shape, k.shape[-2]``: the names ``q``'s sizes get, as
        ``b, h, n, _ = q.shape`` would give them."""
        if not isinstance(target, ast.Tuple | ast.List) or not isinstance(value, ast.Tuple):
            return
        spliced = [element for element in value.elts if isinstance(element, ast.Starred)]
        if len(spliced) != 1:
            return
        receiver = _shape_receiver(spliced[0].value)
        start, rank = value.elts.index(spliced[0]), len(target.elts) - (len(value.elts) - 1)
        key = dotted_name(receiver) if receiver is not None else None
        tensor = self.env.get(key) if key is not None else None
        if receiver is None or key is None or not isinstance(tensor, TensorFact):
            return
        if tensor.rank == rank and not any(isinstance(n, ast.Starred) for n in target.elts):
            self._named_sizes(receiver, key, tensor, target.elts[start : start + rank])

    def _unpack_leading(self, target: ast.expr, value: ast.Subscript) -> bool:
        """``B, L = x.shape[:2]`` while ``x``'s rank is unknown: ``B`` and ``L`` name its
        first sizes, as ``x.shape[0]`` and ``x.shape[1]`` will once its rank is known."""
        if not isinstance(target, ast.Tuple | ast.List) or any(
            isinstance(element, ast.Starred) for element in target.elts
        ):
            return False
        leading = self._leading_sizes(value)
        owner = dotted_name(_shape_receiver(value.value) or value)
        if leading is None or len(leading.dims) != len(target.elts) or owner is None:
            return False
        for axis, element in enumerate(target.elts):
            dim = self._size_named(element, f"{owner}.shape[{axis}]")
            if not dim.has_unknown:
                self.symbols[f"{owner}.shape[{axis}]"] = dim
            self._bind(element, IntFact(dim))
        return True

    def _size_named(self, target: ast.expr, axis: str) -> Dim:
        """The size an unpacking target names for ``axis`` (``x.shape[1]``): a name already
        holding a size keeps it (``B, H, S, D = k.shape`` after ``B, H, L, D = q.shape``
        says k shares B, H, D); ``_`` names none, and the axis' size is unnamed."""
        name = dotted_name(target)
        if name is None or name == "_":
            return self._size_called(None, axis)
        bound = self.env.get(name)
        if isinstance(bound, IntFact):
            return bound.dim
        return Dim.symbol(name)

    def _passed_in(self, param: ast.arg, fact: Fact, shown: RankByUse | None) -> None:
        """A tensor parameter of unknown rank: given the rank its uses showed where the
        function is read again (``shown``), else followed for what its uses show (and what
        is made from it keeping its rank: ``rank_of``)."""
        if not isinstance(fact, TensorFact):
            return
        name = param.arg
        if shown is not None and shown.as_size:
            self.env[name] = IntFact(self.symbol(name))
            return
        if fact.shape is not None:
            self.env[name] = _received(name, fact, fact.shape)
            return
        if shown is None:
            followed = fact if fact.rank_of is param else replace(fact, rank_of=param)
            self.env[name] = followed
            self.passed[name] = [followed]
            self.followed.add(param)
        else:
            self.env[name] = self._shaped(name, fact, shown)

    def _parameter_fact(self, param: Parameter) -> Fact:
        """A parameter: a number when annotated or defaulted as one, otherwise a tensor
        (with the shape its jaxtyping annotation names)."""
        annotation_node = param.node.annotation
        if annotation_node is not None:
            spec = self._shape_spec(annotation_node)
            if spec is not None:
                return _declared_tensor(declared(spec, self.annotation_sizes))
        annotation = _annotated_name(annotation_node) if annotation_node else None
        if annotation in self.context.classes:
            return InstanceFact(annotation)
        if self._norm_or_activation_class(param.default):
            # norm_layer=nn.LayerNorm: a caller may hand another class, as with ``norm_layer
            # or nn.LayerNorm``; a guess that it keeps the shape too, as norms do
            guess = f"`{param.name}` keeps the shape, as its default does"
            return QualifiedName(SAME_SHAPE, guess=guess)
        kind = annotation if annotation in _NUMBER_ANNOTATIONS else _literal_kind(param.default)
        if kind == "int":
            return IntFact(self.symbol(param.name))
        if kind == "float":
            default = param.default
            return ScalarFact(value=_float_literal(default), origin=default)
        if kind is not None or param.star:
            return UNKNOWN
        if annotation_node is not None:
            return _annotated(annotation_node, param.node)
        return _tensor_parameter(param.node)

    def _norm_or_activation_class(self, default: ast.expr | None) -> bool:
        """A default naming a norm or activation class: ``nn.LayerNorm``, ``nn.GELU``, or a
        project's own class of such a name (timm's ``LayerNorm``) or a norm's (timm's
        ``GroupNorm1``, ``LayerNorm2d``)."""
        if default is None or dotted_name(default) is None:
            return False
        fact = self._eval(default)
        name = fact.name if isinstance(fact, QualifiedName) else None
        if isinstance(fact, ImportedName):
            name = fact.detail
        if name is None:
            return False
        written = name.rsplit(".", 1)[-1]
        return written in _NORM_AND_ACTIVATION_NAMES or _NORM_CLASS.search(written) is not None

    # --- expressions --------------------------------------------------------------------------

    def eval(self, node: ast.expr) -> Fact:
        # (a name is most of what is evaluated: looked up without the dispatch)
        fact = self._name(node.id) if type(node) is ast.Name else self._eval(node)
        if not self.context.shapes and isinstance(fact, TensorFact) and fact.shape is not None:
            fact = replace(fact, shape=None, layout=None, known_last=None)
        if self.record:
            self.facts[node] = fact
        return fact

    def _eval(self, node: ast.expr) -> Fact:
        match node:
            case ast.Name(id=name):
                return self._name(name)
            case ast.Attribute():
                return self._attribute(node)
            case ast.Call():
                return self._call(node)
            case ast.Constant(value=value):
                if type(value) is int:
                    return IntFact(Dim.constant(value))
                if type(value) is float:
                    return ScalarFact(value=value, origin=node)
                if value is None:
                    return NONE
                if type(value) is str:
                    return Text(values=(value,))
                return ScalarFact() if type(value) is complex else UNKNOWN
            case ast.JoinedStr(values=pieces):
                return self._formatted(pieces)
            case ast.UnaryOp(op=operator, operand=operand):
                return self._unary(operator, operand, node)
            case ast.BinOp():
                return self._binary(node)
            case ast.Tuple(elts=elements) | ast.List(elts=elements):
                return self._sequence(elements)
            case ast.Subscript():
                return self._subscript(node)
            case ast.IfExp(test=test, body=body, orelse=orelse):
                self.eval(test)
                chosen, other = self.eval(body), self.eval(orelse)
                chosen, other = self._partners(body, chosen, orelse, other, alternative_uses)
                self.chose = (node, chosen, other)
                return join(chosen, other)
            case ast.Compare(left=left, ops=operators, comparators=comparators):
                if any(isinstance(op, _IDENTITY_TESTS) for op in operators):
                    for operand in (left, *comparators):
                        self._tested(operand)
                    return UNKNOWN  # ``mask is not None``: a Python bool
                facts = [self.eval(left), *(self.eval(c) for c in comparators)]
                tensors = [fact for fact in facts if isinstance(fact, TensorFact)]
                if not tensors:
                    return UNKNOWN
                shape = tensors[0].shape
                if all(tensor.shape is not None for tensor in tensors):
                    shape = functools.reduce(broadcast_shapes, (t.shape for t in tensors))
                elif shape is not None:  # the unknown side may grow its size-1 axes
                    shape = tuple(Dim.symbol("?") if dim.value == 1 else dim for dim in shape)
                return TensorFact(
                    shape=shape,
                    origin=node,
                    dtype="bool",
                    polarity=_compared_polarity(facts, operators, comparators),
                )
            case ast.BoolOp(op=operator, values=values):
                facts = [self.eval(value) for value in values]
                # ``norm_layer or nn.LayerNorm``: one of the values, whichever is truthy (not
                # sizes: ``dim_out or dim`` stays a size of its own, named where it is used)
                numbers = any(isinstance(fact, IntFact | ScalarFact) for fact in facts)
                if isinstance(operator, ast.Or) and not numbers:
                    return functools.reduce(join, facts)
                return UNKNOWN
            case ast.NamedExpr(target=target, value=value):
                fact = self.eval(value)
                self._bind(target, fact)
                return fact
            case ast.Await(value=value):
                self.eval(value)
                return UNKNOWN
            case ast.ListComp() | ast.SetComp() | ast.GeneratorExp():
                return self._comprehension(node)
            case ast.Dict(keys=keys, values=values) if all(_is_text(key) for key in keys):
                names = [str(key.value) for key in keys if isinstance(key, ast.Constant)]
                return NamedFacts(tuple(zip(names, map(self.eval, values), strict=True)))
        return UNKNOWN

    def _formatted(self, pieces: Sequence[ast.expr]) -> Fact:
        """An f-string whose every field is a name bound to text: each string it may be
        (no field is evaluated, as none was before: they may call anything)."""
        strings = [""]
        for piece in pieces:
            if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                options: tuple[str, ...] = (piece.value,)
            else:
                name = _field_name(piece)
                field = self.env.get(name) if name is not None else None
                if not isinstance(field, Text):
                    return UNKNOWN
                options = field.values
            strings = [start + option for start in strings for option in options]
            if len(strings) > MAX_TEXTS:
                return UNKNOWN
        return text_of(set(strings))

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> Fact:
        """Every element: ``elt`` in a scope of its own (so ``[nn.MultiheadAttention(100, 3)
        for _ in range(n)]`` is still checked), each loop target what all the items iterated
        have in common (``for t in (q, k, v)``: the three split alike), else unknown. One loop
        over a tuple whose items differ (``tuple(repeat(t, ...) for t in (k, v, added_k))``)
        gives each item's own element, as ``map`` does."""
        outer = dict(self.env)
        for clause in node.generators:
            iterated = self.eval(clause.iter)
            item = _alike_items(iterated)
            if item is None and isinstance(iterated, TupleFact):
                target = clause.target.id if isinstance(clause.target, ast.Name) else None
                if (
                    target is not None
                    and len(node.generators) == 1
                    and not clause.ifs
                    and not isinstance(node, ast.SetComp)
                ):
                    elements = self._elements(node.elt, target, iterated.items)
                    self.env = outer
                    return TupleFact(elements)
                if iterated.items:
                    item = functools.reduce(join, iterated.items)
            self._bind(clause.target, item or UNKNOWN)
            for condition in clause.ifs:
                self.eval(condition)
        element = self.eval(node.elt)
        self.env = outer
        return RepeatedFact(element)

    def _elements(self, element: ast.expr, name: str, items: Sequence[Fact]) -> tuple[Fact, ...]:
        """``element`` with ``name`` bound to each of ``items`` in turn; ``name`` is then
        what it was before."""
        outer = self.env.get(name)
        elements: list[Fact] = []
        for item in items:
            self.env[name] = item
            for learned in [key for key in self.symbols if key.startswith(f"{name}.")]:
                del self.symbols[learned]  # each item's sizes are its own
            elements.append(self.eval(element))
        if outer is None:
            self.env.pop(name, None)
        else:
            self.env[name] = outer
        return tuple(elements)

    def _sequence(self, elements: Sequence[ast.expr]) -> Fact:
        """``(a, b)``, and ``(*shape, -1, d)`` when ``shape``'s length is known."""
        items: list[Fact] = []
        known = True
        prefix = None
        for position, element in enumerate(elements):
            if not isinstance(element, ast.Starred):
                items.append(self.eval(element))
                continue
            fact = self.spliced(self.eval(element.value))
            if isinstance(fact, SizeFact | TupleFact):
                items.extend(items_of(fact))
            elif isinstance(fact, ShapePrefix) and position == 0:
                prefix = fact  # (*x.shape[:-1], -1, d) while x's rank is unknown
            else:
                known = False  # spliced in, length unknown
        if not known:
            return UNKNOWN
        return PrefixedSizes(prefix, tuple(items)) if prefix else TupleFact(tuple(items))

    def _tested(self, node: ast.expr) -> None:
        """An operand of ``is`` or ``in`` (``mask is not None``). A parameter of unknown rank
        read there is not read for its shape: no reason to interpret the function again
        once a later use shows its rank, which the name is given then (``_learned``)."""
        fact = self.env.get(node.id) if isinstance(node, ast.Name) else None
        if not (isinstance(node, ast.Name) and isinstance(fact, TensorFact)):
            self.eval(node)
        elif self.record:
            self.facts[node] = fact
            if fact.shape is None and self.holds_passed(node.id, fact):
                self.tested.setdefault(node.id, []).append(node)

    def _name(self, name: str) -> Fact:
        if name in self.env:
            fact = self.env[name]
            if name in self.passed:  # a parameter read while its rank is unknown?
                unknown = isinstance(fact, TensorFact) and fact.shape is None
                if unknown and self.holds_passed(name, fact):
                    self.uses.read(name, self.statement)
            return fact
        project = self.context.project
        if project is not None and (imported := project.definition(name)) is not None:
            return imported
        if name in self.context.imports:
            return QualifiedName(canonical(self.context.imports[name]))
        if name in self.context.functions:
            return FunctionRef(self.context.functions[name])
        if name in self.context.classes or name in self.context.class_names:
            return ClassRef(name)
        if name in _BUILTINS:
            return QualifiedName(f"builtins.{name}")
        if name == "self" and (instance := self._own_instance()) is not None:
            return instance
        return Unknown("name", name)

    def _own_instance(self) -> InstanceFact | None:
        """``self`` handed on as a value (Hugging Face's ``eager_attention_forward(self, q,
        k, v)`` reads ``module.num_key_value_groups``), or called (nanoGPT's ``generate`` runs
        ``self(idx_cond)``, its own ``forward``): an instance of the class whose method this
        is, where the module's model of it is the one interpreted (not a model built in a
        construction's sizes, whose sizes the callee would not share)."""
        model = self.class_model
        if model is None or self.context.classes.get(model.name) is not model:
            return None
        return InstanceFact(model.name, own=True)

    def _attribute(self, node: ast.Attribute) -> Fact:
        bound = self._bound_path(node)
        return bound if bound is not None else self._member(node, self.eval(node.value))

    def _bound_path(self, node: ast.Attribute) -> Fact | None:
        """What the environment holds for ``node``'s dotted path (``self.proj``), if anything."""
        key = dotted_name(node)
        return self.env.get(key) if key is not None else None

    def _held_by(self, holder: str, model: ClassModel, fact: Fact) -> Fact:
        """``fact``, which ``model``'s ``__init__`` stored on its ``self``, read through
        ``holder`` here (``attn``): the sizes that class names ``self.heads`` are
        ``attn.heads`` (the same size each time this function reads them)."""
        mapping = {
            symbol: self.symbol(f"{holder}.{attribute}")
            for attribute, stored in model.attributes.items()
            if isinstance(stored, IntFact)
            and (symbol := stored.dim.single_symbol) is not None
            and symbol.name == f"self.{attribute}"
        }
        return sizes_substituted(fact, mapping)

    def _member(self, node: ast.Attribute, base: Fact) -> Fact:
        """``node.attr`` looked up on ``base``, the already evaluated ``node.value``, where the
        environment holds nothing for its path."""
        attribute = node.attr
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            model = self.class_model
            if model is not None and attribute in model.attributes:
                return model.attributes[attribute]
            if model is not None and attribute in model.methods:
                return FunctionRef(model.methods[attribute], class_name=model.name)
            return UNKNOWN
        if isinstance(base, QualifiedName):
            return QualifiedName(canonical(f"{base.name}.{attribute}"))
        if isinstance(base, NamedFacts) and base.layers:
            return base.named(attribute)
        if isinstance(base, TupleFact) and len(base.items) == 2 and attribute in _RANKED:
            return base.items[_RANKED.index(attribute)]  # x.topk(k).indices
        if isinstance(base, ImportedName):
            return ImportedName(base.reason, f"{base.detail}.{attribute}")
        if isinstance(base, InstanceFact | ClassRef):
            # a layer's method (``self.attend.attention(q, k, v)``), or a class's static one
            # (``Attention.attention(q, k, v)``), of this module or another file's; what an
            # instance's ``__init__`` stored (diffusers' processors call ``attn.to_q(x)`` of
            # the ``attn: Attention`` handed to them), its sizes that class's own
            model = self.context.classes.get(base.name)
            method = model.methods.get(attribute) if model is not None else None
            if method is not None and (isinstance(base, InstanceFact) or static_method(method)):
                return FunctionRef(method, class_name=base.name)
            holder = dotted_name(node.value)
            if model is not None and isinstance(base, InstanceFact) and base.own:
                return model.attributes.get(attribute, UNKNOWN)
            if model is not None and isinstance(base, InstanceFact) and holder is not None:
                return self._held_by(holder, model, model.attributes.get(attribute, UNKNOWN))
            return UNKNOWN
        if (
            attribute == "weight"
            and isinstance(base, ModuleFact)
            and base.kind == "torch.nn.Linear"
        ):
            sizes = (base.out_features, base.in_features)
            shape = None if None in sizes else tuple(size for size in sizes if size is not None)
            layout = Layout.contiguous(2)
            return TensorFact(shape, layout, node, is_parameter=True, is_linear_weight=True)
        if attribute in ("weight", "bias") and (
            isinstance(base, ModuleFact | TensorFact | Unknown)
        ):
            return TensorFact(layout=Layout.contiguous(None), is_parameter=True, origin=node)
        if isinstance(base, ModuleFact) and attribute == "out_features":
            return IntFact(base.out_features) if base.out_features is not None else UNKNOWN
        tensor = as_tensor(base)
        if tensor is None:
            return UNKNOWN
        if attribute == "shape":
            return SizeFact(tensor.shape) if tensor.shape is not None else UNKNOWN
        if attribute == "ndim":
            self._asked(node.value, base)
            return IntFact(Dim.constant(tensor.rank)) if tensor.rank is not None else UNKNOWN
        if attribute == "dtype":
            return DtypeOf(tensor.dtype)
        if attribute in ("T", "mT"):
            anchor = self.context.attribute_name(node)
            call = OpCall(attribute, node, anchor, tensor, node.value, self)
            return reversed_axes(call) if attribute == "T" else last_two_swapped(call)
        return UNKNOWN

    def _unary(self, operator: ast.unaryop, expression: ast.expr, node: ast.expr) -> Fact:
        fact = self.eval(expression)
        if isinstance(operator, ast.USub) and isinstance(fact, IntFact):
            return IntFact(Dim.constant(-1) * fact.dim)
        if isinstance(operator, ast.Invert) and isinstance(fact, TensorFact):
            return negated(fact, node)
        if isinstance(fact, TensorFact):
            return flow(fact, Family.ELEMENTWISE, origin=node, scaling=fact.scaling)
        if isinstance(fact, ScalarFact) and isinstance(operator, ast.USub):
            value = None if fact.value is None else -fact.value
            scale = (
                None
                if fact.scale is None
                else replace(fact.scale, coefficient=-fact.scale.coefficient)
            )
            return ScalarFact(scale=scale, value=value, origin=node)
        if isinstance(fact, ScalarFact):
            return fact
        return UNKNOWN

    def _binary(self, node: ast.BinOp) -> Fact:
        left = self.eval(node.left)
        right = self.eval(node.right)
        operator = node.op
        if isinstance(operator, ast.MatMult):
            if self.context.shapes:
                left, right = self._factors(node.left, left, node.right, right)
            left_tensor, right_tensor = as_tensor(left), as_tensor(right)
            if left_tensor is None or right_tensor is None:
                return UNKNOWN
            return matrix_product(self, node, left_tensor, right_tensor, node.left, node.right)
        symbol = _ARITHMETIC.get(type(operator))
        if symbol in ("+", "-") and self.context.shapes:
            left, right = self._partners(node.left, left, node.right, right, addend_uses)
        sequences = (SizeFact, TupleFact)
        if symbol == "+" and isinstance(right, sequences):
            if isinstance(left, sequences):
                return TupleFact(items_of(left) + items_of(right))
            if isinstance(left, ShapePrefix):  # x.size()[:-1] + (nf,): Conv1D's output sizes
                return PrefixedSizes(left, tuple(items_of(right)))
            if isinstance(left, PrefixedSizes):
                return PrefixedSizes(left.prefix, (*left.tail, *items_of(right)))
        if symbol == "*" and (repeated := _repeated(left, right) or _repeated(right, left)):
            return repeated
        if symbol in ("+", "-"):
            left, right = self._attribute_as_size(node, left, right)
        if symbol in ("//", "*") and not (
            isinstance(left, TensorFact) or isinstance(right, TensorFact)
        ):
            sizes = self._size_arithmetic(symbol, node, left, right)
            if sizes is not None:
                return sizes
        if symbol is not None:
            return arithmetic(self, node, symbol, left, right)
        if isinstance(operator, ast.BitAnd | ast.BitOr):
            return combined(node, left, right)
        if isinstance(operator, ast.Pow):
            exponent = scale_of(right)
            power = exponent.coefficient if exponent and exponent.base == Dim.constant(1) else None
            if isinstance(left, TensorFact):
                scalar = left.scalar.power(power) if left.scalar and power is not None else None
                return flow(left, Family.ELEMENTWISE, origin=node, scalar=scalar)
            if isinstance(right, TensorFact):  # base ** (positions / d): inverse frequencies
                return flow(right, Family.ELEMENTWISE, origin=node, scalar=None)
            if isinstance(left, IntFact | ScalarFact) or isinstance(right, ScalarFact):
                base = scale_of(left)
                return ScalarFact(scale=base.power(power) if base and power is not None else None)
        return UNKNOWN

    def _size_arithmetic(
        self, symbol: str, node: ast.BinOp, left: Fact, right: Fact
    ) -> IntFact | None:
        """``d_model // num_heads`` or ``num_heads * head_dim`` on names not known to be
        tensors: size arithmetic. A product needs one side already known to be a size, save
        in a constructor, where two names multiplied (``inner_dim = dim_head * heads``,
        ``config.head_dim * config.num_heads``) make a size for its layers."""
        if symbol == "*" and not (isinstance(left, IntFact) or isinstance(right, IntFact)):
            names = all(dotted_name(side) is not None for side in (node.left, node.right))
            if not (self.in_constructor and names):
                return None
        if not isinstance(left, Unknown | IntFact):
            return None
        if not isinstance(right, Unknown | IntFact):
            return None
        a, b = self.size(left, node.left), self.size(right, node.right)
        if a is None or b is None:
            return None
        assumed = isinstance(left, Unknown) or isinstance(right, Unknown)
        if symbol == "*":
            return IntFact(a * b, assumed)
        if a.value is None and b.value is None:
            self._divided(node, a, b)
        return IntFact(a.floordiv(b, origin=node), assumed)

    def _attribute_as_size(self, node: ast.BinOp, left: Fact, right: Fact) -> tuple[Fact, Fact]:
        """``config.num_hidden_layers + 1``: an attribute the analysis knows nothing of,
        added to a size, is a size too (a sequence plus an int raises), taken as one
        (``assumed``), so ``torch.ones(num_layers)`` has one axis. Not a bare name: a
        parameter so added to would be an int from the start (see :meth:`_used_as_size`),
        where ``1 - t`` is as often a tensor's."""
        if isinstance(right, IntFact) and isinstance(left, Unknown):
            return self._sized_attribute(node.left, left), right
        if isinstance(left, IntFact) and isinstance(right, Unknown):
            return left, self._sized_attribute(node.right, right)
        return left, right

    def _sized_attribute(self, written: ast.expr, fact: Fact) -> Fact:
        size = self.size(fact, written) if isinstance(written, ast.Attribute) else None
        return IntFact(size, assumed=True) if size is not None else fact

    def _divided(self, node: ast.BinOp, numerator: Dim, denominator: Dim) -> None:
        """Remember a division of named sizes, for SC502: by the names written and those
        the sizes were read as (``self.embed_dim = config.hidden_size``: a check of
        ``config.hidden_size % config.num_heads`` checks ``self.embed_dim`` too)."""
        if isinstance(node.left, ast.Name) and isinstance(node.right, ast.Name):
            self.divisions.append((node.left.id, node.right.id))
        constructor = self.in_constructor
        divided = self._names_read(node.left, numerator), self._names_read(node.right, denominator)
        self.observe(SizeDivision(node, *divided, constructor))

    def _names_read(self, node: ast.expr, size: Dim) -> frozenset[str]:
        """:func:`_names_in` ``node``, and the last part of what each name there was copied
        from (an unknown value's name) and of each name ``size`` was read as."""
        copies = [self.copied.get(dotted_name(part) or "") for part in ast.walk(node)]
        read = [symbol.name for symbol in symbols_in(size)]
        return _names_in(node) | {name.rsplit(".", 1)[-1] for name in (*copies, *read) if name}

    def _shape_spec(self, annotation: ast.expr) -> ShapeSpec | None:
        """The shape a jaxtyping annotation (``Float[Tensor, "b l d"]``) names, if any."""
        if not isinstance(annotation, ast.Subscript):
            return None
        pieces = _subscript_pieces(annotation)
        if len(pieces) != 2:
            return None
        kind = self._eval(annotation.value)
        if not isinstance(kind, QualifiedName) or not kind.name.startswith("jaxtyping."):
            return None
        text = string_literal(pieces[1])
        return parse_shape(text) if text is not None else None

    def _check_arguments(
        self,
        function: FunctionRef,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> None:
        """Arguments against the callee's jaxtyping annotations (names bound per call)."""
        params = _callee_parameters(function)
        by_name = {param.name: param for param in params}
        passed = [(param, argument) for param, argument in zip(params, args, strict=False)]
        passed += [(by_name[key], argument) for key, argument in kwargs.items() if key in by_name]
        bindings = Bindings()
        for param, (fact, node) in passed:
            annotation = param.node.annotation
            spec = self._shape_spec(annotation) if annotation is not None else None
            if spec is not None:
                self._check_annotation(node, fact, spec, bindings)

    def _check_annotation(
        self, node: ast.AST, fact: Fact, spec: ShapeSpec, bindings: Bindings
    ) -> None:
        if not isinstance(fact, TensorFact):
            return
        value = fact.shape if fact.shape is not None else fact.prefixed
        if value is not None:
            reason = contradiction(spec, value, bindings)
            if reason is not None:
                self.observe(AnnotationMismatch(node, spec.text, value, reason))

    def _subscript(self, node: ast.Subscript) -> Fact:
        if self.context.shapes:
            self._index_uses(node)
        base = self.eval(node.value)
        prefix = self._shape_prefix(node) or self._leading_sizes(node)
        if prefix is not None:
            return prefix
        bounds: dict[ast.Slice, SliceBounds] = {}
        indices: dict[ast.expr, Fact] = {}
        for piece in _subscript_pieces(node):
            if isinstance(piece, ast.Slice):
                parts = (piece.lower, piece.upper, piece.step)
                bounds[piece] = SliceBounds(*(self._bound(part) for part in parts))
            else:
                indices[piece] = self.eval(piece)
        key = node.slice
        if isinstance(base, NamedFacts) and isinstance(key, ast.Constant) and _is_text(key):
            return base.named(str(key.value))
        index = _single_index(node)
        if isinstance(base, SizeFact | TupleFact) and index is None:
            window = _literal_slice(node)
            if window is not None and isinstance(base, SizeFact):
                return SizeFact(base.dims[window])
            if window is not None and isinstance(base, TupleFact):
                return TupleFact(base.items[window])
        if len(indices) == 1 and not bounds and (index is None or isinstance(base, RepeatedFact)):
            alike = _alike_items(base)
            if alike is not None:  # ``parts[k]`` of pieces all alike, whichever ``k`` is
                return alike
        if isinstance(base, SizeFact | TupleFact) and index is not None:
            items = base.dims if isinstance(base, SizeFact) else base.items
            if -len(items) <= index < len(items):
                item = items[index]
                return IntFact(item) if isinstance(item, Dim) else item
            return UNKNOWN
        receiver = node.value
        if (
            isinstance(receiver, ast.Attribute)
            and receiver.attr == "shape"
            and isinstance(base, Unknown)
            and index is not None
        ):
            owner = dotted_name(receiver.value)
            if owner is not None:
                known = _last_size(self.env.get(owner), index)
                return IntFact(known or self.symbol(f"{owner}.shape[{index}]"))
        if isinstance(base, TensorFact):
            return _index_tensor(base, node, bounds, indices)
        return UNKNOWN

    def _bound(self, bound: ast.expr | None) -> Fact | None:
        """A slice's bound (``None`` where it is left out, or written ``None``)."""
        fact = self.eval(bound) if bound is not None else None
        return None if isinstance(fact, NoneFact) else fact

    def _leading_sizes(self, node: ast.Subscript) -> SizeFact | None:
        """``x.shape[:k]`` (or ``x.size()[:k]``) of a tensor whose rank is unknown: its first
        ``k`` sizes, named as ``x.shape[i]`` is (code that takes ``k`` sizes takes them from a
        tensor that has them)."""
        window = _literal_slice(node)
        owner = _shape_receiver(node.value)
        if window is None or owner is None or window.step is not None or window.start:
            return None
        key = dotted_name(owner)
        tensor = self.env.get(key) if key is not None else None
        if not isinstance(tensor, TensorFact) or tensor.shape is not None:
            return None
        if window.stop is None or window.stop <= 0:
            return None
        return SizeFact(tuple(self.symbol(f"{key}.shape[{axis}]") for axis in range(window.stop)))

    def _shape_prefix(self, node: ast.Subscript) -> ShapePrefix | None:
        """``x.shape[:-k]`` (or ``x.size()[:-k]``) of a tensor whose rank is unknown: where
        ``x`` is a prefix (a ``*batch``) and ``k`` last axes, that prefix."""
        dropped = _dropped_tail(node)
        owner = _shape_receiver(node.value)
        key = dotted_name(owner) if owner is not None and dropped else None
        tensor = self.env.get(key) if key is not None else None
        if key is None or dropped is None or not isinstance(tensor, TensorFact):
            return None
        if tensor.shape is not None:
            return None
        split = tensor.prefixed
        if split is not None and len(split.tail) == dropped:
            return split.prefix
        passed = self.holds_passed(key, tensor)
        return ShapePrefix(key, dropped, passed, binding=self.rebindings[key])

    def spliced(self, fact: Fact) -> Fact:
        """What ``*value`` splices in: a shape prefix read again now, if its rank is known."""
        if isinstance(fact, ShapePrefix):
            return self.resolved(fact) or fact
        if isinstance(fact, PrefixedSizes):
            sizes = self.resolved(fact.prefix)
            return TupleFact((*items_of(sizes), *fact.tail)) if sizes else fact
        return fact

    def resolved(self, prefix: ShapePrefix) -> SizeFact | None:
        """The sizes a :class:`ShapePrefix` stands for, once its tensor's rank is known (and
        while its name still holds that tensor)."""
        if self.rebindings[prefix.owner] != prefix.binding:
            return None
        tensor = self.env.get(prefix.owner)
        shape = tensor.shape if isinstance(tensor, TensorFact) else None
        if shape is None or len(shape) < prefix.dropped:
            return None
        return SizeFact(shape[: len(shape) - prefix.dropped])

    def learn_rank(self, key: str, rank: int, guess: str | None) -> TensorFact | None:
        """The tensor bound to ``key``, whose rank the code's use of it reveals: bound again
        with ``rank`` named sizes (``hidden_states.shape[0]``, ...) and the guess it rests
        on. Last axes known already (after a ``*batch``) keep their sizes."""
        tensor = self.env.get(key)
        if not isinstance(tensor, TensorFact) or tensor.shape is not None:
            return None
        shape = tuple(self.symbol(f"{key}.shape[{index}]") for index in range(rank))
        split = tensor.prefixed
        if split is not None and len(split.tail) <= rank:
            shape = (*shape[: rank - len(split.tail)], *split.tail)
        layout = tensor.layout.materialise(rank) if tensor.layout is not None else None
        learned = replace(
            tensor,
            shape=shape,
            layout=layout,
            unknown_rank=None,
            guess=guess or tensor.guess,
            prefixed=None,
        )
        return self._learned(key, tensor, learned)

    def _learned(self, key: str, tensor: TensorFact, learned: TensorFact) -> TensorFact:
        """``key``, bound to ``tensor``, bound to what the code has shown of it: a parameter
        that held what was passed in still does (see ``holds_passed``)."""
        self.env[key] = learned
        if self.holds_passed(key, tensor):
            self.passed[key].append(learned)
            if tensor.shape is None and learned.shape is not None:
                self.uses.learned(key, self.statement)
                for tested in self.tested.pop(key, ()):
                    self.facts[tested] = learned
        return learned

    def holds_passed(self, key: str, fact: Fact | None) -> bool:
        """Does ``key`` hold what was passed in to the parameter of that name (as passed, or
        as learned since)? A name bound again, or a tensor changed in place, holds another;
        so does a join of branches that learned differently."""
        return any(version is fact for version in self.passed.get(key, ()))

    def _shows(
        self, node: ast.expr, fact: Fact | None, evidence: Evidence, *, learn: bool = True
    ) -> Fact | None:
        """A use of the tensor ``node`` that shows something of its rank (see
        :mod:`~shapecheck.analysis.usage`): noted where ``node`` names a parameter that still
        holds what was passed in, and learned from here on where it fixes the rank or guesses
        it (unless the op learns it itself: ``learn``). What ``node`` holds now. A use that
        fixes the rank of a tensor with the rank of a parameter (``rank_of``: ``self.norm(x)``)
        fixes the parameter's."""
        if not isinstance(fact, TensorFact):
            return fact
        kin = fact.rank_of
        certain = evidence.exact and evidence.guess is None and fact.shape is None
        if kin in self.followed and certain and not self.holds_passed(kin.arg, fact):
            self.uses.note(kin.arg, fixed(evidence.rank))
        if not isinstance(node, ast.Name):
            return fact
        key = node.id
        if self.holds_passed(key, fact):
            self.uses.note(key, evidence)
        if not learn or fact.shape is not None or self.env.get(key) is not fact:
            return fact
        shown = decide(key, [evidence])
        if shown is None:
            return fact
        learned = self._learned(key, fact, self._shaped(key, fact, shown))
        if self.record and node in self.facts:
            self.facts[node] = learned  # the tensor read there is the one now known
        return learned

    def _shaped(self, key: str, fact: TensorFact, shown: RankByUse) -> TensorFact:
        """``fact``, of unknown rank, with the rank its uses show: each size as an unpacking
        names it, or as the code reads it (``key.shape[i]``), else unnamed; last axes already
        known (a tail after a ``*batch``, a linear layer's width) keep their sizes."""
        rank = shown.rank
        shape = tuple(
            self._size_called(size, f"{key}.shape[{index}]")
            for index, size in enumerate(shown.sizes or (None,) * rank)
        )
        split = fact.prefixed
        last = fact.known_last or shown.last
        if split is not None and len(split.tail) <= rank:
            shape = (*shape[: rank - len(split.tail)], *split.tail)
        elif last is not None and rank:
            shape = (*shape[:-1], last)
        layout = fact.layout.materialise(rank) if fact.layout is not None else None
        return replace(
            fact,
            shape=shape,
            layout=layout,
            unknown_rank=None,
            guess=fact.guess or shown.guess,
            prefixed=None,
            known_last=None,
        )

    def _size_called(self, name: str | None, axis: str) -> Dim:
        """The size of ``axis`` (``x.shape[1]``) where an unpacking names it ``name``: the
        size the name holds already, else one named so. Where nothing names it, the size the
        code read as ``axis`` before, else one unnamed (``Dim.unnamed``), which reading
        ``axis`` again gives: rules take two named sizes for different ones, and nothing says
        this one differs from any other."""
        bound = self.env.get(name) if name is not None else None
        if isinstance(bound, IntFact):
            return bound.dim
        if name is not None:
            return self.symbol(name)
        if axis not in self.symbols:
            self.symbols[axis] = Dim.unnamed(axis, nameable=True)
        return self.symbols[axis]

    def _factors(
        self, left_node: ast.expr, left: Fact, right_node: ast.expr, right: Fact
    ) -> tuple[Fact, Fact]:
        """The factors of a matrix product, a factor of unknown rank taking the other's
        where that is a batch of matrices (see ``usage.partner_uses``)."""
        return self._partners(left_node, left, right_node, right, partner_uses)

    def _partners(
        self,
        left_node: ast.expr,
        left: Fact,
        right_node: ast.expr,
        right: Fact,
        uses: Callable[[str | None, Fact], Evidence | None],
    ) -> tuple[Fact, Fact]:
        """The two operands of a binary op, each as what ``uses`` says its partner shows of
        its rank (the factors of a product: ``usage.partner_uses``; a term added to
        attention scores: ``usage.addend_uses``)."""
        shown = uses(dotted_name(left_node), right)
        if shown is not None:
            left = self._shows(left_node, left, shown) or left
        shown = uses(dotted_name(right_node), left)
        if shown is not None:
            right = self._shows(right_node, right, shown) or right
        return left, right

    def _asked(self, node: ast.expr, fact: Fact | None) -> None:
        """The code asks the rank of ``node`` (``x.ndim``): if a parameter that still holds
        what was passed in, it may take several, and no use shows its rank."""
        if isinstance(node, ast.Name) and self.holds_passed(node.id, fact):
            self.uses.asked.add(node.id)

    def _method_uses(
        self,
        receiver_node: ast.expr,
        receiver: Fact,
        method: str,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> tuple[Fact, list[Argument], dict[str, Argument]]:
        """What ``receiver.<method>(...)`` shows of the ranks of its tensors, and them as
        learned (``x.permute(0, 2, 1, 3)`` is 4-D; ``x.dim()`` asks)."""
        if method not in SHOWING_METHODS:
            return receiver, args, kwargs
        if method in RANK_QUERIES and not args:
            self._asked(receiver_node, receiver)
        written = dotted_name(receiver_node) or "…"
        for operand, evidence in method_uses(written, method, args, kwargs):
            if operand is None:
                receiver = self._shows(receiver_node, receiver, evidence) or receiver
            else:
                self._shows(operand[1], operand[0], evidence)
        if method == "matmul" and args:
            receiver, _ = self._factors(receiver_node, receiver, args[0][1], args[0][0])
        operands = gathered(args, kwargs, (receiver, receiver_node)) if method == "gather" else None
        if operands is not None:
            index, index_node = operands[1]
            receiver, _ = self._partners(receiver_node, receiver, index_node, index, gathered_uses)
        refreshed = {keyword: self._refreshed(argument) for keyword, argument in kwargs.items()}
        return receiver, [self._refreshed(argument) for argument in args], refreshed

    def _function_uses(
        self, name: str, args: list[Argument], kwargs: dict[str, Argument]
    ) -> tuple[list[Argument], dict[str, Argument]]:
        """What a call of the function ``name`` shows of the ranks of its tensors
        (``torch.bmm(a, b)``: both 3-D; ``len(x.shape)`` asks), and them as learned."""
        if name not in SHOWING_FUNCTIONS:
            return args, kwargs
        if name == "builtins.len" and len(args) == 1:
            owner = shape_owner(args[0][1])
            if owner is not None:
                self._asked(owner, self.env.get(dotted_name(owner) or ""))
        learns = name.startswith("einops.")  # einops learns the rank itself, naming sizes
        for (fact, node), evidence in function_uses(name, args, kwargs):
            self._shows(node, fact, evidence, learn=not learns)
        if name == "torch.matmul" and len(args) == 2:
            self._factors(args[0][1], args[0][0], args[1][1], args[1][0])
        operands = gathered(args, kwargs, None) if name == "torch.gather" else None
        if operands is not None:
            (source, source_node), (index, index_node) = operands
            self._partners(source_node, source, index_node, index, gathered_uses)
        refreshed = {keyword: self._refreshed(argument) for keyword, argument in kwargs.items()}
        return [self._refreshed(argument) for argument in args], refreshed

    def _index_uses(self, node: ast.Subscript) -> None:
        """``x.shape[3]`` (or ``x.size()[3]``) needs four axes; ``x[:, :, 0]`` three."""
        owner = shape_owner(node.value)
        if isinstance(owner, ast.Name):
            axis = _single_index(node)
            if axis is not None and self._may_show(owner.id):
                self._shows(owner, self.env.get(owner.id), shape_index_uses(owner.id, axis))
        elif isinstance(node.value, ast.Name) and self._may_show(node.value.id):
            evidence = index_uses(node.value.id, node)
            if evidence is not None:
                self._shows(node.value, self.env.get(node.value.id), evidence)

    def _may_show(self, name: str) -> bool:
        """Could a use of ``name`` show anything: is it a tensor of unknown rank, or a
        parameter that holds what was passed in? (Most are neither: no evidence is built.)"""
        fact = self.env.get(name)
        if not isinstance(fact, TensorFact):
            return False
        return fact.shape is None or self.holds_passed(name, fact)

    def _refreshed(self, argument: Argument) -> Argument:
        """An argument as its name holds it now, where a use just learned its rank."""
        fact, node = argument
        if isinstance(fact, TensorFact) and fact.shape is None and isinstance(node, ast.Name):
            now = self.env.get(node.id)
            if isinstance(now, TensorFact) and now.shape is not None:
                return now, node
        return argument

    def read_again(self) -> dict[str, RankByUse] | None:
        """Where a parameter was read before its rank was learned (in an earlier statement,
        on another branch), or learned another rank than all its uses show: the ranks to
        interpret the function with once more, known from the start (``None``: none)."""
        learned = {
            name: {fact.rank for fact in versions if fact.rank is not None}
            for name, versions in self.passed.items()
        }
        again = self.uses.read_again(learned)
        for name, shown in again.items():
            widths = [fact.known_last for fact in self.passed[name] if fact.known_last]
            if widths:  # a linear layer's width, the same size in any interpretation
                again[name] = replace(shown, last=widths[-1])
        return again or None

    def keep_call_sites(self) -> None:
        """This interpretation is the one kept: its calls of module functions tell the second
        pass what their parameters are."""
        for function, site in self.call_sites:
            self.context.call_sites.setdefault(function, []).append(site)

    # --- calls ------------------------------------------------------------------------------

    def _call(self, node: ast.Call) -> Fact:
        func = node.func
        if isinstance(func, ast.Attribute):
            receiver = self.eval(func.value)
            bound = self._bound_path(func)
            callee = bound if bound is not None else self._member(func, receiver)
            if self.record:
                self.facts[func] = callee
            if not isinstance(callee, CALLABLES):
                args, kwargs = self._arguments(node)
                project = self.context.project
                if isinstance(callee, ImportedName) and project is not None:
                    # ``Attention.attention(q, k, v)``: a static method of another file's class
                    static = project.called(self, callee, args, kwargs)
                    if isinstance(static, FunctionRef):
                        return self._inline(static, node, args, kwargs)
                return self._method(node, func, receiver, args, kwargs)
        else:
            callee = self.eval(func)
        args, kwargs = self._arguments(node)
        project = self.context.project
        if project is not None and isinstance(callee, Unknown | QualifiedName):
            callee = project.called(self, callee, args, kwargs) or callee  # another file's
        if isinstance(callee, Choice):
            return self._chosen_call(callee, node, func, args, kwargs)
        return self._called(callee, node, func, args, kwargs)

    def _chosen_call(
        self,
        choice: Choice,
        node: ast.Call,
        func: ast.expr,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> Fact:
        """What the results of every option share."""
        results = [self._called(option, node, func, args, kwargs) for option in choice.options]
        joined = functools.reduce(join, results)
        return _uncertain(joined) if choice.uncertain else joined

    def _called(
        self,
        callee: Fact,
        node: ast.Call,
        func: ast.expr,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> Fact:
        """``callee`` called with ``args``: a function by import, of the module, a class of
        the module (constructed), a layer, a partial of one of them."""
        if isinstance(callee, Partial):
            kwargs = {**dict(callee.kwargs), **kwargs}
            return self._called(callee.function, node, func, [*callee.args, *args], kwargs)
        if isinstance(callee, QualifiedName):
            built = self._qualified(callee.name, node, args, kwargs)
            if callee.guess is not None and isinstance(built, ModuleFact):
                return replace(built, guess=callee.guess)
            return built
        if isinstance(callee, FunctionRef):
            return self._inline(callee, node, args, kwargs)
        if isinstance(callee, ClassRef):
            self._construct(callee, node, args, kwargs)
            project = self.context.project
            if project is not None:  # an instance of the sizes it was given
                return project.instance(self, callee, node, args, kwargs)
            return InstanceFact(callee.name)
        return self._layer_call(callee, node, func, args, kwargs) or _unmodelled_call(node)

    def _layer_call(
        self,
        layer: Fact,
        node: ast.Call,
        func: ast.expr,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> Fact | None:
        """A layer called: a module the analysis knows (``nn.Sequential`` applies each of its
        layers to what the one before returned) or an instance of a class of this module
        (its ``forward`` runs); ``None`` for anything else."""
        if isinstance(layer, InstanceFact):
            # (a layer an inherited method of another file stored is named in that file)
            model = self.context.classes.get(layer.name)
            forward = model.methods.get("forward") if model is not None else None
            if model is not None and model.layers is not None:
                sequential = ModuleFact("torch.nn.Sequential", stages=model.layers)
                return self._sequential_call(sequential, node, func, args, kwargs)
            if model is None or forward is None:
                return None
            result = self._inline(FunctionRef(forward, class_name=layer.name), node, args, kwargs)
            if layer.built_with:
                result = self._in_construction_sizes(result, layer, model)
            given = as_tensor(args[0][0]) if args else None
            # the model's name: Norm, file.Norm (another module's), Norm(sizes) (in its sizes)
            written = layer.name.partition("(")[0].rsplit(".", 1)[-1]
            norm = _NORM_CLASS.search(written)
            if norm is not None and isinstance(result, TensorFact) and given is not None:
                # unscaled, as ``products.normalised`` says; a batch norm passes a scale on
                batch = norm.group(1).lower() == "batch"
                return replace(result, scaling=given.scaling if batch else ())
            return result
        if not isinstance(layer, ModuleFact):
            return None
        if layer.kind == "torch.nn.Sequential":
            return self._sequential_call(layer, node, func, args, kwargs)
        learned = self._rank_through((layer,), args)
        if learned is not None:
            args = [(learned, args[0][1]), *args[1:]]
        transfer = MODULE_CALLS.get(layer.kind)
        tensor = as_tensor(args[0][0]) if args else None
        if transfer is None or tensor is None:
            return UNKNOWN
        op = OpCall(layer.kind, node, func, tensor, args[0][1], self, args[1:], kwargs, layer)
        result = transfer(op)
        linear = layer.kind == "torch.nn.Linear"
        self._learn_width(args[0][1], tensor, layer.in_features if linear else None)
        return _uncertain(result) if layer.uncertain else result

    def _in_construction_sizes(self, result: Fact, layer: InstanceFact, model: ClassModel) -> Fact:
        """What a layer's ``forward`` returned, a size named after an attribute its
        ``__init__`` set to a parameter (``self.nf = nf``) put in what the construction
        passed for it (``Conv1D(self.embed_dim, ...)``): the caller's size, not the callee's
        name, which means nothing here (and two layers of the class, of two widths, would
        share it)."""
        init = model.methods.get("__init__")
        if init is None:
            return result
        stored = self.context.stored_parameters.get(init)
        if stored is None:
            stored = self.context.stored_parameters[init] = _stored_parameters(init)
        if not stored:
            return result
        given = dict(layer.built_with)
        written = ast.Constant(None)  # (the construction's arguments are not at hand)
        positional: list[Argument] = [
            (IntFact(dim) if isinstance(dim := given.get(index), Dim) else UNKNOWN, written)
            for index in range(1 + max((i for i in given if isinstance(i, int)), default=-1))
        ]
        named: dict[str, Argument] = {
            where: (IntFact(dim), written) for where, dim in given.items() if isinstance(where, str)
        }
        bound = _bind_arguments(FunctionRef(init, class_name=layer.name), positional, named)
        sizes = {
            f"self.{attribute}": fact.dim
            for parameter, attribute in stored.items()
            if bound is not None and isinstance(fact := bound.get(parameter), IntFact)
        }
        return _sizes_handed_back(result, {}, sizes, self.symbols) if sizes else result

    def _sequential_call(
        self,
        sequential: ModuleFact,
        node: ast.Call,
        func: ast.expr,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> Fact:
        """``self.to_q(x)`` with ``to_q = nn.Sequential(nn.Linear(d, h * e), Rearrange(...))``:
        the first layer gets the arguments, every later one what the one before returned
        (written nowhere: it is the call's)."""
        learned = self._rank_through(sequential.stages, args)
        if learned is not None:
            args = [(learned, args[0][1]), *args[1:]]
        result: Fact | None = None
        for index, stage in enumerate(sequential.stages):
            given = (args, kwargs) if index == 0 else ([(result or UNKNOWN, node)], {})
            if isinstance(stage, Choice):
                result = self._chosen_call(stage, node, func, *given)
            else:
                result = self._layer_call(stage, node, func, *given)
            if result is None:
                return _unmodelled_call(node)
        result = result if result is not None else (args[0][0] if args else UNKNOWN)
        return _uncertain(result) if sequential.uncertain else result

    def _rank_through(self, stages: tuple[Fact, ...], args: list[Argument]) -> TensorFact | None:
        """A tensor handed to layers that keep its rank (a ``Linear``, a norm; or none) before
        an einops layer's pattern has that pattern's rank: a use of it, learned for the name
        it is bound to (and returned; ``None`` where nothing was learned)."""
        if not args:
            return None
        fact, node = args[0]
        for stage in stages:
            if not isinstance(stage, ModuleFact):
                return None
            rank = input_rank(stage.pattern) if stage.pattern is not None else None
            if rank is not None:
                self._shows(node, fact, fixed(rank), learn=False)
                key = dotted_name(node)
                return self.learn_rank(key, rank, None) if key is not None else None
            if stage.kind not in _KEEPS_RANK:
                return None
        return None

    def _construct(
        self,
        cls: ClassRef,
        node: ast.Call,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> None:
        """``MultiHeadAttention(100, 3)``: literal sizes its ``__init__`` divides must divide."""
        model = self.context.classes.get(cls.name)
        init = model.methods.get("__init__") if model is not None else None
        if model is None or init is None or not model.divisions:
            return
        bound = _bind_arguments(FunctionRef(init, class_name=cls.name), args, kwargs) or {}
        for numerator, denominator in model.divisions:
            a, b = bound.get(numerator), bound.get(denominator)
            if isinstance(a, IntFact) and isinstance(b, IntFact):
                top, bottom = a.dim.value, b.dim.value
                if top is not None and bottom and top % bottom:
                    what = f"{numerator} by {denominator}"
                    self.observe(IndivisibleSizes(node, what, top, bottom))

    def _arguments(self, node: ast.Call) -> tuple[list[Argument], dict[str, Argument]]:
        args: list[Argument] = []
        kwargs: dict[str, Argument] = {}
        for argument in node.args:
            if not isinstance(argument, ast.Starred):
                args.append((self.spliced(self.eval(argument)), argument))
                continue
            fact = self.spliced(self.eval(argument.value))
            if isinstance(fact, SizeFact | TupleFact):
                args.extend((item, argument) for item in items_of(fact))
            else:  # a prefix of unknown length (with sizes after it: ``view(*hidden_shape)``,
                # read as ``view(hidden_shape)``), or anything else spliced in
                spliced = isinstance(fact, ShapePrefix | PrefixedSizes)
                args.append((fact if spliced else UNKNOWN, argument))
        for keyword in node.keywords:
            fact = self.eval(keyword.value)
            if keyword.arg is not None:  # ``**options`` maps to no parameter we can name
                kwargs[keyword.arg] = (fact, keyword.value)
        return args, kwargs

    def _method(
        self,
        node: ast.Call,
        func: ast.Attribute,
        receiver: Fact,
        args: list[Argument],
        kwargs: dict[str, Argument],
        receiver_node: ast.expr | None = None,
    ) -> Fact:
        """``receiver.<func.attr>(...)``; ``receiver_node`` is where the receiver is written
        when it is not ``func.value`` (``torch.Tensor.unsqueeze_(y, 0)``)."""
        name = func.attr
        receiver_node = func.value if receiver_node is None else receiver_node
        if isinstance(receiver, ModuleFact) and name in _MODULE_RETURNS_ITSELF:
            return receiver  # self.proj = nn.Linear(a, b).to(device)
        if name in _REGISTERS and _is_self(func.value):
            self._register(node, args, kwargs, _REGISTERS[name])
            return NONE
        default = _default_function(name, args)
        if default is not None:
            return default
        if name == "append" and isinstance(receiver, TupleFact | RepeatedFact) and len(args) == 1:
            self._rebind(receiver_node, _appended(receiver, args[0][0]))
            return NONE
        tensor = as_tensor(receiver)
        if tensor is None:
            return _unmodelled_call(node)
        if self.context.shapes:
            receiver, args, kwargs = self._method_uses(receiver_node, receiver, name, args, kwargs)
            tensor = as_tensor(receiver) or tensor
        if name == "size":
            return self._size_call(receiver_node, tensor, args)
        if name in ("dim", "ndimension"):
            return IntFact(Dim.constant(tensor.rank)) if tensor.rank is not None else UNKNOWN
        in_place = name.endswith("_") and not name.startswith("_")
        transfer = TENSOR_METHODS.get(name[:-1] if in_place else name)
        if transfer is None:
            if name in _RESHAPED_IN_PLACE:
                changed = flow(tensor, Family.VIEW, shape=None, layout=None, origin=node)
                self._changed_in_place(receiver_node, tensor, changed)
            elif in_place:
                self._rebind(receiver_node, flow(tensor, Family.UNMODELLED_IN_PLACE))
            return _unmodelled_call(node)
        anchor = self.context.attribute_name(func)
        op = OpCall(
            name[:-1] if in_place else name, node, anchor, tensor, receiver_node, self, args, kwargs
        )
        result = transfer(op)
        if in_place and isinstance(result, TensorFact) and _reshaped(tensor, result):
            self._changed_in_place(receiver_node, tensor, result)
        elif in_place:
            self._rebind(receiver_node, result)
        return result

    def _register(
        self, node: ast.Call, args: list[Argument], kwargs: dict[str, Argument], keyword: str
    ) -> None:
        """``self.register_buffer("mask", torch.tril(...))`` stores ``self.mask``;
        ``self.add_module("c", nn.Conv2d(...))`` stores ``self.c`` (``keyword``: the name of
        the stored value's parameter)."""
        named = kwargs.get("name") or (args[0] if args else None)
        stored = kwargs.get(keyword) or (args[1] if len(args) > 1 else None)
        if named is None or stored is None:
            return
        written, fact = string_literal(named[1]), stored[0]
        if isinstance(fact, TensorFact):
            fact = moved_with_module(fact)
        if written is not None:
            key = f"self.{written}"
            self._forget_name(key)
            self.env[key] = fact
            self._note_path(key)

    def _learn_width(self, argument: ast.expr, tensor: TensorFact, width: Dim | None) -> None:
        """After ``self.proj(x)`` with ``proj = nn.Linear(E, ...)``, or ``F.linear(x, w)``
        with ``w`` ``[out, E]``, ``x`` is ``E`` wide."""
        key = dotted_name(argument)
        if width is None or key is None or key not in self.env:
            return
        last = tensor.last_dim
        if last is not None and not last.unrelated:  # an unnamed width is E, as ``?`` would be
            return
        if tensor.shape is None:
            self._learned(key, tensor, replace(tensor, known_last=width))
        elif tensor.shape:
            self._learned(key, tensor, replace(tensor, shape=(*tensor.shape[:-1], width)))

    def _rebind(self, target: ast.expr, fact: Fact) -> None:
        key = dotted_name(target)
        if key is not None and key in self.env:
            self.env[key] = fact

    def _changed_in_place(self, target: ast.expr, before: TensorFact, after: TensorFact) -> None:
        """``y.unsqueeze_(0)``, ``y.data = w``: the tensor object itself took another shape,
        so every name bound to it (``z = y``, ``box = [y]; box[0]``) sees the change. Names
        holding the very same fact may be that tensor: they get the new shape, uncertain, so
        no "does nothing" finding or safe fix rests on their old one. (Only ops that change
        the shape look for aliases: they are rare, and the scan is over the environment.)"""
        key = dotted_name(target)
        changed = _uncertain(after)
        for name, fact in list(self.env.items()):
            if fact is before and name != key:
                self.env[name] = changed
        self._rebind(target, after)

    def _size_call(
        self,
        receiver: ast.expr,
        tensor: TensorFact,
        args: list[Argument],
    ) -> Fact:
        if not args:
            return SizeFact(tensor.shape) if tensor.shape is not None else UNKNOWN
        fact = args[0][0]
        if not isinstance(fact, IntFact) or fact.dim.value is None:
            return UNKNOWN
        index = fact.dim.value
        if tensor.shape is not None:
            if -len(tensor.shape) <= index < len(tensor.shape):
                return IntFact(tensor.shape[index])
            return UNKNOWN
        known = _last_size(tensor, index)
        if known is not None:
            return IntFact(known)
        owner = dotted_name(receiver)
        if owner is None:
            return IntFact(Dim.symbol("?"))
        return IntFact(self.symbol(f"{owner}.shape[{index}]"))

    def _qualified(
        self,
        name: str,
        node: ast.Call,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> Fact:
        method = name.removeprefix("torch.Tensor.")
        if method != name and args and isinstance(node.func, ast.Attribute):
            # torch.Tensor.unsqueeze_(y, 0) is y.unsqueeze_(0)
            receiver, receiver_node = args[0]
            return self._method(node, node.func, receiver, args[1:], kwargs, receiver_node)
        if self.context.shapes:
            args, kwargs = self._function_uses(name, args, kwargs)
        if name in FUNCTIONS:
            op = OpCall(name, node, node.func, TensorFact(), None, self, args, kwargs)
            return FUNCTIONS[name](op)
        if name in TENSOR_FUNCTIONS:
            first = kwargs.get("input") or (args[0] if args else None)
            rest = args if "input" in kwargs else args[1:]
            tensor = as_tensor(first[0]) if first is not None else None
            if first is None or tensor is None:
                return UNKNOWN
            op = OpCall(name, node, node.func, tensor, first[1], self, rest, kwargs)
            result = TENSOR_FUNCTIONS[name](op)
            if name == "torch.nn.functional.linear":
                weight = op.tensor_arg(0, "weight")
                if weight is not None and weight.shape is not None and len(weight.shape) == 2:
                    self._learn_width(first[1], tensor, weight.shape[1])
            return result
        if name in ("math.sqrt", "numpy.sqrt"):
            root = scale_of(args[0][0]) if args else None
            return ScalarFact(scale=root.power(0.5) if root else None)
        literal = args[0][1] if args else None
        if name == "builtins.int" and len(args) == 1 and _divides_names(literal):
            assert isinstance(literal, ast.BinOp)
            left, right = self.eval(literal.left), self.eval(literal.right)
            return self._size_arithmetic("//", literal, left, right) or Unknown("call", name)
        if name == "builtins.float" and isinstance(literal, ast.Constant):
            if not isinstance(literal.value, str):
                return ScalarFact()
            try:
                return ScalarFact(value=float(literal.value), origin=node)
            except ValueError:
                return ScalarFact()
        if name == "builtins.float" and args:
            number = args[0][0]
            return number if isinstance(number, ScalarFact) else ScalarFact(scale=scale_of(number))
        if name.startswith(_SCALAR_FUNCTIONS):
            return ScalarFact()
        if name == "builtins.dict" and not args and len(kwargs) == len(node.keywords):
            return NamedFacts(tuple((key, fact) for key, (fact, _) in kwargs.items()))
        copied = args[0][0] if len(args) == 1 else None
        if name in ("builtins.list", "builtins.tuple") and isinstance(
            copied, SizeFact | TupleFact | RepeatedFact
        ):
            # ``list(x.shape)``: the same sizes, in a list to change; ``tuple(rearrange(t,
            # ...) for t in (q, k, v))``: what the comprehension gives
            return copied
        if name == "builtins.map" and len(args) == 2:
            return self._mapped(args[0], args[1][0])
        if name == "builtins.getattr" and len(args) == 3:
            return self._configured_size(args) or Unknown("call", name)
        return _default_function(name, args) or Unknown("call", name)

    def _mapped(self, function: Argument, items: Fact) -> Fact:
        """``map(lambda t: rearrange(t, ...), qkv)`` over a tuple whose items are known: the
        function applied to each (a function of the module, or of another file, is followed
        as a call would be)."""
        fact, node = function
        if not isinstance(items, TupleFact):
            return UNKNOWN
        project = self.context.project
        if isinstance(fact, ImportedName) and project is not None and items.items:
            # ``map(split_heads, (q, k, v))`` with a helper of another file
            fact = project.called(self, fact, [(items.items[0], node)], {}) or fact
        if isinstance(node, ast.Lambda) and len(node.args.args) == 1 and not node.args.vararg:
            return TupleFact(self._elements(node.body, node.args.args[0].arg, items.items))
        if not isinstance(fact, FunctionRef):
            return UNKNOWN
        call = ast.copy_location(ast.Call(node, [], []), node)
        return TupleFact(
            tuple(self._inline(fact, call, [(item, node)], {}) for item in items.items)
        )

    def _configured_size(self, args: list[Argument]) -> IntFact | None:
        """``getattr(config, "head_dim", hidden // heads)``: a size of its own, named after
        the attribute; whether it is the default the code cannot tell."""
        owner, written, default = dotted_name(args[0][1]), string_literal(args[1][1]), args[2][0]
        if owner is None or written is None or not isinstance(default, IntFact):
            return None
        return IntFact(self.symbol(f"{owner}.{written}"))

    def _inline(
        self,
        function: FunctionRef,
        node: ast.Call,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> Fact:
        """Follow a call into a function, without recording anything there: one of this
        module, or one of another file (``from .layers import split_heads``), interpreted in
        its own module's context and handed back in this module's names (see
        :class:`~shapecheck.analysis.imported.ProjectScope`)."""
        project = self.context.project
        home = project.homes.get(function.node) if project is not None else None
        splats_none = all(keyword.arg is not None for keyword in node.keywords)
        arguments = _bind_arguments(function, args, kwargs, splats_none=splats_none)
        if home is None:
            if self.record and not self.context.call_sites_frozen:
                # a recursive call says what the function passes itself, not what its callers
                # do: its parameters are then no one's to tell
                site = None if _within(node, function.node) else arguments
                self.call_sites.append((function.node, site))
            if arguments is not None:
                self._check_arguments(function, args, kwargs)
        elif arguments is not None:
            assert project is not None
            project.check_arguments(self, function, home, args, kwargs)
        if self.depth >= INLINE_DEPTH or arguments is None:
            return _unmodelled_call(node)
        context, owner = self.context, self.class_model
        if home is not None:
            assert project is not None
            entered = project.entering(function, home, arguments)
            if entered is None or home.context is None:
                return _unmodelled_call(node)
            project.hand(node, function, home, entered)
            context, owner, arguments = home.context, None, entered
        if self._nothing_to_learn(node, arguments):
            return _unmodelled_call(node)
        owner = self.context.classes.get(function.class_name or "") or owner
        key: tuple[object, ...] | None = (
            function.node,
            owner.name if owner else None,
            self.depth,
            *sorted(arguments.items()),
        )
        if function.enclosed or any(_closes_over(fact) for fact in arguments.values()):
            key = None  # what it returns may depend on the names bound where it was defined
        with project.inside(home) if project is not None else contextlib.nullcontext():
            known = self.context.inlined.get(key) if key is not None else None
            returned, shown = known if known is not None else (None, {})
            if returned is None:
                callee = Interpreter(context, class_model=owner, record=False, depth=self.depth + 1)
                callee.inherit(function.node, dict(function.closure))
                try:
                    returned = callee.run_function(function.node, arguments)
                except RecursionError:  # deeper than Python's stack: a call it cannot follow
                    return _unmodelled_call(node)
                if home is not None:
                    assert project is not None
                    returned = project.leaving(returned, home)
                shown = {name: rank for name in callee.passed if (rank := callee.uses.rank(name))}
                if key is not None:
                    self.context.inlined[key] = (returned, shown)
        if shown and self.context.shapes:
            self._handed_uses(function.node.name, [*args, *kwargs.values()], arguments, shown)
        returned = self._in_callers_names(returned, function, args, kwargs)
        if home is not None:
            assert project is not None
            returned = project.arrived(node, returned, arguments.values())
        return _uncertain(returned) if function.uncertain else returned

    def _in_callers_names(
        self,
        fact: Fact,
        function: FunctionRef,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> Fact:
        """``fact``, returned by a call of ``function``, with the shape prefixes it names in
        this function's names: ``x.shape[:-1]`` of the callee's parameter ``x`` is that of the
        name passed to it (Conv1D's ``x.view(x.size()[:-1] + (nf,))``). A prefix handed in
        stays; one of the callee's own names, or of an argument that is no name, is dropped."""
        positional = [param.name for param in _callee_parameters(function)]
        passed = {**dict(zip(positional, args, strict=False)), **kwargs}
        # a size this caller handed unknown is the callee's unnamed ``x.shape[i]`` there
        # (see _received): it comes back as the caller's own (EVA's RoPE'd slice, whose
        # length with the prefix put back is the sequence's again)
        unknown = {
            f"{param}.shape[{axis}]": dim
            for param, (tensor, _) in passed.items()
            if isinstance(tensor, TensorFact) and tensor.shape is not None
            for axis, dim in enumerate(tensor.shape)
            if dim.has_unknown
        }
        # a size the callee names by a parameter this caller handed an unknown name for
        # (PEGASUS-X's ``self._shape(x, seq_len=dim.global_len, bsz=dim.batch_size)``) is
        # that name's size here, as it is where this function writes the name as a size
        named = {
            param: self.symbol(name)
            for param, (argument, node) in passed.items()
            if isinstance(argument, Unknown) and (name := dotted_name(node)) is not None
        }
        returned = _sizes_handed_back(fact, unknown, named, self.symbols)
        if not _names_prefixes(returned):
            return returned  # (most results: no prefix to read in this function's names)
        names = {param: dotted_name(node) for param, (_, node) in passed.items()}
        renames = {
            param: ShapePrefix(
                name,
                0,
                self.holds_passed(name, self.env.get(name)),
                binding=self.rebindings[name],
            )
            for param, name in names.items()
            if name is not None
        }
        handed = frozenset(
            tensor.prefixed
            for tensor, _ in passed.values()
            if isinstance(tensor, TensorFact) and tensor.prefixed is not None
        )
        return _prefixes_renamed(returned, renames, handed)

    def _nothing_to_learn(self, node: ast.Call, arguments: Mapping[str, Fact]) -> bool:
        """Following the call would tell nothing (what it is handed is noted before): its
        value is dropped (``self.reset()``, ``trunc_normal_(self.weight)``) and no tensor it
        is handed has a rank its uses could show (see :meth:`_handed_uses`). Most such calls
        initialise weights, at a cost."""
        statement = self.statement
        return (
            isinstance(statement, ast.Expr)
            and statement.value is node
            and not any(isinstance(f, TensorFact) and f.rank is None for f in arguments.values())
        )

    def _handed_uses(
        self,
        callee: str,
        given: list[Argument],
        arguments: Mapping[str, Fact],
        shown: Mapping[str, RankByUse],
    ) -> None:
        """A tensor handed to a function of the module has the rank the function's uses of
        that parameter show (``repeat_kv(key, n)`` unpacks it into four sizes); a guess
        there is a guess here."""
        for fact, node in given:
            for parameter, rank in shown.items():
                if arguments.get(parameter) is fact and isinstance(node, ast.Name):
                    guess = rank.guess and (
                        f"`{node.id}` has {rank.rank} axes, as its use in `{callee}` suggests"
                    )
                    self._shows(node, fact, Evidence(rank.rank, exact=True, guess=guess))


# --- helpers --------------------------------------------------------------------------------


def _appended(listed: TupleFact | RepeatedFact, item: Fact) -> Fact:
    """``outs.append(y)``: the list one item longer (of unknown length, each item alike, when
    it was so already: a loop's, see ``lattice.join``)."""
    if isinstance(listed, TupleFact):
        return TupleFact((*listed.items, item))
    return RepeatedFact(join(listed.item, item))


def _field_name(piece: ast.expr) -> str | None:
    """The name of an f-string's field ``{name}`` (no conversion, no format spec)."""
    match piece:
        case ast.FormattedValue(value=ast.Name(id=name), conversion=-1, format_spec=None):
            return name
    return None


def _iterated(tensor: TensorFact, target: ast.Tuple | ast.List) -> list[Fact] | None:
    """``q, k, v = qkv``: a tensor unpacks along its first axis, one slice per name (its
    size, where known, is how many there are: Python raises otherwise)."""
    if not tensor.shape:
        return None
    count = tensor.shape[0].value
    if count is not None and count != len(target.elts):
        return None
    return [unbound(tensor, 0, element) for element in target.elts]


def _received(name: str, fact: TensorFact, shape: tuple[Dim, ...]) -> TensorFact:
    """A tensor parameter as the call received it: each size nobody knew (a caller's ``?``,
    an annotation's ``_``) is the parameter's own, unnamed (``name.shape[1]``). Where the
    rank is all a caller tells, the function's unpacking names them (as it names those of a
    parameter of unknown rank); a size unknown beside known ones stays unnamed."""
    if not any(dim.has_unknown for dim in shape):
        return fact
    rank_only = all(dim.has_unknown for dim in shape)
    sizes = (
        Dim.unnamed(f"{name}.shape[{axis}]", nameable=rank_only) if dim.has_unknown else dim
        for axis, dim in enumerate(shape)
    )
    return replace(fact, shape=tuple(sizes))


def _tensor_parameter(param: ast.arg) -> TensorFact:
    """A tensor handed in: nothing known about it (its rank followed, ``rank_of``), nothing
    applied to it yet."""
    return TensorFact(
        layout=Layout.contiguous(None),
        scaling=PARAMETER_SCALING,
        unknown_rank=Unknown("parameter", param.arg),
        rank_of=param,
    )


def _last_size(tensor: Fact | None, index: int) -> Dim | None:
    """``x.shape[index]`` counted from the end, where only ``x``'s last axes are known: a
    tail after another tensor's leading sizes, or the width a linear layer gave."""
    if not isinstance(tensor, TensorFact):
        return None
    split = tensor.prefixed
    if split is None:
        return tensor.known_last if index == -1 else None
    if not -len(split.tail) <= index < 0:
        return None
    return split.tail[index]


def _declared_tensor(shape: tuple[Dim, ...] | PrefixedShape | None) -> TensorFact:
    """A tensor handed in with the shape its jaxtyping annotation declares: every axis, or
    the last ones after a ``*batch``."""
    if isinstance(shape, PrefixedShape):
        last = shape.tail[-1] if shape.tail else None
        return TensorFact(
            None,
            Layout.contiguous(None),
            scaling=PARAMETER_SCALING,
            prefixed=shape,
            known_last=last,
        )
    rank = None if shape is None else len(shape)
    return TensorFact(shape, Layout.contiguous(rank), scaling=PARAMETER_SCALING)


def _annotated_name(annotation: ast.expr) -> str | None:
    """The name an annotation gives (``Attention``, ``Optional[Attention]``), written as a
    string too: the forward reference ``"FluxAttention"`` (diffusers' processors)."""
    named = _not_none(annotation)
    if isinstance(named, ast.Constant) and isinstance(named.value, str):
        text = named.value.strip()
        return text if all(part.isidentifier() for part in text.split(".")) else None
    return dotted_name(named)


def _not_none(annotation: ast.expr) -> ast.expr:
    """What an optional annotation allows besides ``None``: ``int`` of ``int | None`` and of
    ``Optional[int]`` (a size a caller may leave out is a size where it is used)."""
    match annotation:
        case ast.BinOp(op=ast.BitOr(), left=left, right=right) if _is_none(right):
            return left
        case ast.BinOp(op=ast.BitOr(), left=left, right=right) if _is_none(left):
            return right
        case ast.Subscript(value=generic, slice=inner) if _generic(generic) == "Optional":
            return inner
    return annotation


def _generic(generic: ast.expr) -> str:
    """``Optional`` for ``typing.Optional`` and ``Optional`` alike."""
    return (dotted_name(generic) or "").rsplit(".", 1)[-1]


def _annotated(annotation: ast.expr, param: ast.arg) -> Fact:
    """A parameter by its annotation: ``torch.Tensor`` (optional or not) is a tensor,
    ``tuple[torch.Tensor, torch.Tensor]`` a pair of them, anything else (``Cache``,
    ``list[...]``, ``Callable``) not a tensor.

    A guess: ``tuple[torch.FloatTensor]``, a tuple of one tensor, is that tensor. Hugging Face
    annotates tensors so (GPT-2's ``hidden_states: tuple[torch.FloatTensor] | None``, passed
    a tensor by every caller); a real tuple of one tensor is rarely written."""
    allowed = _not_none(annotation)
    if allowed is not annotation:
        return _annotated(allowed, param)
    match annotation:
        case ast.BinOp(op=ast.BitOr()):
            return UNKNOWN
        case ast.Subscript(value=generic, slice=inner):
            kind = _generic(generic)
            items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            fixed = not any(_is_ellipsis(item) for item in items)
            if kind in ("tuple", "Tuple") and fixed:
                facts = tuple(_annotated(item, param) for item in items)
                one_tensor = len(facts) == 1 and isinstance(facts[0], TensorFact)
                return facts[0] if one_tensor else TupleFact(facts)
            return UNKNOWN
        case ast.Constant(value=str(text)):
            return _tensor_parameter(param) if "Tensor" in text else UNKNOWN
    written = dotted_name(annotation) or ""
    return _tensor_parameter(param) if written.endswith("Tensor") else UNKNOWN


def may_declare(text: str) -> bool:
    """Whether a module's text may hold a ``global`` or ``nonlocal`` statement: the keyword
    where a statement starts (a line's start, after ``;`` or a one-line clause's ``:``), not
    within a name (timm's ``global_pool`` is in most of its modules). Found with ``str.find``:
    a regular expression tried at every character costs more than the walks it spares."""
    for keyword in ("global", "nonlocal"):
        start = text.find(keyword)
        while start != -1:
            end = start + len(keyword)
            if not _continues_name(text, end) and _starts_statement(text, start):
                return True
            start = text.find(keyword, end)
    return False


def _continues_name(text: str, index: int) -> bool:
    return index < len(text) and (text[index].isalnum() or text[index] == "_")


def _starts_statement(text: str, index: int) -> bool:
    line_start = max(text.rfind("\n", 0, index), text.rfind("\r", 0, index)) + 1
    before = text[line_start:index].rstrip(" \t\f")
    return not before or before.endswith((";", ":"))


_IDENTITY_TESTS = (ast.Is, ast.IsNot, ast.In, ast.NotIn)
"""Comparisons that give a Python bool whatever their operands: no tensor."""

_LOOKUPS = ("get", "get_interface")

_RANKED = ("values", "indices")
"""The fields of what ``max``, ``min``, ``topk`` and ``sort`` return (a tuple has none)."""


def _default_function(name: str, args: list[Argument]) -> FunctionRef | None:
    """A lookup whose default is a function of this module:
    ``ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)``. The
    default (the eager path) is what the analysis can follow; the others are kernels."""
    if name.rsplit(".", 1)[-1] not in _LOOKUPS or len(args) < 2:
        return None
    default = args[-1][0]
    return replace(default, uncertain=True) if isinstance(default, FunctionRef) else None


def _uncertain(fact: Fact) -> Fact:
    """``fact`` as known on some paths only (tensors, and the tensors in a tuple)."""
    if isinstance(fact, TensorFact):
        return replace(fact, uncertain=True)
    if isinstance(fact, TupleFact):
        return TupleFact(tuple(_uncertain(item) for item in fact.items))
    return fact


def _within(node: ast.expr, function: FunctionNode) -> bool:
    """Is ``node`` written inside ``function``'s body?"""
    end = function.end_lineno or function.lineno
    return function.lineno <= node.lineno <= end


_NAMES_PER_LINE = 8
"""A scope of up to this many names per line of the function is copied whole: the copy costs
less than a walk of the function for the names it mentions. Either way a function costs the
smaller of its own size and the scope's, so thousands of functions still cost linear time."""


def _mentioned(function: FunctionNode) -> Iterator[str]:
    """Every name and dotted path (``config.hidden_size``) written in ``function``."""
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            path = dotted_name(node)
            if path is not None:
                yield path


def _shape_owner(fact: Fact) -> str | None:
    """The name of the tensor a shape prefix (``x.shape[:-1]``) is read from."""
    if isinstance(fact, ShapePrefix):
        return fact.owner
    if isinstance(fact, PrefixedSizes):
        return fact.prefix.owner
    return None


def _reconciled(
    first: Fact, first_pinned: Mapping[Dim, int], second: Fact, second_pinned: Mapping[Dim, int]
) -> tuple[Fact, Fact]:
    """Two returned tensors written alike where the sizes one's branch pins make them equal:
    ``repeat_kv`` returns ``[b, kv, s, d]`` where ``n_rep == 1`` and ``[b, kv*n_rep, s, d]``
    otherwise, which is ``[b, kv*n_rep, s, d]`` on both paths."""
    if not (first_pinned or second_pinned):
        return first, second
    if not (isinstance(first, TensorFact) and isinstance(second, TensorFact)):
        return first, second
    if first.shape is None or second.shape is None or len(first.shape) != len(second.shape):
        return first, second
    ones, others = list(first.shape), list(second.shape)
    for axis, (one, other) in enumerate(zip(first.shape, second.shape, strict=True)):
        if one == other:
            continue
        if _equal_where(first_pinned, one, other):
            ones[axis] = other
        elif _equal_where(second_pinned, other, one):
            others[axis] = one
    return replace(first, shape=tuple(ones)), replace(second, shape=tuple(others))


def _equal_where(pinned: Mapping[Dim, int], size: Dim, other: Dim) -> bool:
    """Is ``other`` the same size as ``size`` where each pinned size is its number? (``kv *
    n_rep`` is ``kv`` where ``n_rep`` is 1: times the number, one is the other times the
    size.)"""
    return any(
        size * pin == other * Dim.constant(number) or other * pin == size * Dim.constant(number)
        for pin, number in pinned.items()
    )


def _closes_over(fact: Fact) -> bool:
    if isinstance(fact, FunctionRef):
        return fact.enclosed
    return isinstance(fact, TupleFact) and any(_closes_over(item) for item in fact.items)


_REGISTERS = {"register_buffer": "tensor", "add_module": "module", "register_module": "module"}
"""The methods of ``nn.Module`` that store a value under a name, and the value's parameter."""


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


_RESHAPED_IN_PLACE = frozenset({"resize_", "resize_as_", "set_", "as_strided_"})
"""In-place methods that give the tensor another shape, which the analysis does not work out."""


def _reshaped(before: TensorFact, after: TensorFact) -> bool:
    return before.shape != after.shape or before.layout != after.layout


def _divides_names(node: ast.expr | None) -> bool:
    """``dim / num_heads`` of names (or ``config.`` attributes): inside ``int(...)`` the size
    ``dim // num_heads``, as both truncate sizes alike (BERT's ``int(hidden / heads)``). Only
    names, whose second evaluation costs and changes nothing."""
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and all(dotted_name(side) is not None for side in (node.left, node.right))
    )


_REPEATED_ITEMS = 64
"""The most items a repeated list is followed with: section sizes are a few; ``[0] * 10**6``
would cost a million facts for one line."""


def _repeated(sequence: Fact, count: Fact) -> TupleFact | None:
    """``[dim] * 3``: a list or tuple repeated a literal number of times (the sections of a
    fused projection, ``torch.split(y, [mlp_dim] + [dim] * 3)``)."""
    if not isinstance(sequence, TupleFact) or not isinstance(count, IntFact):
        return None
    times = count.dim.value
    if times is None or not 0 <= times * len(sequence.items) <= _REPEATED_ITEMS:
        return None
    return TupleFact(sequence.items * times)


def _unmodelled_call(node: ast.Call) -> Unknown:
    """The result of a call the analysis cannot follow, named for ``--coverage``."""
    func = node.func
    name = dotted_name(func)
    if name is None:
        name = f"….{func.attr}" if isinstance(func, ast.Attribute) else "…"
    return Unknown("call", name)


_ARITHMETIC: dict[type[ast.operator], str] = {
    ast.Mult: "*",
    ast.Div: "/",
    ast.Add: "+",
    ast.Sub: "-",
    ast.FloorDiv: "//",
}


def _compared_polarity(
    facts: list[Fact], operators: Sequence[ast.cmpop], comparators: Sequence[ast.expr]
) -> str | None:
    """``mask == 0`` flips a mask's polarity; ``!= 0``, ``> 0`` and ``== 1`` keep it;
    ``ids == pad_id`` is True at the padding (blocked), ``ids != pad_id`` at the tokens."""
    if len(operators) != 1:
        return None
    operator = operators[0]
    # positions < lengths: True at the tokens
    if _names_lengths(comparators[0]) and isinstance(operator, ast.Lt | ast.GtE):
        return "attend" if isinstance(operator, ast.Lt) else "block"
    if not isinstance(facts[0], TensorFact):
        return None
    mask, number = facts[0], scale_of(facts[1])
    padding = "pad" in (dotted_name(comparators[0]) or "").rsplit(".", 1)[-1]
    if padding and isinstance(operator, ast.Eq | ast.NotEq):
        return "block" if isinstance(operator, ast.Eq) else "attend"
    if mask.polarity is None or number is None or number.base != Dim.constant(1):
        return None
    value = number.coefficient
    flipped = OPPOSITE_POLARITY[mask.polarity]
    if isinstance(operator, ast.Eq):
        return flipped if value == 0 else mask.polarity if value == 1 else None
    if isinstance(operator, ast.NotEq | ast.Gt) and value == 0:
        return mask.polarity
    return None


def _names_lengths(node: ast.expr) -> bool:
    """``lengths``, ``seq_lens[:, None]``, ``self.input_lengths``: sequence lengths."""
    while isinstance(node, ast.Subscript):
        node = node.value
    name = (dotted_name(node) or "").rsplit(".", 1)[-1].lower()
    return name.endswith(("lengths", "lens", "length"))


_HALF_PRECISION_NAMES = frozenset({"float16", "half", "fp16"})
"""A branch testing one of these (``if mask.dtype == torch.float16``) picks its fill per dtype."""


def _tests_half_precision(test: ast.expr) -> bool:
    """Does an ``if`` test name float16? (A walk of the usual test shapes, not of every node.)"""
    match test:
        case ast.Name(id=name):
            return name in _HALF_PRECISION_NAMES
        case ast.Attribute(value=value, attr=attr):
            return attr in _HALF_PRECISION_NAMES or _tests_half_precision(value)
        case ast.Compare(left=left, comparators=comparators):
            return _tests_half_precision(left) or any(map(_tests_half_precision, comparators))
        case ast.BoolOp(values=values):
            return any(map(_tests_half_precision, values))
        case ast.UnaryOp(operand=operand):
            return _tests_half_precision(operand)
        case ast.Tuple(elts=elements) | ast.List(elts=elements) | ast.Set(elts=elements):
            return any(map(_tests_half_precision, elements))
        case ast.Call(func=func, args=args, keywords=keywords):
            return _tests_half_precision(func) or any(
                map(_tests_half_precision, [*args, *(keyword.value for keyword in keywords)])
            )
    return False


def _names_in(node: ast.AST) -> frozenset[str]:
    """The names an expression mentions, attributes by their last part only
    (``config.hidden_size`` -> ``hidden_size``)."""
    names: set[str] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, ast.Attribute):
            names.add(current.attr)
        elif isinstance(current, ast.Name):
            names.add(current.id)
        else:
            pending.extend(ast.iter_child_nodes(current))
    return frozenset(names)


def _names_prefixes(fact: Fact) -> bool:
    """Does ``fact`` hold a shape prefix that :func:`_prefixes_renamed` would read?"""
    if isinstance(fact, TupleFact):
        return any(_names_prefixes(item) for item in fact.items)
    if isinstance(fact, RepeatedFact):
        return _names_prefixes(fact.item)
    if isinstance(fact, TensorFact):
        return fact.prefixed is not None
    return isinstance(fact, ShapePrefix | PrefixedSizes)


def _prefixes_renamed(
    fact: Fact, renames: Mapping[str, ShapePrefix], handed: frozenset[PrefixedShape]
) -> Fact:
    """``fact`` with each shape prefix it names read through ``renames`` (a callee's
    parameter -> the prefix, of no sizes dropped yet, of the name its caller passed it): see
    :meth:`Interpreter._in_callers_names`. A prefix of ``handed`` stays as it is."""
    if isinstance(fact, TupleFact):
        return TupleFact(tuple(_prefixes_renamed(item, renames, handed) for item in fact.items))
    if isinstance(fact, RepeatedFact):
        return RepeatedFact(_prefixes_renamed(fact.item, renames, handed))
    if isinstance(fact, ShapePrefix):
        return _prefix_renamed(fact, renames) or UNKNOWN
    if isinstance(fact, PrefixedSizes):
        prefix = _prefix_renamed(fact.prefix, renames)
        return PrefixedSizes(prefix, fact.tail) if prefix else UNKNOWN
    if isinstance(fact, TensorFact) and fact.prefixed is not None and fact.prefixed not in handed:
        prefix = _prefix_renamed(fact.prefixed.prefix, renames)
        return replace(fact, prefixed=PrefixedShape(prefix, fact.prefixed.tail) if prefix else None)
    return fact


def _sizes_handed_back(
    fact: Fact, unknown: Mapping[str, Dim], named: Mapping[str, Dim], callers: Mapping[str, Dim]
) -> Fact:
    """``fact`` with each size a callee named for what its caller handed unknown replaced by
    the caller's size there: the unnamed ``x.shape[2]`` of an axis (by the names ``unknown``
    maps), or a parameter used as a size (by the names ``named`` maps) where it is not the
    caller's own symbol of that name (``callers``)."""
    if not unknown and not named:
        return fact
    if isinstance(fact, TupleFact):
        return TupleFact(
            tuple(_sizes_handed_back(item, unknown, named, callers) for item in fact.items)
        )
    if not isinstance(fact, TensorFact) or fact.shape is None:
        return fact
    mapping = {
        atom: unknown[atom.name] if atom.unnamed else named[atom.name]
        for dim in fact.shape
        for atom in dim.factors
        if isinstance(atom, Symbol)
        and (
            atom.name in unknown
            if atom.unnamed
            else atom.name in named and atom not in callers.get(atom.name, Dim.constant(1)).factors
        )
    }
    if not mapping:
        return fact
    return replace(fact, shape=tuple(substitute(dim, mapping) for dim in fact.shape))


def _prefix_renamed(prefix: ShapePrefix, renames: Mapping[str, ShapePrefix]) -> ShapePrefix | None:
    if "@" in prefix.owner:  # a jaxtyping *batch: a symbol, no name
        return prefix
    renamed = renames.get(prefix.owner) if prefix.passed else None
    return replace(renamed, dropped=prefix.dropped) if renamed is not None else None


def _bind_arguments(
    function: FunctionRef,
    args: list[Argument],
    kwargs: dict[str, Argument],
    *,
    splats_none: bool = False,
) -> dict[str, Fact] | None:
    """Parameter name -> argument fact at one call; ``None`` when the call cannot be mapped.
    A callee taking ``*args`` or ``**kwargs`` is mapped where it is a lookup's default (the
    eager attention), what they collect staying unknown, or where the call hands them nothing
    (``splats_none``: it splices no ``**mapping``), so that they are empty: x-transformers'
    ``maybe(norm)(q)`` calls ``inner(x, *args, **kwargs)`` with ``q`` alone. Following calls
    that fill them (each Hugging Face ``forward`` takes ``**kwargs``, handed on) would cost
    more than it tells."""
    if any(isinstance(node, ast.Starred) for _, node in args):
        return None
    signature = function.node.args
    only_named = bool(signature.vararg or signature.kwarg) and not function.uncertain
    if only_named and not splats_none:
        return None
    listed = {*signature.posonlyargs, *signature.args}
    params = _callee_parameters(function)
    positional = [param for param in params if param.node in listed]
    if len(args) > len(positional) and (signature.vararg is None or only_named):
        return None
    arguments = {param.name: fact for param, (fact, _) in zip(positional, args, strict=False)}
    named = {param.name for param in params if not param.star}
    for keyword, (fact, _) in kwargs.items():
        if keyword in named:
            arguments[keyword] = fact
        elif signature.kwarg is None:
            return None  # no such parameter: Python raises
        elif only_named:
            return None  # collected by ``**kwargs``
    for param in params:  # an integer left at its default (``unsqueeze_dim=1``) is that number
        default = param.default
        value = default.value if isinstance(default, ast.Constant) else None
        if param.name not in arguments and type(value) is int:
            arguments[param.name] = IntFact(Dim.constant(value))
    return arguments


def _literal_kind(default: ast.expr | None) -> str | None:
    if not isinstance(default, ast.Constant):
        return None
    kind = type(default.value)
    if kind is bytes:
        return "str"
    return kind.__name__ if kind in (int, float, str, bool) else None


def _float_literal(node: ast.expr | None) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) is float:
        return node.value
    return None


@record
class Conditional:
    """A name bound on either side of a test: ``states = encoder_states if is_cross else
    hidden_states``, or in both branches of ``if is_cross:``. A later ``if`` on the same
    test, the tested name not bound again and this one not since, reads on each side what
    the name is there (ImageGPT's cross-attention: its keys and values are made from one of
    two tensors chosen by a flag, its queries under the same flag)."""

    test: tuple[str, str]
    """``("truth", name)`` for ``if name:``, ``("none", name)`` for ``if name is None:``."""
    binding: int
    """How many times the tested name had been bound (``Interpreter.rebindings``)."""
    holds: Fact
    fails: Fact
    joined: Fact
    """What the name was bound to after the test: the join of the two."""


def _tested_name(test: ast.expr) -> tuple[tuple[str, str], bool] | None:
    """What ``test`` tests, as :attr:`Conditional.test`, and whether it holds where that
    does: ``not flag`` is ``(("truth", "flag"), False)``, ``x is not None`` is ``(("none",
    "x"), False)``; ``None`` for any other test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _tested_name(test.operand)
        return (inner[0], not inner[1]) if inner is not None else None
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is | ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        name = dotted_name(test.left)
        return (("none", name), isinstance(test.ops[0], ast.Is)) if name is not None else None
    name = dotted_name(test)
    return (("truth", name), True) if name is not None else None


def _stored_parameters(init: FunctionNode) -> dict[str, str]:
    """The parameters ``init`` stores as attributes of ``self`` as they are, written once:
    parameter -> attribute (``self.nf = nf``)."""
    parameters = {param.arg for param in [*init.args.args, *init.args.kwonlyargs]}
    stored: dict[str, str] = {}
    written: Counter[str] = Counter()
    for node, _ in statements(init.body, definitions=False):
        for target in _assignment_targets(node):
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                written[target.attr] += 1
                value = node.value if isinstance(node, ast.Assign) else None
                if isinstance(value, ast.Name) and value.id in parameters:
                    stored[value.id] = target.attr
    return {param: attribute for param, attribute in stored.items() if written[attribute] == 1}


def _assignment_targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    return []


@record
class Parameter:
    """One parameter of a ``def``, with its default (``ast`` keeps defaults apart)."""

    node: ast.arg
    default: ast.expr | None = None
    star: bool = False
    """``*args`` or ``**kwargs``."""

    @property
    def name(self) -> str:
        return self.node.arg


_PARAMETERS: weakref.WeakKeyDictionary[FunctionNode, tuple[Parameter, ...]] = (
    weakref.WeakKeyDictionary()
)
"""What :func:`parameters` listed, asked at each call of a function and each reading of it;
for as long as the function's tree lives (a cache that held the trees kept every checked
file's alive: twice the memory on timm)."""


def parameters(function: FunctionNode) -> tuple[Parameter, ...]:
    """Positional, then keyword-only, then ``*args`` and ``**kwargs`` parameters."""
    listed = _PARAMETERS.get(function)
    if listed is None:
        listed = _PARAMETERS[function] = _listed_parameters(function)
    return listed


def _listed_parameters(function: FunctionNode) -> tuple[Parameter, ...]:
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    defaults += arguments.defaults
    listed = [Parameter(arg, default) for arg, default in zip(positional, defaults, strict=True)]
    listed += [
        Parameter(arg, default)
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    listed += [Parameter(star, star=True) for star in (arguments.vararg, arguments.kwarg) if star]
    return tuple(listed)


def static_method(function: FunctionNode) -> bool:
    """Is ``function`` decorated ``@staticmethod``?"""
    return any(
        isinstance(decorator, ast.Name) and decorator.id == "staticmethod"
        for decorator in function.decorator_list
    )


def _callee_parameters(function: FunctionRef) -> tuple[Parameter, ...]:
    """The parameters a call's arguments fill (a method's ``self`` is bound already)."""
    params = parameters(function.node)
    if function.class_name is not None and params and params[0].name in ("self", "cls"):
        return params[1:]
    return params


def _join_environments(
    environments: list[dict[str, Fact]], never_set: Collection[str] = ()
) -> dict[str, Fact]:
    """What is known of each name after the branches join: a name missing from a branch is
    unknown there, unless ``never_set`` holds it (no value exists on that path, so where the
    code reads it, it is a branch's that set it)."""
    first, *others = environments
    joined: dict[str, Fact] = {}
    for name, fact in first.items():  # (the names of one branch: most are every branch's)
        merged = fact
        for other in others:
            found = other.get(name)
            if found is merged:
                continue  # (most names: the same value on every path, no join to make)
            if found is not None:
                merged = join(merged, found)
            elif name not in never_set:
                break
        else:
            joined[name] = merged
    for name in sorted(never_set):  # (in one order whatever the hashes)
        if name not in first:
            facts = [environment[name] for environment in others if name in environment]
            joined[name] = functools.reduce(join, facts)
    return joined


def _shape_receiver(value: ast.expr) -> ast.expr | None:
    if isinstance(value, ast.Attribute) and value.attr == "shape":
        return value.value
    if (
        isinstance(value, ast.Call)
        and not value.args
        and not value.keywords
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "size"
    ):
        return value.func.value
    return None


def _dropped_tail(node: ast.Subscript) -> int | None:
    """``k`` for a subscript ``[:-k]`` (``[0:-k]``), the leading sizes of a shape."""
    window = node.slice
    if not isinstance(window, ast.Slice) or window.step is not None:
        return None
    if window.lower is not None and literal_int(window.lower) != 0:
        return None
    upper = literal_int(window.upper) if window.upper is not None else None
    return -upper if upper is not None and upper < 0 else None


def _is_equality(test: ast.expr) -> TypeGuard[ast.Compare]:
    """``a == b``, one comparison (a branch's or an ``assert``'s test)."""
    return isinstance(test, ast.Compare) and [type(op) for op in test.ops] == [ast.Eq]


def _is_text(node: ast.expr | None) -> bool:
    """A string literal (a dict's key); ``None`` is a ``**`` splat's."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _subscript_pieces(node: ast.Subscript) -> list[ast.expr]:
    """What ``x[a, b:c]`` indexes with, one entry per comma-separated piece."""
    pieces = node.slice
    return pieces.elts if isinstance(pieces, ast.Tuple) else [pieces]


def _alike_items(fact: Fact) -> Fact | None:
    """The one value every item of a sequence is (a comprehension's elements, the pieces of
    an even ``split``); ``None`` where they differ or it is not a sequence."""
    if isinstance(fact, RepeatedFact):
        return fact.item
    if (
        isinstance(fact, TupleFact)
        and fact.items
        and all(item == fact.items[0] for item in fact.items[1:])
    ):
        return fact.items[0]
    return None


def _single_index(node: ast.Subscript) -> int | None:
    pieces = _subscript_pieces(node)
    if len(pieces) != 1 or isinstance(pieces[0], ast.Slice):
        return None
    return literal_int(pieces[0])


def _literal_slice(node: ast.Subscript) -> slice | None:
    """``[a:b]`` with literal integer bounds (or none)."""
    piece = node.slice
    if not isinstance(piece, ast.Slice):
        return None
    bounds: list[int | None] = []
    for bound in (piece.lower, piece.upper, piece.step):
        if bound is None:
            bounds.append(None)
            continue
        value = literal_int(bound)
        if value is None:
            return None
        bounds.append(value)
    return slice(*bounds)


@record
class SliceBounds:
    """What a slice's ``start``, ``stop`` and ``step`` hold (``None``: left out)."""

    start: Fact | None
    stop: Fact | None
    step: Fact | None

    def length(self, size: Dim) -> Dim:
        """How long the slice of an axis of ``size`` is: Python's answer where all are
        numbers, else ``stop - start`` where sizes name it (``self.cache_k[:bsz, : start_pos
        + seqlen]``, ``x[:, -n:]``, ``x[..., d // 2 :]``), taking the slice to lie within the
        axis, as code slices a cache up to what it filled; unknown (``?``) otherwise (a step,
        ``x[1:]`` of a named size)."""
        unknown = Dim.symbol("?")
        if self.step is not None:
            return unknown
        if self.start is None and self.stop is None:
            return size
        start = _size_of(self.start) if self.start is not None else Dim.constant(0)
        stop = _size_of(self.stop) if self.stop is not None else None
        if start is None or (self.stop is not None and stop is None):
            return unknown
        end = stop.value if stop is not None else None
        if size.value is not None and start.value is not None and (stop is None or end is not None):
            first, last, _ = slice(start.value, end).indices(size.value)
            return Dim.constant(max(0, last - first))
        if stop is None:  # x[-n:]: the last n; x[n:]: all but the first n
            return Dim.constant(-1) * start if start.coefficient < 0 else size - start
        if (start.coefficient < 0) != (stop.coefficient < 0):
            return unknown
        length = stop - start
        return length if length.coefficient >= 0 else unknown


def _size_of(fact: Fact) -> Dim | None:
    """The size a slice bound holds, if the analysis knows it."""
    if isinstance(fact, IntFact) and not fact.dim.has_unknown:
        return fact.dim
    return None


def _index_tensor(
    tensor: TensorFact,
    node: ast.Subscript,
    bounds: Mapping[ast.Slice, SliceBounds],
    indices: Mapping[ast.expr, Fact],
) -> Fact:
    """``x[...]`` with slices, integers, ``None`` and ``...``: the axes kept, dropped, added.

    Basic indexing returns a view: the memory order of the kept axes stays (a slice leaves
    gaps, which only ever make a later ``view`` less possible, never more). One tensor among
    the indices (advanced indexing, a copy of the values picked) puts its own axes where it
    stands: an integer index its shape (``t[batch_arange, ...]``), a boolean mask of ``r``
    axes, which it consumes, one axis as long as its count of True (see :func:`_picked`).
    """
    unknown = flow(tensor, Family.VIEW, shape=None, layout=None, origin=node)
    pieces = _subscript_pieces(node)
    if tensor.shape is None:
        if all(isinstance(piece, ast.Slice) for piece in pieces):  # ``idx[:, -n:]``
            return replace(unknown, rank_of=tensor.rank_of)  # as many axes as it has
        return unknown
    if sum(_is_ellipsis(piece) for piece in pieces) > 1:
        return unknown  # Python raises
    tensors = {piece: index for piece in pieces if (index := _index_of(piece, indices.get(piece)))}
    advanced = {piece: picked for piece, index in tensors.items() if (picked := _picked(index))}
    if len(advanced) != len(tensors):
        return unknown  # an index tensor whose rank or kind it cannot tell
    if len(advanced) > 1:
        # integer indices side by side (``t[batch_arange, positions]``) broadcast together
        # where the first stands; apart, PyTorch moves them to the front
        places = [pieces.index(piece) for piece in advanced]
        integers = [shape for axes, shape in advanced.values() if axes == 1]
        apart = places != list(range(places[0], places[0] + len(places)))
        if apart or len(integers) < len(places):
            return unknown
        together: tuple[Dim, ...] | None = integers[0]
        for other in integers[1:]:
            together = broadcast_shapes(together, other)
        first, *rest = advanced
        advanced = {first: (1, together or ()), **{piece: (1, ()) for piece in rest}}
    consumed = sum(
        advanced[piece][0] if piece in advanced else 1
        for piece in pieces
        if not (_is_ellipsis(piece) or _is_none(piece))
    )
    shape: list[Dim] = []
    order: list[int] = []
    old_order = tensor.layout.materialise(len(tensor.shape)) if tensor.layout else None
    memory = old_order.order if old_order is not None else None
    axis = 0

    landed: dict[int, int] = {}  # old axis -> new axis, for a positions table

    def keep(position: int, dim: Dim) -> None:
        landed[position] = len(shape)
        shape.append(dim)
        if memory is not None:
            order.append(memory[position])

    for piece in pieces:
        if _is_ellipsis(piece):
            for _ in range(len(tensor.shape) - consumed):
                keep(axis, tensor.shape[axis])
                axis += 1
        elif _is_none(piece):
            shape.append(Dim.constant(1))
            order.append(FREE)
        elif axis >= len(tensor.shape):
            return unknown
        elif isinstance(piece, ast.Slice):
            keep(axis, bounds[piece].length(tensor.shape[axis]))
            axis += 1
        elif piece in advanced:
            axes, picked_shape = advanced[piece]
            shape.extend(picked_shape)
            axis += axes
        elif (
            isinstance(piece, ast.UnaryOp)
            or (isinstance(piece, ast.Constant) and type(piece.value) is int)
            or isinstance(indices.get(piece), IntFact)
        ):
            axis += 1
        else:
            return unknown
    if axis > len(tensor.shape):
        return unknown  # a mask of more axes than are left: PyTorch raises
    for position in range(axis, len(tensor.shape)):
        keep(position, tensor.shape[position])
    if advanced:  # a copy, laid out as PyTorch chooses
        return flow(tensor, Family.VIEW, shape=tuple(shape), layout=None, origin=node)
    layout = None
    if memory is not None and old_order is not None:
        layout = Layout(tuple(order)).renumbered(old_order.reordered_by)
    table = tensor.table.moved(landed, len(tensor.shape), len(shape)) if tensor.table else None
    return flow(tensor, Family.VIEW, shape=tuple(shape), layout=layout, origin=node, table=table)


def _index_of(piece: ast.expr, fact: Fact | None) -> TensorFact | None:
    """The index tensor a piece of a subscript is: a tensor, or a list of integers, which
    PyTorch reads as one (``x[:, [-1], :]`` keeps the axis, one long)."""
    if isinstance(fact, TensorFact):
        return fact
    if (
        isinstance(piece, ast.List)
        and isinstance(fact, TupleFact)
        and all(isinstance(item, IntFact) for item in fact.items)
    ):
        return TensorFact((Dim.constant(len(fact.items)),), dtype="int64", origin=piece)
    return None


def _picked(index: TensorFact) -> tuple[int, tuple[Dim, ...]] | None:
    """What an index tensor does where it stands: how many axes it consumes and the axes it
    puts there. Integers (int64, int32): one axis, their shape. A boolean mask: its own rank
    of axes, one axis of its count of True. Of unknown dtype, only a 1-d index is either
    (one axis for one, of a length unknown); ``None``: its rank is unknown, or it may be
    either of several ranks."""
    if index.shape is None:
        return None
    if index.dtype == "bool":
        return len(index.shape), (Dim.symbol("?"),)
    if index.dtype in ("int64", "int32"):
        return 1, index.shape
    if index.dtype is None and len(index.shape) == 1:
        return 1, (Dim.symbol("?"),)
    return None  # of another dtype, PyTorch raises


def _is_ellipsis(piece: ast.expr) -> bool:
    return isinstance(piece, ast.Constant) and piece.value is Ellipsis


def _is_none(piece: ast.expr) -> bool:
    return isinstance(piece, ast.Constant) and piece.value is None


def _assigned_names(statement: ast.AST) -> set[str]:
    """Every name mentioned in a statement the interpreter does not follow (a superset),
    the names ``match`` patterns capture included."""
    names: set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name is not None:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest is not None:
            names.add(node.rest)
    return names
