"""The confirmation report, and rule documentation that quotes what PyTorch really says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shapecheck.confirm.fixtures import fixed_version, fixture_files
from shapecheck.rule import Rule, all_rules

pytest.importorskip("torch")

from shapecheck.confirm.__main__ import main
from shapecheck.confirm.fixtures import confirm


def test_report_covers_every_rule_and_agrees(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--device", "cpu"]) == 0
    report = capsys.readouterr().out
    assert report.startswith("shapecheck confirmation report\ntorch ")
    for rule in all_rules():
        assert f"{rule.code} {rule.name} — cpu" in report
    assert "all agree" in report


def test_report_fails_when_a_fixture_disagrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = fixture_files()[0]
    broken = tmp_path / source.name
    # claim a look-alike line is bad: the linter stays quiet and the case matches
    text = source.read_text(encoding="utf-8").replace("# ok: SC101", "# expect: SC101", 1)
    broken.write_text(text, encoding="utf-8")
    assert main(["--device", "cpu", "--fixtures", str(tmp_path)]) == 1
    report = capsys.readouterr().out
    assert "disagreement(s)" in report and "not flagged" in report and "matches" in report


def test_report_needs_fixtures(tmp_path: Path) -> None:
    assert main(["--device", "cpu", "--fixtures", str(tmp_path)]) == 2


def test_cuda_report_without_cuda_is_refused() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["--device", "cuda"]) == 2


def _normalised(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\d+", "#", text.replace("`", "")))


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_documentation_quotes_what_its_fixtures_show(rule: type[Rule]) -> None:
    """At least one error PyTorch really raised is quoted; a silent bug says it differs."""
    documentation = _normalised(rule.documentation().split("## Runtime evidence", 1)[1])
    raised: set[str] = set()
    diverges = False
    for path in fixture_files():
        for verdict in confirm(path, "cpu").verdicts:
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
