"""Every fixture, both halves: what the linter says about each line, what PyTorch does."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from shapecheck.linter import lint_source
from shapecheck.rule import all_rules
from tests.fixture_format import fixture_files, read_marks

FIXTURES = fixture_files()
IDS = [path.name for path in FIXTURES]


def findings(path: Path) -> set[tuple[int, str]]:
    rules = [rule() for rule in all_rules()]
    result = lint_source(path.read_bytes(), str(path), rules)
    return {(d.line, d.code) for d in result.diagnostics}


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_linter_says_exactly_what_the_fixture_expects(path: Path) -> None:
    marks = read_marks(path)
    found = findings(path)
    assert found == set(marks.expect), (
        f"missing: {sorted(set(marks.expect) - found)}; unexpected: {sorted(found - marks.expect)}"
    )
    assert not found & marks.ok


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_fixture_states_its_runtime_truth(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert "runtime:" in docstring, f"{path.name}: the docstring must say `runtime: ...`"
    assert path.name[:5] in docstring.split()[0], f"{path.name}: start the docstring with the code"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_every_rule_has_bad_and_lookalike_fixture_lines(rule: type) -> None:
    expected: Counter[str] = Counter()
    clean: Counter[str] = Counter()
    for path in FIXTURES:
        marks = read_marks(path)
        expected.update(code for _, code in marks.expect)
        clean.update(code for _, code in marks.ok)
    code = rule.code  # type: ignore[attr-defined]
    assert expected[code] >= 5, f"{code}: {expected[code]} bad fixture lines, need 5"
    assert clean[code] >= 5, f"{code}: {clean[code]} look-alike fixture lines, need 5"


def devices() -> list[str]:
    torch = pytest.importorskip("torch")
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_runtime_confirms_every_marked_line(path: Path, device: str) -> None:
    if device not in devices():
        pytest.skip("no CUDA device")
    from shapecheck.confirm import run_fixture

    outcomes = run_fixture(path, device)
    marks = read_marks(path)
    resolved = str(path.resolve())

    def innermost(line: int) -> str:
        covering = [
            o
            for o in outcomes
            if Path(o.path).resolve() == Path(resolved) and o.first_line <= line <= o.last_line
        ]
        assert covering, f"{path.name}:{line}: no case run by run() covers this marked line"
        return min(covering, key=lambda outcome: outcome.span).kind

    for line, code in sorted(marks.expect):
        assert innermost(line) in ("raises", "differs"), (
            f"{path.name}:{line}: {code} is expected here, but the case ran and matched"
        )
    for line, code in sorted(marks.ok):
        assert innermost(line) == "matches", (
            f"{path.name}:{line}: marked ok for {code}, but the case crashed or diverged"
        )
