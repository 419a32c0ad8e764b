"""Input the linter cannot read: one SC000 finding each, exit 2, never a traceback,
and every other file still checked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests.conftest import BAD_VIEW, CLEAN, run_python

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]


def _findings(result: Result) -> list[dict[str, object]]:
    findings = json.loads(result.output)
    assert isinstance(findings, list)
    return findings


@pytest.mark.parametrize(
    ("content", "message", "line", "column"),
    [
        (b"x = 1\ny = '\xff\xfe'\n", "cannot decode as utf-8", 2, 6),
        (b"def f(:\n    pass\n", "syntax error", 1, 7),
        (b"import torch\nx = (1,\n", "syntax error: '(' was never closed", 2, 5),
        (b"x = 1\n\x00y = 2\n", "null byte", 2, 1),
        (b"# -*- coding: klingon -*-\nx = 1\n", "cannot decode", 1, 1),
    ],
    ids=["not-utf8", "syntax-error", "unclosed", "null-byte", "unknown-encoding"],
)
def test_unreadable_source_is_one_sc000_finding(
    cli: Cli, write: Write, content: bytes, message: str, line: int, column: int
) -> None:
    write("bad.py", content)
    write("model.py", BAD_VIEW)
    result = cli("--format", "json", "bad.py", "model.py")
    assert result.exit_code == 2
    bad, other = _findings(result)
    assert (bad["path"], bad["code"], bad["line"], bad["column"]) == (
        "bad.py",
        "SC000",
        line,
        column,
    )
    assert message in str(bad["message"])
    assert (other["path"], other["code"]) == ("model.py", "SC101")  # the run went on


def test_declared_encodings_and_bom_are_honoured(cli: Cli, write: Write) -> None:
    write("latin.py", "# -*- coding: latin-1 -*-\n# café\n".encode("latin-1") + CLEAN.encode())
    write("bom.py", b"\xef\xbb\xbf" + CLEAN.encode())
    assert cli("latin.py", "bom.py").exit_code == 0


def test_empty_file_is_valid_python(cli: Cli, write: Write) -> None:
    # An empty module (every package's __init__.py) is correct code: nothing to report.
    write("__init__.py", b"")
    result = cli("__init__.py")
    assert (result.exit_code, result.output.strip()) == (0, "No findings in 1 file")


def test_missing_and_unreadable_paths(cli: Cli, write: Write, tmp_path: Path) -> None:
    write("model.py", CLEAN)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    result = cli("--format", "json", "missing.py", "dangling.py", "model.py")
    assert result.exit_code == 2
    messages = {f["path"]: f["message"] for f in _findings(result)}
    assert messages == {
        "missing.py": "cannot read: No such file or directory",
        "dangling.py": "cannot read: No such file or directory",
    }


def test_unreadable_file_in_a_directory(cli: Cli, write: Write, tmp_path: Path) -> None:
    write("pkg/model.py", BAD_VIEW)
    (tmp_path / "pkg" / "broken.py").symlink_to(tmp_path / "nowhere.py")
    result = cli("pkg")
    assert result.exit_code == 2
    assert "broken.py:1:1: SC000 cannot read" in result.output
    assert "model.py:6:37: SC101" in result.output


def test_symlink_loops_end(cli: Cli, write: Write, tmp_path: Path) -> None:
    write("pkg/model.py", BAD_VIEW)
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path / "pkg")
    result = cli("pkg")
    assert result.exit_code == 1
    assert result.output.count("SC101") == 1


@pytest.mark.parametrize(
    "expression",
    ["1" + "+1" * 3000, "-" * 3000 + "1", "y" + ".a" * 3000],
    ids=["long-sum", "unary-chain", "attribute-chain"],
)
def test_code_too_deep_to_analyse_is_said_and_the_other_files_are_checked(
    cli: Cli, write: Write, expression: str
) -> None:
    """Valid Python nested deeper than the analysis can follow: its findings are unknown, so
    it is one SC000 (exit 2), never a silent pass (issue 19, D17)."""
    write("deep.py", f"import torch\nx = {expression}\n")
    write("model.py", BAD_VIEW)
    result = cli("deep.py", "model.py")
    assert result.exit_code == 2
    deep, model, summary = result.output.splitlines()
    assert deep == "deep.py:1:1: SC000 cannot analyse the top-level code: too deeply nested"
    assert model.startswith("model.py:6:37: SC101")
    assert summary == "2 findings in 2 files; [*] 1 fixable with --fix"


def test_nesting_the_analysis_follows_is_not_an_error(cli: Cli, write: Write) -> None:
    write("deep.py", "import torch\nx = " + "[" * 150 + "]" * 150 + "\n")
    write("model.py", BAD_VIEW)
    result = cli("deep.py", "model.py")
    assert result.exit_code == 1
    first, summary = result.output.splitlines()
    assert first.startswith("model.py:6:37: SC101")
    assert summary == "1 finding in 1 file; [*] 1 fixable with --fix"


def test_no_traceback_from_the_real_executable(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_bytes(b"def f(:\n")
    process = run_python("-m", "shapecheck", "bad.py", cwd=tmp_path)
    assert process.returncode == 2
    assert "Traceback" not in process.stdout + process.stderr
    assert process.stdout.startswith("bad.py:1:7: SC000 syntax error")
