"""The confirmation report, and rule documentation that quotes what PyTorch really says."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from shapecheck.confirm.fixtures import confirm, fixed_version, fixture_files
from shapecheck.rule import Rule, SuppressionRule, all_rules

pytest.importorskip("torch")

from shapecheck.confirm import Outcome, OutcomeKind, Repair
from shapecheck.confirm.__main__ import main, print_report
from shapecheck.confirm.fixtures import FixedReport, LineVerdict, _innermost
from tests.conftest import confirmation, fixed_confirmation

PROVEN_AT_RUN_TIME = [rule for rule in all_rules() if not issubclass(rule, SuppressionRule)]
"""Every rule but those about suppression comments, which PyTorch never runs."""


def test_report_covers_every_rule_and_agrees(capsys: pytest.CaptureFixture[str]) -> None:
    reports = [confirmation(path, "cpu") for path in fixture_files()]
    fixed = [
        fixed_confirmation(path, "cpu") for path in fixture_files() if fixed_version(path).exists()
    ]
    assert print_report(reports, fixed) == 0
    report = capsys.readouterr().out
    for rule in PROVEN_AT_RUN_TIME:
        assert f"{rule.code} {rule.name} — cpu" in report
    assert "all agree" in report and "disagreement" not in report


def test_report_fails_when_a_fixture_disagrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = next(path for path in fixture_files() if "# ok: SC101" in path.read_text())
    broken = tmp_path / source.name
    # claim a look-alike line is bad: the linter stays quiet and the case matches
    text = source.read_text(encoding="utf-8").replace("# ok: SC101", "# expect: SC101", 1)
    broken.write_text(text, encoding="utf-8")
    assert main(["--device", "cpu", "--fixtures", str(tmp_path)]) == 1
    report = capsys.readouterr().out
    assert report.startswith("shapecheck confirmation report\ntorch ")
    assert "disagreement(s)" in report and "not flagged" in report and "matches" in report


BAD_CASE_THAT_RUNS = '''\
"""SC101: a merge after a transpose that, with one head, happens to be viewable."""

import torch


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    b, h, t, d = x.shape
    return x.transpose(1, 2).view(b, t, h * d)  # expect: SC101


def run(device: str) -> None:
    from shapecheck.confirm import raises

    raises(merge_heads, torch.randn(2, 1, 3, 4, device=device), match="view size")
'''


def test_a_bad_case_that_stops_crashing_is_a_disagreement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "SC101_one_head.py"
    path.write_text(BAD_CASE_THAT_RUNS, encoding="utf-8")
    report = confirm(path, "cpu")
    assert report.failure == "merge_heads ran without raising 'view size'"
    assert report.disagreements == [
        "SC101_one_head.py (cpu): merge_heads ran without raising 'view size'",
        "SC101_one_head.py:8 SC101 (cpu): at run time no case ran it",
    ]
    assert main(["--device", "cpu", "--fixtures", str(tmp_path)]) == 1
    assert "ran without raising" in capsys.readouterr().out


def test_a_finding_on_an_unmarked_line_is_a_disagreement(tmp_path: Path) -> None:
    path = tmp_path / "SC101_unmarked.py"
    path.write_text(BAD_CASE_THAT_RUNS.replace("  # expect: SC101", ""), encoding="utf-8")
    assert "SC101_unmarked.py:8: SC101 reported on an unmarked line" in (
        confirm(path, "cpu").disagreements
    )


def test_report_needs_fixtures(tmp_path: Path) -> None:
    assert main(["--device", "cpu", "--fixtures", str(tmp_path)]) == 2


def test_cuda_report_without_cuda_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["--device", "cuda"]) == 2


def _normalised(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "#", text.replace("`", "")))


@pytest.mark.parametrize("rule", PROVEN_AT_RUN_TIME, ids=lambda rule: rule.code)
def test_documentation_quotes_what_its_fixtures_show(rule: type[Rule]) -> None:
    """At least one error PyTorch really raised is quoted; a silent bug says it differs."""
    documentation = _normalised(rule.documentation().split("## Runtime evidence", 1)[1])
    raised: set[str] = set()
    diverges = False
    for path in fixture_files():
        for verdict in confirmation(path, "cpu").verdicts:
            if verdict.code != rule.code or not verdict.bad or verdict.outcome is None:
                continue
            if verdict.outcome.kind == "raises":
                raised.add(_normalised(verdict.outcome.detail)[:50])
            elif verdict.outcome.kind == "allocates":
                assert "allocates" in documentation, f"{rule.code} docs do not say it allocates"
            else:
                diverges = True
    assert raised or diverges or "allocates" in documentation, f"{rule.code}: nothing confirmed"
    if raised:
        assert any(message in documentation for message in raised), (
            f"{rule.code} docs quote none of: {sorted(raised)}"
        )
    if diverges:
        assert "differs from the reference" in documentation


def test_report_fails_when_a_fix_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = next(path for path in fixture_files() if path.name == "SC301_functional.py")
    (tmp_path / "fixed").mkdir()
    (tmp_path / source.name).write_bytes(source.read_bytes())
    # a scale the linter cannot judge, so the case counts as repaired, but not the right one
    fixed = fixed_version(source).read_text(encoding="utf-8")
    wrong = fixed.replace("/ math.sqrt(query.size(-1))", "/ math.sqrt(query.size(-1) + 1)", 1)
    assert wrong != fixed
    (tmp_path / "fixed" / source.name).write_text(wrong, encoding="utf-8")
    assert main(["--device", "cpu", "--fixtures", str(tmp_path)]) == 1
    report = capsys.readouterr().out
    assert "SC301_functional.py (cpu): " in report and "differs" in report


def _outcome(kind: OutcomeKind, case: str = "case") -> Outcome:
    return Outcome(case, "/model.py", 1, 9, kind, "what it did")


@pytest.mark.parametrize("kind", ["raises", "differs", "allocates", "matches", "runs", "same"])
def test_a_bad_line_needs_a_crash_a_divergence_or_allocations(kind: OutcomeKind) -> None:
    bad = LineVerdict(Path("model.py"), 5, "SC101", True, True, _outcome(kind))
    assert bad.runtime_agrees == (kind in ("raises", "differs", "allocates"))
    lookalike = LineVerdict(Path("model.py"), 5, "SC101", False, False, _outcome(kind))
    assert lookalike.runtime_agrees == (kind == "matches")


def test_a_marked_line_no_case_ran_disagrees() -> None:
    assert not LineVerdict(Path("model.py"), 5, "SC101", True, True, None).runtime_agrees
    assert not LineVerdict(Path("model.py"), 5, "SC101", False, False, None).runtime_agrees


def test_a_repaired_case_must_run_and_do_what_its_repair_promises() -> None:
    original = types.ModuleType("original")
    repairs = {"kept": Repair(True, original), "mended": Repair(False, original)}

    def disagreements(*outcomes: Outcome) -> list[str]:
        return FixedReport(Path("fixed.py"), "cpu", repairs, list(outcomes), None).disagreements

    assert disagreements(_outcome("same", "kept"), _outcome("matches", "mended")) == []
    assert disagreements(_outcome("same", "kept")) == ["mended: run() never ran it"]
    assert disagreements(_outcome("matches", "kept"), _outcome("runs", "mended")) == [
        "kept: matches"
    ]


def test_a_line_is_judged_by_the_innermost_case_holding_it() -> None:
    """A look-alike helper inside a bad case is judged by its own run, not by the bad case's."""
    outer = Outcome("Attention", "/model.py", 1, 20, "differs", "diverged")
    inner = Outcome("Attention.scores", "/model.py", 5, 8, "matches", "matched")
    assert _innermost([outer, inner], Path("/model.py"), 6) is inner
    assert _innermost([inner, outer], Path("/model.py"), 6) is inner
    assert _innermost([outer, inner], Path("/model.py"), 12) is outer
    assert _innermost([outer, inner], Path("/other.py"), 6) is None
