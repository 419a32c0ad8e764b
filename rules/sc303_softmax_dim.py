from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.observations import SoftmaxAxis
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation, assuming

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class SoftmaxDim(Rule):
    """
    ## What it does
    Finds a softmax over attention scores that does not run over the keys' axis: no `dim` at
    all on 3-D or 4-D scores (`F.softmax(scores)`, `nn.Softmax()`), or an explicit axis that
    is not the keys' (`dim=1` on `[B, H, Lq, Lk]`, `dim=-1` on einsum output laid out
    `bhkq`).

    ## Why is this bad?
    Each query's weights must sum to one over the keys. Without `dim`, PyTorch picks axis 0
    for 3-D and axis 1 for 4-D input — the batch or the heads — and warns that the implicit
    choice is deprecated. Over any other axis the weights mix heads, batches or queries;
    nothing crashes.

    ## Example
    ```python
    self.softmax = nn.Softmax()
    weights = self.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k))   # [B, H, Lq, Lk]
    ```

    ## Use instead
    ```python
    self.softmax = nn.Softmax(dim=-1)
    ```

    ## Fix safety
    Unsafe: the weights change (that is the point), so it applies only with `--unsafe-fixes`.
    The call gets `dim=` the keys' axis counted from the end (`-1`, or `-2` for a key-major
    einsum layout). An `nn.Softmax` built in `__init__` is left to the author.

    ## Runtime evidence
    No error (a deprecation warning for the implicit dim): the output differs from the
    reference (fixtures/SC303_*.py). Real cases: hyunwoongko/transformer PR#4, PyTorch-NLP#2,
    fastNLP#254, labmlai#146. Traps that stay quiet: 2-D scores with the implicit dim (it is
    the keys), pooling softmaxes over a sequence axis, selective-kernel attention,
    talking-heads attention that mixes the heads of the scores (the keys stay last), and a
    similarity normalised over both its axes (ESIM's co-attention, LoFTR's dual softmax:
    fixtures/SC301_co_attention.py).
    """

    code = "SC303"
    name = "softmax-dim"
    severity = "error"
    summary = "softmax over attention scores without dim, or over a non-key axis"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for softmax in analysis.observations(SoftmaxAxis):
            if analysis.co_attention(softmax.product):
                continue  # an alignment both ways: the softmax over the queries is meant
            how = (
                f"without `dim`, so PyTorch picks axis {softmax.axis}"
                if softmax.implicit
                else f"over axis {softmax.axis}"
            )
            yield Violation(
                softmax.softmax,
                f"softmax of the {softmax.rank}-D attention scores runs {how}, but the keys "
                f"are axis {softmax.keys}: pass `dim={softmax.keys - softmax.rank}`"
                + assuming(softmax.guess),
                fix=_over_keys(softmax),
            )


def _over_keys(softmax: SoftmaxAxis) -> FixOffer | None:
    """Write ``dim=<keys>`` (counted from the end) where the call takes it: in place of the
    ``dim`` given, else after the last argument (the call written again as it was)."""
    keys = str(softmax.keys - softmax.rank)
    description = f"softmax over the keys (dim={keys})"
    if softmax.dim is not None:
        write = partial(_write_dim, softmax.dim, keys)
        return FixOffer(description, safe=False, write=write, rewritten=(softmax.dim,))
    if softmax.through_module or not isinstance(softmax.softmax, ast.Call):
        return None
    call = softmax.softmax
    write = partial(_add_dim, call, keys)
    return FixOffer(description, safe=False, write=write, rewritten=(call,), kept=(call,))


def _write_dim(dim: ast.expr, keys: str, tree: ConcreteTree) -> Replacements | None:
    written = tree.node(dim)
    if written is None:
        return None
    return ((written, keys),)


def _add_dim(softmax: ast.Call, keys: str, tree: ConcreteTree) -> Replacements | None:
    import libcst as cst  # libcst loads only when a fix is written

    from shapecheck.concrete import bare

    call = tree.node(softmax)
    if not isinstance(call, cst.Call):
        return None
    tight = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    dim = cst.Arg(cst.parse_expression(keys), keyword=cst.Name("dim"), equal=tight)
    return ((call, bare(call.with_changes(args=[*call.args, dim]))),)
