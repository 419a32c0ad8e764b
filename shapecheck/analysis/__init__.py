"""The analysis: facts about every tensor-valued expression of a module, computed once.

:func:`analyse` resolves imports, models each class from its ``__init__``, interprets every
function body (see :mod:`shapecheck.analysis.interpreter`) and returns a
:class:`ModuleAnalysis` that rules query.
"""

from __future__ import annotations

import ast
import builtins
import os
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from shapecheck.analysis.configs import conclude
from shapecheck.analysis.dims import Dim, Quotient, Symbol, substitute
from shapecheck.analysis.facts import (
    Fact,
    FunctionNode,
    InstanceFact,
    IntFact,
    ModuleFact,
    Product,
    QualifiedName,
    TensorFact,
    Unknown,
    sizes_substituted,
)
from shapecheck.analysis.imported import (
    Construction,
    ProjectScope,
    checking,
    classes_in,
    is_layer,
    reanchored,
)
from shapecheck.analysis.imports import (
    call_name,
    collect_imports,
    imported_name,
    nested_blocks,
)
from shapecheck.analysis.interpreter import (
    ClassModel,
    FunctionFacts,
    Interpreter,
    ModuleContext,
    may_declare,
)
from shapecheck.analysis.lattice import join
from shapecheck.analysis.observations import AttentionScores
from shapecheck.analysis.order import callers_first
from shapecheck.diagnostics import Diagnostic, input_error
from shapecheck.record import record, replace
from shapecheck.source import Lines

ObservationT = TypeVar("ObservationT")


@dataclass
class SyntaxIndexes:
    """What rules look up in a module's syntax, each built the first time one asks."""

    parents: dict[ast.AST, ast.AST] | None = None
    lines: Lines | None = None
    module_classes: set[ast.ClassDef] | None = None
    attribute_names: dict[ast.Attribute, ast.Name] = field(default_factory=dict)
    """The names after the dot that ops are anchored at (``ModuleContext.attribute_names``):
    no node of the tree holds one, its attribute stands for it."""


@dataclass
class ModuleAnalysis:
    """Everything the analysis learned about one module."""

    module: ast.Module
    text: str
    """The module's source, for the code of a node (``source``)."""
    functions: list[FunctionFacts]
    imports: dict[str, str] = field(default_factory=dict)
    """Each name an import binds -> what it imports (``F`` -> ``torch.nn.functional``)."""
    too_deep: list[TooDeep] = field(default_factory=list)
    """What the analysis could not follow (``functions`` holds the rest)."""
    project: ProjectScope | None = None
    """The project's other files as the module saw them, and what its result rests on
    (``evidence``); ``None`` when analysed alone."""
    handed_by: dict[FunctionNode, str] = field(default_factory=dict)
    """The functions whose parameters another module's calls told (what the first one passes,
    in words: ``line 30 of multi_head_attention.py``)."""
    specialised: list[Specialised] = field(default_factory=list)
    """The module's classes analysed again in the sizes a construction gives them."""
    syntax: SyntaxIndexes = field(default_factory=SyntaxIndexes, repr=False)
    """Indexes of the module's syntax, shared with its analyses in callers' sizes."""
    _facts: dict[ast.AST, Fact] | None = field(default=None, repr=False)
    _calls: dict[tuple[type[Fact], str], list[ast.Call]] | None = field(default=None, repr=False)
    _functions_by_node: dict[ast.AST, FunctionFacts] | None = field(default=None, repr=False)
    _averaged: dict[ast.AST, frozenset[str]] = field(default_factory=dict, repr=False)
    """Per function: how the values that attention weights average are written."""
    _observed: dict[type, list[object]] = field(default_factory=dict, repr=False)

    # --- what rules ask -------------------------------------------------------------------------

    def fact(self, node: ast.AST) -> Fact | None:
        """What the analysis knows about the value of expression ``node`` (``None``: the
        analysis never evaluated it)."""
        if self._facts is None:
            self._facts = {}
            for function in reversed(self.functions):  # the first function to evaluate it wins
                self._facts.update(function.facts)
        return self._facts.get(node)

    def calls_to(self, *names: str) -> Iterator[ast.Call]:
        """Every call of a function or class among ``names`` (qualified:
        ``torch.nn.functional.cross_entropy``, ``torch.nn.Linear``), in source order."""
        return self._calls_of(QualifiedName, names)

    def module_calls(self, *kinds: str) -> Iterator[ast.Call]:
        """Every call of an instance of a module class among ``kinds``, in source order:
        ``self.loss(logits, y)`` where ``self.loss = nn.CrossEntropyLoss()``."""
        return self._calls_of(ModuleFact, kinds)

    def method_calls(self, *names: str) -> Iterator[ast.Call]:
        """Every call of a method among ``names`` on a tensor (``probs.log()``), in source
        order."""
        return self._calls_of(TensorFact, names)

    def _calls_of(self, callee: type[Fact], names: Sequence[str]) -> Iterator[ast.Call]:
        if self._calls is None:
            self._calls = {}
            for function in self.functions:
                for node in function.facts:
                    if isinstance(node, ast.Call):
                        key = _callee_key(node, function.facts)
                        if key is not None:
                            self._calls.setdefault(key, []).append(node)
        calls = [call for name in names for call in self._calls.get((callee, name), ())]
        return iter(sorted(calls, key=lambda call: (call.lineno, call.col_offset)))

    def attention_masks(self) -> Iterator[tuple[ast.expr, str, str]]:
        """Every mask given to PyTorch's attention, as ``(mask, api, parameter)``: SDPA's
        ``attn_mask``, nn.MultiheadAttention's ``key_padding_mask`` and ``attn_mask``."""
        for call in self.calls_to("torch.nn.functional.scaled_dot_product_attention"):
            if (mask := argument(call, 3, "attn_mask")) is not None:
                yield mask, "F.scaled_dot_product_attention", "attn_mask"
        for call in self.module_calls("torch.nn.MultiheadAttention"):
            for position, keyword in ((3, "key_padding_mask"), (5, "attn_mask")):
                if (mask := argument(call, position, keyword)) is not None:
                    yield mask, "nn.MultiheadAttention", keyword

    def causal_attention_calls(self) -> Iterator[tuple[ast.Call, ast.expr]]:
        """Every ``F.scaled_dot_product_attention`` call given ``is_causal=True`` as written
        (a flag the code computes is its own decision), with that argument."""
        for call in self.calls_to("torch.nn.functional.scaled_dot_product_attention"):
            causal = argument(call, 5, "is_causal")
            if isinstance(causal, ast.Constant) and causal.value is True:
                yield call, causal

    def observations(
        self, kind: type[ObservationT], within: FunctionNode | None = None
    ) -> Iterator[ObservationT]:
        """The conclusions of the analysis of one kind, each once (a method inlined at several
        call sites repeats them), optionally only those ``within`` one function. The module's
        are found once per kind: rules ask again and again (per product of scores), and
        telling repeats apart hashes each observation's facts in full."""
        if within is not None:
            yield from _each_once(kind, (f for f in self.functions if f.node is within))
            return
        found = self._observed.get(kind)
        if found is None:
            found = self._observed[kind] = list(_each_once(kind, self.functions))
        yield from found  # type: ignore[misc]

    def co_attention(self, product: Product) -> bool:
        """Is ``product`` a similarity that aligns two sequences both ways: softmaxed over
        two of its axes (LoFTR's dual softmax), or with attention weights that average its
        queries and others its keys (ESIM's soft alignment)? Not dot-product attention, which
        normalises over the keys and never averages the queries."""
        axes = {
            scores.axis
            for scores in self.observations(AttentionScores)
            if scores.product.node is product.node and scores.axis is not None
        }
        if len(axes) > 1:
            return True
        queries, keys = _written(product.left_node), _written(product.right_node)
        if queries == keys:
            return False  # x @ x.T: self-attention without projections
        holder = self._evaluated_in(product.node)
        if holder is None:
            return False
        if holder.node not in self._averaged:
            self._averaged[holder.node] = _averaged(holder)
        return {queries, keys} <= self._averaged[holder.node]

    def _evaluated_in(self, node: ast.AST) -> FunctionFacts | None:
        """The first function whose analysis evaluated ``node`` (indexed once per module)."""
        if self._functions_by_node is None:
            self._functions_by_node = {}
            for function in reversed(self.functions):
                self._functions_by_node.update(dict.fromkeys(function.facts, function))
        return self._functions_by_node.get(node)

    def enclosing_function(self, node: ast.AST) -> FunctionNode | None:
        """The innermost ``def`` holding ``node``."""
        return next((h for h in self.holders(node) if isinstance(h, FunctionNode)), None)

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        """The innermost ``class`` holding ``node``."""
        return next((h for h in self.holders(node) if isinstance(h, ast.ClassDef)), None)

    def in_module_method(self, node: ast.AST) -> bool:
        """Inside a method (or a function nested in one) of an ``nn.Module`` subclass, where
        ``self.training`` and the model's dtype mean something."""
        cls = self.enclosing_class(node)
        return (
            cls is not None
            and self.enclosing_function(node) is not None
            and self.is_module_class(cls)
        )

    def source(self, node: ast.AST) -> str:
        """``node``'s code as written (without parentheses around it)."""
        syntax = self.syntax
        if syntax.lines is None:
            syntax.lines = Lines(self.text)  # once per module: a finding costs its own code only
        return syntax.lines.segment(node)

    def resolves_to(self, node: ast.expr, target: str) -> bool:
        """Does ``node`` (``torch``, ``th.sqrt``) name ``target`` through the imports?"""
        return self.imported_name(node) == target

    def imported_name(self, node: ast.expr) -> str | None:
        """What ``node`` (``nn.Module``, ``th.sqrt``) names through the imports, qualified
        (``torch.nn.Module``); ``None`` for anything else."""
        return imported_name(node, self.imports)

    def is_module_class(self, cls: ast.ClassDef) -> bool:
        """Is ``cls`` an ``nn.Module``, as far as this file tells: one of its bases comes from
        ``torch.nn`` (``nn.Module``, ``nn.Linear``) or is a class of this file that is one;
        or a base comes from another file (``GradientCheckpointingLayer``) and the class has
        a ``forward``, the mark of a module."""
        if self.syntax.module_classes is None:
            classes = {c.name: c for c in self.module.body if isinstance(c, ast.ClassDef)}
            found: dict[str, bool] = {}

            def is_module(candidate: ast.ClassDef) -> bool:
                if candidate.name not in found:
                    found[candidate.name] = False  # a cycle of bases is no module
                    found[candidate.name] = any(
                        self._module_base(base, candidate, classes)
                        or (
                            isinstance(base, ast.Name)
                            and base.id in classes
                            and is_module(classes[base.id])
                        )
                        for base in candidate.bases
                    )
                return found[candidate.name]

            self.syntax.module_classes = {c for c in classes.values() if is_module(c)}
        if cls in self.syntax.module_classes:
            return True
        return any(self._module_base(base, cls, ()) for base in cls.bases)

    def _module_base(self, base: ast.expr, cls: ast.ClassDef, local: Container[str]) -> bool:
        """Is ``base`` ``torch.nn``'s, or from another file with ``cls`` marked as a module?"""
        qualified = self.imported_name(base)
        if qualified is not None and qualified.startswith("torch.nn."):
            return True
        if qualified is not None:
            foreign = not qualified.startswith(("torch.", "typing.", "abc.", "enum."))
        else:  # a relative import binds nothing: a name that is no class here nor builtin
            foreign = isinstance(base, ast.Name) and not (
                base.id in local or hasattr(builtins, base.id)
            )
        return foreign and is_layer(cls)

    def holders(self, node: ast.AST) -> Iterator[ast.AST]:
        """The nodes holding ``node``, innermost first."""
        holder = self.parent(node)
        while holder is not None:
            yield holder
            holder = self.parent(holder)

    def parent(self, node: ast.AST) -> ast.AST | None:
        """The node holding ``node`` (computed once per module, when a rule first asks)."""
        syntax = self.syntax
        if syntax.parents is None:  # (once the analyses are done: no op is anchored later)
            syntax.parents = _parents(self.module)
            syntax.parents.update((name, dot) for dot, name in syntax.attribute_names.items())
        return syntax.parents.get(node)


def _each_once(
    kind: type[ObservationT], functions: Iterable[FunctionFacts]
) -> Iterator[ObservationT]:
    seen: set[object] = set()
    for function in functions:
        for observation in function.observations:
            if isinstance(observation, kind) and observation not in seen:
                seen.add(observation)
                yield observation


def _parents(module: ast.Module) -> dict[ast.AST, ast.AST]:
    """Each node's holder: one pass over the children of each node (``ast.walk`` and a
    second ``iter_child_nodes`` would list them twice)."""
    parents: dict[ast.AST, ast.AST] = {}
    stack: list[ast.AST] = [module]
    while stack:
        holder = stack.pop()
        for name in holder._fields:
            value = getattr(holder, name, None)
            if isinstance(value, ast.AST):
                parents[value] = holder
                stack.append(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        parents[item] = holder
                        stack.append(item)
    return parents


def argument(call: ast.Call, position: int | None, keyword: str) -> ast.expr | None:
    """The expression a call passes for a parameter, by keyword or at ``position`` (``None``:
    keyword-only); ``None`` when not passed or spliced in with ``*`` or ``**``."""
    for passed in call.keywords:
        if passed.arg == keyword:
            return passed.value
    if position is None or position >= len(call.args):
        return None
    if any(isinstance(given, ast.Starred) for given in call.args[: position + 1]):
        return None
    return call.args[position]


def _averaged(function: FunctionFacts) -> frozenset[str]:
    """How the values that attention weights average are written in ``function``."""
    return frozenset(
        _written(fact.product.right_node)
        for node, fact in function.facts.items()
        if isinstance(fact, TensorFact)
        and fact.product is not None
        and fact.product.node is node
        and fact.product.left.weights
    )


def _written(node: ast.expr) -> str:
    """A product's operand, structurally, with a transpose of it taken away
    (``k.transpose(1, 2)`` and ``k.mT`` are ``k``)."""
    while True:
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("transpose", "permute", "swapaxes", "contiguous")
        ):
            node = node.func.value
        else:
            return ast.dump(node)


def _callee_key(call: ast.Call, facts: dict[ast.AST, Fact]) -> tuple[type[Fact], str] | None:
    """What a call calls: a function or class by its qualified name, a module instance by its
    class, a tensor's method by its name."""
    callee = facts.get(call.func)
    if isinstance(callee, QualifiedName):
        return QualifiedName, callee.name
    if isinstance(callee, ModuleFact):
        return ModuleFact, callee.kind
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(facts.get(func.value), TensorFact):
        return TensorFact, func.attr
    return None


def uses_torch(imports: dict[str, str]) -> bool:
    return any(target == "torch" or target.startswith("torch.") for target in imports.values())


def analyse(
    module: ast.Module, text: str, *, shapes: bool = True, path: str | None = None
) -> ModuleAnalysis:
    """Interpret every function of ``module``; modules that never import torch are skipped.

    ``path``, where the module lies, lets it see the project's other files its imports name
    (see :mod:`~shapecheck.analysis.imported`); without it, the module is analysed alone.

    ``shapes=False`` forgets every tensor's shape as soon as it is computed: the engine
    without symbolic shapes, for measuring what they cost (benchmarks/throughput.py).
    """
    imports = collect_imports(module, text)
    if not uses_torch(imports):
        return ModuleAnalysis(module, text, [], imports)
    context = ModuleContext(imports, shapes=shapes, declares=may_declare(text))
    top_definitions = list(definitions(module.body))
    for definition in top_definitions:
        if isinstance(definition, FunctionNode):
            context.functions.setdefault(definition.name, definition)
    context.class_names = frozenset(
        node.name for node in top_definitions if isinstance(node, ast.ClassDef)
    )

    top_level = Interpreter(context)
    functions: list[FunctionFacts] = []
    too_deep: list[TooDeep] = []
    try:
        top_level.run_block(module.body)
        top_level.keep_call_sites()
        functions.append(top_level.result(module, "<module>"))
    except RecursionError:
        too_deep.append(TooDeep(module, "<module>"))
    globals_ = dict(top_level.env)
    # (top-level code is read alone: it seldom computes attention)
    context.project = checking(path, module, context, globals_)
    jobs = list(_jobs(context, top_definitions, globals_, None, ""))
    # A function called in this module, or by a module of its folder, learns its parameters
    # from its callers (a helper handed an already scaled query must not be told it forgot
    # the scale; ``self.attention(q, k, v)`` in another file says q is 4-D): callers go
    # first, and a function interpreted before one of its callers (calls that go round, a
    # call the names did not foresee) is interpreted again with what every call hands it.
    _handed_from_neighbours(context, module)
    outputs: list[list[FunctionFacts | TooDeep]] = [[] for _ in jobs]
    for index in callers_first([(job[0], job[3]) for job in jobs], text):
        outputs[index] = _analyse_function(context, *jobs[index])
    context.call_sites_frozen = True
    for index, job in enumerate(jobs):
        if any(_told_more(context, output.node) for output in outputs[index]):
            outputs[index] = _analyse_function(context, *job)
    for output in outputs:
        for result in output:
            if isinstance(result, TooDeep):
                too_deep.append(result)
            else:
                functions.append(result)
    syntax = SyntaxIndexes(attribute_names=context.attribute_names)
    specialised = list(_constructed(context, module, text, imports, globals_, syntax))
    conclude(context.project, module, functions)
    return ModuleAnalysis(
        module,
        text,
        functions,
        imports,
        too_deep=too_deep,
        project=context.project,
        handed_by=context.handed_by,
        specialised=specialised,
        syntax=syntax,
    )


@record
class Specialised:
    """A class of the module analysed again in the sizes one construction gives it: what the
    rules find there and not in the class alone is true of the code only as so built."""

    construction: Construction
    where: str
    """The construction in words (``line 34 of model.py builds `Head(n_embd, head_size)```)."""
    analysis: ModuleAnalysis

    @property
    def elsewhere(self) -> bool:
        """Built in another module (a construction there names the class's file)."""
        return self.construction.home is not None


def _constructed(
    context: ModuleContext,
    module: ast.Module,
    text: str,
    imports: dict[str, str],
    globals_: dict[str, Fact],
    syntax: SyntaxIndexes,
) -> Iterator[Specialised]:
    """Each class of the module a construction gave sizes, here or in another module of its
    folder (see :meth:`ProjectScope.callers`), with its methods (all but ``__init__``, which
    built the model) interpreted in them; one analysis per model."""
    project = context.project
    if project is None:
        return
    lines = syntax.lines = syntax.lines or Lines(text)
    built: dict[str, tuple[Construction, str]] = {}
    for construction in project.constructions:
        if construction.home is None:  # the last: ``__init__`` is read twice
            code = lines.flattened(construction.node)
            built[construction.model] = (
                construction,
                f"line {construction.node.lineno} builds `{code}`",
            )
    for caller in project.callers():
        construction = caller.construction
        file = os.path.basename(caller.file.path)
        where = f"line {construction.node.lineno} of {file} builds `{caller.written}`"
        built.setdefault(construction.model, (construction, where))
    if not built:
        return
    classes = {node.name: node for node in classes_in(module.body)}
    for name, (construction, where) in built.items():
        node = classes.get(construction.cls)
        if node is None or not (_attends(node) or construction.layers):
            continue  # what a caller's sizes change is mostly attention's to say
        model = context.classes.get(name)
        if model is None:  # built in another module: model it here
            given = {**dict(construction.sizes), **dict(construction.layers)}
            model = _class_model(context, node, globals_, given)
            model.name = name
            context.classes[name] = model
        methods: list[FunctionFacts] = []
        for method in definitions(node.body):
            if isinstance(method, FunctionNode) and method.name != "__init__":
                qualified = f"{name}.{method.name}"
                for result in _analyse_function(context, method, globals_, model, qualified):
                    if isinstance(result, FunctionFacts):
                        methods.append(result)
        analysis = ModuleAnalysis(module, text, methods, imports, syntax=syntax)
        yield Specialised(construction, where, analysis)


_ATTENDING = frozenset({"softmax", "scaled_dot_product_attention", "matmul", "bmm", "einsum"})


def _attends(node: ast.ClassDef) -> bool:
    """Does a method of the class (``__init__`` aside) multiply tensors or take a softmax?"""
    for method in node.body:
        if isinstance(method, FunctionNode) and method.name != "__init__":
            for each in ast.walk(method):
                if isinstance(each, ast.BinOp) and isinstance(each.op, ast.MatMult):
                    return True
                if call_name(each) in _ATTENDING:
                    return True
    return False


@record
class TooDeep:
    """A function (by its qualified name), or the module's top-level code, nested deeper than
    Python's stack lets the analysis follow: nothing is known there, and a check says so."""

    node: FunctionNode | ast.Module
    name: str

    def diagnostic(self, path: str) -> Diagnostic:
        """The SC000 for it, where the function starts."""
        if isinstance(self.node, ast.Module):
            return input_error(path, "cannot analyse the top-level code: too deeply nested")
        message = f"cannot analyse `{self.name}`: too deeply nested"
        return input_error(path, message, self.node.lineno, self.node.col_offset + 1)


Job = tuple[FunctionNode, dict[str, Fact], ClassModel | None, str]


def _jobs(
    context: ModuleContext,
    defined: Sequence[Definition],
    globals_: dict[str, Fact],
    model: ClassModel | None,
    prefix: str,
) -> Iterator[Job]:
    """Each function and method to interpret; class models are built on the way."""
    for definition in defined:
        name = prefix + definition.name
        if isinstance(definition, FunctionNode):
            yield definition, globals_, model, name
            continue
        class_model = _class_model(context, definition, globals_, recorded=True)
        context.classes[class_model.name] = class_model
        inner = list(definitions(definition.body))
        yield from _jobs(context, inner, globals_, class_model, name + ".")


def _handed_from_neighbours(context: ModuleContext, module: ast.Module) -> None:
    """What the modules of the folder that build this module's layers hand their methods, as
    call sites of them (each value pointing at the method: the call lies in another file)."""
    project = context.project
    if project is None or not project.handed_in:
        return
    methods = {
        (method.name, method.lineno): method
        for cls in classes_in(module.body)
        for method in definitions(cls.body)
        if isinstance(method, FunctionNode)
    }
    for handed in project.handed_in:
        method = methods.get((handed.name, handed.line))
        if method is not None:
            arguments = {name: reanchored(fact, method) for name, fact in handed.arguments.items()}
            context.call_sites.setdefault(method, []).append(arguments)
            context.handed_by.setdefault(method, handed.caller)


def _parameter_facts(context: ModuleContext, function: FunctionNode) -> dict[str, Fact] | None:
    """What every call of ``function`` so far agrees its arguments are (``None``: nothing)."""
    sites = context.call_sites.get(function)
    if not sites or any(site is None for site in sites):
        return None
    known = [site for site in sites if site is not None]
    names = [name for name in known[0] if all(name in site for site in known)]
    joined: dict[str, Fact] = {}
    for name in names:
        merged: Fact | None = None
        for site in known:
            merged = site[name] if merged is None else join(merged, site[name])
        if merged is not None and not isinstance(merged, Unknown):  # callers know nothing
            joined[name] = merged  # leave the function its own assumptions
    return _sizes_callers_name_apart(joined, known) if joined else None


def _told_more(context: ModuleContext, function: FunctionNode | ast.Module) -> bool:
    """Did a call of ``function`` come after it was interpreted, and change what its callers
    agree its parameters are?"""
    if isinstance(function, ast.Module):
        return False
    return _parameter_facts(context, function) != context.parameter_facts.get(function)


def _sizes_callers_name_apart(
    joined: dict[str, Fact], sites: list[dict[str, Fact]]
) -> dict[str, Fact]:
    """``joined`` with each size every caller names, but differently (``q``'s, ``k``'s and
    ``v``'s lengths handed to one helper), an axis that exists: the parameter's own size,
    unnamed (``name.shape[1]``), which the function's own unpacking of it (``batch, length,
    d = t.shape``) names, as it names a parameter's. Sizes every call hands equal (each
    caller's batch as both ``query``'s and ``key``'s first axis) are one such size."""
    shared: dict[tuple[Dim, ...], Dim] = {}  # the sizes each call hands -> the one size here
    result = dict(joined)
    for name, fact in joined.items():
        passed = [site[name] for site in sites]
        shapes = [handed.shape for handed in passed if isinstance(handed, TensorFact)]
        if not isinstance(fact, TensorFact) or fact.shape is None or len(shapes) != len(passed):
            continue
        if any(shape is None or len(shape) != len(fact.shape) for shape in shapes):
            continue
        sizes = list(fact.shape)
        for axis, dim in enumerate(fact.shape):
            handed = tuple(shape[axis] for shape in shapes if shape is not None)
            # every caller names the size, or shows the axis exists
            if dim.has_unknown and all(not size.unrelated or size.is_nameable for size in handed):
                if handed not in shared:
                    shared[handed] = Dim.unnamed(f"{name}.shape[{axis}]", nameable=True)
                sizes[axis] = shared[handed]
        result[name] = replace(fact, shape=tuple(sizes))
    return result


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def definitions(statements: Sequence[ast.stmt]) -> Iterator[Definition]:
    """Functions and classes defined at this level, also inside ``if``/``try``/``with``."""
    for statement in statements:
        if isinstance(statement, Definition):
            yield statement
        else:
            for block in nested_blocks(statement):
                yield from definitions(block)


def _analyse_function(
    context: ModuleContext,
    node: FunctionNode,
    closure: dict[str, Fact],
    model: ClassModel | None,
    name: str,
) -> list[FunctionFacts | TooDeep]:
    arguments = _parameter_facts(context, node)
    if arguments is None:
        context.parameter_facts.pop(node, None)
    else:
        context.parameter_facts[node] = arguments
    kept = context.constructors.pop(node, None)
    try:
        if kept is not None and arguments is None:
            interpreter = kept  # read as its class's model was built, recording
        else:
            interpreter = Interpreter(context, class_model=model)
            interpreter.inherit(node, closure)
            interpreter.run_function(node, arguments)
        shown = interpreter.read_again()
        if shown is not None:  # a parameter's rank came to light only after it was read
            interpreter = Interpreter(context, class_model=model)
            interpreter.inherit(node, closure)
            interpreter.run_function(node, arguments, shown)
    except RecursionError:
        return [TooDeep(node, name)]
    interpreter.keep_call_sites()
    results: list[FunctionFacts | TooDeep] = [interpreter.result(node, name)]
    for nested, nested_closure in interpreter.nested:
        results.extend(
            _analyse_function(context, nested, nested_closure, model, f"{name}.{nested.name}")
        )
    return results


def _class_model(
    context: ModuleContext,
    node: ast.ClassDef,
    globals_: dict[str, Fact],
    arguments: dict[str, Fact] | None = None,
    *,
    recorded: bool = False,
) -> ClassModel:
    """What ``self`` holds after ``__init__`` (bases defined in the same module first), given
    ``arguments`` for some of its parameters (a construction that passes sizes). ``recorded``:
    the module's own model of its class, whose reading of ``__init__`` is kept for the job
    that checks ``__init__`` (see ``ModuleContext.constructors``)."""
    model = ClassModel(node.name)
    project = context.project
    for base in node.bases:
        inherited = None
        if isinstance(base, ast.Name) and base.id in context.classes:
            inherited = context.classes[base.id]
        elif isinstance(base, ast.Name) and project is not None:
            inherited = project.base_class(base.id)  # another module's, of this folder
        if inherited is not None:
            model.attributes.update(inherited.attributes)
            model.methods.update(inherited.methods)
    own: set[FunctionNode] = set()
    for definition in definitions(node.body):
        if isinstance(definition, FunctionNode):
            model.methods[definition.name] = definition
            own.add(definition)
    init = model.methods.get("__init__")
    if init is None or (project is not None and init in project.homes):
        return model  # (another file's __init__ built the attributes, in its own module)
    sequential = "forward" not in model.methods and any(
        imported_name(base, context.imports) == "torch.nn.Sequential" for base in node.bases
    )
    # (an inherited ``__init__`` is its own class's to check, as that class's model reads it)
    recorded = recorded and init in own
    interpreter = Interpreter(context, class_model=model, record=recorded, builds=True)
    interpreter.inherit(init, globals_)
    try:
        interpreter.run_function(init, arguments)
    except RecursionError:
        return model
    if recorded:
        context.constructors[init] = interpreter
    stored: dict[str, Fact] = {}
    for key, fact in interpreter.env.items():
        if not key.startswith("self.") or key.count(".") != 1:
            continue
        source = interpreter.copied.get(key)
        if isinstance(fact, Unknown) and key in interpreter.symbols:
            fact = IntFact(interpreter.symbols[key])  # self.h used as a size in __init__
        elif isinstance(fact, Unknown) and source in interpreter.symbols:
            fact = IntFact(interpreter.symbols[source])  # self.h = h, h used as a size
        stored[key.removeprefix("self.")] = fact
    model.attributes.update(stored)
    if sequential and not _hands_its_base_layers(init):
        layers = (fact for fact in stored.values() if isinstance(fact, ModuleFact | InstanceFact))
        model.layers = tuple(layers)
    renamed = _name_sizes(model.attributes)
    model.held_sizes.update(_sizes_read_through(interpreter, renamed))
    parameters = {param.arg for param in init.args.args}
    model.divisions = [
        (a, b) for a, b in interpreter.divisions if a in parameters and b in parameters
    ]
    return model


def _hands_its_base_layers(init: FunctionNode) -> bool:
    """Does ``__init__`` hand arguments to its base's (``super().__init__(*layers)``)? An
    ``nn.Sequential`` then applies those layers before the ones stored on ``self``."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__init__"
        and bool(node.args or node.keywords)
        for node in ast.walk(init)
    )


def _name_sizes(attributes: dict[str, Fact]) -> dict[Symbol, Dim]:
    """Sizes stored on self become sizes named after their attribute, shared by methods.

    ``self.d_model = d_model`` renames the parameter's symbol ``self.d_model`` everywhere (in
    ``nn.Linear(d_model, d_model)`` too); ``self.head_dim = d_model // num_heads`` keeps the
    division (so ``num_heads * head_dim`` is ``d_model``) and shows it as ``self.head_dim``.
    Returns the renaming.
    """
    renamed: dict[Symbol, Dim] = {}
    for attribute, fact in attributes.items():
        symbol = fact.dim.single_symbol if isinstance(fact, IntFact) else None
        if symbol is not None:
            renamed.setdefault(symbol, Dim.symbol(f"self.{attribute}"))
    _substitute_sizes(attributes, renamed)
    for attribute, fact in attributes.items():
        if isinstance(fact, IntFact) and fact.dim.coefficient == 1 and len(fact.dim.factors) == 1:
            [atom] = fact.dim.factors
            if isinstance(atom, Quotient) and not atom.label:
                attributes[attribute] = IntFact(Dim.of(replace(atom, label=f"self.{attribute}")))
    return renamed


def _sizes_read_through(interpreter: Interpreter, renamed: dict[Symbol, Dim]) -> dict[str, Dim]:
    """The sizes ``__init__`` read off an object it stores unchanged (``self.config = config``:
    ``config.num_key_value_heads``), by the path its methods read them at
    (``config.num_key_value_heads`` of ``self``): one size, in the layers ``__init__`` built
    and in the methods (Moonshine's ``k_proj`` is ``config.num_key_value_heads`` heads wide;
    ``forward`` splits ``self.config.num_key_value_heads`` heads off it)."""
    held: dict[str, Dim] = {}
    for target, source in interpreter.copied.items():
        attribute = target.removeprefix("self.")
        if attribute == target or "." in attribute or source in interpreter.assigned:
            continue  # not self's own attribute, or the name was bound again
        for key, size in interpreter.symbols.items():
            if key.startswith(f"{source}."):
                held[f"{attribute}{key.removeprefix(source)}"] = substitute(size, renamed)
    return held


def _substitute_sizes(attributes: dict[str, Fact], mapping: dict[Symbol, Dim]) -> None:
    for attribute, fact in attributes.items():
        attributes[attribute] = sizes_substituted(fact, mapping)
