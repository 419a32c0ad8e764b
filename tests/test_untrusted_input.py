"""Input shapecheck does not control (a checkout's files, configuration, baselines, cache
entries) ends in findings or an SC000 and an exit status, never a traceback or a hang.

Tests that could hang or eat memory on a regression (a FIFO, ``/dev/zero``) run the real
executable in a subprocess, with a timeout and a memory limit."""

from __future__ import annotations

import ast
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from shapecheck import linter
from shapecheck.cache import ResultCache
from shapecheck.rule import rule_codes
from tests.conftest import BAD_VIEW, CLEAN

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]

MEMORY_LIMIT = 2 * 1024**3
"""For the subprocesses: a regression that reads an endless stream fails, not the machine."""


def _shapecheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real executable, stopped after 60 s (a hang fails the test, not the suite)."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "shapecheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit_memory,
    )


def _findings(result: Result) -> dict[str, str]:
    """Each reported path and its first message."""
    found: dict[str, str] = {}
    for finding in json.loads(result.output):
        found.setdefault(finding["path"], f"{finding['code']} {finding['message']}")
    return found


# D9: file symlink loops


def test_d9_symlink_loops_found_by_walking_are_unreadable_files(
    cli: Cli, write: Write, tmp_path: Path
) -> None:
    write("model.py", BAD_VIEW)
    (tmp_path / "self.py").symlink_to("self.py")
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    result = cli("--format", "json", ".")
    assert result.exit_code == 2
    found = _findings(result)
    assert found.pop("model.py").startswith("SC101 ")  # the run went on
    loop = "SC000 cannot read: Too many levels of symbolic links"
    assert found == {"a.py": loop, "b.py": loop, "self.py": loop}


def test_d9_symlink_loop_named_on_the_command_line(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "self.py").symlink_to("self.py")
    result = cli("self.py")
    assert result.exit_code == 2
    assert result.output.startswith("self.py:1:1: SC000 cannot read: Too many levels")


# D10: special files named *.py


def test_d10_fifo_named_py_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(BAD_VIEW, encoding="utf-8")
    os.mkfifo(tmp_path / "fifo.py")
    process = _shapecheck("--no-cache", ".", cwd=tmp_path)
    assert process.returncode == 2, process.stderr
    assert "fifo.py:1:1: SC000 cannot read: not a regular file" in process.stdout
    assert "model.py:6:37: SC101" in process.stdout  # the run went on


def test_d10_device_named_py_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    process = _shapecheck("--no-cache", ".", "/dev/null", cwd=tmp_path)
    assert process.returncode == 2, process.stderr
    assert process.stdout.splitlines()[:2] == [
        "/dev/null:1:1: SC000 cannot read: not a regular file",
        "zero.py:1:1: SC000 cannot read: not a regular file",
    ]


# D11: pyproject.toml


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('tool = "shapecheck"\n', "tool must be a table, not a string"),
        ('tool = ["shapecheck"]\n', "tool must be a table, not an array"),
        ("[tool]\nshapecheck = 3\n", "[tool.shapecheck] must be a table"),
    ],
    ids=["tool-string", "tool-array", "shapecheck-integer"],
)
def test_d11_tables_that_are_not_tables(cli: Cli, write: Write, content: str, message: str) -> None:
    write("model.py", CLEAN)
    write("pyproject.toml", content)
    result = cli("model.py")
    assert result.exit_code == 2
    assert f"pyproject.toml: {message}" in result.output
    assert "Usage:" not in result.output  # a file that cannot be used, not a usage mistake


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("select = 3", "select must be a list of strings, not an integer"),
        ('ignore = ["SC1", true]', "ignore must be a list of strings, not an array holding a"),
        ("exclude = {a = 1}", "exclude must be a list of strings, not a table"),
        ("extend-exclude = 1.5", "extend-exclude must be a list of strings, not a float"),
        ("per-file-ignores = []", "per-file-ignores must be a table of pattern = [codes]"),
        ('per-file-ignores = {"a.py" = 1}', "per-file-ignores 'a.py' must be a list of strings"),
    ],
    ids=["select", "ignore", "exclude", "extend-exclude", "per-file-ignores", "a-pattern"],
)
def test_d11_a_value_of_the_wrong_type_is_named(
    cli: Cli, write: Write, setting: str, message: str
) -> None:
    write("model.py", CLEAN)
    write("pyproject.toml", f"[tool.shapecheck]\n{setting}\n")
    result = cli("model.py")
    assert result.exit_code == 2
    assert f"pyproject.toml: [tool.shapecheck] {message}" in result.output


def test_d11_invalid_utf8_in_a_parent_projects_pyproject(
    cli: Cli, write: Write, tmp_path: Path
) -> None:
    # like ruff: the search stops at a pyproject.toml it cannot read, which may be ours
    write("pyproject.toml", b"\xff[tool.other]\n")
    write("pkg/model.py", CLEAN)
    os.chdir(tmp_path / "pkg")
    result = cli("model.py")
    assert result.exit_code == 2
    assert f"{tmp_path / 'pyproject.toml'}: not UTF-8 (byte 0: invalid start byte)" in (
        result.output
    )


def test_d11_deeply_nested_array(cli: Cli, write: Write) -> None:
    write("model.py", CLEAN)
    write("pyproject.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n")
    result = cli("model.py")
    assert result.exit_code == 2
    assert "pyproject.toml: nested too deeply to read" in result.output


def test_d11_config_that_is_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(CLEAN, encoding="utf-8")
    os.mkfifo(tmp_path / "settings.toml")
    process = _shapecheck("--config", "settings.toml", "model.py", cwd=tmp_path)
    assert process.returncode == 2
    assert "settings.toml: cannot read: not a regular file" in process.stderr


# D12: baselines


def _baseline(**entry: object) -> str:
    finding = {"path": "model.py", "code": "SC101", "anchor": "x", "count": 1, **entry}
    return json.dumps({"version": 1, "findings": [finding]})


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (_baseline(count=1e400), '"count" must be a positive integer'),
        (_baseline().replace('"count": 1', '"count": Infinity'), '"count" must be a positive'),
        (_baseline(count=-1), '"count" must be a positive integer'),
        (_baseline(count=0), '"count" must be a positive integer'),
        (_baseline(count=1.5), '"count" must be a positive integer'),
        (_baseline(count=True), '"count" must be a positive integer'),
        (_baseline(count="2"), '"count" must be a positive integer'),
        (_baseline(path=3), '"path", "code" and "anchor" must be strings'),
        (_baseline(anchor=None), '"path", "code" and "anchor" must be strings'),
        (_baseline(extra=1), 'expected "path", "code", "anchor" and "count"'),
        ('{"version": true, "findings": []}', "version 1 expected"),
        ('{"version": 1, "findings": {}}', '"findings" must be a list'),
        ("[]", 'expected an object with "version" and "findings"'),
        ("[" * 100_000 + "]" * 100_000, "maximum recursion depth exceeded"),
        ("\ufeff{}".encode("utf-16"), "codec can't decode"),
    ],
    ids=[
        "count-1e400",
        "count-infinity",
        "count-negative",
        "count-zero",
        "count-float",
        "count-bool",
        "count-string",
        "path-int",
        "anchor-null",
        "extra-key",
        "version-true",
        "findings-object",
        "not-an-object",
        "deeply-nested",
        "not-utf8",
    ],
)
def test_d12_a_baseline_that_is_not_one_is_refused(
    cli: Cli, write: Write, content: str | bytes, reason: str
) -> None:
    write("model.py", BAD_VIEW)
    write("baseline.json", content)
    result = cli("--baseline", "baseline.json", "model.py")
    assert result.exit_code == 2
    assert result.output.startswith("Error: baseline.json: not a shapecheck baseline (")
    assert reason in result.output


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_d12_a_baseline_that_is_not_a_regular_file(tmp_path: Path, special: str) -> None:
    (tmp_path / "model.py").write_text(BAD_VIEW, encoding="utf-8")
    if special == "fifo":
        os.mkfifo(tmp_path / "baseline.json")
    else:
        (tmp_path / "baseline.json").symlink_to("/dev/zero")
    process = _shapecheck("--baseline", "baseline.json", "model.py", cwd=tmp_path)
    assert process.returncode == 2
    assert "baseline.json: cannot read: not a regular file" in process.stderr


# D13: cache entries


def _entry(tmp_path: Path) -> Path:
    [entry] = (tmp_path / ".shapecheck_cache").glob("*/*.json")
    return entry


def _recorded(**changes: object) -> list[dict[str, object]]:
    """A well-formed entry of one finding, with ``changes``."""
    entry: dict[str, object] = {
        "path": None,
        "line": 6,
        "column": 37,
        "end_line": 6,
        "end_column": 41,
        "code": "SC101",
        "name": "view-without-contiguous",
        "severity": "error",
        "message": "INJECTED",
        "fix": None,
        "anchor": "",
    }
    return [{**entry, **changes}]


EDIT = {"line": 1, "column": 1, "end_line": 1, "end_column": 1, "content": "import os\n"}
FIX = {"description": "x", "safe": True, "edits": [EDIT], "keeps_results": False}


@pytest.mark.parametrize(
    "entry",
    [
        _recorded(line="4"),
        _recorded(line=None),
        _recorded(line=0),
        _recorded(column=True),
        _recorded(code="SC999"),
        _recorded(code="SC301"),  # a rule that does not run (--select SC101)
        _recorded(code=["SC101"]),
        _recorded(severity="fatal"),
        _recorded(message=3),
        _recorded(path="elsewhere.py"),
        _recorded(extra=1),
        _recorded(fix={"description": "x", "safe": True, "edits": [EDIT]}),
        _recorded(fix={**FIX, "safe": 1}),
        _recorded(fix={**FIX, "edits": [{**EDIT, "line": -1}]}),
        _recorded(fix={**FIX, "edits": [{**EDIT, "content": 3}]}),
        {"a": 1},
        json.loads("[" * 500 + "]" * 500),
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=[
        "line-string",
        "line-null",
        "line-zero",
        "column-bool",
        "unknown-code",
        "rule-not-run",
        "code-list",
        "unknown-severity",
        "message-int",
        "path-set",
        "extra-key",
        "fix-missing-key",
        "fix-safe-int",
        "edit-negative-line",
        "edit-content-int",
        "not-a-list",
        "nested-lists",
        "deeper-than-the-stack",
    ],
)
def test_d13_a_malformed_cache_entry_is_a_miss_and_rewritten(
    cli: Cli, write: Write, tmp_path: Path, entry: object
) -> None:
    write("model.py", BAD_VIEW)
    fresh = cli("--select", "SC101", "model.py")
    assert fresh.exit_code == 1
    written = _entry(tmp_path).read_bytes()
    text = entry if isinstance(entry, str) else json.dumps(entry)
    _entry(tmp_path).write_text(text, encoding="utf-8")
    again = cli("--select", "SC101", "model.py")
    assert (again.exit_code, again.output) == (fresh.exit_code, fresh.output)
    assert _entry(tmp_path).read_bytes() == written


def test_d13_a_well_formed_entry_is_used(cli: Cli, write: Write, tmp_path: Path) -> None:
    """The control for the test above: the same entry without the flaw is read (whoever can
    write the cache can change the report, as whoever can write the checkout can)."""
    write("model.py", BAD_VIEW)
    cli("--select", "SC101", "model.py")
    _entry(tmp_path).write_text(json.dumps(_recorded(fix=FIX)), encoding="utf-8")
    assert "SC101 [*] INJECTED" in cli("--select", "SC101", "model.py").output


def test_d13_cache_entries_follow_the_umask(write: Write, cli: Cli, tmp_path: Path) -> None:
    write("model.py", BAD_VIEW)
    previous = os.umask(0o022)
    try:
        cli("model.py")
    finally:
        os.umask(previous)
    assert _entry(tmp_path).stat().st_mode & 0o777 == 0o644  # a shared cache hits for all


# D14: the Python version


def test_d14_each_python_version_has_its_own_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codes = rule_codes()
    here = ResultCache(tmp_path, codes).folder
    monkeypatch.setattr(sys, "version", "3.12.1 (main) [GCC 12.2.0]")
    assert ResultCache(tmp_path, codes).folder != here  # what parses depends on the version


# D15: out of memory


def test_d15_out_of_memory_while_parsing_is_not_cached(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("model.py", BAD_VIEW)
    with monkeypatch.context() as scarce:

        def out_of_memory(*args: object, **kwargs: object) -> ast.Module:
            raise MemoryError

        scarce.setattr(ast, "parse", out_of_memory)
        result = cli("--format", "json", "model.py")
    assert result.exit_code == 2
    assert _findings(result)["model.py"].startswith(
        "SC000 cannot parse: out of memory while parsing"
    )
    assert cli("model.py").exit_code == 1  # checked again, with memory enough


def test_d15_out_of_memory_while_analysing_is_not_cached(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("model.py", BAD_VIEW)
    with monkeypatch.context() as scarce:

        def out_of_memory(*args: object, **kwargs: object) -> None:
            raise MemoryError

        scarce.setattr(linter, "analyse", out_of_memory)
        result = cli("--format", "json", "model.py")
    assert result.exit_code == 2
    assert _findings(result) == {"model.py": "SC000 cannot analyse: out of memory"}
    assert cli("model.py").exit_code == 1


# D25: directories that cannot be listed


def test_d25_a_directory_that_cannot_be_listed_is_reported(
    cli: Cli, write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as root every directory can be listed, so the refusal is made here
    write("model.py", BAD_VIEW)
    write("locked/hidden.py", BAD_VIEW)
    scandir = os.scandir

    def refuse_locked(path: str) -> object:
        if os.path.basename(path) == "locked":
            raise PermissionError(13, "Permission denied", path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse_locked)
    result = cli("--format", "json", ".")
    assert result.exit_code == 2
    found = _findings(result)
    assert found.pop("model.py").startswith("SC101 ")  # the run went on
    assert found == {"locked": "SC000 cannot list directory: Permission denied"}
    named = cli("locked")
    assert named.exit_code == 2
    assert named.output.startswith("locked:1:1: SC000 cannot list directory: Permission denied")
