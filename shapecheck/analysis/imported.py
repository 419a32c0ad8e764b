"""Definitions imported from the other files of the project.

A module's :class:`ProjectScope` says what the names its imports bind are in the project. A
function of another file (``from .layers import split_heads``) is followed as a function of
the same file is, its body interpreted with *its* module's imports; a class
(``from pkg.attention import Head``) is modelled from its ``__init__`` in its own module, and
calling an instance runs its ``forward`` there. A name is looked up only at a call worth it
(one that hands it a tensor, or builds a class); until then it is an :class:`ImportedName`,
as unknown as before. A construction that passes sizes the class is made of
(``Head(64, head_size=16)``) gets a model of the class built with them
(:meth:`ProjectScope.instance`, for the module's own classes too).

:mod:`shapecheck.project` finds and reads the files; each dependency is analysed once per
process and content, at most :data:`MAX_DEPTH` imports away from the checked file, and what
the analysis of one rested on is replayed into the evidence of every checked file that uses
it (the cache keys a result by all of it).

What crosses between files is translated. A class gets its module's dotted name
(``pkg.attention.Head``) in the importing module. A function, class or instance the caller
hands to another file's function is unknown there. A value coming back keeps what it *is*
(shape, layout, role, dtype) but not where it was *made*: that code lies in another file, and
no finding or fix of the checked file may point into it (findings stay where the bug is
written), so its provenance becomes the call, and what only the other file's code can answer
for (the product that computed it, the scaling applied there, the op a fix would rewrite) is
forgotten.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from shapecheck.analysis.dims import Dim, Quotient, symbols_in
from shapecheck.analysis.facts import (
    UNKNOWN,
    ClassRef,
    Fact,
    FunctionNode,
    FunctionRef,
    ImportedName,
    InstanceFact,
    IntFact,
    ModuleFact,
    QualifiedName,
    RepeatedFact,
    ScalarFact,
    TensorFact,
    TupleFact,
)
from shapecheck.analysis.imports import call_name, collect_imports, statements
from shapecheck.analysis.interpreter import (
    ClassModel,
    Interpreter,
    ModuleContext,
    _bind_arguments,
    may_declare,
    static_method,
)
from shapecheck.analysis.ops import Argument
from shapecheck.project import (
    Evidence,
    ProjectFile,
    active,
    begin,
    find_module,
    modelled,
    neighbours,
    submodule,
    touch,
)
from shapecheck.record import fields, is_record, record, replace
from shapecheck.source import Lines

MAX_DEPTH = 2
"""A checked file's dependencies (1) and theirs (2) are read; imports further away are not."""

MAX_BINDINGS = 4
"""Models of one class built in the sizes of its constructions, per module: a class built in
many sizes (a block of a dozen kernel sizes) gets its one model beyond these."""

_REEXPORT_HOPS = 4
"""How many modules a name is followed through (``__init__`` re-exports, star imports)."""

_MAX_STARS = 8
"""Star imports searched in one module (see ``ProjectScope._from_stars``)."""

_MAX_DEPENDENCIES = 512
"""Analysed dependencies kept per process (an editor's server runs for hours)."""


@record
class Binding:
    """What an import binds a name to: ``attribute`` of the module ``module`` (after
    ``level`` dots), or the module itself (``attribute`` is ``None``)."""

    level: int
    module: str
    attribute: str | None


@record
class Syntax:
    """What a module's text alone says of the names it offers and imports."""

    bindings: dict[str, Binding]
    stars: tuple[Binding, ...]
    """``from .x import *``, in order."""
    definitions: dict[str, FunctionNode | ast.ClassDef]
    constants: dict[str, int]
    """Top-level names bound to an integer literal (``NUM_HEADS = 4``)."""


def read_syntax(module: ast.Module) -> Syntax:
    """The names a module's imports bind (module-level ones: a function's are its own), its
    star imports, and its top-level definitions and integer constants."""
    bindings: dict[str, Binding] = {}
    stars: list[Binding] = []
    for statement, fallback in statements(module.body, definitions=False):
        bound: list[tuple[str, Binding]] = []
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if modelled(alias.name):
                    continue
                if alias.asname is not None:
                    bound.append((alias.asname, Binding(0, alias.name, None)))
                else:
                    top = alias.name.partition(".")[0]
                    bound.append((top, Binding(0, top, None)))
        elif isinstance(statement, ast.ImportFrom):
            written = statement.module or ""
            if not statement.level and modelled(written):
                continue
            for alias in statement.names:
                if alias.name == "*":
                    stars.append(Binding(statement.level, written, None))
                else:
                    binding = Binding(statement.level, written, alias.name)
                    bound.append((alias.asname or alias.name, binding))
        for name, binding in bound:
            if fallback:  # an ``except ImportError`` fallback stands in for the ``try``'s import
                bindings.setdefault(name, binding)
            else:
                bindings[name] = binding
    definitions: dict[str, FunctionNode | ast.ClassDef] = {}
    constants: dict[str, int] = {}
    for statement in module.body:
        if isinstance(statement, FunctionNode | ast.ClassDef):
            definitions.setdefault(statement.name, statement)
        elif (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Constant)
            and type(statement.value.value) is int
        ):
            constants[statement.targets[0].id] = statement.value.value
    return Syntax(bindings, tuple(stars), definitions, constants)


@record
class Located:
    """Where a name of the project leads: a function or class defined in ``module``, an
    integer constant of it, or (neither given) the module itself."""

    module: ProjectFile
    definition: FunctionNode | ast.ClassDef | None = None
    constant: int | None = None


@dataclass
class Dependency:
    """A module of the project, analysed as another file's dependency at ``depth``."""

    file: ProjectFile
    depth: int
    context: ModuleContext | None
    """``None`` while it is built (a cycle of builds), or where it cannot be parsed: nothing
    of it is known."""
    evidence: Evidence = field(default_factory=dict)
    """Every file looked at while working in it: a result that used it rests on all of them."""


_NOTHING_IMPORTED = Syntax({}, (), {}, {})

_dependencies: dict[tuple[str, int], Dependency] = {}
_syntax: dict[str, tuple[ProjectFile, Syntax]] = {}


def dependency(file: ProjectFile, depth: int) -> Dependency:
    """``file`` analysed at ``depth`` (once per process and content: an edited file is a
    new :class:`~shapecheck.project.ProjectFile`, and replaces the old one's)."""
    key = (file.path, depth)
    found = _dependencies.get(key)
    if found is not None and found.file is file:
        touch(found.evidence)
        return found
    if found is not None and found.context is not None and found.context.project is not None:
        del found.context.project.context  # the file changed: let the old analysis go
    if len(_dependencies) >= _MAX_DEPENDENCIES:
        _dependencies.clear()
    found = _dependencies[key] = Dependency(file, depth, None)  # a cycle of builds: unknown
    with active(found.evidence):
        found.context = _analysed(file, depth)
    return found


def _analysed(file: ProjectFile, depth: int) -> ModuleContext | None:
    """What a module's functions and classes need: its imports and functions now, each class's
    model once something asks for it (see :class:`_Classes`)."""
    from shapecheck.analysis import definitions

    module = file.module
    if module is None:
        return None
    context = ModuleContext(collect_imports(module, file.text), declares=may_declare(file.text))
    for definition in definitions(module.body):
        if isinstance(definition, FunctionNode):
            context.functions.setdefault(definition.name, definition)
    context.classes = _Classes(file, context)
    if depth < MAX_DEPTH:
        context.project = ProjectScope(file.path, depth, context, syntax_of(file), module)
    return context


class _Classes(dict[str, ClassModel]):
    """A dependency's class models, each built (from its ``__init__``, bases first) the first
    time it is asked for: a module offers many classes, and a user needs few of them."""

    def __init__(self, file: ProjectFile, context: ModuleContext) -> None:
        super().__init__()
        self._file = file
        self._context = context
        self._nodes: dict[str, ast.ClassDef] | None = None
        self._building: set[str] = set()

    def __missing__(self, name: str) -> ClassModel:
        model = self._built(name)
        if model is None:
            raise KeyError(name)
        return model

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def get(self, name: str, default: ClassModel | None = None) -> ClassModel | None:  # type: ignore[override]
        if super().__contains__(name):
            return super().__getitem__(name)
        return self._built(name) or default

    def node(self, name: str) -> ast.ClassDef | None:
        """The class ``name`` of the module, as written."""
        if self._nodes is None:
            self._nodes = {}
            module = self._file.module
            for definition in classes_in(module.body if module is not None else []):
                self._nodes.setdefault(definition.name, definition)
        return self._nodes.get(name)

    def _built(self, name: str) -> ClassModel | None:
        from shapecheck.analysis import _class_model

        node = self.node(name)
        if node is None or name in self._building:
            return None  # not a class of the module, or a cycle of bases
        self._building.add(name)
        try:
            # without the module's globals: running a module's top-level code (often a
            # registry of configurations) would cost more than the classes
            model = _class_model(self._context, node, {})
        except Exception:  # a class the analysis cannot read is unknown, never a crash
            return None
        finally:
            self._building.discard(name)
        self[name] = model
        return model


def syntax_of(file: ProjectFile) -> Syntax:
    """What a dependency offers and imports (read once per process and content)."""
    known = _syntax.get(file.path)
    if known is None or known[0] is not file:
        module = file.module
        known = _syntax[file.path] = (file, read_syntax(module) if module else _NOTHING_IMPORTED)
    return known[1]


@record
class Construction:
    """A class built with sizes its caller decides (``Head(n_embd, head_size=n_embd //
    n_head)``): the class's methods are checked once more in them (in the class's own file,
    the construction in it or in another module of its folder), and what they show only
    there is reported where it is written, naming the construction."""

    cls: str
    """The class's name in its module."""
    home: str | None
    """The file of the class (``None``: the module built it)."""
    sizes: tuple[tuple[str, IntFact], ...]
    """Every size passed, by parameter."""
    node: ast.Call
    """The construction, in the module that built it."""
    layers: tuple[tuple[str, Fact], ...] = ()
    """Every layer passed that ``__init__`` keeps (``self.gate = gate`` given
    ``nn.Linear(dim, experts)``), by parameter: the model's layer there."""

    @property
    def decided(self) -> str:
        """The sizes and layers it decides, as shown (``head_size = n_embd//n_head``,
        ``gate = Linear(dim, experts)``)."""
        sizes = [f"{param} = {fact.dim}" for param, fact in self.sizes if _decides_sizes(fact.dim)]
        layers = [f"{param} = {_layer_shown(fact)}" for param, fact in self.layers]
        return ", ".join(sizes + layers)

    @property
    def model(self) -> str:
        """The name of the class's model built in these sizes and layers."""
        sizes = [f"{param}={fact.dim}" for param, fact in self.sizes]
        layers = [f"{param}={_layer_shown(fact)}" for param, fact in self.layers]
        return f"{self.cls}({', '.join(sizes + layers)})"


def _layer_shown(fact: Fact) -> str:
    """A layer handed to a constructor, in a construction's name (``Linear(dim, experts)``)."""
    if isinstance(fact, InstanceFact):
        return fact.name
    assert isinstance(fact, ModuleFact)
    sizes = [str(size) for size in (fact.in_features, fact.out_features) if size is not None]
    return f"{fact.kind.rsplit('.', 1)[-1]}({', '.join(sizes)})"


@record
class Caller:
    """Where a :class:`Construction` of a class of the checked module was written in another
    module: that module's file and the construction's code."""

    construction: Construction
    file: ProjectFile
    written: str


@record
class Handed:
    """Arguments a call handed function ``name`` (at line ``line``) of the file ``home``."""

    home: str
    name: str
    line: int
    arguments: dict[str, Fact]
    caller: str
    """Where the call is, in words (``line 30 of multi_head_attention.py``)."""


def _run_methods(context: ModuleContext, model: ClassModel) -> None:
    """Interpret a dependency's class's methods (``__init__`` aside), recording nothing: the
    calls they make into other files are noted (see :meth:`ProjectScope.hand`)."""
    inherited = context.project.homes if context.project is not None else {}
    for method in model.methods.values():
        if method.name != "__init__" and method not in inherited:  # (runs in its own file)
            interpreter = Interpreter(context, class_model=model, record=False)
            interpreter.inherit(method, {})
            try:
                interpreter.run_function(method)
            except RecursionError:
                continue


class ProjectScope:
    """What one module (checked, or read as a dependency) sees of the project's other files."""

    def __init__(
        self,
        path: str | None,
        depth: int,
        context: ModuleContext,
        syntax: Syntax,
        module: ast.Module,
        globals_: dict[str, Fact] | None = None,
    ) -> None:
        self.path = path
        """Where the module lies (``None``: nowhere, so no other file is found)."""
        self.depth = depth
        self.context = context
        self.syntax = syntax
        self.module = module
        self.globals = globals_ or {}
        """What the module's top-level code binds (``{}`` for a dependency: not run)."""
        self.evidence: Evidence = {}
        """For the checked file: every file its result rests on."""
        self.homes: dict[FunctionNode, Dependency] = {}
        """Functions and methods of other files handed out here -> where they are analysed."""
        self.followed: set[ast.AST] = set()
        """The calls of this module followed into another file's code (for ``--coverage``)."""
        self._names: dict[str, Fact | None] = {}
        self._lookups: dict[str, Fact | None] = {}
        self._dotted: dict[str, Fact | None] = {}
        self._modules: dict[str, ProjectFile] = {}
        self.handed: list[Handed] | None = None
        """What this module's code handed functions of other files while its methods ran for
        a neighbour (see :meth:`callers`); ``None``: not noted."""
        self._handed_in: list[Handed] = []
        self._callers: list[Caller] | None = None
        self.constructions: list[Construction] = []
        """The module's own classes built with sizes of their callers, in the order met."""
        self._instances: dict[tuple[object, ...], str] = {}
        self._bindings: dict[str, int] = {}
        """How many models of each class were built in sizes its constructions gave it."""
        self._binding: set[str] = set()
        """The classes whose model in such sizes is being built (one that builds itself,
        ``DlaTree(levels - 1, ...)``, gets its one model inside)."""
        self._sizes_named: dict[str, set[str]] = {}
        self._layers_kept: dict[str, set[str]] = {}
        self._class_nodes: dict[str, ast.ClassDef] | None = None

    # --- what the interpreter asks --------------------------------------------------------

    def definition(self, name: str) -> Fact | None:
        """What ``name`` is, where a relative import binds it (or may: a star import): a
        module of the project, or an :class:`ImportedName` looked up only once it is called
        (see :meth:`called`). ``None``: not this scope's to say."""
        if name not in self._names:
            self._names[name] = self._named(name)
        return self._names[name]

    def called(
        self,
        caller: Interpreter,
        callee: Fact,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> Fact | None:
        """What the callee of a call is in the project, where that is worth finding out: a
        constructor builds a layer (a name in CapWords, called in ``__init__``: ``self.attn =
        Head(...)``), or a function is handed a tensor (a helper of attention code). Other
        calls build outputs, caches and options (``BaseModelOutput(...)`` in ``forward``,
        ``make_divisible(dim)``): reading files for them would cost more than it tells."""
        if isinstance(callee, ImportedName):
            name = callee.detail
        elif isinstance(callee, QualifiedName) and not modelled(callee.name):
            name = callee.name
        else:
            return None
        if name.rpartition(".")[2][:1].isupper():
            worth = caller.in_constructor
        else:
            worth = any(_a_tensor(fact) for fact, _ in [*args, *kwargs.values()])
        if not worth:
            return None
        owner, _, member = name.rpartition(".")
        if isinstance(callee, ImportedName) and owner:
            return self._static_method(owner, member)
        return self.qualified(name) if "." in name else self._resolved(name)

    def _static_method(self, owner: str, member: str) -> FunctionRef | None:
        """``Attention.attention``, a static method of an imported class (``None``: not one)."""
        cls = self._resolved(owner)
        model = self.context.classes.get(cls.name) if isinstance(cls, ClassRef) else None
        method = model.methods.get(member) if model is not None else None
        if method is None or not static_method(method):
            return None
        assert isinstance(cls, ClassRef)
        return FunctionRef(method, class_name=cls.name)

    def qualified(self, dotted: str) -> Fact | None:
        """What ``pkg.attention.Head`` (an attribute of a module reached through an import)
        is in the project."""
        if modelled(dotted) or self.path is None:
            return None
        if dotted not in self._dotted:
            self._dotted[dotted] = None  # a name that leads back to itself
            located = self._located_dotted(dotted)
            self._dotted[dotted] = self._fact(located) if located is not None else None
        return self._dotted[dotted]

    def base_class(self, written: str) -> ClassModel | None:
        """The model of a class of another module of this file's folder that a class of this
        module derives from (``class Unscaled(Attention)``): its methods are followed in its
        file."""
        binding = self.syntax.bindings.get(written)
        if binding is None or self.path is None:
            return None
        module = find_module(self.path, binding.module, binding.level)
        if module is None or os.path.dirname(module.path) != os.path.dirname(self.path):
            return None  # a base in another folder (transformers' modular files derive from
            # other models' classes, each a large file to parse): a package's own bases only
        located = self._located_name(written)
        if located is None or not isinstance(located.definition, ast.ClassDef):
            return None
        home = dependency(located.module, self.depth + 1)
        key = self._adopted(located.definition.name, home)
        if key is None:
            return None
        model = self.context.classes[key]
        # what its __init__ stored, in this module's names (its layers' classes adopted)
        attributes = {name: self.leaving(fact, home) for name, fact in model.attributes.items()}
        return ClassModel(model.name, attributes, dict(model.methods))

    def class_definition(self, written: str) -> tuple[ProjectFile, ast.ClassDef] | None:
        """The class a name or dotted name of this module (``FooConfig``, ``cfg.FooConfig``)
        stands for, as written in its file (nothing of it is analysed)."""
        if "." in written:
            located = None if modelled(written) else self._located_dotted(written)
        else:
            located = self._located_name(written)
        if located is None or not isinstance(located.definition, ast.ClassDef):
            return None
        return located.module, located.definition

    def callers(self) -> list[Caller]:
        """The constructions, in the other modules of the checked file's folder, of its
        classes with sizes they decide (a package of a few modules builds its layers in each
        other: ``model.py``'s ``Head(n_embd, head_size=n_embd // n_head)``); and, in
        :attr:`handed_in`, what the methods of the classes that build them pass their
        methods (``self.attention(q, k, v, mask)``). Looked for once."""
        if self._callers is None:
            self._callers = self._looked_for_callers()
        return self._callers

    def _looked_for_callers(self) -> list[Caller]:
        if self.path is None or self.depth != 0:
            return []
        layers = [node.name for node in classes_in(self.module.body) if is_layer(node)]
        files = neighbours(self.path) if layers else []
        if not files:
            return []
        stem = os.path.splitext(os.path.basename(self.path))[0].encode()
        names = {name.encode() for name in layers}
        found: list[Caller] = []
        for file in files:
            data = file.data
            if not import_line_names(data, stem) or names.isdisjoint(_CALLED.findall(data)):
                continue  # (read, never parsed: most neighbours build nothing of ours)
            module = file.module
            if module is None or not self._imported_by(file):
                continue  # a module of the same names that imports them from elsewhere
            home = dependency(file, self.depth + 1)
            scope = home.context.project if home.context is not None else None
            if scope is None or home.context is None:
                continue
            with active(home.evidence):
                scope.handed = []  # what this run hands: the same whatever ran before
                try:
                    for name in _building(module, set(layers)):
                        model = home.context.classes.get(name)  # its __init__ builds ours
                        if model is not None:
                            _run_methods(home.context, model)  # which call ours
                    handed = scope.handed
                finally:
                    scope.handed = None
            lines = Lines(file.text)
            found += [
                Caller(built, file, lines.flattened(built.node))
                for built in scope.constructions
                if built.home == self.path
            ]
            self._handed_in += [site for site in handed if site.home == self.path]
        return found

    @property
    def handed_in(self) -> list[Handed]:
        """For the checked file: what its neighbours hand its functions (see :meth:`callers`)."""
        self.callers()
        return self._handed_in

    def hand(
        self, call: ast.Call, function: FunctionRef, home: Dependency, arguments: dict[str, Fact]
    ) -> None:
        """``call`` in this module's code hands ``arguments`` to a function of ``home``'s
        (noted while its methods run for a neighbour's :meth:`callers`)."""
        if self.handed is not None and self.path is not None:
            node, caller = function.node, f"line {call.lineno} of {os.path.basename(self.path)}"
            self.handed.append(Handed(home.file.path, node.name, node.lineno, arguments, caller))

    def _imported_by(self, file: ProjectFile) -> bool:
        """Does one of ``file``'s imports name the checked module (``from .attention import
        Head``, ``from . import attention``, ``from pkg.attention import Head``)?"""
        syntax = syntax_of(file)
        for binding in (*syntax.bindings.values(), *syntax.stars):
            module = find_module(file.path, binding.module, binding.level)
            if module is not None and module.is_package and binding.attribute is not None:
                module = submodule(module, binding.attribute) or module
            if module is not None and module.path == self.path:
                return True
        return False

    # --- a call followed into another file (``Interpreter._inline``) -------------------------

    def check_arguments(
        self,
        caller: Interpreter,
        function: FunctionRef,
        home: Dependency,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> None:
        """Check what the caller passes against the callee's jaxtyping annotations, read with
        its own module's imports: the caller's to answer for."""
        if home.context is not None and _annotated(function.node):
            checker = Interpreter(home.context, record=caller.record)
            checker.observations = caller.observations
            checker._check_arguments(function, args, kwargs)

    @staticmethod
    def entering(
        function: FunctionRef, home: Dependency, arguments: dict[str, Fact]
    ) -> dict[str, Fact] | None:
        """The arguments as the callee's file sees them; ``None`` where the call is not worth
        following: a function of another file handed no tensor builds sizes, options or
        layers, and following each such call costs more than it tells about attention code."""
        if function.class_name is None and not any(_a_tensor(f) for f in arguments.values()):
            return None
        return {name: _entering(fact) for name, fact in arguments.items()}

    def inside(self, home: Dependency | None) -> contextlib.AbstractContextManager[None]:
        """Work in ``home``'s code: what its answers rest on, this module's result rests on
        (each time, an answer remembered from before too)."""
        return active(home.evidence) if home is not None else contextlib.nullcontext()

    def arrived(self, call: ast.Call, fact: Fact, handed: Iterable[Fact] = ()) -> Fact:
        """A value another file's code returned through ``call``, which ``handed`` it: in the
        checked module it points at the call (see :func:`reanchored`), and the call counts as
        followed."""
        if self.depth != 0:
            return fact
        self.followed.add(call)
        return reanchored(fact, call, [each for each in handed if isinstance(each, TensorFact)])

    def instance(
        self,
        caller: Interpreter,
        cls: ClassRef,
        node: ast.Call,
        args: list[Argument],
        kwargs: dict[str, Argument],
    ) -> InstanceFact:
        """An instance of ``cls`` as construction ``node`` builds it: where it passes sizes
        the class's own sizes are made of (``Head(n_embd, head_size=n_embd // n_head)``,
        ``Head(64, 16)``), or layers ``__init__`` keeps as they are (``Router(gate=nn.Linear(d,
        n))`` where ``self.gate = gate``), a model of the class built from ``__init__`` with
        them, so its ``forward`` computes in the caller's sizes and layers; otherwise the
        class's one model. A class of the checked module so built is one of its
        :attr:`constructions`."""
        if caller.record and caller.in_constructor and caller.class_model and not caller.builds:
            # ``__init__`` read again as a function: its class's model, built first, already
            # holds the layers the methods use
            return InstanceFact(cls.name)
        args = [_as_size(caller, *argument) for argument in args]
        kwargs = {name: _as_size(caller, *argument) for name, argument in kwargs.items()}
        passed = [fact for fact, _ in [*args, *kwargs.values()]]
        plain = InstanceFact(cls.name, built_with=_sizes_passed(args, kwargs))
        if not any(
            (isinstance(fact, IntFact) and _decides_sizes(fact.dim))
            or isinstance(fact, ModuleFact | InstanceFact)
            for fact in passed
        ):
            return plain
        generic = self.context.classes.get(cls.name)
        if generic is None:
            return InstanceFact(cls.name)
        init = generic.methods.get("__init__")
        if "forward" not in generic.methods:
            return InstanceFact(cls.name)  # no layer: nothing computes in its sizes
        arguments = (
            _bind_arguments(FunctionRef(init, class_name=cls.name), args, kwargs)
            if init is not None
            else None
        )
        if not arguments:
            return InstanceFact(cls.name)
        assert init is not None
        if cls.name not in self._sizes_named:
            self._sizes_named[cls.name] = _size_names(generic) | _handed_on(init)
            self._layers_kept[cls.name] = _kept_on_self(init)
        named = self._sizes_named[cls.name]
        passed_sizes = {
            name: fact
            for name, fact in sorted(arguments.items())
            if isinstance(fact, IntFact) and (name in named or f"self.{name}" in named)
        }
        decided = [fact.dim for fact in passed_sizes.values() if _decides_sizes(fact.dim)]
        # another file's class cannot name this module's classes: only torch's layers cross
        layer = ModuleFact if init in self.homes else ModuleFact | InstanceFact
        layers = {
            name: fact
            for name, fact in sorted(arguments.items())
            if isinstance(fact, layer)
            and not (isinstance(fact, InstanceFact) and fact.own)
            and name in self._layers_kept[cls.name]
        }
        if not decided and not layers:
            return plain
        # a size the decided ones are made of is bound too (``n_embd``, which ``head_size =
        # n_embd // n_head`` divides); others would only multiply the models
        related = set().union(*(symbols_in(dim) for dim in decided))
        sizes = {
            name: fact
            for name, fact in passed_sizes.items()
            if _decides_sizes(fact.dim) or (decided and symbols_in(fact.dim) <= related)
        }
        key = (cls.name, *sizes.items(), *layers.items())
        if key not in self._instances:
            bound = self._bindings[cls.name] = self._bindings.get(cls.name, 0) + 1
            if bound > MAX_BINDINGS or cls.name in self._binding:
                return InstanceFact(cls.name)  # a class that builds itself, or built often
            self._binding.add(cls.name)
            try:
                model = self._bound_model(generic, init, {**sizes, **layers})
            finally:
                self._binding.discard(cls.name)
            name = cls.name
            if model is not None:
                home = self.homes.get(init)
                built = Construction(
                    generic.name,
                    home.file.path if home else None,
                    tuple(sizes.items()),
                    node,
                    tuple(layers.items()),
                )
                name = model.name = cls.name + built.model.removeprefix(generic.name)
                self.context.classes[name] = model
                self.constructions.append(built)
            self._instances[key] = name
        return InstanceFact(self._instances[key])

    def _bound_model(
        self, generic: ClassModel, init: FunctionNode, given: dict[str, Fact]
    ) -> ClassModel | None:
        """``generic``'s class modelled again, ``__init__`` given sizes and layers, in its
        module."""
        from shapecheck.analysis import _class_model

        home = self.homes.get(init)
        if home is None:  # a class of this module
            if self._class_nodes is None:
                self._class_nodes = {node.name: node for node in classes_in(self.module.body)}
            node = self._class_nodes.get(generic.name)
            if node is None:
                return None
            return _class_model(self.context, node, self.globals, given)
        classes = home.context.classes if home.context is not None else None
        node = classes.node(generic.name) if isinstance(classes, _Classes) else None
        if node is None or home.context is None:
            return None
        with active(home.evidence):
            return _class_model(home.context, node, {}, given)

    # --- resolution -----------------------------------------------------------------------

    def _defined_here(self, name: str) -> bool:
        return name in self.context.functions or name in self.context.classes

    def _named(self, name: str) -> Fact | None:
        binding = self.syntax.bindings.get(name)
        if self.path is None:
            return None
        if binding is None:
            star = self.syntax.stars and not (
                name in self.context.imports or self._defined_here(name) or hasattr(builtins, name)
            )
            return ImportedName("name", name) if star else None
        if not binding.level:
            return None  # an absolute import: a qualified name, looked up once called
        if binding.module or binding.attribute is None:
            return ImportedName("name", name)  # ``from .layers import Head``: looked up if called
        package = find_module(self.path, binding.module, binding.level)
        inner = submodule(package, binding.attribute) if package is not None else None
        if inner is not None and inner.name:
            return self._fact(Located(inner))  # ``from . import layers``: a module
        return ImportedName("name", name)

    def _resolved(self, name: str) -> Fact | None:
        """What an :class:`ImportedName` ``name`` is (looked up once)."""
        if name not in self._lookups:
            located = self._located_name(name)
            self._lookups[name] = self._fact(located) if located is not None else None
        return self._lookups[name]

    def _located_name(self, name: str) -> Located | None:
        binding = self.syntax.bindings.get(name)
        if self.path is None:
            return None
        if binding is not None:
            if binding.attribute is None and not binding.level:
                return None  # ``import pkg.model``: its attributes are looked up as they are read
            return self._bound(self.path, binding, _REEXPORT_HOPS)
        if self.syntax.stars and not self._defined_here(name):
            return self._from_stars(self.path, self.syntax.stars, name, _REEXPORT_HOPS)
        return None

    def _located_dotted(self, dotted: str) -> Located | None:
        head, _, last = dotted.rpartition(".")
        module = self._modules.get(head)
        if module is None and head and self.path is not None:
            module = find_module(self.path, head)
        return self._member(module, last, _REEXPORT_HOPS) if module is not None else None

    def _bound(self, importer: str, binding: Binding, hops: int) -> Located | None:
        """Where ``binding``, an import of the module at ``importer``, leads."""
        module = find_module(importer, binding.module, binding.level)
        if module is None or binding.attribute is None:
            return Located(module) if module is not None else None
        return self._member(module, binding.attribute, hops)

    def _member(self, module: ProjectFile, name: str, hops: int) -> Located | None:
        """``module``'s attribute ``name``: a function or class defined there, a name it
        imports (a re-export, followed ``hops`` modules at most), a submodule of a package,
        an integer constant, or a name a star import brings."""
        syntax = syntax_of(module)
        definition = syntax.definitions.get(name)
        if definition is not None:
            return Located(module, definition)
        binding = syntax.bindings.get(name)
        if binding is not None:
            return self._bound(module.path, binding, hops - 1) if hops > 0 else None
        inner = submodule(module, name)
        if inner is not None:
            return Located(inner)
        if name in syntax.constants:
            return Located(module, constant=syntax.constants[name])
        return self._from_stars(module.path, syntax.stars, name, hops - 1)

    def _from_stars(
        self, importer: str, stars: Sequence[Binding], name: str, hops: int
    ) -> Located | None:
        """``name`` from one of a module's star imports (``from .x import *``); a module that
        gathers more than a few (a package's lazy ``__init__`` naming every model) is not
        searched: finding one name would read the whole package."""
        if name.startswith("_") or hops < 0 or len(stars) > _MAX_STARS:
            return None  # a star import leaves private names behind
        for star in stars:
            module = find_module(importer, star.module, star.level)
            found = self._member(module, name, hops) if module is not None else None
            if found is not None:
                return found
        return None

    def _fact(self, located: Located) -> Fact | None:
        """What a located name is to the interpreter."""
        definition = located.definition
        if isinstance(definition, ast.ClassDef):
            return self._class(located.module, definition.name)
        if definition is not None:
            return self._function(located.module, definition)
        if located.constant is not None:
            return IntFact(Dim.constant(located.constant))
        if not located.module.name:
            return None
        self._modules[located.module.name] = located.module
        return QualifiedName(located.module.name)

    def _function(self, module: ProjectFile, node: FunctionNode) -> Fact | None:
        home = dependency(module, self.depth + 1)
        if home.context is None:
            return None
        self.homes[node] = home
        return FunctionRef(node)

    def _class(self, module: ProjectFile, name: str) -> Fact | None:
        home = dependency(module, self.depth + 1)
        key = self._adopted(name, home)
        return ClassRef(key) if key is not None else None

    def _adopted(self, name: str, home: Dependency) -> str | None:
        """The name, in this module, of class ``name`` of ``home`` (registered on first use)."""
        context = home.context
        model = context.classes.get(name) if context is not None else None
        if model is None:
            return None
        key = name if "." in name else f"{home.file.name or home.file.path}.{name}"
        self.context.classes[key] = model
        for method in model.methods.values():
            self.homes[method] = self._home_of(method, home)
        return key

    @staticmethod
    def _home_of(node: FunctionNode, home: Dependency) -> Dependency:
        """Where a function handed out by ``home`` is analysed: there, or where ``home``
        itself got it from."""
        scope = home.context.project if home.context is not None else None
        return scope.homes.get(node, home) if scope is not None else home

    # --- crossing -------------------------------------------------------------------------

    def leaving(self, fact: Fact, home: Dependency) -> Fact:
        """A value ``home`` returns, in this module's names."""
        if isinstance(fact, ClassRef | InstanceFact):
            key = self._adopted(fact.name, home)
            return type(fact)(key) if key is not None else UNKNOWN
        if isinstance(fact, FunctionRef):
            self.homes[fact.node] = self._home_of(fact.node, home)
            if fact.class_name is None:
                return fact
            key = self._adopted(fact.class_name, home)
            return replace(fact, class_name=key) if key is not None else UNKNOWN
        if isinstance(fact, TupleFact):
            return TupleFact(tuple(self.leaving(item, home) for item in fact.items))
        if isinstance(fact, RepeatedFact):
            return RepeatedFact(self.leaving(fact.item, home))
        return fact


def _as_size(caller: Interpreter, fact: Fact, node: ast.expr) -> Argument:
    """An argument as the size the caller calls it, where it may be one (``n_embd``, a
    parameter nothing said more of): the class then computes in the caller's sizes."""
    if not isinstance(fact, IntFact) and (size := caller.size(fact, node)) is not None:
        return IntFact(size), node
    return fact, node


def _sizes_passed(
    args: list[Argument], kwargs: dict[str, Argument]
) -> tuple[tuple[int | str, Dim], ...]:
    """The named sizes a construction passes, by position or keyword (see
    :attr:`InstanceFact.built_with`)."""
    given: list[tuple[int | str, Argument]] = [*enumerate(args), *kwargs.items()]
    return tuple(
        (where, fact.dim)
        for where, (fact, _) in given
        if isinstance(fact, IntFact) and fact.dim.factors and not fact.dim.has_unknown
    )


def is_layer(node: ast.ClassDef) -> bool:
    """Has the class a ``forward``, which its users call with their tensors?"""
    return any(isinstance(d, FunctionNode) and d.name == "forward" for d in node.body)


def _building(module: ast.Module, classes: set[str]) -> Iterator[str]:
    """The classes of ``module`` whose code calls one of ``classes`` by name."""
    for node in classes_in(module.body):
        for call in ast.walk(node):
            if call_name(call) in classes:
                yield node.name
                break


def _a_tensor(fact: Fact) -> bool:
    """Known to be a tensor: not merely a parameter nothing says more of (an unannotated
    ``pretrained`` or ``config`` is taken for a tensor until its use says otherwise)."""
    if not isinstance(fact, TensorFact):
        return False
    return (
        fact.shape is not None
        or fact.unknown_rank is None
        or fact.unknown_rank.reason != "parameter"
    )


def _annotated(function: FunctionNode) -> bool:
    """Does a parameter carry an annotation that may name a shape (``Float[Tensor, ...]``)?"""
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return any(isinstance(param.annotation, ast.Subscript) for param in every)


def _decides_sizes(dim: Dim) -> bool:
    """A size that tells a class more than a parameter of its own would: a number
    (``64``), or a size made of others (``n_embd // n_head``, ``3 * d``)."""
    if dim.value is not None:
        return dim.value > 0
    return dim.coefficient != 1 or len(dim.factors) != 1 or isinstance(dim.factors[0], Quotient)


def _handed_on(init: FunctionNode | None) -> set[str]:
    """The parameters of ``__init__`` it hands to the layers it builds (a name in CapWords),
    as written or through a local (``head_size = n_embd // n_head``, then
    ``nn.ModuleList([Head(head_size) ...])``): sizes of those layers, which the model's own
    attributes may not show."""
    if init is None:
        return set()
    parameters = {param.arg for param in [*init.args.args, *init.args.kwonlyargs]}
    computed: dict[str, set[str]] = {}
    handed: set[str] = set()
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            if isinstance(target := node.targets[0], ast.Name):
                computed.setdefault(target.id, set()).update(_names_in(node.value))
        elif isinstance(node, ast.Call) and (call_name(node) or "")[:1].isupper():
            for passed in [*node.args, *(keyword.value for keyword in node.keywords)]:
                handed |= _names_in(passed)
    for local in list(handed):
        handed |= computed.get(local, set())
    return handed & parameters


def _kept_on_self(init: FunctionNode) -> set[str]:
    """The parameters ``__init__`` stores as they are (``self.gate = gate``): a layer handed
    there is the instance's layer."""
    parameters = {param.arg for param in [*init.args.args, *init.args.kwonlyargs]}
    return {
        node.value.id
        for node in ast.walk(init)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Name)
        and node.value.id in parameters
        and any(
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            for target in node.targets
        )
    }


def _names_in(node: ast.AST) -> set[str]:
    return {name.id for name in ast.walk(node) if isinstance(name, ast.Name)}


def _size_names(model: ClassModel) -> set[str]:
    """The names of the sizes a class model's attributes are made of (``head_size``,
    ``self.head_dim``): the parameters a construction can tell it something about."""
    dims: list[Dim] = []
    for fact in model.attributes.values():
        if isinstance(fact, IntFact):
            dims.append(fact.dim)
        elif isinstance(fact, ModuleFact):
            dims += [size for size in (fact.in_features, fact.out_features) if size is not None]
        elif isinstance(fact, TensorFact) and fact.shape is not None:
            dims += fact.shape
    return {symbol.name for dim in dims for symbol in symbols_in(dim)}


def classes_in(statements: Sequence[ast.stmt]) -> Iterator[ast.ClassDef]:
    """A module's classes, also inside ``if``/``try`` and other classes (not functions)."""
    from shapecheck.analysis import definitions

    for definition in definitions(statements):
        if isinstance(definition, ast.ClassDef):
            yield definition
            yield from classes_in(definition.body)


_CALLED = re.compile(rb"(?<!class )\b([A-Za-z_]\w*)\s*\(")
"""A name called (``Head(``), not a ``class`` statement's."""


def import_line_names(data: bytes, stem: bytes) -> bool:
    """Does an import line of ``data`` name the module ``stem`` (its first line, at least:
    ``from .stem import``, ``from pkg.stem import``, ``from . import a, stem``, ``import
    pkg.stem``)? A prefilter: which module a line names is :meth:`ProjectScope._imported_by`'s
    to decide, once the neighbour is parsed. Only the lines that hold ``stem`` are looked at:
    a neighbour mentions it mostly in comments (transformers' generated ``modeling_*.py`` names
    its ``modular_*.py``)."""
    at = data.find(stem)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        line = _IMPORT_LINE.match(data, start, end)
        if line is not None:
            module, imported, names = line.group("module", "imported", "names")
            if module is not None and module.rpartition(b".")[2] == stem:
                return True  # from pkg.stem import ...
            if stem in _WORD.findall(imported if module is not None else names):
                return True  # from . import stem; import pkg.stem
        at = data.find(stem, end)
    return False


_IMPORT_LINE = re.compile(
    rb"[ \t]*(?:from[ \t]+(?P<module>[\w.]+)[ \t]+import(?P<imported>[^\n]*)"
    rb"|import[ \t](?P<names>[^\n]*))"
)
_WORD = re.compile(rb"\w+")


def _entering(fact: Fact) -> Fact:
    """An argument, as a function of another file sees it: functions, classes and instances
    are named in the caller's module, so they are unknown there."""
    if isinstance(fact, ClassRef | InstanceFact | FunctionRef):
        return UNKNOWN
    if isinstance(fact, TupleFact):
        return TupleFact(tuple(_entering(item) for item in fact.items))
    if isinstance(fact, RepeatedFact):
        return RepeatedFact(_entering(fact.item))
    return fact


def checking(
    path: str | None, module: ast.Module, context: ModuleContext, globals_: dict[str, Fact]
) -> ProjectScope:
    """The scope of the module being checked, which lies at ``path`` (``None``: nowhere, so
    only its own classes are known); what it looks at from now on is its evidence."""
    if path is None:
        return ProjectScope(None, 0, context, _NOTHING_IMPORTED, module, globals_)
    syntax = read_syntax(module)
    scope = ProjectScope(os.path.abspath(path), 0, context, syntax, module, globals_)
    begin(scope.evidence)
    return scope


def finished(scope: ProjectScope | None) -> None:
    """The checked file's analysis is done: record nothing more for it, and let its analysis
    go when its user does (the scope and the module's context hold each other)."""
    begin(None)
    if scope is not None:
        del scope.context


# --- provenance --------------------------------------------------------------------------------

_FORGOTTEN: dict[str, object] = {
    "product": None,
    "axis_op": None,
    "scaling": None,
    "masked_weights": None,
    "from_number": None,
    "positions": None,
    "tiled": None,
}
"""Knowledge of a tensor that only the code that made it can answer for (a fix rewrites it,
a finding points at it): forgotten when that code lies in another file. ``scaling`` becomes
"cannot tell", not "nothing applied"; fills no softmax read yet are dropped too."""


def reanchored(fact: Fact, call: ast.AST, handed: Sequence[TensorFact] = ()) -> Fact:
    """``fact``, come back from another file through ``call``, pointing at nothing there: every
    node it names becomes the call, but for what a tensor ``handed`` to the call held as it is
    (``maybe_add_mask(scores, mask)`` returns the caller's scores, their product written in
    the caller's code)."""
    if isinstance(fact, TupleFact):
        return TupleFact(tuple(reanchored(item, call, handed) for item in fact.items))
    if isinstance(fact, RepeatedFact):
        return RepeatedFact(reanchored(fact.item, call, handed))
    if isinstance(fact, TensorFact):
        changes: dict[str, Any] = {"origin": call, "unread_fills": ()}
        for each in fields(fact):
            if each.name not in changes:
                value = getattr(fact, each.name)
                if any(getattr(tensor, each.name) == value for tensor in handed):
                    continue  # the caller's own, handed in and back
                moved, touched = _anchored(value, call)
                if touched:
                    changes[each.name] = _FORGOTTEN.get(each.name, moved)
        return replace(fact, **changes)
    if isinstance(fact, ScalarFact) and fact.origin is not None:
        return replace(fact, origin=call)
    return fact


def _anchored(value: object, call: ast.AST) -> tuple[object, bool]:
    """``value`` with every node in it replaced by ``call``, and whether there was one."""
    if isinstance(value, ast.AST):
        return call, True
    if value is None or isinstance(value, str | int | float | bool | Dim):
        return value, False  # sizes keep their divisions' origins, which only SC502 reads
    if isinstance(value, tuple | frozenset):
        items = [_anchored(item, call) for item in value]
        if not any(touched for _, touched in items):
            return value, False
        return type(value)(item for item, _ in items), True
    if is_record(value):
        changes = {}
        for each in fields(value):
            moved, touched = _anchored(getattr(value, each.name), call)
            if touched:
                changes[each.name] = moved
        return (replace(value, **changes), True) if changes else (value, False)
    return value, False
