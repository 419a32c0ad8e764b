"""Symbolic tensor sizes.

A :class:`Dim` is an integer coefficient times a sorted product of atoms, so ``H * D`` and
``D * H`` compare equal and ``(H * D) // H`` simplifies to ``D``. Atoms are :class:`Symbol`
(a named size: ``B``, ``self.head_dim``, or an unknown ``?``) or :class:`Quotient` (a floor
division that does not simplify). Two symbols are the same size only if they are the same
object: equal names from different places stay apart.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

_serials = itertools.count(1)


@dataclass(frozen=True)
class Symbol:
    """A named size; identity is the serial number, the name is for people."""

    name: str
    serial: int

    @staticmethod
    def fresh(name: str) -> Symbol:
        return Symbol(name, next(_serials))

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Quotient:
    """``numerator // denominator`` that does not divide symbolically."""

    numerator: Dim
    denominator: Dim

    def __str__(self) -> str:
        return f"{_parenthesised(self.numerator)}//{_parenthesised(self.denominator)}"


Atom = Symbol | Quotient


def _atom_key(atom: Atom) -> tuple[int, str, int]:
    if isinstance(atom, Symbol):
        return (0, atom.name, atom.serial)
    return (1, str(atom), 0)


@dataclass(frozen=True)
class Dim:
    """``coefficient * factors[0] * factors[1] * …`` with factors kept sorted."""

    coefficient: int
    factors: tuple[Atom, ...] = ()

    @staticmethod
    def constant(value: int) -> Dim:
        return Dim(value)

    @staticmethod
    def symbol(name: str) -> Dim:
        return Dim(1, (Symbol.fresh(name),))

    @staticmethod
    def of(atom: Atom) -> Dim:
        return Dim(1, (atom,))

    @property
    def value(self) -> int | None:
        """The integer, when this size is a literal."""
        return None if self.factors else self.coefficient

    def __mul__(self, other: Dim) -> Dim:
        factors = tuple(sorted(self.factors + other.factors, key=_atom_key))
        return Dim(self.coefficient * other.coefficient, factors)

    def floordiv(self, other: Dim) -> Dim:
        if other.coefficient != 0 and self.coefficient % other.coefficient == 0:
            remaining = list(self.factors)
            for atom in other.factors:
                if atom not in remaining:
                    break
                remaining.remove(atom)
            else:
                return Dim(self.coefficient // other.coefficient, tuple(remaining))
        return Dim.of(Quotient(self, other))

    def __str__(self) -> str:
        parts = [str(atom) for atom in self.factors]
        if self.coefficient != 1 or not parts:
            parts.insert(0, str(self.coefficient))
        return "*".join(parts)


def _parenthesised(dim: Dim) -> str:
    text = str(dim)
    return f"({text})" if "*" in text or "//" in text else text


def product(dims: tuple[Dim, ...] | list[Dim]) -> Dim:
    result = Dim.constant(1)
    for dim in dims:
        result = result * dim
    return result


def substitute(dim: Dim, mapping: dict[Symbol, Dim]) -> Dim:
    """``dim`` with each symbol in ``mapping`` replaced by its size."""
    result = Dim.constant(dim.coefficient)
    for atom in dim.factors:
        if isinstance(atom, Symbol):
            result = result * mapping.get(atom, Dim.of(atom))
        else:
            numerator = substitute(atom.numerator, mapping)
            result = result * numerator.floordiv(substitute(atom.denominator, mapping))
    return result
