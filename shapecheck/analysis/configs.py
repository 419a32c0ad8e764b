"""Configuration classes' own checks, as facts about the models that read them.

A model's constructor divides sizes it reads from a configuration object:
``config.hidden_size // config.num_attention_heads``, or through attributes, locals and
constructor parameters (``self.num_heads = module_config["num_attention_heads"]`` where every
construction of the class passes ``config.encoder_config``). Where the configuration class, in
the module or another file of the project (found as imports are, see
:mod:`~shapecheck.analysis.imported`), validates that division itself for every value the
sizes can be (``if self.hidden_size % self.num_attention_heads != 0: raise ValueError(...)``
in any of its methods, or on ``__init__``'s parameters it stores), the constructor's division
is checked: it gets the :class:`~shapecheck.analysis.observations.DivisibilityCheck` SC502
looks for.

Where a value comes from is read from the code as written: assignments in the function, the
parameter's annotation (``config: FooConfig``; a parameter named ``config`` of a class that
declares ``config: FooConfig``), else the arguments every construction of the class in the
module passes. Anything else leaves the value unknown, and nothing is concluded.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import field

from shapecheck.analysis.facts import FunctionNode
from shapecheck.analysis.imported import ProjectScope, classes_in, finished
from shapecheck.analysis.imports import dotted_name, statements
from shapecheck.analysis.interpreter import FunctionFacts, parameters
from shapecheck.analysis.observations import DivisibilityCheck, SizeDivision
from shapecheck.record import record

_MAX_CALLERS = 6
"""How many constructions deep a parameter's value is followed."""

_UNKNOWN = ast.Constant(None)
"""Stands for a value assigned in a way not read here (``x += 1``, unpacking)."""


@record
class ConfigClass:
    """What a configuration class's code says: the divisions it validates, its dictionaries
    of sizes, and the attribute names it maps onto others (Hugging Face's ``attribute_map``)."""

    path: str
    name: str
    checks: frozenset[tuple[str, str]] = field(compare=False)
    """``(numerator, denominator)`` attributes it raises on when they do not divide."""
    dicts: dict[str, dict[str, str]] = field(compare=False)
    """``self.encoder_config = {"num_attention_heads": self.encoder_num_attention_heads}``."""
    aliases: dict[str, str] = field(compare=False)

    def attribute(self, name: str) -> str:
        return self.aliases.get(name, name)

    def validates(self, numerator: str, denominator: str) -> bool:
        return (self.attribute(numerator), self.attribute(denominator)) in self.checks


@record
class Instance:
    """A configuration object."""

    config: ConfigClass


@record
class Attribute:
    """One of its attributes (``config.hidden_size``)."""

    config: ConfigClass
    name: str


@record
class Items:
    """One of its dictionaries (``config.encoder_config``)."""

    config: ConfigClass
    name: str


Origin = Instance | Attribute | Items
Origins = frozenset[Origin] | None
"""Every value an expression can hold, by where it comes from; ``None``: not known."""


def conclude(
    scope: ProjectScope | None, module: ast.Module, functions: Sequence[FunctionFacts]
) -> None:
    """The analysis of a module is done: each constructor's division that a configuration
    class validates gets its check, and the module's evidence is complete."""
    if scope is not None and scope.path is not None:
        _give_checks(scope, module, functions)
    finished(scope)


def _give_checks(
    scope: ProjectScope, module: ast.Module, functions: Sequence[FunctionFacts]
) -> None:
    divisions = [
        (function, observation)
        for function in functions
        if isinstance(function.node, FunctionNode) and function.node.name == "__init__"
        for observation in function.observations
        if isinstance(observation, SizeDivision) and observation.in_constructor
    ]
    if not divisions:
        return
    reader = _Reader(scope, module, functions)
    for function, division in divisions:
        assert isinstance(function.node, FunctionNode)
        if reader.validated(division.node, function.node):
            names = division.numerator | division.denominator
            function.observations.append(DivisibilityCheck(names))


class _Reader:
    """Where values come from in one module (each question answered once)."""

    def __init__(
        self, scope: ProjectScope, module: ast.Module, functions: Sequence[FunctionFacts]
    ) -> None:
        self.scope = scope
        self.classes = {node.name: node for node in classes_in(module.body)}
        self.owners = {
            method: owner
            for owner in self.classes.values()
            for method in owner.body
            if isinstance(method, FunctionNode)
        }
        self.functions = functions
        self._constructions: dict[str, list[tuple[ast.Call, FunctionNode]]] | None = None
        self.assignments: dict[FunctionNode, dict[str, list[ast.expr]]] = {}
        self.configs: dict[tuple[str, str], ConfigClass] = {}
        self.parameters: dict[tuple[FunctionNode, str], Origins] = {}

    def validated(self, division: ast.BinOp, function: FunctionNode) -> bool:
        """Do the sizes ``division`` divides come from one configuration class that
        validates the division for every value they can hold? (A configuration of one of
        several classes, ``config: VisionConfig | TextConfig``, gives both sizes from the
        same class: each must validate.)"""
        numerators = self.origins(division.left, function, 0)
        denominators = self.origins(division.right, function, 0)
        if not numerators or not denominators:
            return False
        if not all(isinstance(o, Attribute) for o in numerators | denominators):
            return False
        configs = {o.config for o in numerators if isinstance(o, Attribute)}
        if configs != {o.config for o in denominators if isinstance(o, Attribute)}:
            return False
        return all(
            a.config.validates(a.name, b.name)
            for a in numerators
            for b in denominators
            if isinstance(a, Attribute) and isinstance(b, Attribute) and a.config == b.config
        )

    def origins(self, node: ast.expr, function: FunctionNode, depth: int) -> Origins:
        key = dotted_name(node)
        if key is not None and (key.startswith("self.") or "." not in key):
            assigned = self._assigned(function).get(key)
            if assigned is not None:
                return _union(self.origins(value, function, depth) for value in assigned)
            if "." not in key:
                return self._parameter(function, key, depth)
            return None
        if isinstance(node, ast.Attribute):
            return _each(self.origins(node.value, function, depth), node.attr, _attribute)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return _product(
                self.origins(node.left, function, depth), self.origins(node.right, function, depth)
            )
        if isinstance(node, ast.Subscript):
            item = node.slice
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                return _each(self.origins(node.value, function, depth), item.value, _item)
            return None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) == 2  # a default may be what is used
            and not node.keywords
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            return _each(
                self.origins(node.args[0], function, depth), node.args[1].value, _attribute
            )
        return None

    def _assigned(self, function: FunctionNode) -> dict[str, list[ast.expr]]:
        """Every value assigned to each name and ``self.x`` in ``function``."""
        if function not in self.assignments:
            assigned: dict[str, list[ast.expr]] = {}
            for node in _statements_in(function.body):
                if isinstance(node, ast.Assign):
                    targets, value = node.targets, node.value
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    targets, value = [node.target], node.value
                elif isinstance(node, ast.AugAssign):
                    targets, value = [node.target], _UNKNOWN  # changed in place
                else:
                    continue
                for target in targets:
                    name = dotted_name(target)
                    if name is not None:
                        assigned.setdefault(name, []).append(value)
                    else:  # unpacking: the names it binds hold values not known here
                        for element in ast.walk(target):
                            inner = dotted_name(element)
                            if isinstance(element, ast.Name | ast.Attribute) and inner:
                                assigned.setdefault(inner, []).append(_UNKNOWN)
            self.assignments[function] = assigned
        return self.assignments[function]

    def _parameter(self, function: FunctionNode, name: str, depth: int) -> Origins:
        key = (function, name)
        if key in self.parameters:
            return self.parameters[key]
        self.parameters[key] = None  # a cycle of constructions tells nothing
        found = self._passed(function, name, depth)
        self.parameters[key] = found
        return found

    def _passed(self, function: FunctionNode, name: str, depth: int) -> Origins:
        """What a parameter holds: its annotation's configuration class, or what every
        construction of the class in the module passes for it."""
        listed = parameters(function)
        param = next((p for p in listed if p.name == name and not p.star), None)
        if param is None:
            return None
        owner = self.owners.get(function)
        written = _written_classes(param.node.annotation)
        if not written and name == "config" and owner is not None:
            written = self._declared_config(owner)
        if written:
            configs = [self._config(each) for each in written]
            if None in configs:
                return None
            return frozenset(Instance(config) for config in configs if config is not None)
        if owner is None or function.name != "__init__" or depth >= _MAX_CALLERS:
            return None
        sites = self._sites(owner.name)
        if not sites:
            return None
        positional = [p.name for p in listed if p.node in function.args.args][1:]  # no self
        values: list[Origins] = []
        for call, caller in sites:
            passed = _argument(call, positional, name)
            values.append(None if passed is None else self.origins(passed, caller, depth + 1))
        return _union(values)

    def _sites(self, name: str) -> list[tuple[ast.Call, FunctionNode]]:
        """Every call of ``name`` in the module (a construction of the class ``name``), with
        the function it is in: found once, among the calls the analysis evaluated."""
        if self._constructions is None:
            self._constructions = {}
            for function in self.functions:
                if not isinstance(function.node, FunctionNode):
                    continue
                for node in function.facts:
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                        sites = self._constructions.setdefault(node.func.id, [])
                        sites.append((node, function.node))
        return self._constructions.get(name, [])

    def _declared_config(self, owner: ast.ClassDef) -> tuple[str, ...]:
        """``config: FooConfig`` (or ``config_class = FooConfig``) in the class or a base of
        this module: Hugging Face's way to say what its ``config`` parameter is."""
        seen: set[str] = set()
        pending = [owner]
        while pending:
            current = pending.pop()
            if current.name in seen:
                continue
            seen.add(current.name)
            for statement in current.body:
                if (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and statement.target.id == "config"
                ):
                    return _written_classes(statement.annotation)
                if isinstance(statement, ast.Assign) and [
                    dotted_name(t) for t in statement.targets
                ] == ["config_class"]:
                    return _written_classes(statement.value)
            pending += [
                self.classes[base.id]
                for base in current.bases
                if isinstance(base, ast.Name) and base.id in self.classes
            ]
        return ()

    def _config(self, written: str) -> ConfigClass | None:
        """The configuration class ``written`` names: one of this module (a modular file's
        ``class ZayaConfig(LagunaConfig)`` beside the model), else one its imports name."""
        own = self.classes.get(written)
        if own is not None and self.scope.path is not None:
            path, node = self.scope.path, own
        else:
            found = self.scope.class_definition(written)
            if found is None:
                return None
            path, node = found[0].path, found[1]
        key = (path, node.name)
        if key not in self.configs:
            self.configs[key] = _read_config(path, node)
        return self.configs[key]


def _read_config(path: str, node: ast.ClassDef) -> ConfigClass:
    """The divisions a configuration class validates, its dictionaries of sizes, and the
    attribute names it maps onto others."""
    checks: set[tuple[str, str]] = set()
    dicts: dict[str, dict[str, str]] = {}
    aliases: dict[str, str] = {}
    for statement in node.body:
        if isinstance(statement, ast.Assign) and [dotted_name(t) for t in statement.targets] == [
            "attribute_map"
        ]:
            aliases = _string_pairs(statement.value)
        if not isinstance(statement, FunctionNode):
            continue
        stored = _stored_parameters(statement)
        for inner in _statements_in(statement.body):
            if isinstance(inner, ast.Assert) or (
                isinstance(inner, ast.If)
                and any(isinstance(line, ast.Raise) for line in inner.body)
            ):
                checks.update(_remainders(inner.test, stored))
            elif (
                isinstance(inner, ast.Assign)
                and len(inner.targets) == 1
                and isinstance(inner.value, ast.Dict)
            ):
                target = dotted_name(inner.targets[0]) or ""
                if target.startswith("self.") and target.count(".") == 1:
                    dicts[target[5:]] = _sizes_by_key(inner.value, stored)
    return ConfigClass(path, node.name, frozenset(checks), dicts, aliases)


def _stored_parameters(method: FunctionNode) -> dict[str, str]:
    """``self.hidden_size = hidden_size``: parameter -> the attribute that keeps it."""
    names = {p.name for p in parameters(method)}
    stored: dict[str, str] = {}
    for node in _statements_in(method.body):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.value, ast.Name)
            and node.value.id in names
        ):
            target = dotted_name(node.targets[0]) or ""
            if target.startswith("self.") and target.count(".") == 1:
                stored.setdefault(node.value.id, target[5:])
    return stored


def _size_attribute(node: ast.expr, stored: dict[str, str]) -> str | None:
    """``self.hidden_size`` or a parameter ``hidden_size`` stored as it: the attribute; a
    product of them (``self.expand * self.hidden_size``) by its factors' names."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _size_attribute(node.left, stored), _size_attribute(node.right, stored)
        return _times(left, right) if left is not None and right is not None else None
    written = dotted_name(node) or ""
    if written.startswith("self.") and written.count(".") == 1:
        return written[5:]
    return stored.get(written)


def _times(left: str, right: str) -> str:
    """A product of attributes, named the same whatever the order of its factors."""
    return "*".join(sorted([*left.split("*"), *right.split("*")]))


def _remainders(test: ast.expr, stored: dict[str, str]) -> Iterator[tuple[str, str]]:
    """``a % b`` of size attributes in a condition that raises (or an assert)."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            numerator = _size_attribute(node.left, stored)
            denominator = _size_attribute(node.right, stored)
            if numerator is not None and denominator is not None:
                yield numerator, denominator


def _sizes_by_key(literal: ast.Dict, stored: dict[str, str]) -> dict[str, str]:
    sizes: dict[str, str] = {}
    for key, value in zip(literal.keys, literal.values, strict=True):
        attribute = _size_attribute(value, stored)
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and attribute:
            sizes[key.value] = attribute
    return sizes


def _string_pairs(literal: ast.expr) -> dict[str, str]:
    if not isinstance(literal, ast.Dict):
        return {}
    return {
        key.value: value.value
        for key, value in zip(literal.keys, literal.values, strict=True)
        if isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and isinstance(value, ast.Constant)
        and isinstance(value.value, str)
    }


def _attribute(origin: Origin, name: str) -> Origin | None:
    if not isinstance(origin, Instance):
        return None
    config = origin.config
    if name in config.dicts:
        return Items(config, name)
    return Attribute(config, config.attribute(name))


def _item(origin: Origin, key: str) -> Origin | None:
    if not isinstance(origin, Items):
        return None
    attribute = origin.config.dicts[origin.name].get(key)
    return Attribute(origin.config, attribute) if attribute is not None else None


def _product(left: Origins, right: Origins) -> Origins:
    """``config.expand * config.hidden_size``: one attribute of one configuration each."""
    if not left or not right or len(left) != 1 or len(right) != 1:
        return None
    [a], [b] = left, right
    if not isinstance(a, Attribute) or not isinstance(b, Attribute) or a.config != b.config:
        return None
    return frozenset({Attribute(a.config, _times(a.name, b.name))})


def _each(origins: Origins, name: str, step: object) -> Origins:
    """``step`` (an attribute or an item ``name``) applied to every value: known only where
    it is known for each."""
    if not origins:
        return None
    found = [step(origin, name) for origin in origins]  # type: ignore[operator]
    return None if None in found else frozenset(found)


def _union(values: Iterator[Origins] | Sequence[Origins]) -> Origins:
    union: set[Origin] = set()
    for value in values:
        if value is None:
            return None
        union |= value
    return frozenset(union) if union else None


def _argument(call: ast.Call, positional: list[str], name: str) -> ast.expr | None:
    """The expression ``call`` passes for parameter ``name`` (``None``: the default, or
    spliced in with ``*``/``**``)."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if any(isinstance(argument, ast.Starred) for argument in call.args):
        return None
    index = positional.index(name) if name in positional else len(call.args)
    return call.args[index] if index < len(call.args) else None


def _written_classes(annotation: ast.expr | None) -> tuple[str, ...]:
    """The classes an annotation names: ``FooConfig``, ``"FooConfig"``, ``FooConfig | None``,
    ``Optional[FooConfig]``; each of a union (``VisionConfig | TextConfig``: CLIP's attention
    takes either). Empty where it names something else too."""
    match annotation:
        case ast.Constant(value=str(text)):
            return (text,) if text.replace(".", "").isidentifier() else ()
        case ast.BinOp(op=ast.BitOr(), left=left, right=right):
            sides = [side for side in (left, right) if not _is_none(side)]
            named = [_written_classes(side) for side in sides]
            return () if not all(named) else tuple(name for each in named for name in each)
        case ast.Subscript(value=generic, slice=inner):
            if (dotted_name(generic) or "").rsplit(".", 1)[-1] == "Optional":
                return _written_classes(inner)
            return ()
        case ast.Name() | ast.Attribute():
            name = dotted_name(annotation)
            return (name,) if name is not None else ()
    return ()


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _statements_in(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of ``body`` and of the blocks inside it (not nested functions')."""
    return (statement for statement, _ in statements(body, definitions=False))
