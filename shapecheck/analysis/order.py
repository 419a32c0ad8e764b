"""The order in which a module's functions are interpreted: callers before what they call.

A function learns its parameters from what its callers in the module hand it (the call sites
:class:`~shapecheck.analysis.interpreter.ModuleContext` collects). Interpreted after all of
them, it is interpreted once, knowing what each hands it; interpreted before one of them, it
is interpreted again once that caller has run (``analyse``). Which function calls which is
known for certain only by interpreting them, so the order is read from the names the code
mentions, which say who *may* call whom:

- a function or method named ``n`` comes after every function that mentions ``n``
  (``n(x)``, ``self.n(x)``, ``map(self.n, xs)``, ``partial(n, ...)``);
- a layer's ``forward`` (or ``__call__``) comes after the methods of every class that
  mentions the layer's class (``self.attn = Attention(...)`` in ``__init__``,
  ``self.attn(x)`` in ``forward``), and after every function that mentions it.

Where calls go round in a cycle (a recursive helper, classes that build each other), the
function written first goes first. Each graph node stands for a function, a name or a class,
so the graph grows with what the code mentions, not with its product by the functions it
names (every method calling ``super().forward`` would otherwise call every ``forward``).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from shapecheck.analysis.facts import FunctionNode

LAYER_CALLS = frozenset({"forward", "__call__"})
"""Methods a call of an instance runs (nanoGPT's ``self.attn(x)``)."""


def callers_first(functions: Sequence[tuple[FunctionNode, str]], text: str) -> list[int]:
    """The indexes of ``functions`` (each a node and its qualified name: ``f``,
    ``Class.method``, ``Outer.Inner.method``) of the module whose code is ``text``, callers
    first (see the module's docstring); otherwise in the order given."""
    graph = _CallGraph(len(functions))
    lines = _words_by_line(text)
    mentioned = [_mentions(function, lines) for function, _ in functions]
    callees: dict[str, list[int]] = {}
    owners: dict[str, set[str]] = {}
    for index, (_, qualified) in enumerate(functions):
        owner, _, name = qualified.rpartition(".")
        if name != "__init__":  # (built, never called: every subclass mentions it)
            callees.setdefault(name, []).append(index)
        if owner:
            owners.setdefault(owner, set()).update(mentioned[index])
            if name in LAYER_CALLS:
                graph.edge(graph.node("class", _simple(owner)), index)
    for name, indexes in callees.items():
        named = graph.node("name", name)
        for index in indexes:
            graph.edge(named, index)
    layers = graph.names("class")  # (all of them by now: what follows only looks them up)
    for index, (_, qualified) in enumerate(functions):
        owner, _, own = qualified.rpartition(".")
        for name in mentioned[index] & callees.keys():
            if name != own:  # (a recursive call tells nothing)
                graph.edge(index, graph.node("name", name))
        if owner:
            graph.edge(index, graph.node("code", owner))
        else:
            for name in mentioned[index] & layers:
                graph.edge(index, graph.node("class", name))
    for owner, names in owners.items():
        code = graph.node("code", owner)
        for name in names & layers:
            if name != _simple(owner):
                graph.edge(code, graph.node("class", name))
    return graph.callers_first()


def _simple(qualified: str) -> str:
    return qualified.rpartition(".")[2]


_WORDS_ONLY = bytes(
    byte if chr(byte).isalnum() or byte == ord("_") or byte == ord("\n") or byte >= 128 else 32
    for byte in range(256)
)


def _words_by_line(text: str) -> list[bytes]:
    """Each line of ``text`` (as ``ast`` counts lines) with every character that cannot be
    part of a name blanked: a table's translation and a split, not a walk of the tree or a
    regular expression (each cost more than the order saves)."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data.translate(_WORDS_ONLY).split(b"\n")


def _mentions(function: FunctionNode, lines: list[bytes]) -> set[str]:
    """Every word of the function's code (its nested functions too): the names and attribute
    names it reads, and a few words more (strings, comments)."""
    end = function.end_lineno or function.lineno
    code = b" ".join(lines[function.lineno - 1 : end]).decode("utf-8", "surrogatepass")
    return set(code.split())


class _CallGraph:
    """Nodes ``0 .. functions-1`` are the functions; the others stand for a name or a class
    (``kind``, ``name``) and pass the order on."""

    def __init__(self, functions: int) -> None:
        self.functions = functions
        self.successors: list[list[int]] = [[] for _ in range(functions)]
        self.named: dict[tuple[str, str], int] = {}

    def node(self, kind: str, name: str) -> int:
        key = (kind, name)
        found = self.named.get(key)
        if found is None:
            found = self.named[key] = len(self.successors)
            self.successors.append([])
        return found

    def names(self, kind: str) -> set[str]:
        """The names of the nodes of ``kind``."""
        return {name for each, name in self.named if each == kind}

    def edge(self, before: int, after: int) -> None:
        self.successors[before].append(after)

    def callers_first(self) -> list[int]:
        """Kahn's order, the function written first among those ready; in a cycle, the first
        function not yet placed goes as if ready."""
        waiting = [0] * len(self.successors)
        for successors in self.successors:
            for successor in successors:
                waiting[successor] += 1
        ready = [(self._priority(node), node) for node, count in enumerate(waiting) if not count]
        heapq.heapify(ready)
        placed = [False] * len(self.successors)
        order: list[int] = []
        first_unplaced = 0
        while len(order) < self.functions:
            if not ready:  # a cycle
                while placed[first_unplaced]:
                    first_unplaced += 1
                ready.append((first_unplaced, first_unplaced))
            _, node = heapq.heappop(ready)
            if placed[node]:
                continue
            placed[node] = True
            if node < self.functions:
                order.append(node)
            for successor in self.successors[node]:
                waiting[successor] -= 1
                if not waiting[successor] and not placed[successor]:
                    heapq.heappush(ready, (self._priority(successor), successor))
        return order

    def _priority(self, node: int) -> int:
        return node if node < self.functions else -1  # a name or class passes on at once
