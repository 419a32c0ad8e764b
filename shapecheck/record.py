"""``@record``: how shapecheck declares an immutable value (a fact, a size, an observation, a
finding): a dataclass that type checkers see frozen and that is a plain one at run time.

A frozen dataclass pays for immutability where it is not needed. Its ``__init__`` writes each
field through ``object.__setattr__``, and each class costs two more generated methods at
import: in one process checking every fifth timm model file, 7% of all instructions; in a
pre-commit run, 30 ms of the imports. The guarantee is kept where it is checked:
``mypy --strict``, which the tests run, rejects any assignment to a field of a record.

Only ``__init__`` is generated per class. Equality, hashing (from the compared fields, as a
frozen dataclass hashes), ordering and ``repr`` read the fields through one
:func:`operator.attrgetter` each, made here: a dataclass compiles each of them again for each
class, which for about a hundred records was 28 ms of the imports and 13% of the instructions
of a pre-commit run. ``replace``, ``fields`` and ``match`` work as on any dataclass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from operator import attrgetter, eq, ge, gt, le, lt
from typing import Any, TypeVar, dataclass_transform, overload

_Record = TypeVar("_Record")


@overload
def record(cls: type[_Record], /) -> type[_Record]: ...


@overload
def record(*, order: bool = False) -> Callable[[type[_Record]], type[_Record]]: ...


@dataclass_transform(frozen_default=True)
def record(
    cls: type[_Record] | None = None, /, *, order: bool = False
) -> type[_Record] | Callable[[type[_Record]], type[_Record]]:
    """``cls`` as a dataclass that hashes like a frozen one; ``order``: comparable by fields."""

    def make(cls: type[_Record]) -> type[_Record]:
        cls = dataclass(cls, repr=False, eq=False)
        every = fields(cls)  # type: ignore[arg-type]
        compared = _values([field.name for field in every if field.compare])
        hashed = _values(
            [field.name for field in every if (field.compare if field.hash is None else field.hash)]
        )
        shown = [field.name for field in every if field.repr]
        methods: dict[str, Callable[..., Any]] = {
            "__eq__": _compare(compared, eq),
            "__hash__": lambda self: hash(hashed(self)),
            "__repr__": lambda self: _repr(self, shown),
        }
        if order:
            tests = {"__lt__": lt, "__le__": le, "__gt__": gt, "__ge__": ge}
            methods.update((name, _compare(compared, test)) for name, test in tests.items())
        for name, method in methods.items():
            if name not in vars(cls):  # a method the class writes itself is kept
                method.__name__ = method.__qualname__ = name
                setattr(cls, name, method)
        return cls

    return make(cls) if cls is not None else make


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
