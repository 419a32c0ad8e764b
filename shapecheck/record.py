"""``@record``: how shapecheck declares an immutable value (a fact, a size, an observation, a
finding): a dataclass that type checkers see frozen and that is a plain one at run time.

A frozen dataclass pays for immutability where it is not needed. Its ``__init__`` writes each
field through ``object.__setattr__``, and each class costs two more generated methods at
import: in one process checking every fifth timm model file, 7% of all instructions; in a
pre-commit run, 30 ms of the imports. The guarantee is kept where it is checked:
``mypy --strict``, which the tests run, rejects any assignment to a field of a record.
Equality, hashing (from the compared fields, as frozen ones have) and ``replace`` are those of
a frozen dataclass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, dataclass_transform, overload

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
    make = dataclass(unsafe_hash=True, order=order)
    return make(cls) if cls is not None else make
