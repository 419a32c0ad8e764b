"""Each piece of knowledge about a tensor states how it merges and how it flows, and the
joins keep what both branches know (and what one branch knows, where the other is a value the
analysis could not model)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from shapecheck.analysis import analyse
from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    NONE,
    UNKNOWN,
    IntFact,
    RepeatedFact,
    TensorFact,
    TupleFact,
    Unknown,
)
from shapecheck.analysis.lattice import FLOWS, MERGES, Family, flow, join, missing_rules
from shapecheck.analysis.layout import Layout
from shapecheck.record import record, replace

B, L, D = (Dim.symbol(name) for name in "BLD")
SOFTMAX = ast.Name("softmax")
WEIGHTS = TensorFact((B, L, L), Layout.contiguous(3), SOFTMAX, weights=True, probabilities=True)


def test_every_field_has_a_merge_rule_and_a_flow_for_every_family() -> None:
    assert missing_rules(TensorFact) == []


def test_a_field_without_rules_is_named() -> None:
    @record
    class Extended(TensorFact):
        provenance: str = ""

    assert missing_rules(Extended) == ["provenance"]


def test_a_field_with_a_merge_rule_and_no_flow_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    @record
    class Extended(TensorFact):
        provenance: str = ""

    monkeypatch.setitem(MERGES, "provenance", MERGES["dtype"])
    assert missing_rules(Extended) == ["provenance"]


def test_a_flow_missing_for_a_family_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    partial = {family: flow for family, flow in FLOWS["dtype"].items() if family != Family.VIEW}
    monkeypatch.setitem(FLOWS, "dtype", partial)
    assert missing_rules(TensorFact) == ["dtype"]


# --- joins -----------------------------------------------------------------------------------


def test_weights_of_either_dtype_stay_weights() -> None:
    upcast = replace(WEIGHTS, dtype="float32")
    joined = join(upcast, WEIGHTS)
    assert isinstance(joined, TensorFact)
    assert joined.weights and joined.probabilities and joined.dtype is None
    assert joined.shape == (B, L, L)


def test_weights_and_an_activation_are_not_weights() -> None:
    joined = join(WEIGHTS, TensorFact((B, L, L)))
    assert isinstance(joined, TensorFact) and not joined.weights


def test_masking_after_the_softmax_on_one_branch_is_kept() -> None:
    masked_fill = ast.Name("masked_fill")
    masked = replace(WEIGHTS, masked_weights=masked_fill, masked_with=frozenset("m"))
    for joined in (join(masked, WEIGHTS), join(WEIGHTS, masked)):
        assert isinstance(joined, TensorFact)
        assert joined.masked_weights is masked_fill and joined.masked_with == {"m"}


def test_different_sizes_keep_the_rank_and_different_ranks_conflict() -> None:
    other = TensorFact((B, D, L))
    joined = join(TensorFact((B, L, L)), other)
    assert isinstance(joined, TensorFact) and joined.shape is not None
    assert joined.shape[0] == B and joined.shape[2] == L and joined.shape[1].has_unknown
    lower = join(TensorFact((B, L)), other)
    assert isinstance(lower, TensorFact) and lower.shape is None
    assert lower.unknown_rank is not None and lower.unknown_rank.reason == "conflict"


def test_an_unmodelled_branch_keeps_the_other_branchs_tensor_as_uncertain() -> None:
    cache = Unknown("call", "past_key_values.update")
    for joined in (join(WEIGHTS, cache), join(cache, WEIGHTS)):
        assert isinstance(joined, TensorFact)
        assert joined.uncertain and joined.weights and joined.shape == (B, L, L)


def test_lists_of_tensors_of_different_lengths_join_to_one_of_unknown_length() -> None:
    """``outs = []`` before a loop that appends ``y``, ``outs`` after it: a list of tensors
    like ``y``, how many unknown. Sizes or anything else of different lengths conflict."""
    row = TensorFact((B, D), Layout.contiguous(2))
    assert join(TupleFact(()), TupleFact((row,))) == RepeatedFact(row)
    assert join(RepeatedFact(row), TupleFact((row, row))) == RepeatedFact(row)
    sizes = TupleFact((IntFact(B),)), TupleFact((IntFact(B), IntFact(D)))
    assert isinstance(join(*sizes), Unknown)
    assert isinstance(join(TupleFact(()), TupleFact((row, IntFact(B)))), Unknown)


def test_none_on_one_branch_is_an_optional_tensor_known_for_certain() -> None:
    for joined in (join(WEIGHTS, NONE), join(NONE, WEIGHTS)):
        assert joined is WEIGHTS


def test_conflicting_branches_stay_a_conflict() -> None:
    conflict = join(WEIGHTS, IntFact(B))
    assert isinstance(conflict, Unknown) and conflict.reason == "conflict"
    assert join(conflict, WEIGHTS) == conflict
    assert join(IntFact(B), UNKNOWN) is UNKNOWN  # a size from one branch only is not kept


def test_tuples_join_item_by_item() -> None:
    joined = join(TupleFact((WEIGHTS, IntFact(B))), TupleFact((WEIGHTS, IntFact(L))))
    assert isinstance(joined, TupleFact)
    assert joined.items[0] is WEIGHTS and isinstance(joined.items[1], IntFact)


# --- flows -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "computed", "kept"),
    [
        (Family.AXES, {"shape": None, "layout": None, "axis_op": None}, True),
        (Family.VIEW, {"shape": None, "layout": None}, True),
        (Family.SAME_VALUES, {}, True),
        (Family.MASKING, {}, True),
        (Family.ELEMENTWISE, {}, False),
    ],
)
def test_weights_flow_through_families_that_keep_the_values(
    family: Family, computed: dict[str, object], kept: bool
) -> None:
    result = flow(WEIGHTS, family, origin=ast.Name("op"), **computed)
    assert result.weights is kept and result.probabilities is kept


def test_an_op_that_skips_a_computed_field_is_refused() -> None:
    with pytest.raises(TypeError, match="must compute 'shape'"):
        flow(WEIGHTS, Family.VIEW, origin=ast.Name("view"), layout=None)


def test_an_op_that_loses_the_rank_says_which() -> None:
    call = ast.parse("x.view(*s)", mode="eval").body
    lost = flow(WEIGHTS, Family.VIEW, shape=None, layout=None, origin=call)
    assert lost.unknown_rank is not None and lost.unknown_rank.detail == "view"


# --- through the interpreter -----------------------------------------------------------------


def _fact(source: str, name: str) -> TensorFact:
    text = textwrap.dedent(source)
    analysis = analyse(ast.parse(text), text)
    [function] = [f for f in analysis.functions if f.name == "attend"]
    [fact] = [fact for _, bound, fact in function.bindings if bound == name][-1:]
    assert isinstance(fact, TensorFact)
    return fact


def test_a_cache_update_on_one_branch_keeps_the_keys() -> None:
    keys = _fact(
        """
        import torch
        def attend(x, cache, wk):
            k = wk(x).view(2, 5, 4, 8).transpose(1, 2)
            if cache is not None:
                k = cache.update(k)
            keys = k
        """,
        "keys",
    )
    assert keys.rank == 4 and keys.uncertain


def test_an_optional_mask_keeps_the_scores() -> None:
    scores = _fact(
        """
        import torch
        def attend(q, k, mask=None):
            scores = q @ k.transpose(-2, -1) / 8
            if mask is not None:
                scores = scores + mask
            scores = scores
        """,
        "scores",
    )
    assert scores.product is not None and scores.scaling and not scores.uncertain
