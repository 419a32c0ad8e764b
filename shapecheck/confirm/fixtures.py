"""Fixture files: their marks, and what the linter and PyTorch each say about the marked lines.

``# expect: SC101`` at the end of a line: the linter must report SC101 there, and the case
(function or class) holding the line must crash or diverge when the fixture runs.
``# ok: SC101``: a look-alike; the linter must stay quiet and the case must match.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from shapecheck.confirm import Outcome, run_fixture

FIXTURES_DIR = Path(__file__).resolve().parents[2] / "fixtures"
"""The fixtures of a source checkout (they are not installed with the package)."""

_MARK = re.compile(r"#\s*(expect|ok):\s*(SC\d{3}(?:\s*,\s*SC\d{3})*)")


@dataclass(frozen=True)
class Marks:
    expect: frozenset[tuple[int, str]]
    ok: frozenset[tuple[int, str]]


def fixture_files(directory: Path = FIXTURES_DIR) -> list[Path]:
    return sorted(directory.glob("SC[0-9][0-9][0-9]*.py"))


def read_marks(path: Path) -> Marks:
    expect: set[tuple[int, str]] = set()
    ok: set[tuple[int, str]] = set()
    text = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.COMMENT:
            continue
        for kind, codes in _MARK.findall(token.string):
            for code in re.findall(r"SC\d{3}", codes):
                (expect if kind == "expect" else ok).add((token.start[0], code))
    return Marks(frozenset(expect), frozenset(ok))


def static_findings(path: Path) -> set[tuple[int, str]]:
    """(line, code) of everything the linter reports in ``path``, with every rule on."""
    from shapecheck.linter import lint_source
    from shapecheck.rule import all_rules

    result = lint_source(path.read_bytes(), str(path), [rule() for rule in all_rules()])
    return {(diagnostic.line, diagnostic.code) for diagnostic in result.diagnostics}


@dataclass(frozen=True)
class LineVerdict:
    """One marked line: what was expected, what the linter said, what PyTorch did."""

    path: Path
    line: int
    code: str
    bad: bool
    flagged: bool
    outcome: Outcome | None

    @property
    def static_agrees(self) -> bool:
        return self.flagged == self.bad

    @property
    def runtime_agrees(self) -> bool:
        if self.outcome is None:
            return False
        if self.bad:
            return self.outcome.kind in ("raises", "differs", "allocates")
        return self.outcome.kind == "matches"


@dataclass(frozen=True)
class FixtureReport:
    path: Path
    device: str
    verdicts: list[LineVerdict]
    unmarked_findings: set[tuple[int, str]]


def confirm(path: Path, device: str) -> FixtureReport:
    """Lint and run one fixture on ``device``; judge every marked line."""
    marks = read_marks(path)
    found = static_findings(path)
    outcomes = run_fixture(path, device)
    verdicts = [
        LineVerdict(path, line, code, bad, (line, code) in found, _innermost(outcomes, path, line))
        for bad, marked in ((True, marks.expect), (False, marks.ok))
        for line, code in sorted(marked)
    ]
    return FixtureReport(path, device, verdicts, found - marks.expect)


def _innermost(outcomes: list[Outcome], path: Path, line: int) -> Outcome | None:
    covering = [outcome for outcome in outcomes if outcome.covers(str(path.resolve()), line)]
    return min(covering, key=lambda outcome: outcome.span, default=None)
