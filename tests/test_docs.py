"""Each rule documents itself, and the README's table is generated from the rules."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from shapecheck.docs import rule_table, with_rule_table
from shapecheck.rule import Rule, SuppressionRule, all_rules

README = Path(__file__).resolve().parent.parent / "README.md"
SECTIONS = (
    "## What it does",
    "## Why is this bad?",
    "## Example",
    "## Use instead",
    "## Runtime evidence",
)


def test_readme_rule_table_is_generated_from_the_rules() -> None:
    readme = README.read_text(encoding="utf-8")
    assert rule_table() in readme
    assert with_rule_table(readme) == readme, "run `python -m shapecheck.docs`"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rule_documentation_has_every_section(rule: type[Rule]) -> None:
    documentation = rule.documentation()
    positions = [documentation.find(section) for section in SECTIONS]
    assert all(position >= 0 for position in positions), documentation
    assert positions == sorted(positions)
    assert rule.name.replace("-", "").isalpha() and rule.name == rule.name.lower()
    assert rule.severity in ("error", "warning")
    assert rule.summary and "\n" not in rule.summary


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_rule_module_is_named_after_its_code(rule: type[Rule]) -> None:
    module = rule.__module__.rsplit(".", 1)[-1]
    assert module == f"{rule.code.lower()}_{rule.name.replace('-', '_')}"


@cache
def _fix_safety_in_fixtures() -> dict[str, set[bool]]:
    """Rule code -> the safety of every fix it offers on the fixtures."""
    from shapecheck.confirm.fixtures import fixture_files
    from shapecheck.linter import lint_path

    rules = [rule() for rule in all_rules()]
    safety: dict[str, set[bool]] = {}
    for path in fixture_files():
        for diagnostic in lint_path(str(path), rules).diagnostics:
            if diagnostic.fix is not None:
                safety.setdefault(diagnostic.code, set()).add(diagnostic.fix.safe)
    return safety


# a suppression rule's fixes edit comments, never fixtures' code: tests/test_suppression.py
@pytest.mark.parametrize(
    "rule",
    [rule for rule in all_rules() if not issubclass(rule, SuppressionRule)],
    ids=lambda rule: rule.code,
)
def test_a_rule_with_fixes_says_how_safe_they_are(rule: type[Rule]) -> None:
    documentation = rule.documentation()
    safety = _fix_safety_in_fixtures().get(rule.code)
    if safety is None:
        assert rule.fix_safety() is None
        return
    assert rule.fix_safety() == ("safe" if safety == {True} else "unsafe")
    assert documentation.find("## Fix safety") < documentation.find("## Runtime evidence")


def test_readme_example_shows_what_shapecheck_prints() -> None:
    from tests.conftest import run_python

    readme = README.read_text(encoding="utf-8")
    command = "$ shapecheck examples/attention_mistakes.py\n"
    shown = readme.split(command, 1)[1].split("```", 1)[0]
    process = run_python("-m", "shapecheck", "--no-cache", "examples/attention_mistakes.py")
    assert process.stdout == shown
