"""Every fixture, both halves: what the linter says about each line, what PyTorch does."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from shapecheck.confirm.fixtures import fixture_files, read_marks, static_findings
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
