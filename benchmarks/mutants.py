"""Recall on real code: seed one known bug at a time into real attention code, count the finds.

    python benchmarks/mutants.py [--corpus timm|transformers|x-transformers]... [--limit 60]
                                 [--seed 0] [--corpora DIR] [--show-missed OPERATOR]

The corpora are the wheels ``benchmarks/repository.py`` downloads and unpacks (timm 1.0.31,
transformers 5.23.0, x-transformers 2.31.10). Each operator below finds the sites in a file
where its bug can be written, and writes it, one site per mutant. Every mutant is a real bug
by construction: a site qualifies only where the syntax around it proves that the rewrite
breaks the code (the condition is in each operator's docstring), the mutant must parse, and
its tree must differ from the original's. A mutant is *found* when shapecheck reports more
findings of the operator's codes on the mutant than on the original file. Up to ``--limit``
mutants per operator and corpus are drawn at random (``--seed``) from all the sites.

Prints, per operator and corpus: sites, mutants checked, found, recall; then per operator.
"""

from __future__ import annotations

import argparse
import ast
import copy
import itertools
import random
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from repository import CORPORA, prepare

from shapecheck.analysis import analyse
from shapecheck.analysis.imports import call_name
from shapecheck.coverage import percent
from shapecheck.rule import Rule, SuppressionRule, all_rules
from shapecheck.source import Lines


@dataclass(frozen=True)
class Edit:
    """Replace the text from ``start`` to ``end`` (character offsets) with ``text``."""

    start: int
    end: int
    text: str


class Source:
    """A file's text and its parse, with character offsets of nodes."""

    def __init__(self, text: str, module: ast.Module) -> None:
        self.text = text
        self.module = module
        self.lines = Lines(text)
        self.starts = list(itertools.accumulate(map(len, self.lines.lines), initial=0))

    def start(self, node: ast.AST) -> int:
        line, column, _, _ = self.lines.span(node)
        return self.starts[line - 1] + column

    def end(self, node: ast.AST) -> int:
        _, _, line, column = self.lines.span(node)
        return self.starts[line - 1] + column

    def code(self, node: ast.AST) -> str:
        return self.text[self.start(node) : self.end(node)]

    def dot(self, call: ast.Call) -> int:
        """Where ``.name`` of ``receiver.name(...)`` starts (after any closing parenthesis)."""
        assert isinstance(call.func, ast.Attribute)
        name_start = self.end(call.func) - len(call.func.attr)
        return self.text.rindex(".", 0, name_start)


def _method(node: ast.AST, *names: str) -> ast.Call | None:
    """``node`` as a call ``receiver.name(...)`` of one of ``names``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    ):
        return node
    return None


def _ints(call: ast.Call) -> tuple[int, ...] | None:
    values = []
    for argument in call.args:
        value = argument
        sign = 1
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            sign, value = -1, value.operand
        if not (isinstance(value, ast.Constant) and type(value.value) is int):
            return None
        values.append(sign * value.value)
    return tuple(values) if not call.keywords else None


HEAD_SWAPS = {(1, 2), (2, 1)}
HEAD_PERMUTATION = (0, 2, 1, 3)


def _swaps_heads(node: ast.AST) -> ast.Call | None:
    """``x.transpose(1, 2)`` or ``x.permute(0, 2, 1, 3)``: the head axis moved."""
    call = _method(node, "transpose", "permute")
    if call is None:
        return None
    axes = _ints(call)
    if call_name(call) == "transpose" and axes in HEAD_SWAPS:
        return call
    return call if axes == HEAD_PERMUTATION else None


def _merges(view: ast.Call) -> bool:
    """A view of at most three sizes, or sizes spliced in (``*input_shape, -1``): after a head
    swap of a 4-D tensor, it merges axes that the swap left apart."""
    return (
        bool(view.args)
        and (len(view.args) <= 3 or any(isinstance(a, ast.Starred) for a in view.args))
        and not view.keywords
    )


def _functions(module: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


_PRODUCTS = ("matmul", "bmm", "einsum", "baddbmm")


def _is_product(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True
    return isinstance(node, ast.Call) and _name_of(node.func) in _PRODUCTS


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _calls_softmax(function: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Call) and _name_of(node.func) == "softmax"
        for node in ast.walk(function)
    )


def _has_product(function: ast.AST) -> bool:
    return any(_is_product(node) for node in ast.walk(function))


def _heads_split(function: ast.AST, source: Source) -> bool:
    """The function works on 4-D per-head tensors: it splits or swaps a head axis."""
    return any(_swaps_heads(node) for node in ast.walk(function)) or bool(
        _HEADS.search(source.code(function))
    )


_HEADS = re.compile(r"\bnum_heads\b|\bn_heads?\b|\bheads\b")


def _folds_heads_into_batch(function: ast.AST, source: Source) -> bool:
    """A view into three sizes, after a stack of q, k and v (a leading literal), the first the
    heads times a batch (``reshape(3, B * self.num_heads, N, -1)``): the per-head tensors are
    3-D there, where ``transpose(1, 2)`` swaps the last two."""
    for node in ast.walk(function):
        view = _method(node, "view", "reshape")
        sizes = list(view.args) if view is not None else []
        if sizes and isinstance(sizes[0], ast.Constant):
            sizes = sizes[1:]  # the stack of q, k and v
        if len(sizes) == 3 and _batch_times_heads(sizes[0], source):
            return True
    return False


def _batch_times_heads(size: ast.expr, source: Source) -> bool:
    """``B * self.num_heads``: the heads multiplied by a name that is no width or count."""
    if not isinstance(size, ast.BinOp) or not isinstance(size.op, ast.Mult):
        return False
    factors = [source.code(size.left), source.code(size.right)]
    heads = [factor for factor in factors if _HEADS.search(factor)]
    others = [factor for factor in factors if factor not in heads]
    return len(heads) == 1 and len(others) == 1 and others[0].isidentifier()


# --- operators -----------------------------------------------------------------------------


def drop_contiguous(source: Source) -> Iterator[Edit]:
    """``x.transpose(1, 2).contiguous().view(B, L, D)`` -> without ``.contiguous()``: a view
    merging axes a head swap left apart raises 'view size is not compatible'."""
    for node in ast.walk(source.module):
        view = _method(node, "view")
        if view is None or not _merges(view):
            continue
        contiguous = _method(view.func.value, "contiguous")  # type: ignore[attr-defined]
        if contiguous is None or contiguous.args or contiguous.keywords:
            continue
        swapped = _swaps_heads(contiguous.func.value)  # type: ignore[attr-defined]
        if swapped is not None:
            yield Edit(source.dot(contiguous), source.end(contiguous), "")


_KEY_AXES = {(-2, -1), (-1, -2), (2, 3), (3, 2)}


def key_transpose_axes(source: Source) -> Iterator[Edit]:
    """``q @ k.transpose(-2, -1)`` -> ``k.transpose(1, 2)`` where the product is attention
    scores (a softmax reads it, directly or through the name it is assigned to) in a function on
    4-D per-head tensors (``transpose(2, 3)`` written, or heads split there and never folded
    into the batch): the scores no longer contract the feature axis."""
    for function in _functions(source.module):
        four_d = _heads_split(function, source) and not _folds_heads_into_batch(function, source)
        scores = _softmaxed(function)
        for node in ast.walk(function):
            operands: list[ast.expr] = []
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                operands = [node.right]
            elif isinstance(node, ast.Call) and _name_of(node.func) == "matmul":
                function_form = (
                    isinstance(node.func, ast.Attribute) and _name_of(node.func.value) == "torch"
                )
                operands = node.args[1:] if function_form else node.args[:1]
            if not operands or node not in scores:
                continue
            for operand in operands:
                transpose = _method(operand, "transpose")
                axes = _ints(transpose) if transpose is not None else None
                if transpose is None or axes not in _KEY_AXES:
                    continue
                if four_d or axes in {(2, 3), (3, 2)}:
                    first, last = transpose.args[0], transpose.args[-1]
                    yield Edit(source.start(first), source.end(last), "1, 2")


def _softmaxed(function: ast.AST) -> set[ast.AST]:
    """The nodes a softmax reads in ``function``: inside its arguments or receiver, or in the
    value assigned to a name it reads."""
    names: set[str] = set()
    read: set[ast.AST] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and _name_of(node.func) == "softmax":
            inputs = [*node.args, *(k.value for k in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                inputs.append(node.func.value)
            for given in inputs:
                read.update(ast.walk(given))
                names.update(n.id for n in ast.walk(given) if isinstance(n, ast.Name))
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id in names for target in node.targets
        ):
            read.update(ast.walk(node.value))
    return read


def drop_scale(source: Source) -> Iterator[Edit]:
    """``(q @ kᵀ) * scale`` or ``/ math.sqrt(d)`` in a function that takes a softmax ->
    the product alone: the scores lose their only 1/sqrt(d_k). Left out: products that are
    no scores (see ``_not_scores``)."""
    for function in _functions(source.module):
        if not _calls_softmax(function):
            continue
        for node in ast.walk(function):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div)):
                continue
            sides = [node.left] if isinstance(node.op, ast.Div) else [node.left, node.right]
            for product in sides:
                other = node.right if product is node.left else node.left
                if _is_product(product) and not _is_product(other) and not _not_scores(product):
                    yield Edit(source.start(node), source.end(node), f"({source.code(product)})")


def _not_scores(product: ast.AST) -> bool:
    """An einsum with fewer than two output axes, which cannot be attention scores (they have
    a query and a key axis), so its scale is no attention scale: ConViT's mean attention
    distance, ``einsum('nm,hnm->h', distances, attn_map) / N``."""
    if not isinstance(product, ast.Call):
        return False
    equation = product.args[0] if _name_of(product.func) == "einsum" and product.args else None
    if isinstance(equation, ast.Constant) and isinstance(equation.value, str):
        output = equation.value.partition("->")[2]
        return "->" in equation.value and len(output.replace(" ", "")) < 2
    return False


def softmax_dim(source: Source) -> Iterator[Edit]:
    """``softmax(scores, dim=-1)`` -> ``dim=1`` where ``scores`` is a name the function assigns
    from a matrix product (``q @ kᵀ``, ``matmul``, ``bmm``, ``einsum``), in a function on
    per-head or batched tensors: the softmax normalises heads or queries, not keys."""
    for function in _functions(source.module):
        products = {
            target.id
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            and any(_is_product(part) for part in ast.walk(node.value))
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and _name_of(node.func) == "softmax"):
                continue
            method = isinstance(node.func, ast.Attribute) and _name_of(node.func.value) not in (
                "F",
                "functional",
                "torch",
            )
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            scores = receiver if method else (node.args[0] if node.args else None)
            if not (isinstance(scores, ast.Name) and scores.id in products):
                continue
            dims = [keyword.value for keyword in node.keywords if keyword.arg == "dim"]
            positional = node.args[0 if method else 1 :]
            if not dims and positional:
                dims = [positional[0]]
            if len(dims) == 1 and source.code(dims[0]).replace(" ", "") == "-1":
                yield Edit(source.start(dims[0]), source.end(dims[0]), "1")


_INFINITE_FILLS = re.compile(
    r"^(-float\(['\"]inf['\"]\)|float\(['\"]-inf['\"]\)|-(math|torch|np|numpy)\.inf)$"
)


def fill_overflow(source: Source) -> Iterator[Edit]:
    """``masked_fill(mask, torch.finfo(x.dtype).min)`` (or ``-inf``) -> ``-1e9``: float16
    cannot hold it (masked_fill raises; arithmetic gives -inf). Left out: a fill of a tensor
    the code made float32 or float64 itself (see ``_wide_names``), which holds -1e9 whatever
    the input's dtype: timm's ZLPR loss then computes the same losses, bit for bit, from
    float16, bfloat16, float32 and float64 logits (its log-sum-exp adds a zero logit, so -1e9
    and -inf both give exp() = 0); Mamba2's segment sums of ``A.to(hidden_states.dtype) *
    dt.float()`` after ``hidden_states = hidden_states.float()``; gated delta rules' decays of
    ``[x.to(torch.float32) for x in (query, key, value, beta, g)]``."""
    wide, keepers = _wide_names(source.module)
    for node in ast.walk(source.module):
        call = _method(node, "masked_fill", "masked_fill_")
        if call is None or len(call.args) != 2:
            continue
        assert isinstance(call.func, ast.Attribute)
        if call in wide and _wide(call.func.value, wide[call], keepers):
            continue
        value = call.args[1]
        written = source.code(value).replace(" ", "")
        finfo_min = (
            isinstance(value, ast.Attribute)
            and value.attr == "min"
            and isinstance(value.value, ast.Call)
            and _name_of(value.value.func) == "finfo"
        )
        if finfo_min or _INFINITE_FILLS.match(written):
            yield Edit(source.start(value), source.end(value), "-1e9")


_WIDE_DTYPES = frozenset({"float32", "float64", "float", "double"})
_KEEPS_DTYPE = frozenset(
    {
        "reshape", "view", "unsqueeze", "squeeze", "transpose", "permute", "contiguous",
        "expand", "repeat", "flatten", "unflatten", "clone", "cumsum", "sum", "mean", "exp",
        "log", "neg", "clamp", "masked_fill", "unbind", "chunk", "split", "repeat_interleave",
    }
)  # fmt: skip
"""Methods whose result has their receiver's dtype."""


def _wide(tensor: ast.expr, wide: set[str], keepers: frozenset[str] = frozenset()) -> bool:
    """Does ``tensor`` hold float32 or float64 by the code's own casts: ``x.float()``,
    ``x.to(torch.float32)``, a name in ``wide``, ops that keep the dtype (``x.exp()``,
    ``torch.exp(x)``, ``F.pad(x, ...)``, a call of one of the module's functions in
    ``keepers``, which return their first argument's dtype), or arithmetic of such tensors
    and numbers (not with a tensor of another dtype: one of no dimensions would not promote
    a float16 one)."""

    def held(node: ast.expr) -> bool:
        return _wide(node, wide, keepers)

    if isinstance(tensor, ast.Name):
        return tensor.id in wide
    if isinstance(tensor, ast.Subscript):
        return held(tensor.value)
    if isinstance(tensor, ast.UnaryOp):
        return held(tensor.operand)
    if isinstance(tensor, ast.BinOp) and not isinstance(tensor.op, ast.MatMult):
        sides = (tensor.left, tensor.right)
        return any(map(held, sides)) and all(held(side) or _number(side) for side in sides)
    if not isinstance(tensor, ast.Call):
        return False
    function = _name_of(tensor.func)
    if isinstance(tensor.func, ast.Name) and function in keepers and tensor.args:
        return held(tensor.args[0])
    if not isinstance(tensor.func, ast.Attribute):
        return False
    method, receiver = tensor.func.attr, tensor.func.value
    if _name_of(receiver) in ("torch", "F", "functional"):  # torch.exp(x), F.pad(x, ...)
        kept = method in _KEEPS_DTYPE or method == "pad"
        return kept and bool(tensor.args) and held(tensor.args[0])
    if method in ("float", "double") and not tensor.args:
        return True
    if method == "to":
        given = [*tensor.args, *(k.value for k in tensor.keywords if k.arg == "dtype")]
        if any(_name_of(argument) in _WIDE_DTYPES for argument in given):
            return True
        if any(_dtype_of_wide(argument, wide) for argument in given):
            return True  # ``.to(x.dtype)`` of an ``x`` that holds float32
        devices = all(
            (_name_of(argument) or "").endswith("device") for argument in tensor.args
        ) and all(keyword.arg in ("device", "non_blocking") for keyword in tensor.keywords)
        return devices and held(receiver)  # ``.to(x.device)`` keeps the dtype
    return method in _KEEPS_DTYPE and held(receiver)


def _number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp):
        return _number(node.operand)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _dtype_of_wide(node: ast.expr, wide: set[str]) -> bool:
    """``x.dtype`` of an ``x`` in ``wide``."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "dtype"
        and isinstance(node.value, ast.Name)
        and node.value.id in wide
    )


def _wide_names(module: ast.Module) -> tuple[dict[ast.AST, set[str]], frozenset[str]]:
    """For each node inside a function, the names that hold float32 or float64 there
    (``_wide``), statement by statement: an assignment of such a tensor adds its name, any
    other removes it, and after an ``if`` (a loop, a ``try``) only what every way through
    holds is left. A parameter of a module-level function holds one where every call of it in
    the module passes one (Mamba2's ``segment_sum(A)``; calls from other files are not seen:
    Hugging Face copies such helpers into each model's file); ``keepers`` are the module's
    functions that return their first argument's dtype."""
    functions = list(_functions(module))
    by_name = {f.name: f for f in functions if f in module.body}
    keepers: frozenset[str] = frozenset()
    while True:  # a keeper may return what another one returns
        found = frozenset(
            name
            for name, function in by_name.items()
            if function.args.args and _returns_first_dtype(function, keepers)
        )
        if found == keepers:
            break
        keepers = found
    handed: dict[ast.AST, set[str]] = {}
    wide: dict[ast.AST, set[str]] = {}
    for _ in range(3):  # callers' names, then their callees' parameters, then theirs
        wide = {}
        for function in functions:
            wide.update(_wide_within(function, handed.get(function, set()), keepers))
        handed = _wide_parameters(functions, by_name, wide, keepers)
    return wide, keepers


def _wide_within(
    function: ast.FunctionDef | ast.AsyncFunctionDef, entry: set[str], keepers: frozenset[str]
) -> dict[ast.AST, set[str]]:
    """Each node of ``function`` (not of the functions inside it) with the names that hold
    float32 or float64 before the statement that holds it."""
    before: dict[ast.AST, set[str]] = {}

    def block(statements: list[ast.stmt], held: set[str]) -> set[str]:
        for statement in statements:
            held = step(statement, held)
        return held

    def step(statement: ast.stmt, held: set[str]) -> set[str]:
        for node in _own_nodes(statement):
            before[node] = held
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                held = bind(target, statement.value, held)
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            held = bind(statement.target, statement.value, held)
        elif isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
            value = ast.BinOp(ast.Name(statement.target.id), statement.op, statement.value)
            held = bind(statement.target, value, held)
        elif isinstance(statement, ast.If):
            held = block(statement.body, held) & block(statement.orelse, held)
        elif isinstance(statement, ast.For | ast.AsyncFor | ast.While):
            looped = (
                bind(statement.target, None, held) if not isinstance(statement, ast.While) else held
            )
            held = held & block(statement.body, looped) & block(statement.orelse, looped)
        elif isinstance(statement, ast.With | ast.AsyncWith):
            for item in statement.items:
                if item.optional_vars is not None:
                    held = bind(item.optional_vars, None, held)
            held = block(statement.body, held)
        elif isinstance(statement, ast.Try):
            ways = [block(statement.body + statement.orelse, held)]
            ways += [block(handler.body, held) for handler in statement.handlers]
            held = set.intersection(*ways)
            held = block(statement.finalbody, held)
        return held

    def bind(target: ast.expr, value: ast.expr | None, held: set[str]) -> set[str]:
        changes = assigned(target, value, held)
        return (held - set(changes)) | {name for name, widened in changes.items() if widened}

    def assigned(target: ast.expr, value: ast.expr | None, held: set[str]) -> dict[str, bool]:
        """Each name ``target`` binds: does it hold float32 or float64 now?"""
        if isinstance(target, ast.Name):
            return {target.id: value is not None and _wide(value, held, keepers)}
        if not isinstance(target, ast.Tuple | ast.List):
            return {}
        items: list[ast.expr] | None = None
        if isinstance(value, ast.Tuple | ast.List):
            items = value.elts
        elif isinstance(value, ast.ListComp | ast.GeneratorExp):
            items = _each_item(value)  # [x.to(torch.float32) for x in (q, k, v)]
        changes: dict[str, bool] = {}
        for index, element in enumerate(target.elts):
            fits = items is not None and len(items) == len(target.elts)
            changes.update(assigned(element, items[index] if items and fits else None, held))
        return changes

    block(function.body, set(entry))
    return before


def _own_nodes(statement: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of ``statement`` outside the statements nested in it (a compound statement's
    test, its targets)."""
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(
            child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.stmt)
        )


def _returns_first_dtype(
    function: ast.FunctionDef | ast.AsyncFunctionDef, keepers: frozenset[str]
) -> bool:
    """Does every ``return`` of ``function`` hold its first argument's dtype, where that is
    float32 (Mamba2's ``reshape_into_chunks``, a pad and a reshape)?"""
    held = _wide_within(function, {function.args.args[0].arg}, keepers)
    returns = [node for node in held if isinstance(node, ast.Return)]
    return bool(returns) and all(
        node.value is not None and _wide(node.value, held[node], keepers) for node in returns
    )


def _each_item(comprehension: ast.ListComp | ast.GeneratorExp) -> list[ast.expr] | None:
    """``[f(x) for x in (a, b)]`` as ``[f(a), f(b)]``: one loop over a literal tuple, no
    condition; ``None`` otherwise."""
    [loop] = comprehension.generators if len(comprehension.generators) == 1 else [None]
    if loop is None or loop.ifs or not isinstance(loop.target, ast.Name):
        return None
    if not isinstance(loop.iter, ast.Tuple | ast.List):
        return None
    name = loop.target.id

    class Substituted(ast.NodeTransformer):
        def __init__(self, item: ast.expr) -> None:
            self.item = item

        def visit_Name(self, node: ast.Name) -> ast.expr:
            return self.item if node.id == name else node

    return [Substituted(item).visit(copy.deepcopy(comprehension.elt)) for item in loop.iter.elts]


def _wide_parameters(
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef],
    by_name: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    wide: dict[ast.AST, set[str]],
    keepers: frozenset[str],
) -> dict[ast.AST, set[str]]:
    """The parameters of each module-level function that every call in the module passes a
    float32 or float64 tensor, by position."""
    passed: dict[ast.FunctionDef | ast.AsyncFunctionDef, list[list[bool]]] = {}
    for node, held in wide.items():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        callee = by_name.get(node.func.id)
        if callee is not None and not node.keywords:
            passed.setdefault(callee, []).append(
                [_wide(argument, held, keepers) for argument in node.args]
            )
    handed: dict[ast.AST, set[str]] = {}
    for callee, calls in passed.items():
        parameters = [argument.arg for argument in callee.args.args]
        handed[callee] = {
            name
            for index, name in enumerate(parameters)
            if all(index < len(call) and call[index] for call in calls)
        }
    return handed


def split_heads_without_transpose(source: Source) -> Iterator[Edit]:
    """``x.view(B, L, H, D).transpose(1, 2)`` -> ``x.view(B, H, L, D)``, where neither ``L``
    nor ``H`` is written as 1: the heads are cut out of the wrong memory (each 'head' mixes
    tokens). Also the fold of the heads into the batch, ``x.transpose(1, 2).reshape(B * H, L,
    D)`` -> ``x.reshape(B * H, L, D)`` (SC102's ``(B*H, L, D)``: positions read as heads).

    Only in attention code (``_attention_code``), and not where the view writes a head count
    second (``view(B, H, L, D).transpose(1, 2)``): there the heads already stand before the
    positions (a batch ``B*H`` unfolded) and the swap moves them behind, on the way to a
    merge; without it the merge is wrong, a head merge's bug, not a split's. Not where the
    heads or positions are one (a literal 1, or an attribute its class sets to 1 only:
    VisualBERT's region-to-phrase attention has ``self.num_attention_heads = 1``): the swap
    moves a size-1 axis and changes nothing. Not in a private
    helper its file never calls (``_uncalled_helper``: IDEFICS' and PP-OCRv5's ``_shape``,
    left over from an older attention): the rewrite there changes nothing that runs.
    """
    enclosing = _enclosing_functions(source.module)
    called = _called_names(source.module)
    ones = _attributes_one(source.module)
    attention = {
        function: _attention_code(function) and not _uncalled_helper(function, called)
        for function in set(enclosing.values())
    }
    for node in ast.walk(source.module):
        if node not in enclosing or not attention[enclosing[node]]:
            continue
        fold = _swapped_merge(node)
        if fold is not None and _folds_into_batch(*fold, enclosing[node], source):
            yield Edit(source.dot(fold[1]), source.end(fold[1]), "")
        transpose = _method(node, "transpose")
        if transpose is None or _ints(transpose) not in HEAD_SWAPS:
            continue
        view = _method(transpose.func.value, "view", "reshape")  # type: ignore[attr-defined]
        if view is None or len(view.args) != 4 or view.keywords:
            continue
        if any(isinstance(argument, ast.Starred) for argument in view.args):
            continue
        if any(_is_one(argument) for argument in view.args[1:3]):
            continue  # a size-1 axis sits anywhere in memory: the swap changes nothing
        if any(source.code(argument) in ones.get(node, ()) for argument in view.args[1:3]):
            continue  # one head (``self.num_attention_heads = 1``): the same
        if _counts_heads(view.args[1]):
            continue  # the heads stand before the positions already: the swap is a merge's
        b, length, heads, depth = (source.code(argument) for argument in view.args)
        name = view.func.attr  # type: ignore[attr-defined]
        rewritten = f".{name}({b}, {heads}, {length}, {depth})"
        yield Edit(source.dot(view), source.end(transpose), rewritten)


def _is_one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1


def merge_heads_without_transpose(source: Source) -> Iterator[Edit]:
    """``x.transpose(1, 2).reshape(B, L, D)`` (or ``.contiguous().view``) -> ``x.reshape(...)``,
    where ``L`` is not written as 1: the heads are merged in the wrong order (features of
    different tokens interleave).

    Only in attention code (``_attention_code``), and only merges of the heads into the
    features: not a fold into the batch (``reshape(B * H, L, D)``, a split's bug, seeded by
    ``split_heads_without_transpose``); not in a function whose queries are one position
    (``q.reshape(B, 1, H, D)``: attention pooling), where the output's swap moves a size-1
    axis; and not of what transformers' ``attention_interface(...)`` returns, which is
    ``[B, L, H, D]`` already: a swap there is itself a bug, and dropping it mends the code.
    """
    enclosing = _enclosing_functions(source.module)
    merging = {
        function: _attention_code(function) and not _one_query(function)
        for function in set(enclosing.values())
    }
    for node in ast.walk(source.module):
        if node not in enclosing or not merging[enclosing[node]]:
            continue
        found = _swapped_merge(node)
        if found is None:
            continue
        merge, swapped = found
        if any(_is_one(argument) for argument in merge.args[1:2]):
            continue  # one query (a class token): the swap moves a size-1 axis, nothing else
        if _folds_into_batch(merge, swapped, enclosing[node], source):
            continue
        if _name_of(swapped.func.value) in _interface_outputs(enclosing[node]):  # type: ignore[attr-defined]
            continue
        yield Edit(source.dot(swapped), source.end(swapped), "")


def _swapped_merge(node: ast.AST) -> tuple[ast.Call, ast.Call] | None:
    """``x.transpose(1, 2).reshape(...)`` (or ``.contiguous().view(...)``) merging axes:
    the merge and the head swap before it."""
    merge = _method(node, "view", "reshape")
    if merge is None or not _merges(merge):
        return None
    inner = merge.func.value  # type: ignore[attr-defined]
    contiguous = _method(inner, "contiguous")
    if contiguous is not None:
        inner = contiguous.func.value  # type: ignore[attr-defined]
    elif merge.func.attr == "view":  # type: ignore[attr-defined]
        return None  # a view right after the swap is already a crash
    swapped = _swaps_heads(inner)
    return (merge, swapped) if swapped is not None else None


def _folds_into_batch(
    merge: ast.Call, swapped: ast.Call, function: ast.AST, source: Source
) -> bool:
    """A merge whose first size is the batch times the heads (``reshape(B * H, L, D)``), as
    written or in the one tuple the function assigns to the name it is given
    (``view(query_shape)``), or ``-1`` where the last size is the swapped tensor's own last
    (DeBERTa's ``x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))``): the
    head size stays whole, so what the ``-1`` merges is the batch and the heads."""
    sizes: list[ast.expr] = list(merge.args)
    if len(sizes) == 1 and isinstance(sizes[0], ast.Name):
        assigned = [
            node.value
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            and any(
                isinstance(target, ast.Name) and target.id == sizes[0].id for target in node.targets
            )
        ]
        if len(assigned) == 1 and isinstance(assigned[0], ast.Tuple):
            sizes = list(assigned[0].elts)
    if len(sizes) != 3:
        return False
    tensor = swapped.func.value  # type: ignore[attr-defined]
    return _batch_times_heads(sizes[0], source) or (
        _is_minus_one(sizes[0]) and _last_size_of(sizes[2], tensor, source)
    )


def _is_minus_one(node: ast.expr) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _is_one(node.operand)


def _last_size_of(size: ast.expr, tensor: ast.expr, source: Source) -> bool:
    """``size`` is ``tensor.size(-1)`` or ``tensor.shape[-1]``."""
    if isinstance(size, ast.Call) and _name_of(size.func) == "size" and len(size.args) == 1:
        owner, index = size.func.value, size.args[0]  # type: ignore[attr-defined]
    elif isinstance(size, ast.Subscript) and _name_of(size.value) == "shape":
        owner, index = size.value.value, size.slice  # type: ignore[attr-defined]
    else:
        return False
    return _is_minus_one(index) and source.code(owner) == source.code(tensor)


_ATTENTION_CALLS = re.compile(r"attention|attn", re.IGNORECASE)
_HEAD_COUNT = re.compile(r"^(?:\w*_)?heads$|^n_?heads?$|^nhead$")


def _counts_heads(node: ast.AST) -> bool:
    """A name, attribute or parameter that counts heads: ``num_heads``,
    ``self.num_attention_heads``, ``n_head``, ``heads``."""
    name = node.arg if isinstance(node, ast.arg) else _name_of(node)
    return name is not None and bool(_HEAD_COUNT.match(name))


def _attention_code(function: ast.AST) -> bool:
    """The function computes attention: it takes a softmax or a matrix product, calls an
    attention function (a name with ``attention`` or ``attn``), or names a head count.
    Image grids, pixel shuffles, patch unfolding, convolutional subsampling and RoPE helpers
    transpose and reshape too, without heads."""
    for node in ast.walk(function):
        if _is_product(node) or _counts_heads(node):
            return True
        if isinstance(node, ast.Call):
            name = _name_of(node.func) or ""
            if name == "softmax" or _ATTENTION_CALLS.search(name):
                return True
    return False


def _attributes_one(module: ast.Module) -> dict[ast.AST, set[str]]:
    """Each node inside a class, with the attributes (``self.num_attention_heads``) that its
    class sets to 1 and to nothing else."""
    found: dict[ast.AST, set[str]] = {}
    for cls in ast.walk(module):
        if not isinstance(cls, ast.ClassDef):
            continue
        values: dict[str, list[ast.expr]] = {}
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and _is_self(target):
                        values.setdefault(f"self.{target.attr}", []).append(node.value)
        ones = {name for name, assigned in values.items() if all(map(_is_one, assigned))}
        for node in ast.walk(cls):
            found[node] = ones
    return found


def _is_self(target: ast.Attribute) -> bool:
    return isinstance(target.value, ast.Name) and target.value.id == "self"


def _called_names(module: ast.Module) -> set[str]:
    """The names the module calls or reads as attributes (``self._shape(...)``, ``f = g``)."""
    names: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names


def _uncalled_helper(function: ast.AST, called: set[str]) -> bool:
    """A private helper (``_shape``, not ``__init__``) no code of its file names: dead code,
    unless another module reaches into it (none of the corpora's does)."""
    name = getattr(function, "name", "")
    return name.startswith("_") and not name.startswith("__") and name not in called


def _one_query(function: ast.AST) -> bool:
    """The function splits queries of one position into heads (``reshape(B, 1, H, D)``)."""
    for node in ast.walk(function):
        view = _method(node, "view", "reshape")
        if view is not None and len(view.args) == 4 and _is_one(view.args[1]):
            return True
    return False


def _interface_outputs(function: ast.AST) -> set[str]:
    """Names the function assigns from transformers' ``attention_interface(...)`` (the first
    of a tuple): its attention output, ``[B, L, H, D]``."""
    names: set[str] = set()
    for node in ast.walk(function):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if _name_of(node.value.func) != "attention_interface":
            continue
        for target in node.targets:
            first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
            if isinstance(first, ast.Name):
                names.add(first.id)
    return names


def _enclosing_functions(module: ast.Module) -> dict[ast.AST, ast.AST]:
    """Each node inside a function, with the innermost function around it."""
    enclosing: dict[ast.AST, ast.AST] = {}
    for function in _functions(module):  # ast.walk: outer functions before inner ones
        for node in ast.walk(function):
            enclosing[node] = function
    return enclosing


def mask_polarity(source: Source) -> Iterator[Edit]:
    """``scaled_dot_product_attention(q, k, v, attn_mask=mask)`` -> ``attn_mask=~mask`` where
    the function builds ``mask`` as a boolean (``tril``, a comparison, ``~``, ``.bool()``):
    every allowed position is blocked and every blocked one allowed."""
    for function in _functions(source.module):
        boolean: set[str] = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name) and _is_boolean(node.value):
                    boolean.add(target.id)
        for node in ast.walk(function):
            if not (
                isinstance(node, ast.Call) and _name_of(node.func) == "scaled_dot_product_attention"
            ):
                continue
            mask = next((k.value for k in node.keywords if k.arg == "attn_mask"), None)
            if mask is None and len(node.args) > 3:
                mask = node.args[3]
            if mask is not None and (_is_boolean(mask) or source.code(mask) in boolean):
                yield Edit(source.start(mask), source.end(mask), f"~({source.code(mask)})")


def _is_boolean(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert)
    ):
        return True
    return isinstance(node, ast.Call) and _name_of(node.func) in (
        "tril",
        "triu",
        "bool",
        "logical_not",
    )


@dataclass(frozen=True)
class Operator:
    name: str
    codes: frozenset[str]
    sites: Callable[[Source], Iterator[Edit]]


OPERATORS = [
    Operator("drop .contiguous() before a merging view", frozenset({"SC101"}), drop_contiguous),
    Operator("key transpose -> (1, 2)", frozenset({"SC201"}), key_transpose_axes),
    Operator("drop the attention scale", frozenset({"SC301"}), drop_scale),
    Operator("softmax dim=-1 -> dim=1", frozenset({"SC303"}), softmax_dim),
    Operator("mask fill -> -1e9", frozenset({"SC401"}), fill_overflow),
    Operator("head split without transpose", frozenset({"SC102"}), split_heads_without_transpose),
    Operator("head merge without transpose", frozenset({"SC103"}), merge_heads_without_transpose),
    Operator("SDPA mask polarity flipped", frozenset({"SC403"}), mask_polarity),
]


@dataclass(frozen=True)
class Mutant:
    path: Path
    edit: Edit


def _mutated(text: str, edit: Edit) -> str:
    return text[: edit.start] + edit.text + text[edit.end :]


def _findings(module: ast.Module, text: str, path: Path, rules: list[Rule]) -> Counter[str]:
    """What the rules find in ``text``, checked where it lies: with the modules of its
    project that its imports name, as ``shapecheck FILE`` checks it."""
    analysis = analyse(module, text, path=str(path))
    return Counter(rule.code for rule in rules for _ in rule.check(analysis))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpora = ["timm", "transformers", "x-transformers"]
    parser.add_argument("--corpus", action="append", choices=corpora, help="default: all")
    parser.add_argument("--limit", type=int, default=60, help="mutants per operator and corpus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--corpora", type=Path, default=Path(__file__).parent / ".corpora", metavar="DIR"
    )
    parser.add_argument("--show-missed", metavar="OPERATOR", help="print the missed mutants")
    options = parser.parse_args()
    names = list(dict.fromkeys(options.corpus or corpora))
    prepare(names, options.corpora)
    # SC001 judges suppression comments, which mutants never touch: no check() to run
    rules = [rule() for rule in all_rules() if not issubclass(rule, SuppressionRule)]
    totals: dict[str, list[int]] = {operator.name: [0, 0, 0] for operator in OPERATORS}
    print(f"{'operator':42} {'corpus':15} {'sites':>6} {'checked':>8} {'found':>6} {'recall':>7}")
    for corpus in names:
        files = sorted((options.corpora / corpus / CORPORA[corpus]).rglob("*.py"))
        texts = {path: path.read_text(encoding="utf-8", errors="replace") for path in files}
        modules = {path: _parsed(text) for path, text in texts.items()}
        parsed = {path: Source(texts[path], module) for path, module in modules.items() if module}
        originals: dict[Path, Counter[str]] = {}
        for operator in OPERATORS:
            sites = [
                Mutant(path, edit)
                for path, source in parsed.items()
                for edit in operator.sites(source)
            ]
            chosen = random.Random(f"{options.seed}-{corpus}-{operator.name}").sample(
                sites, min(options.limit, len(sites))
            )
            checked = found = 0
            for mutant in chosen:
                source = parsed[mutant.path]
                original = source.text
                text = _mutated(original, mutant.edit)
                mutated = _parsed(text)
                # a real mutant parses and its tree differs from the original's
                if mutated is None or ast.dump(mutated) == ast.dump(source.module):
                    raise AssertionError(f"{operator.name}: {mutant} does not change the code")
                if mutant.path not in originals:
                    originals[mutant.path] = _findings(source.module, original, mutant.path, rules)
                before = originals[mutant.path]
                after = _findings(mutated, text, mutant.path, rules)
                checked += 1
                if sum(after[c] for c in operator.codes) > sum(before[c] for c in operator.codes):
                    found += 1
                elif options.show_missed and options.show_missed in operator.name:
                    line = original.count("\n", 0, mutant.edit.start) + 1
                    where = mutant.path.relative_to(options.corpora)
                    print(f"  missed {where}:{line}: {text.splitlines()[line - 1].strip()}")
            totals[operator.name] = [
                total + part
                for total, part in zip(
                    totals[operator.name], (len(sites), checked, found), strict=True
                )
            ]
            print(
                f"{operator.name:42} {corpus:15} {len(sites):6} {checked:8} {found:6} "
                f"{percent(found, checked):>7}"
            )
    print(f"\n{'operator':42} {'sites':>6} {'checked':>8} {'found':>6} {'recall':>7}")
    for name, (sites_count, checked, found) in totals.items():
        print(f"{name:42} {sites_count:6} {checked:8} {found:6} {percent(found, checked):>7}")
    checked = sum(total[1] for total in totals.values())
    found = sum(total[2] for total in totals.values())
    print(f"{'all operators':42} {'':6} {checked:8} {found:6} {percent(found, checked):>7}")


def _parsed(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except SyntaxError:
        return None


if __name__ == "__main__":
    main()
