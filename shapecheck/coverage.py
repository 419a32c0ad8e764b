"""``shapecheck --coverage``: how much the analysis knew, so that silence can be trusted.

Like mypy's imprecision report, per file and in total: the softmax calls it recognised as
attention (a softmax over q·kᵀ scores), and, in the functions that compute attention (a
softmax, ``scaled_dot_product_attention``, flash-attn, xformers or ``nn.MultiheadAttention``
call, or a call of a :class:`Choice` that may be one), the share of
tensor-valued expressions whose rank, whole shape and memory layout it knows, with the most
frequent reasons for what it did not know.
"""

from __future__ import annotations

import ast
import textwrap
from collections import Counter
from dataclasses import dataclass, field

from shapecheck.analysis import ModuleAnalysis, analyse
from shapecheck.analysis.facts import (
    Choice,
    Fact,
    FunctionNode,
    FunctionRef,
    InstanceFact,
    ModuleFact,
    QualifiedName,
    TensorFact,
    Unknown,
)
from shapecheck.analysis.imports import call_name
from shapecheck.analysis.interpreter import FunctionFacts
from shapecheck.analysis.observations import AttentionScores
from shapecheck.analysis.ops.attention import ATTENTION_KERNELS
from shapecheck.diagnostics import Diagnostic
from shapecheck.report import count
from shapecheck.source import parse_source

_ATTENTION_CALLS = {
    "torch.softmax",
    "torch.nn.functional.softmax",
    "torch.nn.functional.scaled_dot_product_attention",
    *ATTENTION_KERNELS,
}
_ATTENTION_MODULES = {"torch.nn.Softmax", "torch.nn.MultiheadAttention"}
_SOFTMAX = {"torch.softmax", "torch.nn.functional.softmax", "torch.nn.Softmax"}


@dataclass
class Coverage:
    """What the analysis knew in one file (or, added up, in many)."""

    path: str
    files: int = 1
    softmax_calls: int = 0
    attention_softmax: int = 0
    """Softmax calls recognised as attention: over q·kᵀ scores."""
    attention_functions: int = 0
    tensors: int = 0
    """Tensor-valued expressions in attention functions."""
    rank_known: int = 0
    shape_known: int = 0
    """Every size known (named or a number)."""
    layout_known: int = 0
    unknown_values: int = 0
    """Call results in attention functions it could not model at all."""
    from_other_files: int = 0
    """Tensors in attention functions that calls followed into other files of the project
    returned (a helper's result, an injected layer's output)."""
    built_in_callers_sizes: int = 0
    """Classes checked again in the sizes a construction gives them (``Head(n_embd,
    head_size=n_embd // n_head)``), in this file or another module of its folder."""
    built_in_other_files: int = 0
    """Of those, the ones another module builds."""
    reasons: Counter[str] = field(default_factory=Counter)
    """Why a tensor's rank, or a value, was unknown -> how often."""
    proper_functions: int = 0
    """Of the attention functions, those that are attention proper: a softmax there reads a
    product of two tensors written in the function (``q @ k.mT``, ``matmul``, ``einsum``,
    ``bmm``, ``baddbmm``, through its own assignments), or it is recognised as attention, or
    the function calls a fused attention. Not a router's softmax over its logits, a loss's,
    a sampler's, or a helper's over scores it was handed."""
    proper_tensors: int = 0
    proper_rank_known: int = 0
    proper_shape_known: int = 0

    def add(self, other: Coverage) -> None:
        for name in (
            "files",
            "softmax_calls",
            "attention_softmax",
            "attention_functions",
            "tensors",
            "rank_known",
            "shape_known",
            "layout_known",
            "unknown_values",
            "from_other_files",
            "built_in_callers_sizes",
            "built_in_other_files",
            "proper_functions",
            "proper_tensors",
            "proper_rank_known",
            "proper_shape_known",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.reasons.update(other.reasons)

    def as_json(self, top: int) -> dict[str, object]:
        return {
            "path": self.path,
            "files": self.files,
            "softmax": {"calls": self.softmax_calls, "attention": self.attention_softmax},
            "attention_functions": self.attention_functions,
            "tensors": {
                "expressions": self.tensors,
                "rank_known": self.rank_known,
                "shape_known": self.shape_known,
                "layout_known": self.layout_known,
            },
            "attention_proper": {
                "functions": self.proper_functions,
                "expressions": self.proper_tensors,
                "rank_known": self.proper_rank_known,
                "shape_known": self.proper_shape_known,
            },
            "unknown_values": self.unknown_values,
            "from_other_files": self.from_other_files,
            "built_in_callers_sizes": {
                "classes": self.built_in_callers_sizes,
                "by_other_files": self.built_in_other_files,
            },
            "reasons": [
                {"reason": reason, "count": count} for reason, count in self.top_reasons(top)
            ],
        }

    def top_reasons(self, top: int) -> list[tuple[str, int]]:
        return sorted(self.reasons.items(), key=lambda item: (-item[1], item[0]))[:top]


def measure(item: tuple[str, bytes]) -> tuple[Coverage | None, list[Diagnostic]]:
    """What the analysis knew of one file's content (``None`` where it cannot be read), and
    an SC000 for each part of it that could not be read or analysed."""
    path, data = item
    source = parse_source(data, path)
    if isinstance(source, Diagnostic):
        return None, [source]
    try:
        analysis = analyse(source.module, source.text, path=source.location)
        return coverage(path, analysis), [part.diagnostic(path) for part in analysis.too_deep]
    except Exception as error:  # reported for this file; the others go on
        from shapecheck.run import failure

        return None, failure(path, error).diagnostics


def coverage(path: str, analysis: ModuleAnalysis) -> Coverage:
    """What the analysis of one file knew."""
    report = Coverage(path)
    followed = analysis.project.followed if analysis.project is not None else set()
    report.built_in_callers_sizes = len(analysis.specialised)
    report.built_in_other_files = sum(1 for each in analysis.specialised if each.elsewhere)
    attention = {observation.softmax for observation in analysis.observations(AttentionScores)}
    report.attention_softmax = len(attention)
    for function in analysis.functions:
        calls = [node for node in function.facts if isinstance(node, ast.Call)]
        kinds = {node: _called(function, node) for node in calls}
        report.softmax_calls += sum(
            1 for node, name in kinds.items() if name in _SOFTMAX or _is_softmax_method(node, name)
        )
        is_attention = any(
            name in _ATTENTION_CALLS | _ATTENTION_MODULES or _is_softmax_method(node, name)
            for node, name in kinds.items()
        )
        if not is_attention or not isinstance(function.node, FunctionNode):
            continue
        report.attention_functions += 1
        proper = _attention_proper(function, kinds, attention)
        report.proper_functions += proper
        for node, fact in function.facts.items():
            _count(report, function, node, fact)
            report.from_other_files += node in followed and isinstance(fact, TensorFact)
            if proper and isinstance(fact, TensorFact):
                report.proper_tensors += 1
                report.proper_rank_known += fact.shape is not None
                report.proper_shape_known += fact.shape is not None and not any(
                    dim.has_unknown for dim in fact.shape
                )
    return report


_PRODUCTS = {"matmul", "einsum", "bmm", "baddbmm", "mm"}


def _attention_proper(
    function: FunctionFacts, kinds: dict[ast.Call, str | None], recognised: set[ast.AST]
) -> bool:
    """Whether ``function`` computes attention proper (see :attr:`Coverage.proper_functions`):
    read from the code, not from what the analysis knew, so that a function it knows little
    of is counted all the same."""
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function.node):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for bound in ast.walk(target):
                    if isinstance(bound, ast.Name):
                        assigned.setdefault(bound.id, []).append(node.value)
        elif (
            isinstance(node, ast.AugAssign | ast.AnnAssign)
            and node.value is not None
            and isinstance(node.target, ast.Name)
        ):
            assigned.setdefault(node.target.id, []).append(node.value)
    for call, name in kinds.items():
        if name in _ATTENTION_CALLS - _SOFTMAX:
            return True
        if name == "torch.nn.MultiheadAttention" and isinstance(
            function.facts.get(call.func), ModuleFact
        ):
            return True  # called, not built (``__init__``)
        if call in recognised:
            return True
        if name in _SOFTMAX:
            read = call.args[:1]
        elif _is_softmax_method(call, name) and isinstance(call.func, ast.Attribute):
            read = [call.func.value]
        else:
            continue
        seen: set[str] = set()
        if any(_reads_product(expression, assigned, seen) for expression in read):
            return True
    return False


def _reads_product(
    expression: ast.expr, assigned: dict[str, list[ast.expr]], seen: set[str]
) -> bool:
    """Whether ``expression``, or a value the function assigns to a name it reads, holds a
    product of two tensors; each name followed once."""
    for node in ast.walk(expression):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return True
        if isinstance(node, ast.Call) and call_name(node) in _PRODUCTS:
            return True
        if isinstance(node, ast.Name) and node.id not in seen:
            seen.add(node.id)
            if any(_reads_product(value, assigned, seen) for value in assigned.get(node.id, ())):
                return True
    return False


def _called(function: FunctionFacts, call: ast.Call) -> str | None:
    """The qualified name (or module kind) a call calls, as far as the facts tell; of a
    :class:`Choice`, the attention it may call."""
    callee = function.facts.get(call.func)
    options = callee.options if isinstance(callee, Choice) else (callee,)
    names = [_name(option) for option in options]
    attention = [name for name in names if name in _ATTENTION_CALLS | _ATTENTION_MODULES]
    return next(iter(attention), names[0] if len(names) == 1 else None)


def _name(callee: Fact | None) -> str | None:
    if isinstance(callee, QualifiedName):
        return callee.name
    if isinstance(callee, ModuleFact):
        return callee.kind
    return None


def _is_softmax_method(call: ast.Call, name: str | None) -> bool:
    """``scores.softmax(-1)``: a tensor method (the callee is no function or module)."""
    func = call.func
    return name is None and isinstance(func, ast.Attribute) and func.attr == "softmax"


def _count(report: Coverage, function: FunctionFacts, node: ast.AST, fact: Fact) -> None:
    if isinstance(fact, TensorFact):
        report.tensors += 1
        if fact.shape is None:
            report.reasons[_blame(function, node, fact)] += 1
            return
        report.rank_known += 1
        report.shape_known += not any(dim.has_unknown for dim in fact.shape)
        report.layout_known += fact.layout is not None
    elif isinstance(fact, Unknown) and isinstance(node, ast.Call):
        report.unknown_values += 1
        report.reasons[_reason(fact)] += 1


def _blame(function: FunctionFacts, node: ast.AST, fact: TensorFact) -> str:
    """Why a tensor's rank is unknown: its own reason, or that of the operand it came from
    (the softmax of scores of unknown rank is blamed on what made the scores)."""
    seen: set[ast.AST] = set()
    while fact.unknown_rank is None and node not in seen:
        seen.add(node)
        if isinstance(node, ast.Name) and fact.origin is not None and fact.origin is not node:
            node = fact.origin  # a name: blame what was assigned to it
            continue
        for operand in _operands(function, node):
            found = function.facts.get(operand)
            if isinstance(found, Unknown) and found.reason == "call":
                return _reason(found)
            if isinstance(found, TensorFact) and found.shape is None:
                node, fact = operand, found
                break
        else:
            return f"`{_op(node)}`: result of unknown rank"
    return _reason(fact.unknown_rank) if fact.unknown_rank else "expression it does not model"


def _operands(function: FunctionFacts, node: ast.AST) -> list[ast.AST]:
    """The expressions a tensor was computed from (a method's receiver, a call's arguments)."""
    match node:
        case ast.Call(func=func, args=args, keywords=keywords):
            method = isinstance(func, ast.Attribute) and not isinstance(
                function.facts.get(func), ModuleFact | QualifiedName | FunctionRef | InstanceFact
            )
            receiver = [func.value] if method and isinstance(func, ast.Attribute) else []
            passed = [*receiver, *args, *(keyword.value for keyword in keywords)]
            # torch.cat([a, b]): the tensors in the list
            return [
                item
                for value in passed
                for item in (value.elts if isinstance(value, ast.List | ast.Tuple) else [value])
            ]
        case ast.BinOp(left=left, right=right):
            return [left, right]
        case ast.Compare(left=left, comparators=comparators):
            return [left, *comparators]
        case ast.UnaryOp(operand=operand):
            return [operand]
        case ast.Subscript(value=value) | ast.Starred(value=value) | ast.Attribute(value=value):
            return [value]
        case ast.IfExp(body=body, orelse=orelse):
            return [body, orelse]
    return []


def _op(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return call_name(node) or "call"
    return _SYNTAX.get(type(node), type(node).__name__)


_SYNTAX: dict[type[ast.AST], str] = {
    ast.BinOp: "arithmetic",
    ast.AugAssign: "arithmetic",
    ast.UnaryOp: "arithmetic",
    ast.Subscript: "indexing",
    ast.Compare: "comparison",
    ast.IfExp: "conditional expression",
    ast.Name: "a name",
    ast.Attribute: "an attribute",
}


def _reason(unknown: Unknown) -> str:
    match unknown.reason:
        case "call":
            return f"unmodelled call `{unknown.detail}`"
        case "name":
            return f"name `{unknown.detail}` bound where the analysis does not look"
        case "parameter":
            return "parameter of unknown rank"
        case "op":
            return f"`{unknown.detail}` with arguments it cannot read"
        case "conflict":
            return "branches that disagree"
    return "expression it does not model"


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def render_text(reports: list[Coverage], total: Coverage, top: int) -> str:
    """One row per file with attention in it, the total, then the top reasons."""
    header = (
        f"{'file':<48} {'softmax':>9} {'attention':>9} {'tensors':>8} "
        f"{'rank':>5} {'shape':>6} {'layout':>6}"
    )
    rows = [header]
    for report in [*(r for r in reports if r.attention_functions or r.softmax_calls), total]:
        name = report.path if len(report.path) <= 48 else "…" + report.path[-47:]
        rows.append(
            f"{name:<48} {f'{report.attention_softmax}/{report.softmax_calls}':>9} "
            f"{report.attention_functions:>9} {report.tensors:>8} "
            f"{percent(report.rank_known, report.tensors):>5} "
            f"{percent(report.shape_known, report.tensors):>6} "
            f"{percent(report.layout_known, report.tensors):>6}"
        )
    tensors = total.tensors
    summary = (
        f"{count(total.files, 'file')}: {total.attention_softmax} of "
        f"{count(total.softmax_calls, 'softmax call')} recognised as attention, in "
        f"{count(total.attention_functions, 'function')} computing attention; of "
        f"{count(tensors, 'tensor')} there, the rank of {percent(total.rank_known, tensors)} "
        f"is known, the whole shape of {percent(total.shape_known, tensors)}, the layout of "
        f"{percent(total.layout_known, tensors)}; {count(total.unknown_values, 'call')} "
        "not understood at all"
    )
    if total.attention_functions:
        proper = total.proper_tensors
        summary += (
            f"; in attention proper ({count(total.proper_functions, 'function')} whose softmax "
            "reads a product of two tensors written there, or that call a fused attention; "
            f"not a router's, a loss's or a sampler's), {percent(total.proper_rank_known, proper)}"
            f" of ranks and {percent(total.proper_shape_known, proper)} of shapes are known"
        )
    if total.from_other_files:
        summary += f"; {count(total.from_other_files, 'tensor')} from other files of the project"
    if total.built_in_callers_sizes:
        summary += (
            f"; {count(total.built_in_callers_sizes, 'class')} checked again in the "
            f"sizes their constructions give them ({total.built_in_other_files} built in "
            "another file)"
        )
    rows.append("\n" + textwrap.fill(summary, width=100))
    if total.reasons:
        rows.append("\nwhy ranks and values were unknown:")
        rows += [f"{count:>7}  {reason}" for reason, count in total.top_reasons(top)]
    return "\n".join(rows)
