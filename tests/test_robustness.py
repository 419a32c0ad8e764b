"""Untrusted, huge and strange input: no exception escapes, one rule's bug costs only that
rule's findings, nothing the linter reads is ever run, and fuzzed sources never crash it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapecheck import cli as cli_module
from shapecheck.confirm.fixtures import fixture_files
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules, rule_by_code
from tests.conftest import BAD_VIEW, UNSCALED, run_python

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]

RULES = [rule() for rule in all_rules()]


def _codes(result: Result) -> list[str]:
    return [finding["code"] for finding in json.loads(result.output)]


def test_a_crashing_rule_costs_only_its_own_findings(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: object, analysis: object) -> Iterator[object]:
        raise ValueError("a bug")
        yield

    rule = rule_by_code("SC301")
    assert rule is not None
    working = rule.check
    monkeypatch.setattr(rule, "check", broken)
    write("both.py", BAD_VIEW + UNSCALED.replace("import torch\n", ""))
    write("other.py", BAD_VIEW)
    result = cli("--format", "json", "both.py", "other.py")
    findings = json.loads(result.output)
    # the rule fails on every file; every other rule's findings stay
    assert [(f["path"], f["code"]) for f in findings] == [
        ("both.py", "SC000"),
        ("both.py", "SC101"),
        ("other.py", "SC000"),
        ("other.py", "SC101"),
    ]
    assert "internal error in rule SC301 (ValueError: a bug)" in findings[0]["message"]
    assert "please report it" in findings[0]["message"]
    assert result.exit_code == 2
    # an incomplete result is not cached: the next run tries the rule again
    assert _codes(cli("--format", "json", "both.py")) == ["SC000", "SC101"]
    monkeypatch.setattr(rule, "check", working)
    assert _codes(cli("--format", "json", "both.py")) == ["SC101", "SC301"]


def test_a_file_deleted_after_discovery_is_reported(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("model.py", BAD_VIEW)
    doomed = write("doomed.py", BAD_VIEW)
    real_discover = cli_module.discover

    def discover_then_delete(*args: object, **kwargs: object) -> Iterator[Path]:
        found = list(real_discover(*args, **kwargs))  # type: ignore[arg-type]
        doomed.unlink()
        yield from found

    monkeypatch.setattr(cli_module, "discover", discover_then_delete)
    result = cli("--format", "json", ".")
    findings = json.loads(result.output)
    assert [(f["path"], f["code"]) for f in findings] == [
        ("doomed.py", "SC000"),
        ("model.py", "SC101"),
    ]
    assert findings[0]["message"].startswith("cannot read")
    assert result.exit_code == 2


def test_a_50000_line_file(cli: Cli, write: Write) -> None:
    filler = "".join(f"size_{i} = {i} * 2\n" for i in range(50_000 - 20))
    write("huge.py", BAD_VIEW + filler)
    result = cli("--no-cache", "huge.py")
    assert result.output.startswith("huge.py:6:37: SC101")
    assert result.exit_code == 1


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 500 + "1" + ")" * 500,
        "f(" * 500 + "1" + ")" * 500,
        "x" + "[0]" * 500,
        "lambda: " * 500 + "1",
        "not " * 500 + "x",
        " if c else ".join(["1"] * 500),
    ],
    ids=["parentheses", "calls", "subscripts", "lambdas", "nots", "conditionals"],
)
def test_500_deep_expressions_never_raise(cli: Cli, write: Write, expression: str) -> None:
    write("deep.py", f"import torch\nx = {expression}\n")
    write("model.py", BAD_VIEW)
    result = cli("--format", "json", "deep.py", "model.py")
    findings = json.loads(result.output)
    assert ("model.py", "SC101") in [(f["path"], f["code"]) for f in findings]
    for finding in findings:
        if finding["path"] == "deep.py":  # CPython itself refuses some of these
            assert finding["code"] == "SC000"
            assert "deeply nested" in finding["message"] or "syntax error" in finding["message"]


def test_a_very_long_line(cli: Cli, write: Write) -> None:
    write("long.py", "import torch\nx = [" + "1, " * 300_000 + "]\n" + BAD_VIEW)
    result = cli("long.py")
    assert result.exit_code == 1
    assert "SC101" in result.output


def test_the_code_checked_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "was-run"
    hostile = (
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "import torch\n"
        "if __name__ == '__main__':\n"
        f"    pathlib.Path({str(marker)!r}).write_text('ran as main')\n"
    )
    (tmp_path / "hostile.py").write_text(hostile + BAD_VIEW, encoding="utf-8")
    (tmp_path / "__init__.py").write_text(hostile, encoding="utf-8")
    process = run_python("-m", "shapecheck", "--no-cache", ".", cwd=tmp_path)
    assert process.returncode == 1, process.stdout + process.stderr
    assert "hostile.py" in process.stdout
    assert not marker.exists()


SOURCES = [path.read_bytes() for path in fixture_files()]


@st.composite
def mutated_fixture(draw: st.DrawFn) -> bytes:
    """A fixture with a few bytes deleted, inserted or replaced: broken, half-broken or odd."""
    source = bytearray(draw(st.sampled_from(SOURCES)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(source)))
        edit = draw(st.sampled_from(["delete", "insert", "replace"]))
        piece = draw(st.sampled_from([b"(", b")", b":", b".T", b"\n", b"    ", b"view", b"\xff"]))
        if edit == "delete":
            del source[at : at + draw(st.integers(1, 40))]
        elif edit == "insert":
            source[at:at] = piece
        else:
            source[at : at + len(piece)] = piece
    return bytes(source)


# Derandomized, so CI never flakes on a new draw; hypothesmith discards much of what it
# generates, which its health check would otherwise report at random.
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@FUZZ
@given(mutated_fixture())
def test_mutated_fixtures_never_crash(source: bytes) -> None:
    result = lint_source(source, "fuzzed.py", RULES)
    assert result.complete, [d.message for d in result.diagnostics if d.code == "SC000"]


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles what it makes
@FUZZ
@given(st.data())
def test_generated_python_never_crashes(data: st.DataObject) -> None:
    import hypothesmith

    source = data.draw(hypothesmith.from_node())
    result = lint_source(("import torch\n" + source).encode(), "generated.py", RULES)
    assert result.complete, [d.message for d in result.diagnostics if d.code == "SC000"]


def test_functions_that_close_over_functions_are_followed_in_linear_time(
    tmp_path: Path,
) -> None:
    """Each nested helper's closure holds the ones before it: a fact that hashed or compared
    them all would cost 2^40 steps (remembering what a call returned once did)."""
    helpers = "".join(
        f"    def f{i}(t):\n        return {f'f{i - 1}(t)' if i else 't'}\n" for i in range(40)
    )
    source = (
        "import torch\n\n\ndef apply(fn, x):\n    return fn(x)\n\n\n"
        f"def outer(x):\n{helpers}    return apply(f39, x).transpose(1, 2)\n"
    )
    (tmp_path / "closures.py").write_text(source, encoding="utf-8")
    process = subprocess.run(
        [sys.executable, "-m", "shapecheck", "--no-cache", "--isolated", "closures.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stdout + process.stderr
