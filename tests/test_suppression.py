"""Suppression comments: file-level ``# shapecheck: noqa``, and SC001, the opt-in report of
suppressions that silence nothing (ruff's RUF100), with its fix."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import Result

from shapecheck.analysis import ModuleAnalysis
from shapecheck.diagnostics import Diagnostic
from shapecheck.linter import lint_source
from shapecheck.rule import Rule, Violation, all_rules
from tests.conftest import BAD_VIEW, CLEAN, UNSCALED

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]

VIEW_LINE = "    return attn_out.transpose(1, 2).view(batch, seq, heads * head_dim)"
"""BAD_VIEW's line 6, where SC101 reports."""
RESHAPE_LINE = "    return attn_out.transpose(1, 2).reshape(batch, seq, heads * head_dim)"
"""CLEAN's line 6: nothing to report."""
BOTH = BAD_VIEW + "\n\n" + UNSCALED.replace("import torch\n", "")
"""SC101 at line 6, SC301 at line 12."""


def _found(text: str, codes: Sequence[str] | None = None) -> list[tuple[int, str]]:
    rules = [rule() for rule in all_rules() if codes is None or rule.code in codes]
    result = lint_source(text.encode(), "model.py", rules)
    return [(d.line, d.code) for d in result.diagnostics]


def _sc001(text: str, codes: Sequence[str] | None = None) -> list[Diagnostic]:
    rules = [rule() for rule in all_rules() if codes is None or rule.code in codes]
    return [
        d for d in lint_source(text.encode(), "model.py", rules).diagnostics if d.code == "SC001"
    ]


# --- file-level suppression ---------------------------------------------------------------


def test_a_file_level_noqa_silences_the_whole_file() -> None:
    assert _found(BOTH) == [(6, "SC101"), (12, "SC301")]
    assert _found("# shapecheck: noqa\n" + BOTH) == []


def test_a_file_level_noqa_with_codes_silences_only_those() -> None:
    assert _found("# shapecheck: noqa: SC301\n" + BOTH) == [(7, "SC101")]
    assert _found("# shapecheck: noqa: SC101, SC301\n" + BOTH) == []


def test_a_file_level_noqa_counts_anywhere_on_a_line_of_its_own() -> None:
    indented = BOTH.replace(VIEW_LINE, "    # shapecheck: noqa: SC301\n" + VIEW_LINE)
    assert _found(indented) == [(7, "SC101")]
    assert _found(BOTH + "# ShapeCheck: NOQA\n") == []


@pytest.mark.parametrize("directive", ["# NoQA: SC101", "# SHAPECHECK: ignore[SC101]", "# noqa"])
def test_a_directive_in_any_case_is_read(directive: str) -> None:
    """The quick test for files that hold no directive must not pass over one written in
    another case, even with a letter only Unicode's case folding takes for ASCII (the Kelvin
    sign, which the directives' ``re.IGNORECASE`` reads as ``k``)."""
    kelvin = directive.replace("K", "\N{KELVIN SIGN}").replace("k", "\N{KELVIN SIGN}")
    for written in (directive, kelvin):
        assert _found(BOTH.replace(VIEW_LINE, f"{VIEW_LINE}  {written}")) == [(12, "SC301")]


def test_a_file_level_noqa_after_code_is_no_directive() -> None:
    """As in ruff: after code it silences nothing, not even its own line."""
    after_code = BOTH.replace(VIEW_LINE, VIEW_LINE + "  # shapecheck: noqa")
    assert _found(after_code) == [(6, "SC101"), (12, "SC301")]


def test_other_tools_file_level_noqa_is_left_to_them() -> None:
    for directive in ("# flake8: noqa\n", "# ruff: noqa\n", "# noqa\n"):
        assert _found(directive + BOTH) == [(7, "SC101"), (13, "SC301")]


def test_a_colon_without_codes_does_not_silence_the_whole_file() -> None:
    """A typo in the codes must not turn into a blanket exemption."""
    assert _found("# shapecheck: noqa: SC 301\n" + BOTH) == [(7, "SC101"), (13, "SC301")]


def test_a_file_level_noqa_silences_the_command_line_report(cli: Cli, write: Write) -> None:
    write("model.py", "# shapecheck: noqa: SC101\n" + BOTH)
    result = cli("model.py")
    assert result.exit_code == 1
    assert [line.split()[1] for line in result.output.splitlines()[:-1]] == ["SC301"]


# --- SC001: suppressions that silence nothing -----------------------------------------------


def test_sc001_is_opt_in(cli: Cli, write: Write) -> None:
    write("model.py", CLEAN.replace(RESHAPE_LINE, RESHAPE_LINE + "  # noqa: SC101"))
    assert cli("model.py").exit_code == 0
    assert cli("--select", "ALL", "model.py").exit_code == 0  # ALL is the default selection
    assert cli("--select", "SC", "model.py").exit_code == 0
    for selector in ("SC001", "SC0", "sc00"):
        result = cli("--extend-select", selector, "model.py")
        assert result.output.startswith(
            "model.py:6:76: SC001 [*] unused suppression (unused: SC101)"
        )
    write("pyproject.toml", '[tool.shapecheck]\nextend-select = ["SC001"]\n')
    assert cli("model.py").exit_code == 1
    assert cli("--ignore", "SC0", "model.py").exit_code == 0


def test_sc001_reports_codes_that_silence_nothing() -> None:
    text = CLEAN.replace(RESHAPE_LINE, RESHAPE_LINE + "  # noqa: SC101, SC310, SC101, SC301")
    [finding] = _sc001(text)
    assert (
        finding.message
        == "unused suppression (unused: SC101, SC301; unknown: SC310; duplicated: SC101)"
    )
    assert (finding.line, finding.column, finding.end_column) == (6, 76, 110)
    assert finding.severity == "warning"


def test_sc001_keeps_what_silences_a_finding_and_what_it_cannot_judge() -> None:
    """A code that silenced a finding, another tool's code, a code whose rule did not run,
    and a bare ``# noqa`` (flake8's and ruff's too) are never reported."""
    used = BAD_VIEW.replace(VIEW_LINE, VIEW_LINE + "  # noqa: SC101, E501")
    assert _sc001(used) == []
    assert _sc001(CLEAN.replace(RESHAPE_LINE, RESHAPE_LINE + "  # noqa")) == []
    not_run = CLEAN.replace(RESHAPE_LINE, RESHAPE_LINE + "  # noqa: SC101")
    assert _sc001(not_run, ["SC001", "SC301"]) == []
    assert len(_sc001(not_run, ["SC001", "SC101"])) == 1


def test_sc001_judges_a_bare_ignore_only_when_every_rule_ran() -> None:
    text = CLEAN.replace(RESHAPE_LINE, RESHAPE_LINE + "  # shapecheck: ignore")
    [finding] = _sc001(text)
    assert finding.message == "unused suppression: nothing is reported on this line"
    assert _sc001(text, ["SC001", "SC101"]) == []  # a rule that did not run might need it
    assert _sc001(BAD_VIEW.replace(VIEW_LINE, VIEW_LINE + "  # shapecheck: ignore")) == []


def test_sc001_reports_a_second_suppression_of_the_same_finding() -> None:
    text = BAD_VIEW.replace(VIEW_LINE, VIEW_LINE + "  # noqa: SC101  # shapecheck: ignore[SC101]")
    [finding] = _sc001(text)
    assert (finding.column, finding.message) == (88, "unused suppression (unused: SC101)")


def test_sc001_is_silenced_by_its_own_code_and_by_a_file_level_noqa() -> None:
    assert _sc001(CLEAN.replace(RESHAPE_LINE, RESHAPE_LINE + "  # noqa: SC101, SC001")) == []
    stale = CLEAN.replace(RESHAPE_LINE, RESHAPE_LINE + "  # noqa: SC101")
    assert _sc001("# shapecheck: noqa: SC001\n" + stale) == []
    assert len(_sc001("# shapecheck: noqa: SC301\n" + stale)) == 1


class _Crashes(Rule):
    code, name, severity, summary = "SC101", "crashes", "error", "fails on every file"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        raise RuntimeError("a bug")


def test_sc001_leaves_the_codes_of_a_rule_that_failed_alone() -> None:
    """Its findings are lost, not absent: removing its suppressions would be wrong."""
    text = BAD_VIEW.replace(VIEW_LINE, VIEW_LINE + "  # noqa: SC101")
    judge = next(rule for rule in all_rules() if rule.code == "SC001")
    result = lint_source(text.encode(), "model.py", [_Crashes(), judge()])
    assert [d.code for d in result.diagnostics] == ["SC000"]


@pytest.mark.parametrize(
    ("line", "fixed"),
    [
        (RESHAPE_LINE + "  # noqa: SC101", RESHAPE_LINE),
        (RESHAPE_LINE + "  # noqa: SC101 -- left from the view", RESHAPE_LINE),
        (RESHAPE_LINE + "  # noqa: SC101  # type: ignore", RESHAPE_LINE + "  # type: ignore"),
        (RESHAPE_LINE + "  # why # noqa: SC101", RESHAPE_LINE + "  # why"),
        (RESHAPE_LINE + "  # noqa: E501, SC101, SC202", RESHAPE_LINE + "  # noqa: E501"),
        (RESHAPE_LINE + "  # noqa:SC101,E501 why", RESHAPE_LINE + "  # noqa: E501 why"),
        (
            RESHAPE_LINE + "  # shapecheck: ignore[SC101, SC999, E501]",
            RESHAPE_LINE + "  # shapecheck: ignore[E501]",
        ),
        ("    # noqa: SC101\n" + RESHAPE_LINE, RESHAPE_LINE),
    ],
    ids=[
        "end",
        "reason",
        "next-comment",
        "comment-before",
        "keep",
        "keep-reason",
        "ignore",
        "own-line",
    ],
)
def test_sc001_fix_removes_what_silences_nothing(
    cli: Cli, write: Write, line: str, fixed: str
) -> None:
    model = write("model.py", CLEAN.replace(RESHAPE_LINE, line))
    result = cli("--fix", "--extend-select", "SC001", "model.py")
    assert (result.exit_code, model.read_text()) == (0, CLEAN.replace(RESHAPE_LINE, fixed))
    assert result.output == "No findings in 1 file (1 fixed)\n"


def test_sc001_fix_is_safe_and_keeps_the_suppressions_in_use(cli: Cli, write: Write) -> None:
    """Only the codes that silence nothing go: the finding stays silenced."""
    text = BOTH.replace(VIEW_LINE, VIEW_LINE + "  # noqa: SC301, SC101")
    model = write("model.py", text)
    result = cli("--fix", "--extend-select", "SC001", "model.py")
    assert model.read_text() == BOTH.replace(VIEW_LINE, VIEW_LINE + "  # noqa: SC101")
    assert result.output.splitlines()[0].startswith("model.py:12:14: SC301")
    assert result.output.splitlines()[-1] == "1 finding in 1 file (1 fixed)"


def test_sc001_leaves_a_file_the_analysis_saw_only_part_of_alone() -> None:
    """A function too deeply nested to analyse has no findings, not no problems."""
    deep = "\n\ndef deep(x):\n    return " + "-" * 3000 + "x  # noqa: SC101\n"
    text = CLEAN.replace(RESHAPE_LINE, RESHAPE_LINE + "  # noqa: SC101") + deep
    assert [
        d.code
        for d in lint_source(text.encode(), "model.py", [r() for r in all_rules()]).diagnostics
    ] == ["SC000"]
