"""Inline suppressions are found on the lines ``ast`` numbers, whatever the line endings."""

from __future__ import annotations

import pytest

from shapecheck.linter import lint_source
from shapecheck.rule import all_rules
from tests.conftest import BAD_VIEW

VIEW_LINE = "    return attn_out.transpose(1, 2).view(batch, seq, heads * head_dim)"
"""BAD_VIEW's line 6, where SC101 reports."""


def _sc101_lines(text: str) -> list[int]:
    rules = [rule() for rule in all_rules() if rule.code == "SC101"]
    result = lint_source(text.encode(), "model.py", rules)
    return [d.line for d in result.diagnostics]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_d24_a_suppression_on_the_flagged_line_silences_it(newline: str) -> None:
    source = BAD_VIEW.replace(VIEW_LINE, VIEW_LINE + "  # noqa: SC101")
    assert _sc101_lines(source.replace("\n", newline)) == []


ONE_LINE_VIEW = (
    "def merge_heads(attn_out): batch, heads, seq, head_dim = attn_out.shape; "
    "return attn_out.transpose(1, 2).view(batch, seq, heads * head_dim)\n"
    "import torch  # noqa\n"
)
"""SC101 on line 1 and a bare ``# noqa`` on line 2."""


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_d24_a_suppression_on_another_line_does_not(newline: str) -> None:
    assert _sc101_lines(ONE_LINE_VIEW.replace("\n", newline)) == [1]
