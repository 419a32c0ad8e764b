"""Every fixture, both halves: what the linter says about each line, what PyTorch does."""

from __future__ import annotations

import ast
import difflib
from collections import Counter
from pathlib import Path

import pytest

from shapecheck.confirm.fixtures import (
    fixed_text,
    fixed_version,
    fixture_files,
    read_marks,
    static_findings,
)
from shapecheck.rule import Rule, SuppressionRule, all_rules
from tests.conftest import confirmation, fixed_confirmation

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
    assert docstring.startswith(_codes(path)), f"{path.name}: start the docstring with the code"


def _codes(path: Path) -> str:
    """How a fixture's docstring starts: with its code (``SC101``), or for a module of a
    fixture package (named as the module it stands for) with every code its marks use."""
    if path.name.startswith("SC"):
        return path.name[:5]
    marks = read_marks(path)
    return ", ".join(sorted({code for _, code in marks.expect | marks.ok})) + ":"


def test_a_fixture_package_module_is_a_fixture() -> None:
    """Modules of a fixture package that ``run`` are fixtures; the others (what they import)
    are not, and neither is the package's ``fixed/``."""
    names = {path.relative_to(path.parents[1]).as_posix() for path in FIXTURES}
    assert {"project/attention.py", "project/layers.py", "project/model.py"} <= names
    assert not names & {"project/configuration.py", "project/__init__.py"}
    assert not any("fixed/" in name for name in names)


# a suppression rule reports comments, which PyTorch never runs: no fixture can prove it
@pytest.mark.parametrize(
    "rule",
    [rule for rule in all_rules() if not issubclass(rule, SuppressionRule)],
    ids=lambda rule: rule.code,
)
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
    """Every bad line sits in a case that crashed or diverged, every look-alike in one that
    matched, no claim of ``run`` was contradicted, no unmarked line has a finding."""
    if not available(device):
        pytest.skip("no CUDA device")
    report = confirmation(path, device)
    assert report.verdicts and not report.disagreements, report.disagreements


# --- fixed fixtures: every fix proven by running it ------------------------------------------

FIXED = [path for path in FIXTURES if fixed_version(path).exists()]
FIXED_IDS = [path.name for path in FIXED]


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixed_fixture_is_what_fix_writes(path: Path) -> None:
    """``fixtures/fixed/`` holds ``shapecheck --fix --unsafe-fixes`` of each fixture
    (regenerate with ``python -m shapecheck.confirm --write-fixed``)."""
    expected = fixed_text(path)
    committed = fixed_version(path)
    if expected is None:
        assert not committed.exists(), f"{committed} is stale: no fix applies any more"
    else:
        assert committed.read_text(encoding="utf-8") == expected


@pytest.mark.parametrize("path", FIXED, ids=FIXED_IDS)
def test_fixes_change_only_bad_lines(path: Path) -> None:
    """Only bad lines change, and lines that a first round of fixes made bad: SC102's
    `permute` leaves a later `view` needing `.contiguous()`, which SC101 then adds safely."""
    original = path.read_text(encoding="utf-8").splitlines()
    fixed = fixed_version(path).read_text(encoding="utf-8").splitlines()
    bad_lines = {line for line, _ in read_marks(path).expect}
    made_bad = _made_bad_by_a_first_round(path)
    matcher = difflib.SequenceMatcher(a=original, b=fixed, autojunk=False)
    for tag, first, last, new_first, new_last in matcher.get_opcodes():
        if tag == "insert":  # the import a fix needs, alone or as a section of its own
            added = [line for line in fixed[new_first:new_last] if line]
            assert added == ["import math"], fixed[new_first:new_last]
        elif tag != "equal":
            changed = {
                line
                for line in range(first + 1, last + 1)
                if line not in bad_lines and original[line - 1] not in made_bad
            }
            assert not changed, f"lines {sorted(changed)} were not bad"


def _made_bad_by_a_first_round(path: Path) -> set[str]:
    """Lines that, after one round of fixes, have a finding with a safe fix."""
    from shapecheck.fixer import apply_fixes
    from shapecheck.linter import lint_source

    rules = [rule() for rule in all_rules()]
    source = path.read_bytes()
    once, _ = apply_fixes(
        source.decode(), lint_source(source, str(path), rules).diagnostics, unsafe=True
    )
    lines = once.splitlines()
    findings = lint_source(once.encode(), str(path), rules).diagnostics
    return {lines[d.line - 1] for d in findings if d.fix is not None and d.fix.safe}


@pytest.mark.parametrize("path", FIXED, ids=FIXED_IDS)
def test_fixed_fixture_keeps_only_findings_without_a_fix(path: Path) -> None:
    from shapecheck.linter import lint_path

    rules = [rule() for rule in all_rules()]
    remaining = lint_path(str(fixed_version(path)), rules).diagnostics
    assert all(d.fix is None for d in remaining), [d for d in remaining if d.fix]
    marks = read_marks(fixed_version(path))  # the marks move with their lines
    assert {(d.line, d.code) for d in remaining} <= marks.expect


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("path", FIXED, ids=FIXED_IDS)
def test_fixed_cases_run_right(path: Path, device: str) -> None:
    """Each case whose findings were all fixed now runs and matches the reference, or, where
    every fix keeps results (SC202, SC601), computes exactly what it did without the problem."""
    if not available(device):
        pytest.skip("no CUDA device")
    report = fixed_confirmation(path, device)
    assert report.repairs, f"{path.name}: no case was repaired"
    assert not report.disagreements, report.disagreements
