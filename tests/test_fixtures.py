"""Every fixture, both halves: what the linter says about each line, what PyTorch does."""

from __future__ import annotations

import ast
import difflib
from collections import Counter
from pathlib import Path

import pytest

from shapecheck.confirm.fixtures import (
    FIXED_DIR,
    fixed_text,
    fixture_files,
    read_marks,
    static_findings,
)
from shapecheck.rule import Rule, all_rules

FIXTURES = fixture_files()
IDS = [path.name for path in FIXTURES]


def test_there_are_fixtures() -> None:
    assert len(FIXTURES) >= 3


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_linter_says_exactly_what_the_fixture_expects(path: Path) -> None:
    marks = read_marks(path)
    found = static_findings(path)
    assert found == set(marks.expect), (
        f"missing: {sorted(set(marks.expect) - found)}; unexpected: {sorted(found - marks.expect)}"
    )
    assert not found & marks.ok


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixture_states_its_runtime_truth(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert "runtime:" in docstring, f"{path.name}: the docstring must say `runtime: ...`"
    assert docstring.startswith(path.name[:5]), f"{path.name}: start the docstring with the code"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_every_rule_has_bad_and_lookalike_fixture_lines(rule: type[Rule]) -> None:
    expected: Counter[str] = Counter()
    clean: Counter[str] = Counter()
    for path in FIXTURES:
        marks = read_marks(path)
        expected.update(code for _, code in marks.expect)
        clean.update(code for _, code in marks.ok)
    assert expected[rule.code] >= 5, f"{rule.code}: {expected[rule.code]} bad lines, need 5"
    assert clean[rule.code] >= 5, f"{rule.code}: {clean[rule.code]} look-alikes, need 5"


def available(device: str) -> bool:
    torch = pytest.importorskip("torch")
    return device == "cpu" or bool(torch.cuda.is_available())


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_runtime_confirms_every_marked_line(path: Path, device: str) -> None:
    if not available(device):
        pytest.skip("no CUDA device")
    from shapecheck.confirm.fixtures import confirm

    report = confirm(path, device)
    for verdict in report.verdicts:
        where = f"{path.name}:{verdict.line} ({verdict.code}, {device})"
        assert verdict.outcome is not None, f"{where}: no case run by run() holds this line"
        assert verdict.runtime_agrees, (
            f"{where}: marked {'bad' if verdict.bad else 'ok'}, "
            f"but the case {verdict.outcome.kind}: {verdict.outcome.detail}"
        )


# --- fixed fixtures: every fix proven by running it ------------------------------------------

FIXED = [path for path in FIXTURES if (FIXED_DIR / path.name).exists()]
FIXED_IDS = [path.name for path in FIXED]


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixed_fixture_is_what_fix_writes(path: Path) -> None:
    """``fixtures/fixed/`` holds ``shapecheck --fix --unsafe-fixes`` of each fixture
    (regenerate with ``python -m shapecheck.confirm --write-fixed``)."""
    expected = fixed_text(path)
    committed = FIXED_DIR / path.name
    if expected is None:
        assert not committed.exists(), f"{committed} is stale: no fix applies any more"
    else:
        assert committed.read_text(encoding="utf-8") == expected


@pytest.mark.parametrize("path", FIXED, ids=FIXED_IDS)
def test_fixes_change_only_bad_lines(path: Path) -> None:
    original = path.read_text(encoding="utf-8").splitlines()
    fixed = (FIXED_DIR / path.name).read_text(encoding="utf-8").splitlines()
    bad_lines = {line for line, _ in read_marks(path).expect}
    matcher = difflib.SequenceMatcher(a=original, b=fixed, autojunk=False)
    for tag, first, last, new_first, new_last in matcher.get_opcodes():
        if tag == "insert":
            assert fixed[new_first:new_last] == ["import math"], fixed[new_first:new_last]
        elif tag != "equal":
            changed = set(range(first + 1, last + 1))
            assert changed <= bad_lines, f"lines {sorted(changed - bad_lines)} were not bad"


@pytest.mark.parametrize("path", FIXED, ids=FIXED_IDS)
def test_fixed_fixture_keeps_only_findings_without_a_fix(path: Path) -> None:
    from shapecheck.linter import lint_path

    rules = [rule() for rule in all_rules()]
    remaining = lint_path(str(FIXED_DIR / path.name), rules).diagnostics
    assert all(d.fix is None for d in remaining), [d for d in remaining if d.fix]
    marks = read_marks(FIXED_DIR / path.name)  # the marks move with their lines
    assert {(d.line, d.code) for d in remaining} <= marks.expect


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("path", FIXED, ids=FIXED_IDS)
def test_fixed_cases_run_right(path: Path, device: str) -> None:
    """Each case whose findings were all fixed now runs and matches the reference, or, where
    every fix keeps results (SC202, SC601), computes exactly what it did without the problem."""
    if not available(device):
        pytest.skip("no CUDA device")
    from shapecheck.confirm.fixtures import confirm_fixed

    report = confirm_fixed(path, device)
    assert report.repairs, f"{path.name}: no case was repaired"
    for case, repair in report.repairs.items():
        kinds = {outcome.kind for outcome in report.outcomes if outcome.case == case}
        assert kinds, f"{case}: run() never ran it"
        # `allocates` proves an SC601 fix by "same" in a mended case too
        allowed = {"same"} if repair.keeps_results else {"runs", "matches", "same"}
        assert kinds <= allowed, f"{case}: {kinds}"
