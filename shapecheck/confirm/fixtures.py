"""Fixture files: their marks, and what the linter and PyTorch each say about the marked lines.

``# expect: SC101`` at the end of a line: the linter must report SC101 there, and the case
(function or class) holding the line must crash or diverge when the fixture runs.
``# ok: SC101``: a look-alike; the linter must stay quiet and the case must match.
"""

from __future__ import annotations

import inspect
import io
import re
import tokenize
from pathlib import Path
from types import ModuleType

from shapecheck.confirm import Outcome, Repair, judging_fixed, load_fixture, run_fixture
from shapecheck.record import record
from shapecheck.selection import COMMENT_FAMILY

SHIPPED_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
"""Where an installed package keeps its fixtures (pyproject.toml ships them there)."""
CHECKOUT_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
"""Where a source checkout (or an editable install of one) keeps them."""
FIXTURES_DIR = SHIPPED_FIXTURES if SHIPPED_FIXTURES.is_dir() else CHECKOUT_FIXTURES
"""The fixtures ``python -m shapecheck.confirm`` runs unless told ``--fixtures DIR``."""


def fixed_version(path: Path) -> Path:
    """Where ``path`` lies with every fix applied (``--fix --unsafe-fixes``): ``fixed/``
    beside it, present where any fix applies."""
    return path.parent / "fixed" / path.name


_MARK = re.compile(r"#\s*(expect|ok):\s*(SC\d{3}(?:\s*,\s*SC\d{3})*)")


@record
class Marks:
    expect: frozenset[tuple[int, str]]
    ok: frozenset[tuple[int, str]]


def fixture_files(directory: Path = FIXTURES_DIR) -> list[Path]:
    """The fixtures in ``directory``: each ``SCNNN_*.py``, then the modules of each fixture
    package in it (a folder with an ``__init__.py``, whose modules import each other) that
    are fixtures themselves, with a ``run``; the package's other modules are what they use."""
    files = sorted(directory.glob("SC[0-9][0-9][0-9]*.py"))
    for package in sorted(path.parent for path in directory.glob("*/__init__.py")):
        files += [
            path
            for path in sorted(package.glob("*.py"))
            if path.name != "__init__.py" and "\ndef run(" in path.read_text(encoding="utf-8")
        ]
    return files


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


@record
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
        wrong = self.outcome.kind in ("raises", "differs", "allocates")
        if self.code.startswith(COMMENT_FAMILY):
            # a suppression is stale where the code under it is right, used where it is not
            return self.outcome.kind == "matches" if self.bad else wrong
        return wrong if self.bad else self.outcome.kind == "matches"


@record
class FixtureReport:
    path: Path
    device: str
    verdicts: list[LineVerdict]
    unmarked_findings: set[tuple[int, str]]
    failure: str | None
    """A claim of the fixture's ``run`` that PyTorch contradicted."""

    @property
    def disagreements(self) -> list[str]:
        """Everything that contradicts the marks: a finding on an unmarked line, a claim of
        ``run`` that PyTorch contradicted (a bad case that stopped crashing), a marked line
        the linter judged otherwise, or whose case did not do what the mark says."""
        problems = [
            f"{self.path.name}:{line}: {code} reported on an unmarked line"
            for line, code in sorted(self.unmarked_findings)
        ]
        if self.failure:
            problems.append(f"{self.path.name} ({self.device}): {self.failure}")
        for verdict in self.verdicts:
            where = f"{self.path.name}:{verdict.line} {verdict.code} ({self.device})"
            if not verdict.static_agrees:
                expectation = "not flagged" if verdict.bad else "flagged on a look-alike"
                problems.append(f"{where}: {expectation}")
            if not verdict.runtime_agrees:
                outcome = verdict.outcome
                happened = f"{outcome.kind}: {outcome.detail}" if outcome else "no case ran it"
                problems.append(f"{where}: at run time {happened}")
        return problems


def confirm(path: Path, device: str) -> FixtureReport:
    """Lint and run one fixture on ``device``; judge every marked line."""
    marks = read_marks(path)
    found = static_findings(path)
    ran = run_fixture(path, device)
    verdicts = [
        LineVerdict(
            path, line, code, bad, (line, code) in found, _innermost(ran.outcomes, path, line)
        )
        for bad, marked in ((True, marks.expect), (False, marks.ok))
        for line, code in sorted(marked)
    ]
    return FixtureReport(path, device, verdicts, found - marks.expect, ran.failure)


def _innermost(outcomes: list[Outcome], path: Path, line: int) -> Outcome | None:
    covering = [outcome for outcome in outcomes if outcome.covers(str(path.resolve()), line)]
    return min(covering, key=lambda outcome: outcome.span, default=None)


def fixed_text(path: Path) -> str | None:
    """``path`` as ``shapecheck --fix --unsafe-fixes`` leaves it; ``None`` if nothing applies."""
    from shapecheck.fixer import fix_source
    from shapecheck.rule import all_rules
    from shapecheck.source import Source, parse_source

    data = path.read_bytes()
    source = parse_source(data, str(path))
    if not isinstance(source, Source):
        raise ValueError(f"{path}: {source.message}")
    rules = [rule() for rule in all_rules()]
    fixed = fix_source(source, rules, keep=lambda _: True, unsafe=True, original=data)
    return fixed.data.decode(source.encoding) if fixed.data != data else None


@record
class FixedReport:
    """A fixed fixture run: which cases had every finding fixed, and what they did."""

    path: Path
    device: str
    repairs: dict[str, Repair]
    outcomes: list[Outcome]
    failure: str | None

    @property
    def disagreements(self) -> list[str]:
        """Repaired cases that did not do what their repair promises: run and match the
        reference (``runs``/``matches``), or, where every fix keeps results, compute what
        they computed before (``same``; ``allocates`` proves an SC601 fix that way too)."""
        problems = [self.failure] if self.failure else []
        for case, repair in sorted(self.repairs.items()):
            kinds = {outcome.kind for outcome in self.outcomes if outcome.case == case}
            allowed = {"same"} if repair.keeps_results else {"runs", "matches", "same"}
            if not kinds:
                problems.append(f"{case}: run() never ran it")
            elif not kinds <= allowed:
                problems.append(f"{case}: {', '.join(sorted(kinds - allowed))}")
        return problems


def confirm_fixed(path: Path, device: str) -> FixedReport:
    """Run :func:`fixed_version` of ``path``; each case whose findings were all fixed must now run
    and match the reference, or, where every fix keeps results, compute exactly what it
    computed before without the problem. Other cases must behave as they did."""
    from shapecheck.linter import lint_path
    from shapecheck.rule import all_rules

    fixed_path = fixed_version(path)
    rules = [rule() for rule in all_rules()]
    original = load_fixture(path)
    fixed = load_fixture(fixed_path, prefix="shapecheck_fixed")
    keeps: dict[str, bool] = {}
    for diagnostic in lint_path(str(path), rules).diagnostics:
        case = _case_at(original, diagnostic.line)
        if diagnostic.fix is not None and case is not None:
            keeps[case] = keeps.get(case, True) and diagnostic.fix.keeps_results
    unfixed = {_case_at(fixed, d.line) for d in lint_path(str(fixed_path), rules).diagnostics}
    repairs = {
        case: Repair(keeps_results, original)
        for case, keeps_results in keeps.items()
        if case not in unfixed
    }
    with judging_fixed(repairs):
        ran = run_fixture(fixed_path, device, fixed)
    return FixedReport(fixed_path, device, repairs, ran.outcomes, ran.failure)


def _case_at(module: ModuleType, line: int) -> str | None:
    """The qualified name of the innermost function or class of ``module`` holding ``line``."""
    spans = []
    for value in vars(module).values():
        if not (inspect.isfunction(value) or inspect.isclass(value)):
            continue
        written = inspect.unwrap(value)
        if getattr(written, "__module__", None) != module.__name__:
            continue
        lines, first = inspect.getsourcelines(written)
        if first <= line < first + len(lines):
            spans.append((len(lines), value.__qualname__))
    return min(spans)[1] if spans else None
