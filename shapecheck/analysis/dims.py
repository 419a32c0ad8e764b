"""Symbolic tensor sizes.

A :class:`Dim` is an integer coefficient times a sorted product of atoms, so ``H * D`` and
``D * H`` compare equal and ``(H * D) // H`` simplifies to ``D``. A division that sizes a
tensor is taken to be exact, so ``(E // H) * H`` is ``E`` (a view would fail otherwise;
SC502 checks the assumption where the code makes it). Atoms are :class:`Symbol`
(a named size: ``B``, ``self.head_dim``, a sum ``past+n``, or an unknown ``?``) or
:class:`Quotient` (a floor division that does not simplify). Two symbols are the same size
only if they are the same object: equal names from different places stay apart.

Three kinds of size, by what is known of how they compare with others:

- **named** (``B``, ``self.head_dim``, ``3*E``): sizes the code names. Rules take two of them
  for different sizes unless they are the same symbol (the project's long-standing choice:
  code that names two sizes apart means two sizes).
- **unnamed** (``hidden_states.shape[0]``): a size a tensor has though the code never names
  it, axis i of a parameter as the call received it (jaxtyping's named axes, read off the
  code). Equal to itself wherever it flows, and known (``--coverage`` counts it), but of
  *unknown relation* to every other size: a key's length and the query's, ``hidden_states``'
  batch and ``attention_mask``'s, may be equal at run time. No rule or op concludes that it
  differs from another size (:attr:`Dim.unrelated`), except by arithmetic
  (:func:`provably_different`: ``2*n`` is not ``n``).
- **unknown** (``?``): nothing is known; each is a size of its own, equal to nothing.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import field

from shapecheck.record import record, replace

_serials = itertools.count(1)


@record
class Symbol:
    """A named size; identity is the serial number, the name is for people."""

    name: str
    serial: int
    unnamed: bool = field(default=False, compare=False)
    """A size no code names (see ``Dim.unnamed``); its name says where it comes from
    (``hidden_states.shape[0]``). The one field that changes: :func:`named_by_code` clears it."""
    nameable: bool = field(default=False, compare=False)
    """An unnamed size an unpacking may name (see ``Dim.unnamed``)."""

    @staticmethod
    def fresh(name: str) -> Symbol:
        return Symbol(name, next(_serials))

    def __str__(self) -> str:
        return self.name


@record
class Quotient:
    """``numerator // denominator`` that does not divide symbolically.

    ``origin`` is the expression that divided (for SC502), ``label`` a name to show it by
    (``self.head_dim``); neither takes part in equality.
    """

    numerator: Dim
    denominator: Dim
    origin: object = field(default=None, compare=False)
    label: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.label:
            return self.label
        return f"{_parenthesised(self.numerator)}//{_parenthesised(self.denominator)}"


Atom = Symbol | Quotient


def _atom_key(atom: Atom) -> tuple[int, str, int]:
    if isinstance(atom, Symbol):
        return (0, atom.name, atom.serial)
    return (1, str(atom), 0)


@record
class Dim:
    """``coefficient * factors[0] * factors[1] * …`` with factors kept sorted.

    ``assumes`` lists the divisions this size took to be exact on the way (``H * (E // H)``
    is ``E`` assuming ``E // H`` exact); it takes no part in equality.
    """

    coefficient: int
    factors: tuple[Atom, ...] = ()
    assumes: frozenset[Quotient] = field(default=frozenset(), compare=False)

    @staticmethod  # one record per literal: every ``1``, ``-1``, ``2`` the code holds
    @functools.lru_cache(maxsize=1024)
    def constant(value: int) -> Dim:
        return Dim(value)

    @staticmethod
    def symbol(name: str) -> Dim:
        return Dim(1, (Symbol.fresh(name),))

    @staticmethod
    def of(atom: Atom) -> Dim:
        return Dim(1, (atom,))

    @staticmethod
    def unnamed(axis: str, *, nameable: bool) -> Dim:
        """The size of ``axis`` (``x.shape[1]``) of a tensor as a call received it, where no
        code names it. ``nameable``: an axis a use showed to exist (``x.permute(0, 2, 1,
        3)``: four axes; a rank test; all a caller tells is the rank, or callers name it
        apart), which an unpacking later names: this very size, named from then on, as it
        would be had the unpacking come first. Otherwise a size nobody knew (a caller's
        ``?``, a concatenation's length beside known ones): it stays unnamed where the code
        unpacks it, as it stayed unknown before it had a symbol of its own."""
        return Dim(1, (Symbol(axis, next(_serials), unnamed=True, nameable=nameable),))

    @property
    def single_symbol(self) -> Symbol | None:
        """The one symbol this size is (``B``, ``x.shape[1]``, ``?``), no product, multiple or
        quotient of it; ``None`` otherwise."""
        if self.coefficient == 1 and len(self.factors) == 1:
            atom = self.factors[0]
            return atom if isinstance(atom, Symbol) else None
        return None

    @property
    def is_unnamed(self) -> bool:
        """Just one unnamed size (``x.shape[1]``), no product or sum of it."""
        symbol = self.single_symbol
        return symbol is not None and symbol.unnamed

    @property
    def is_nameable(self) -> bool:
        """One unnamed size an unpacking may name (an axis a use showed to exist)."""
        symbol = self.single_symbol
        return symbol is not None and symbol.unnamed and symbol.nameable

    @property
    def value(self) -> int | None:
        """The integer, when this size is a literal."""
        return None if self.factors else self.coefficient

    def __mul__(self, other: Dim) -> Dim:
        if other.coefficient == 1 and not other.factors and not other.assumes:
            return self
        if self.coefficient == 1 and not self.factors and not self.assumes:
            return other  # (a product starts from 1)
        coefficient = self.coefficient * other.coefficient
        factors = [*self.factors, *other.factors]
        assumes = set(self.assumes | other.assumes)
        # (n // d) * d == n: a division that sizes a tensor is taken to be exact
        cancelled = True
        while cancelled:
            cancelled = False
            for atom in factors:
                if isinstance(atom, Quotient):
                    rest = list(factors)
                    rest.remove(atom)
                    remaining = _without(rest, coefficient, atom.denominator)
                    if remaining is not None:
                        rest, coefficient = remaining
                        factors = [*rest, *atom.numerator.factors]
                        coefficient *= atom.numerator.coefficient
                        assumes.add(atom)
                        cancelled = True
                        break
        return Dim(coefficient, tuple(sorted(factors, key=_atom_key)), frozenset(assumes))

    def __add__(self, other: Dim) -> Dim:
        """The sum: like terms added up (``n + n`` is ``2*n``), a difference and what it took
        (``(n-k) + k`` is ``n``), otherwise a size of its own, named ``(a+b)``, the same for
        every sum of the same two sizes; unknown (``?``) if either is."""
        assumed = self.assumes | other.assumes
        if self.factors == other.factors:  # 2 * (d//2) is d, taking the halving to be exact
            total = Dim.constant(self.coefficient + other.coefficient) * Dim(1, self.factors)
            return replace(total, assumes=total.assumes | assumed)
        for difference, term in ((self, other), (other, self)):
            single = difference.coefficient == 1 and len(difference.factors) == 1
            operands = _OPERANDS.get(difference.factors[0]) if single else None
            if operands is not None and operands[1] == term:  # (n-k) + k is n
                return replace(operands[0], assumes=operands[0].assumes | assumed)
        if self.has_unknown or other.has_unknown:
            return Dim.symbol("?")
        terms = tuple(sorted((self, other), key=_term_key))
        if terms not in _SUMS:
            _SUMS[terms] = Symbol.fresh(f"({'+'.join(_parenthesised(t) for t in terms)})")
            _TERMS[_SUMS[terms]] = terms
        return Dim(1, (_SUMS[terms],), assumed)

    def __sub__(self, other: Dim) -> Dim:
        """The difference where sizes name it: like terms (``3*n - n`` is ``2*n``), a sum
        less one of its terms (``(start+n) - start`` is ``n``), a size less a part of it
        (``d - d//2`` is ``d//2``, taking the halving to be exact); unknown (``?``)
        otherwise, as no size names it, but of two named sizes an unknown that adding ``b``
        makes ``a`` again, the same for every such difference (the tokens after a prefix,
        ``x[:, n:]``, and the prefix put back in front)."""
        assumed = self.assumes | other.assumes
        if other.value == 0:
            return replace(self, assumes=assumed)
        if self.factors == other.factors:
            coefficient = self.coefficient - other.coefficient
            return Dim(coefficient, self.factors if coefficient else (), assumed)
        terms = _TERMS.get(self.factors[0]) if len(self.factors) == 1 else None
        if terms is not None and self.coefficient == 1 and other in terms:
            return replace(terms[1] if terms[0] == other else terms[0], assumes=assumed)
        parts = self.floordiv(other)  # how many times ``other`` fits
        count = parts.value
        whole = other * parts
        if count is not None and count > 1 and whole == self:
            rest = other * Dim.constant(count - 1)
            return replace(rest, assumes=rest.assumes | whole.assumes | parts.assumes | assumed)
        if self.is_named and other.is_named:
            operands = (self, other)
            if operands not in _DIFFERENCES:
                _DIFFERENCES[operands] = Symbol.fresh("?")
                _OPERANDS[_DIFFERENCES[operands]] = operands
            return Dim(1, (_DIFFERENCES[operands],), assumed)
        return Dim.symbol("?")

    @property
    def is_named(self) -> bool:
        """A size the code names: no unknown (``?``) or unnamed part, and not a bare
        literal."""
        return bool(self.factors) and not self.unrelated

    @property
    def has_unknown(self) -> bool:
        """Some part is unknown (``?``): the size is not known."""
        return any(_is_unknown(atom) for atom in self.factors)

    @property
    def has_unnamed(self) -> bool:
        """Some part is a size no code names (``x.shape[0]``): known, of unknown relation."""
        return any(_is_unnamed(atom) for atom in self.factors)

    @property
    def unrelated(self) -> bool:
        """Nothing says how this size compares with any size but itself: some part of it is
        unknown or unnamed. What concludes that two sizes differ asks this first."""
        return any(_is_unknown(atom) or _is_unnamed(atom) for atom in self.factors)

    def floordiv(self, other: Dim, origin: object = None) -> Dim:
        dividend, divisor = self, other
        assumed = set(self.assumes | other.assumes)
        # x // (a // b) is (x * b) // a, taking a // b as exact
        while divisor.quotients:
            quotient = divisor.quotients[0]
            rest = list(divisor.factors)
            rest.remove(quotient)
            divisor = Dim(divisor.coefficient, tuple(rest)) * quotient.numerator
            dividend = dividend * quotient.denominator
            assumed.add(quotient)
        assumed |= dividend.assumes | divisor.assumes
        remaining = _without(list(dividend.factors), dividend.coefficient, divisor)
        shared = None if remaining is not None else _sharing_quotient(dividend, divisor)
        if shared is not None:
            # (a // b) * x // y is (a * x) // (b * y), taking a // b as exact, where a and y
            # share a size that then cancels: (E // 2) // (E // H) is H // 2
            rest = list(dividend.factors)
            rest.remove(shared)
            dividend = Dim(dividend.coefficient, tuple(rest)) * shared.numerator
            divisor = divisor * shared.denominator
            remaining = _without(list(dividend.factors), dividend.coefficient, divisor)
        if remaining is not None:
            factors, coefficient = remaining
            return Dim(coefficient, tuple(factors), frozenset(assumed))
        # cancel what both share: (B*L*E) // (B*L*H) is E // H
        numerator, denominator = list(dividend.factors), []
        for atom in divisor.factors:
            if atom in numerator:
                numerator.remove(atom)
            else:
                denominator.append(atom)
        common = math.gcd(dividend.coefficient, divisor.coefficient) or 1
        top = Dim(dividend.coefficient // common, tuple(numerator))
        bottom = Dim(divisor.coefficient // common, tuple(denominator))
        if bottom == Dim.constant(1):
            return Dim(top.coefficient, top.factors, frozenset(assumed))
        return Dim(1, (Quotient(top, bottom, origin),), frozenset(assumed))

    @property
    def quotients(self) -> tuple[Quotient, ...]:
        return tuple(atom for atom in self.factors if isinstance(atom, Quotient))

    def __str__(self) -> str:
        parts = [str(atom) for atom in self.factors]
        if self.coefficient != 1 or not parts:
            parts.insert(0, written(self.coefficient))
        return "*".join(parts)


_SUMS: dict[tuple[Dim, ...], Symbol] = {}
"""Each sum of two sizes made so far -> the size it is (so that equal sums compare equal)."""
_TERMS: dict[Atom, tuple[Dim, ...]] = {}
"""The other way: each sum -> its two terms (so that a sum less a term is the other)."""
_DIFFERENCES: dict[tuple[Dim, Dim], Symbol] = {}
"""Each difference of two named sizes made so far -> the unknown it is."""
_OPERANDS: dict[Atom, tuple[Dim, Dim]] = {}
"""The other way: each difference -> what it was taken from and what was taken."""


_BROADCASTS: dict[frozenset[Dim], Symbol] = {}
"""Each broadcast of sizes of unknown relation made so far -> the size it is."""
_BROADCAST_OF: dict[Symbol, frozenset[Dim]] = {}
"""The other way: each such broadcast -> the sizes it is the broadcast of."""


def broadcast(first: Dim, second: Dim) -> Dim:
    """The size broadcasting gives two sizes that may be equal (the queries' batch
    ``query.shape[0]`` and the keys' ``key.shape[0]``, which two callers hand apart): PyTorch
    needs them equal or one of them 1, so it is the larger, ``max(a, b)``: one unnamed size,
    the same for the same sizes in any order, and for its broadcast with any of them again
    (the weights' batch with the values')."""
    parts = _broadcast_parts(first) | _broadcast_parts(second)
    if len(parts) == 1:
        return first
    if parts not in _BROADCASTS:
        written = ", ".join(sorted(str(part) for part in parts))
        _BROADCASTS[parts] = Symbol(f"max({written})", next(_serials), unnamed=True)
        _BROADCAST_OF[_BROADCASTS[parts]] = parts
    return Dim.of(_BROADCASTS[parts])


def _broadcast_parts(size: Dim) -> frozenset[Dim]:
    symbol = size.single_symbol
    return _BROADCAST_OF.get(symbol, frozenset((size,))) if symbol else frozenset((size,))


def _term_key(term: Dim) -> tuple[list[tuple[int, str, int]], int]:
    return ([_atom_key(atom) for atom in term.factors], term.coefficient)


def written(number: int) -> str:
    """``number`` in decimal; past the digits Python writes out (4,300 by default), how many
    digits it has."""
    try:
        return str(number)
    except ValueError:
        return f"<a {round(number.bit_length() * math.log10(2))}-digit number>"


def _sharing_quotient(dividend: Dim, divisor: Dim) -> Quotient | None:
    """A quotient among ``dividend``'s factors whose numerator shares a size with ``divisor``."""
    return next(
        (q for q in dividend.quotients if set(q.numerator.factors) & set(divisor.factors)), None
    )


def _without(factors: list[Atom], coefficient: int, divisor: Dim) -> tuple[list[Atom], int] | None:
    """``factors * coefficient`` divided exactly by ``divisor``, or ``None``."""
    if divisor.coefficient == 0 or coefficient % divisor.coefficient != 0:
        return None
    remaining = list(factors)
    for atom in divisor.factors:
        if atom not in remaining:
            return None
        remaining.remove(atom)
    return remaining, coefficient // divisor.coefficient


def _is_unknown(atom: Atom) -> bool:
    if isinstance(atom, Symbol):
        return atom.name == "?"
    return atom.numerator.has_unknown or atom.denominator.has_unknown


def _is_unnamed(atom: Atom) -> bool:
    """An unnamed size, or a sum or quotient with one (they compare no better than it)."""
    if isinstance(atom, Symbol):
        if atom.unnamed:
            return True
        terms = _TERMS.get(atom)
        return terms is not None and any(term.has_unnamed for term in terms)
    return atom.numerator.has_unnamed or atom.denominator.has_unnamed


def named_by_code(size: Dim) -> None:
    """The code names ``size`` (``B, L, E = x.shape``): an unnamed size it may name (see
    ``Dim.unnamed``) is a named one from now on, in every fact that holds it (``self.q(x)``,
    made before the unpacking, too): one axis, one symbol, which rules compare as they
    compare the sizes code names. It keeps the name it is shown by (``x.shape[0]``):
    equality, hashing and the order of factors rest on it."""
    if size.is_nameable:
        object.__setattr__(size.factors[0], "unnamed", False)


def _parenthesised(dim: Dim) -> str:
    text = str(dim)
    return f"({text})" if "*" in text or "//" in text else text


def product(dims: tuple[Dim, ...] | list[Dim]) -> Dim:
    result = Dim.constant(1)
    for dim in dims:
        result = result * dim
    return result


def symbols_in(dim: Dim) -> set[Symbol]:
    """The symbols a size is made of (``n_embd`` and ``n_head`` in ``n_embd // n_head``)."""
    found: set[Symbol] = set()
    dims = [dim]
    while dims:
        for atom in dims.pop().factors:
            if isinstance(atom, Quotient):
                dims += [atom.numerator, atom.denominator]
            else:
                found.add(atom)
    return found


def substitute(dim: Dim, mapping: dict[Symbol, Dim]) -> Dim:
    """``dim`` with each symbol in ``mapping`` replaced by its size."""
    assumed = {_substitute_quotient(quotient, mapping) for quotient in dim.assumes}
    result = Dim(dim.coefficient, (), frozenset(q for q in assumed if q is not None))
    for atom in dim.factors:
        if isinstance(atom, Symbol):
            result = result * mapping.get(atom, Dim.of(atom))
        else:
            quotient = _substitute_quotient(atom, mapping)
            result = result * (Dim.of(quotient) if quotient else _exact(atom, mapping))
    return result


def _substitute_quotient(atom: Quotient, mapping: dict[Symbol, Dim]) -> Quotient | None:
    """The quotient with its sizes substituted (``None`` if it now divides exactly)."""
    divided = substitute(atom.numerator, mapping).floordiv(
        substitute(atom.denominator, mapping), atom.origin
    )
    if len(divided.quotients) == 1 and len(divided.factors) == 1 and divided.coefficient == 1:
        return replace(divided.quotients[0], label=atom.label)
    return None


def _exact(atom: Quotient, mapping: dict[Symbol, Dim]) -> Dim:
    return substitute(atom.numerator, mapping).floordiv(substitute(atom.denominator, mapping))


def format_shape(shape: tuple[Dim, ...] | None) -> str:
    """``[B, L, self.num_heads*self.head_dim]``; ``?`` for what is not known."""
    if shape is None:
        return "?"
    return "[" + ", ".join(str(dim) for dim in shape) + "]"


def provably_different(a: Dim, b: Dim) -> bool:
    """Sizes that cannot be equal: two different literals, or one size (named or unnamed)
    times two different literals (``E`` and ``3*E``; ``x.shape[1]`` and ``2*x.shape[1]``)."""
    if a.has_unknown or b.has_unknown:
        return False
    return a.factors == b.factors and a.coefficient != b.coefficient
