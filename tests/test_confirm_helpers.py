"""The confirmation helpers fixtures call: each passes when its claim holds, and fails when it
does not. A helper that cannot fail would prove every rule at once."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("torch")

import torch

from shapecheck.confirm import (
    Outcome,
    Repair,
    allocates,
    differs,
    discards_weights,
    judging_fixed,
    matches,
    raises,
    recording,
)

ONES = torch.ones(2, 3)
NAN_ROW = torch.tensor([[1.0, 2.0, 3.0], [math.nan, math.nan, math.nan]])


def same(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def shifted(x: torch.Tensor) -> torch.Tensor:
    return x + 0.5


def crashes(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1, 7)


def builds_a_constant(x: torch.Tensor) -> torch.Tensor:
    return x * torch.tensor(2.0)


MULTIHEAD_FORWARD = torch.nn.MultiheadAttention.forward
ATTENTION = torch.nn.MultiheadAttention(4, 2, batch_first=True)
TOKENS = torch.randn(1, 3, 4)
ATTENDED = ATTENTION(TOKENS, TOKENS, TOKENS, need_weights=False)[0].detach()


def drops_weights(x: torch.Tensor) -> torch.Tensor:
    out, _ = ATTENTION(x, x, x)  # shapecheck: ignore[SC603] (the waste the helper proves)
    return out.detach()


def asks_for_none(x: torch.Tensor) -> torch.Tensor:
    return ATTENTION(x, x, x, need_weights=False)[0].detach()


def reads_weights(x: torch.Tensor) -> torch.Tensor:
    out, weights = ATTENTION(x, x, x)
    return (out + 0 * weights.sum()).detach()


def _recorded(call: Callable[[], Any]) -> list[Outcome]:
    with recording() as outcomes:
        call()
    return list(outcomes)


# --- raises ----------------------------------------------------------------------------------


def test_raises_records_the_error_the_case_raised() -> None:
    [outcome] = _recorded(lambda: raises(crashes, ONES, match="is invalid for input of size 6"))
    assert outcome.kind == "raises" and outcome.case == "crashes"
    assert outcome.detail.startswith("RuntimeError: shape '[-1, 7]' is invalid")


def test_raises_runs_the_case() -> None:
    calls = []

    def counted(x: torch.Tensor) -> torch.Tensor:
        calls.append(x)
        return x.view(-1, 7)

    raises(counted, ONES, match="invalid")
    assert len(calls) == 1


def test_raises_fails_when_the_case_runs() -> None:
    with pytest.raises(AssertionError, match="same ran without raising 'invalid'"):
        raises(same, ONES, match="invalid")


def test_raises_fails_on_another_error() -> None:
    with pytest.raises(AssertionError, match=r"crashes raised .*, not 'overflow'"):
        raises(crashes, ONES, match="overflow")


# --- differs ---------------------------------------------------------------------------------


def test_differs_records_the_gap() -> None:
    [outcome] = _recorded(lambda: differs(shifted, ONES, expected=ONES))
    assert (outcome.kind, outcome.gap) == ("differs", 0.5)


def test_differs_fails_when_the_output_matches() -> None:
    with pytest.raises(AssertionError, match="same matches the reference"):
        differs(same, ONES, expected=ONES)


def test_differs_fails_within_tolerance() -> None:
    with pytest.raises(AssertionError, match="matches the reference"):
        differs(shifted, ONES, expected=ONES, atol=0.5)


def test_differs_fails_on_another_shape() -> None:
    with pytest.raises(AssertionError, match=r"returned shape \(2, 3\), the reference \(3, 2\)"):
        differs(shifted, ONES, expected=torch.ones(3, 2))


def test_a_nan_output_is_no_evidence_of_a_difference() -> None:
    with pytest.raises(AssertionError, match="the output has 3 NaN or inf"):
        differs(same, NAN_ROW, expected=ONES)


def test_a_nan_reference_proves_nothing() -> None:
    with pytest.raises(AssertionError, match="the reference has 3 NaN or inf"):
        differs(shifted, ONES, expected=NAN_ROW)


def test_non_finite_evidence_is_stated_as_such() -> None:
    [outcome] = _recorded(lambda: differs(same, NAN_ROW, expected=ONES, non_finite=True))
    assert outcome.kind == "differs" and outcome.gap is None
    assert outcome.detail == "3 of 6 outputs are NaN or inf; the reference is finite"


def test_non_finite_evidence_fails_on_a_finite_output() -> None:
    with pytest.raises(AssertionError, match="shifted returned no NaN or inf"):
        differs(shifted, ONES, expected=ONES, non_finite=True)


# --- matches ---------------------------------------------------------------------------------


def test_matches_records_the_gap() -> None:
    [outcome] = _recorded(lambda: matches(same, ONES, expected=ONES))
    assert (outcome.kind, outcome.gap) == ("matches", 0.0)


def test_matches_fails_when_the_output_differs() -> None:
    with pytest.raises(AssertionError, match="shifted differs from the reference"):
        matches(shifted, ONES, expected=ONES)


def test_matching_nans_are_no_match() -> None:
    with pytest.raises(AssertionError, match="NaN or inf"):
        matches(same, NAN_ROW, expected=NAN_ROW)


def test_an_infinite_output_is_no_match() -> None:
    with pytest.raises(AssertionError, match="the output has 1 NaN or inf"):
        matches(lambda x: x / x.sum() * math.inf, torch.ones(1), expected=torch.ones(1))


# --- allocates -------------------------------------------------------------------------------


def test_allocates_records_the_line_that_built_tensors() -> None:
    [outcome] = _recorded(lambda: allocates(builds_a_constant, ONES))
    assert outcome.kind == "allocates" and outcome.detail == "1 torch.tensor(<number>) per call"
    assert outcome.first_line == outcome.last_line == builds_a_constant.__code__.co_firstlineno + 1


def test_allocates_fails_when_nothing_is_built() -> None:
    with pytest.raises(AssertionError, match="same built no tensor from a Python number"):
        allocates(same, ONES)


def test_allocates_restores_torch_tensor() -> None:
    original = torch.tensor
    with pytest.raises(RuntimeError):
        allocates(crashes, ONES)
    assert torch.tensor is original


# --- discards_weights -----------------------------------------------------------------------


def test_discards_weights_records_the_call_that_made_them() -> None:
    [outcome] = _recorded(lambda: discards_weights(drops_weights, TOKENS, expected=ATTENDED))
    assert outcome.kind == "allocates"
    assert outcome.detail == "allocates [1, 3, 3] attention weights per call, never read"
    assert outcome.first_line == outcome.last_line == drops_weights.__code__.co_firstlineno + 1


def test_discards_weights_fails_when_no_weights_are_made() -> None:
    with pytest.raises(AssertionError, match="asks_for_none computed no attention weights"):
        discards_weights(asks_for_none, TOKENS, expected=ATTENDED)


def test_discards_weights_fails_when_the_weights_are_read() -> None:
    with pytest.raises(AssertionError, match="reads_weights uses its attention weights"):
        discards_weights(reads_weights, TOKENS, expected=ATTENDED)
    assert torch.nn.MultiheadAttention.forward is MULTIHEAD_FORWARD


def test_discards_weights_fails_when_the_output_is_wrong() -> None:
    with pytest.raises(AssertionError, match="differs from the reference"):
        discards_weights(drops_weights, TOKENS, expected=ATTENDED + 1)


def test_a_fixed_call_must_make_no_weights() -> None:
    with (
        judging_fixed({"drops_weights": Repair(False, UNFIXED)}),
        pytest.raises(AssertionError, match="fixed drops_weights still computes attention weights"),
    ):
        discards_weights(drops_weights, TOKENS, expected=ATTENDED)
    with judging_fixed({"asks_for_none": Repair(False, UNFIXED)}):
        [outcome] = _recorded(lambda: discards_weights(asks_for_none, TOKENS, expected=ATTENDED))
    assert outcome.kind == "matches"


# --- a fixed case ----------------------------------------------------------------------------

UNFIXED = types.ModuleType("unfixed")
UNFIXED.same = same  # type: ignore[attr-defined]


def test_a_repair_that_keeps_results_must_compute_what_the_unfixed_case_did() -> None:
    with judging_fixed({"same": Repair(True, UNFIXED)}):
        [outcome] = _recorded(lambda: differs(same, NAN_ROW, expected=ONES))
    assert outcome.kind == "same"  # NaN where the unfixed case had NaN is the same result


def test_a_repair_that_keeps_results_fails_when_the_numbers_move() -> None:
    moved = types.ModuleType("unfixed")
    moved.same = shifted  # type: ignore[attr-defined]
    with (
        judging_fixed({"same": Repair(True, moved)}),
        pytest.raises(AssertionError, match=r"fixed same differs from the unfixed case by 0\.5"),
    ):
        differs(same, ONES, expected=ONES)


def test_a_matching_case_whose_repair_keeps_results_must_stay_the_same() -> None:
    """A stale suppression removed: the case matched, and must compute what it computed."""
    with judging_fixed({"same": Repair(True, UNFIXED)}):
        [outcome] = _recorded(lambda: matches(same, ONES, expected=ONES))
    assert outcome.kind == "same"
    moved = types.ModuleType("unfixed")
    moved.same = shifted  # type: ignore[attr-defined]
    with (
        judging_fixed({"same": Repair(True, moved)}),
        pytest.raises(AssertionError, match=r"fixed same differs from the unfixed case by 0\.5"),
    ):
        matches(same, ONES, expected=ONES)


def test_a_mended_case_must_match_the_reference() -> None:
    with judging_fixed({"shifted": Repair(False, UNFIXED)}), pytest.raises(AssertionError):
        differs(shifted, ONES, expected=ONES)


def test_a_mended_crash_must_run() -> None:
    with judging_fixed({"crashes": Repair(False, UNFIXED)}), pytest.raises(RuntimeError):
        raises(crashes, ONES, match="invalid")


def test_a_fixed_constant_must_no_longer_be_built() -> None:
    with (
        judging_fixed({"builds_a_constant": Repair(True, UNFIXED)}),
        pytest.raises(AssertionError, match="still builds 1 tensor"),
    ):
        allocates(builds_a_constant, ONES)
