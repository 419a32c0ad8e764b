"""Output for CI and code scanning: SARIF (validated against the 2.1.0 schema), GitHub
workflow commands, ``--statistics``, ``--quiet`` and ``--exit-zero``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from shapecheck.diagnostics import Diagnostic
from shapecheck.report import render
from tests.conftest import BAD_VIEW, CLEAN, ROOT, UNSCALED

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]

SCHEMA = Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json"


def test_sarif_is_valid_and_carries_rules_results_and_fixes(cli: Cli, write: Write) -> None:
    import jsonschema

    write("model.py", BAD_VIEW)
    write("other.py", UNSCALED)
    write("broken.py", "def f(:\n")
    result = cli("--format", "sarif", "model.py", "other.py", "broken.py")
    log = json.loads(result.output)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(log, schema)
    broken = json.loads(result.output)
    broken["runs"][0]["results"][0]["level"] = "fatal"  # the schema does catch a bad log
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
    [run] = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert rules[0]["id"] == "SC000" and "SC101" in {rule["id"] for rule in rules}
    by_rule = {result["ruleId"]: result for result in run["results"]}
    assert set(by_rule) == {"SC000", "SC101", "SC301"}
    for found in run["results"]:
        assert rules[found["ruleIndex"]]["id"] == found["ruleId"]
    view = by_rule["SC101"]
    location = view["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "model.py"
    assert location["region"]["startLine"] == 6
    [fix] = view["fixes"]
    [change] = fix["artifactChanges"]
    [replacement] = change["replacements"]
    assert replacement["insertedContent"]["text"] == "contiguous().view"  # the name alone
    assert replacement["deletedRegion"]["startColumn"] == location["region"]["startColumn"]
    assert "unsafe" in by_rule["SC301"]["fixes"][0]["description"]["text"]
    assert "## Why is this bad?" in rules[1]["help"]["markdown"]
    assert result.exit_code == 2  # broken.py could not be parsed


def test_sarif_without_findings_is_valid(cli: Cli, write: Write) -> None:
    import jsonschema

    write("clean.py", CLEAN)
    log = json.loads(cli("--format", "sarif", "clean.py").output)
    jsonschema.validate(log, json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert log["runs"][0]["results"] == []


def test_sarif_rules_carry_what_code_scanning_shows(cli: Cli, write: Write) -> None:
    """GitHub code scanning shows a rule's full description and its Markdown help, and
    filters by precision and tags: every rule has them, SC000 included."""
    write("model.py", BAD_VIEW)
    rules = json.loads(cli("--format", "sarif", "model.py").output)["runs"][0]["tool"]["driver"]
    for rule in rules["rules"]:
        assert rule["fullDescription"]["text"] and "\n" not in rule["fullDescription"]["text"]
        assert rule["help"]["markdown"].startswith("## What it does")
        assert "##" not in rule["help"]["text"] and "```" not in rule["help"]["text"]
        assert rule["properties"]["precision"] in ("very-high", "high")
        assert rule["properties"]["tags"]
    view = next(rule for rule in rules["rules"] if rule["id"] == "SC101")
    assert view["fullDescription"]["text"].startswith("Finds `.view(...)` calls that merge")
    assert view["properties"]["tags"] == ["pytorch", "views"]


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("model.py", "model.py"),
        ("src/a b%c.py", "src/a%20b%25c.py"),
        ("/home/user/model.py", "file:///home/user/model.py"),
        ("C:\\work\\my model.py", "file:///C:/work/my%20model.py"),
    ],
)
def test_sarif_locations_are_uris(path: str, uri: str) -> None:
    """A bare absolute path or an unencoded ``%`` is no URI: code scanning cannot place it."""
    found = Diagnostic(path, 1, 1, 1, 2, "SC101", "view-without-contiguous", "error", "m")
    log = json.loads(render([found], "sarif", 1))
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == uri


def test_github_annotations(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    result = cli("--format", "github", "model.py")
    assert result.exit_code == 1
    assert result.output.startswith(
        "::error file=model.py,line=6,col=37,endLine=6,endColumn=41,"
        "title=SC101 view-without-contiguous::`.view()` merges axes"
    )


def test_github_escapes_what_would_end_a_command() -> None:
    odd = Diagnostic("a,b:c.py", 1, 2, 1, 3, "SC301", "n", "warning", "100% sure\nnext")
    assert render([odd], "github", 1) == (
        "::warning file=a%2Cb%3Ac.py,line=1,col=2,endLine=1,endColumn=3,title=SC301 n"
        "::100%25 sure%0Anext"
    )


def test_statistics_count_each_rule(cli: Cli, write: Write) -> None:
    example = (ROOT / "examples" / "attention_mistakes.py").read_text(encoding="utf-8")
    write("model.py", BAD_VIEW)
    write("example.py", example)
    text = cli("--statistics", "model.py", "example.py")
    assert text.output.splitlines() == [
        "2  SC101  [*] view-without-contiguous",
        "1  SC201  key-not-transposed",
        "1  SC301  missing-attention-scale",
    ]
    assert text.exit_code == 1
    rows = json.loads(cli("--statistics", "--format", "json", "model.py", "example.py").output)
    assert rows[0] == {"code": "SC101", "name": "view-without-contiguous", "count": 2, "fixable": 2}


def test_quiet_prints_findings_only(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    write("clean.py", CLEAN)
    noisy = cli("model.py").output.splitlines()
    assert cli("-q", "model.py").output.splitlines() == noisy[:-1]
    assert cli("--quiet", "clean.py").output == ""


def test_exit_zero_keeps_errors_apart(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    write("broken.py", "def f(:\n")
    assert cli("--exit-zero", "model.py").exit_code == 0
    assert cli("--exit-zero", "model.py", "broken.py").exit_code == 2
