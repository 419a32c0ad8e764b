"""``@record``: how shapecheck declares an immutable value (a fact, a size, an observation, a
finding): a class that type checkers see as a frozen dataclass and that is a plain class at
run time, made here without :mod:`dataclasses`.

A frozen dataclass pays for immutability where it is not needed. Its ``__init__`` writes each
field through ``object.__setattr__``, and each class costs two more generated methods at
import: in one process checking every fifth timm model file, 7% of all instructions. The
guarantee is kept where it is checked: ``mypy --strict``, which the tests run, rejects any
assignment to a field of a record.

Nor is a record made by ``dataclass``: for the hundred records of shapecheck, ``dataclass``
took 42 ms of every run's 140 ms of imports (reading each annotation as a possible
``ClassVar`` or ``InitVar``, writing and compiling two functions per ``__init__``). Here a
record's fields are its annotations, each default a class attribute or a
:func:`dataclasses.field` (``default``, ``default_factory``, ``compare``, ``hash``, ``repr``);
only ``__init__`` is compiled per class. Equality, hashing (from the compared fields, as a
frozen dataclass hashes), ordering and ``repr`` read the fields through one
:func:`operator.attrgetter` each, made here. :func:`replace`, :func:`fields` and
:func:`as_dict` stand for their :mod:`dataclasses` namesakes, and ``match`` reads
``__match_args__`` as it does a dataclass's."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING, Field, field
from operator import attrgetter, eq, ge, gt, le, lt
from typing import Any, TypeVar, dataclass_transform, overload

_Record = TypeVar("_Record")

_FIELDS = "__record_fields__"
"""The class attribute holding a record's fields, inherited ones first, by name."""


@overload
def record(cls: type[_Record], /) -> type[_Record]: ...


@overload
def record(*, order: bool = False) -> Callable[[type[_Record]], type[_Record]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(
    cls: type[_Record] | None = None, /, *, order: bool = False
) -> type[_Record] | Callable[[type[_Record]], type[_Record]]:
    """``cls`` as a record that hashes like a frozen dataclass; ``order``: comparable by
    fields."""

    def make(cls: type[_Record]) -> type[_Record]:
        every = _declared_fields(cls)
        setattr(cls, _FIELDS, every)
        cls.__match_args__ = tuple(every)  # type: ignore[attr-defined, misc]
        compared = _values([name for name, each in every.items() if each.compare])
        hashed = _values(
            [
                name
                for name, each in every.items()
                if (each.compare if each.hash is None else each.hash)
            ]
        )
        shown = [name for name, each in every.items() if each.repr]
        methods: dict[str, Callable[..., Any]] = {
            "__eq__": _compare(compared, eq),
            "__hash__": lambda self: hash(hashed(self)),
            "__repr__": lambda self: _repr(self, shown),
        }
        if order:
            tests = {"__lt__": lt, "__le__": le, "__gt__": gt, "__ge__": ge}
            methods.update((name, _compare(compared, test)) for name, test in tests.items())
        if "__init__" not in vars(cls):
            methods["__init__"] = _init(every)
        for name, method in methods.items():
            if name not in vars(cls):  # a method the class writes itself is kept
                method.__name__, method.__qualname__ = name, f"{cls.__qualname__}.{name}"
                setattr(cls, name, method)
        return cls

    return make(cls) if cls is not None else make


def fields(value: object) -> tuple[Field[Any], ...]:
    """The fields of a record or record class, in ``__init__``'s order."""
    return tuple(getattr(value, _FIELDS).values())


def is_record(value: object) -> bool:
    """Whether ``value`` is a record (an instance, not a record class)."""
    return hasattr(type(value), _FIELDS)


def replace(value: _Record, /, **changes: Any) -> _Record:
    """A copy of the record ``value`` with the fields ``changes`` names changed: the hot path
    of the analysis (a tensor fact changed by each op). The copy is not made by ``__init__``,
    which would store every field again: its attributes are ``value``'s, changed, and a field
    ``value`` left to its class's default stays so."""
    known = getattr(value, _FIELDS)
    if not changes.keys() <= known.keys():
        raise TypeError(f"{type(value).__name__} has no field {min(changes.keys() - known)!r}")
    copy = object.__new__(type(value))
    copy.__dict__.update(value.__dict__, **changes)
    return copy


def as_dict(value: object) -> Any:
    """A record, and the records, lists, tuples and dicts inside it, as dicts of their
    fields (``dataclasses.asdict``)."""
    if is_record(value):
        return {name: as_dict(getattr(value, name)) for name in getattr(value, _FIELDS)}
    if isinstance(value, list | tuple):
        return type(value)(as_dict(item) for item in value)
    if isinstance(value, dict):
        return {key: as_dict(item) for key, item in value.items()}
    return value


def _declared_fields(cls: type) -> dict[str, Field[Any]]:
    """The fields of ``cls``: those of the records it derives from, then its annotations in
    order, each default left as a class attribute (none for a factory's)."""
    every: dict[str, Field[Any]] = {}
    for base in reversed(cls.__mro__[1:]):
        every.update(getattr(base, _FIELDS, {}))
    for name, annotation in inspect.get_annotations(cls).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        declared = cls.__dict__.get(name, MISSING)
        each = declared if isinstance(declared, Field) else field(default=declared)
        if not each.init or each.kw_only is True:
            raise TypeError(f"{cls.__name__}.{name}: a record field is set by position")
        each.name = name
        if each.default is MISSING:
            if name in cls.__dict__:
                delattr(cls, name)
        else:
            setattr(cls, name, each.default)
        every[name] = each
    defaulted = False
    for name, each in every.items():
        if each.default is MISSING and each.default_factory is MISSING and defaulted:
            raise TypeError(f"{cls.__name__}.{name}: a field without a default follows one with")
        defaulted = each.default is not MISSING or each.default_factory is not MISSING
    return every


class _Made:
    """The default of a field whose value a factory makes (``default_factory``)."""


def _init(every: dict[str, Field[Any]]) -> Callable[..., None]:
    """``__init__``, compiled for a record's fields ``every``: each given by position or by
    name, in order."""
    scope: dict[str, object] = {"_Made": _Made}
    parameters, lines = ["self"], []
    for name, each in every.items():
        value = name
        if each.default_factory is not MISSING:
            scope[f"_make_{name}"] = each.default_factory
            parameters.append(f"{name}=_Made")
            value = f"_make_{name}() if {name} is _Made else {name}"
        elif each.default is not MISSING:
            scope[f"_default_{name}"] = each.default
            parameters.append(f"{name}=_default_{name}")
        else:
            parameters.append(name)
        lines.append(f"    self.{name} = {value}")
    source = f"def __init__({', '.join(parameters)}):\n" + ("\n".join(lines) or "    pass")
    exec(source, scope)  # the one compile per class
    init: Callable[..., None] = scope["__init__"]  # type: ignore[assignment]
    return init


def _values(names: list[str]) -> Callable[[object], tuple[object, ...]]:
    """The values of ``names`` of a record, as one tuple."""
    if not names:
        return lambda _: ()
    read = attrgetter(*names)
    if len(names) == 1:
        return lambda value: (read(value),)
    return read


def _compare(
    values: Callable[[object], tuple[object, ...]], test: Callable[[Any, Any], Any]
) -> Callable[[object, object], object]:
    """A comparison of two records of one class by their fields, in order; of anything else,
    ``NotImplemented`` (Python then tries the other side), as a dataclass's."""

    def compare(self: object, other: object) -> object:
        if other.__class__ is self.__class__:
            return test(values(self), values(other))
        return NotImplemented

    return compare


def _repr(value: object, shown: list[str]) -> str:
    described = ", ".join(f"{name}={getattr(value, name)!r}" for name in shown)
    return f"{type(value).__qualname__}({described})"
