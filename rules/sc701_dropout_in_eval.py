from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.imports import dotted_name
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree

_DROPOUTS = tuple(
    f"torch.nn.functional.{name}"
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout")
)
"""Functional dropouts: ``training`` defaults to True, whatever mode the module is in."""

_KERNELS = {
    "torch.nn.functional.scaled_dot_product_attention": 4,
    "flash_attn.flash_attn_func": 3,
    "flash_attn.flash_attn_interface.flash_attn_func": 3,
    "flash_attn.flash_attn_qkvpacked_func": 1,
    "flash_attn.flash_attn_interface.flash_attn_qkvpacked_func": 1,
}
"""Attention kernels that drop weights at ``dropout_p``, with its position."""


class DropoutInEval(Rule):
    """
    ## What it does
    Finds dropout that stays on when the module is in eval mode: `F.dropout(x, p)` in a
    method of an `nn.Module` without `training=self.training`, and a nonzero `dropout_p`
    (`self.dropout`, `self.attn_drop.p`, a literal) given to
    `F.scaled_dot_product_attention` or flash-attn's `flash_attn_func` with no
    `if self.training else 0.0`.

    ## Why is this bad?
    `nn.Dropout` follows `model.eval()`; the functional forms do not: `F.dropout` defaults to
    `training=True`, and a kernel's `dropout_p` is whatever it is given. Evaluation and
    inference then drop activations at random, so outputs change from call to call and
    metrics are wrong, with no error anywhere (timm PR#1978, nanoGPT PR#240, torchtune#1791).

    ## Example
    ```python
    attn = F.dropout(attn.softmax(dim=-1), self.p)
    y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout)
    ```

    ## Use instead
    ```python
    attn = F.dropout(attn.softmax(dim=-1), self.p, training=self.training)
    y = F.scaled_dot_product_attention(
        q, k, v, dropout_p=self.dropout if self.training else 0.0
    )
    ```

    ## Fix safety
    Unsafe: `--fix` adds `training=self.training` to the dropout, or makes the kernel's rate
    `... if self.training else 0.0`. Training computes what it computed; evaluation stops
    dropping, which changes its numbers, on purpose.

    ## Runtime evidence
    In eval mode the output differs from the reference (the same computation without
    dropout), and from one call to the next (fixtures/SC701_*.py). Traps that stay quiet: a
    rate passed in by the caller (transformers' `sdpa_attention_forward(dropout=...)`), a
    literal 0, an enclosing `if self.training:`, `training=True` written on purpose (Monte
    Carlo dropout), functions outside an `nn.Module`.
    """

    code = "SC701"
    name = "dropout-in-eval"
    severity = "error"
    summary = "functional dropout that stays on in eval mode"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for call in analysis.calls_to(*_DROPOUTS):
            # cheapest test first: most code passes training, or a rate of its own choosing
            rate = argument(call, 1, "p")
            if argument(call, 2, "training") is not None:
                continue
            if rate is not None and not _may_drop(analysis, call, rate):
                continue
            if not analysis.in_module_method(call) or _stays_off(analysis, call):
                continue
            yield Violation(
                call.func,
                "dropout stays on in eval mode: `F.dropout` defaults to `training=True`; "
                "pass `training=self.training`",
                fix=_training_argument(call) if _fixable(call) else None,
            )
        for call in analysis.calls_to(*_KERNELS):
            name = analysis.imported_name(call.func) or ""
            rate = argument(call, _KERNELS[name], "dropout_p")
            if rate is None or not _may_drop(analysis, call, rate):
                continue
            if not analysis.in_module_method(call) or _stays_off(analysis, call):
                continue
            yield Violation(
                rate,
                "dropout stays on in eval mode: the kernel drops at this rate whatever the "
                "module's mode; pass `... if self.training else 0.0`",
                fix=_rate_in_training(rate),
            )


def _stays_off(analysis: ModuleAnalysis, call: ast.Call) -> bool:
    """Under an ``if`` on ``self.training`` (either branch), or after one that returns
    (``if not self.training: return x``): the author chose the mode."""
    function = analysis.enclosing_function(call)
    if function is None:
        return False
    for holder in analysis.holders(call):
        if isinstance(holder, ast.If | ast.IfExp) and _mentions_training(holder.test):
            return True
    return any(
        isinstance(node, ast.If)
        and node.lineno < call.lineno
        and _mentions_training(node.test)
        and isinstance(node.body[-1], ast.Return | ast.Raise)  # if not self.training: return
        for node in ast.walk(function)
    )


def _may_drop(
    analysis: ModuleAnalysis, call: ast.Call, rate: ast.expr, seen: frozenset[str] = frozenset()
) -> bool:
    """Is ``rate`` a dropout rate this module chose (a stored rate, a nonzero literal), with
    no ``self.training`` in sight? A rate passed in is the caller's to gate."""
    if isinstance(rate, ast.Constant):
        return isinstance(rate.value, int | float) and rate.value != 0
    if isinstance(rate, ast.Call) and dotted_name(rate.func) == "float" and len(rate.args) == 1:
        return _may_drop(analysis, call, rate.args[0], seen)  # p=float(self.drop_rate)
    if _mentions_training(rate):
        return False
    written = dotted_name(rate)
    if written is not None and written.startswith("self."):
        return True  # self.dropout, self.attn_drop.p
    function = analysis.enclosing_function(call)
    if not isinstance(rate, ast.Name) or rate.id in seen or function is None:
        return False
    parameters = {node.arg for node in ast.walk(function.args) if isinstance(node, ast.arg)}
    if rate.id in parameters:
        return False
    values = [
        node.value
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == rate.id for target in node.targets)
    ]
    inner = seen | {rate.id}
    return bool(values) and all(_may_drop(analysis, call, value, inner) for value in values)


def _mentions_training(node: ast.AST) -> bool:
    return any(
        isinstance(part, ast.Attribute) and part.attr == "training" for part in ast.walk(node)
    )


def _fixable(call: ast.Call) -> bool:
    """A last argument to write after, and no ``*args``/``**kwargs`` that might hold it."""
    starred = any(isinstance(a, ast.Starred) for a in call.args)
    return bool(call.args or call.keywords) and not starred and all(k.arg for k in call.keywords)


def _training_argument(call: ast.Call) -> FixOffer:
    """``F.dropout(x, p)`` -> ``F.dropout(x, p, training=self.training)``: written after the
    last argument, so nothing else is rewritten."""
    last = call.keywords[-1].value if call.keywords else call.args[-1]
    write = partial(_written_after, last, ", training=self.training")
    return FixOffer("pass `training=self.training`", False, write, (last,), kept=(last,))


def _rate_in_training(rate: ast.expr) -> FixOffer:
    """``dropout_p=self.p`` -> ``dropout_p=self.p if self.training else 0.0``."""
    write = partial(_written_after, rate, " if self.training else 0.0")
    return FixOffer("drop only in training", False, write, (rate,), kept=(rate,))


def _written_after(node: ast.expr, after: str, tree: ConcreteTree) -> Replacements | None:
    """``node`` as written, then ``after``."""
    from shapecheck.concrete import code

    written = tree.node(node)
    if written is None:
        return None
    return ((written, f"{code(written)}{after}"),)
