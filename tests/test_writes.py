"""What ``--fix`` and ``--write-baseline`` do to the file system: they write through symlinks,
keep hard links, owners and modes, never replace what is not a regular file, never rewrite a
file they have nothing to change in, and never lose an edit made while they ran. Each test is
named after the defect of the reliability sweep it holds fixed (D5...D26)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from shapecheck import fixer, writing
from shapecheck.diagnostics import Diagnostic
from tests.conftest import BAD_VIEW

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]

VIEW_FIXED = BAD_VIEW.replace(".transpose(1, 2).view(", ".transpose(1, 2).contiguous().view(")
FINDING = "model.py:6:37: SC101"


def _fails_to_parse(
    text: str, found: list[Diagnostic], unsafe: bool
) -> tuple[str, list[Diagnostic]]:
    return text + "def (:\n", found


@pytest.mark.parametrize("encoding", ["unicode_escape", "utf-7"], ids=["unicode_escape", "utf-7"])
def test_d5_a_file_without_fixes_is_never_rewritten(cli: Cli, write: Write, encoding: str) -> None:
    """Re-encoding these texts does not give their bytes back: the cookie line would take
    the whole program (unicode_escape), or ``~ \\`` in a comment would change (utf-7)."""
    data = f"# -*- coding: {encoding} -*-\n# ~ \\\nx = 1\nprint('ran, x =', x)\n".encode()
    model = write("model.py", data)
    diff = cli("--diff", "model.py")
    assert (diff.exit_code, diff.stdout, diff.stderr) == (0, "", "0 fixes would be applied\n")
    fixed = cli("--fix", "model.py")
    assert (fixed.exit_code, fixed.output) == (0, "No findings in 1 file (0 fixed)\n")
    assert model.read_bytes() == data


def test_d5_a_fix_that_would_change_bytes_outside_its_edits_is_refused(
    cli: Cli, write: Write
) -> None:
    data = ("# -*- coding: unicode_escape -*-\n" + BAD_VIEW).encode()
    model = write("model.py", data)
    for flag in ("--diff", "--fix"):  # the two agree
        result = cli(flag, "model.py")
        assert result.exit_code == 2
        assert (
            "model.py: cannot fix: unicode_escape does not encode the file back as it was; "
            "left unchanged"
        ) in result.stderr
        assert model.read_bytes() == data


def test_d6_symlink_stays_a_link_and_its_target_is_fixed(
    cli: Cli, write: Write, tmp_path: Path
) -> None:
    """The link's content is what was checked, so the fix goes where it lives (as ruff)."""
    target = write("outside/target.py", BAD_VIEW)
    link = tmp_path / "tree" / "link.py"
    link.parent.mkdir()
    link.symlink_to(Path("..", "outside", "target.py"))
    result = cli("--fix", "tree")
    assert (result.exit_code, result.output) == (0, "No findings in 1 file (1 fixed)\n")
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "outside", "target.py")
    assert target.read_text() == VIEW_FIXED
    assert sorted(p.name for p in target.parent.iterdir()) == ["target.py"]  # no temporary


def test_d6_hard_link_is_kept(cli: Cli, write: Write, tmp_path: Path) -> None:
    model = write("tree/model.py", BAD_VIEW)
    twin = tmp_path / "twin.py"
    os.link(model, twin)
    inode = model.stat().st_ino
    assert cli("--fix", "tree").exit_code == 0
    assert model.stat().st_ino == twin.stat().st_ino == inode
    assert twin.read_text() == VIEW_FIXED


def test_d6_owner_group_and_mode_are_kept(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root the file really belongs to someone else; as anyone, the new file is given
    the old one's owner and group (and that call succeeds)."""
    model = write("model.py", BAD_VIEW)
    if os.geteuid() == 0:
        os.chown(model, 65534, 65534)
    os.chmod(model, 0o640)
    before = model.stat()
    owners: list[tuple[int, int]] = []
    chown = os.chown

    def recording_chown(path: str, uid: int, gid: int) -> None:
        owners.append((uid, gid))
        chown(path, uid, gid)

    monkeypatch.setattr(os, "chown", recording_chown)
    assert cli("--fix", "model.py").exit_code == 0
    after = model.stat()
    assert model.read_text() == VIEW_FIXED
    assert owners == [(before.st_uid, before.st_gid)]
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert stat.S_IMODE(after.st_mode) == 0o640


def test_d6_owner_that_cannot_be_given_means_a_rewrite_in_place(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user fixing a group-writable file of someone else's cannot give a new file its
    owner: the file's own bytes are rewritten instead, so it stays theirs."""
    model = write("model.py", BAD_VIEW)
    inode = model.stat().st_ino

    def refuse(path: str, uid: int, gid: int) -> None:
        raise PermissionError(1, "Operation not permitted", path)

    monkeypatch.setattr(os, "chown", refuse)
    assert cli("--fix", "model.py").exit_code == 0
    assert model.read_text() == VIEW_FIXED
    assert model.stat().st_ino == inode
    assert [p.name for p in model.parent.iterdir()] == ["model.py"]


def test_d6_dir_symlink_out_of_the_tree_is_not_followed(
    cli: Cli, write: Write, tmp_path: Path
) -> None:
    installed = write("elsewhere/pkg/installed.py", BAD_VIEW)
    write("tree/model.py", BAD_VIEW)
    (tmp_path / "tree" / "vendor").symlink_to(Path("..", "elsewhere", "pkg"))
    (tmp_path / "tree" / "again").symlink_to(tmp_path / "tree")  # inside: followed, once
    result = cli("--fix", "tree")
    assert (result.exit_code, result.output) == (0, "No findings in 1 file (1 fixed)\n")
    assert installed.read_text() == BAD_VIEW
    named = cli("--fix", "tree/vendor")  # the link itself named: checked and fixed
    assert (named.exit_code, named.output) == (0, "No findings in 1 file (1 fixed)\n")
    assert installed.read_text() == VIEW_FIXED


@pytest.mark.parametrize("linked", [False, True], ids=["replaced", "rewritten-in-place"])
def test_d7_an_edit_made_while_fixing_is_kept(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, linked: bool
) -> None:
    model = write("model.py", BAD_VIEW)
    if linked:
        os.link(model, tmp_path / "twin.py")
    edited = BAD_VIEW + "# the user's edit\n"
    fix_source = fixer.fix_source

    def fix_while_the_user_edits(*args: Any, **kwargs: Any) -> fixer.Fixed:
        fixed = fix_source(*args, **kwargs)
        model.write_text(edited)
        return fixed

    monkeypatch.setattr(fixer, "fix_source", fix_while_the_user_edits)
    result = cli("--fix", "model.py")
    assert result.exit_code == 2
    assert "model.py: changed while shapecheck ran; left unchanged" in result.stderr
    assert model.read_text() == edited
    assert result.stdout.splitlines()[-1] == "1 finding in 1 file (0 fixed)"


def test_d8_write_baseline_refuses_a_python_file(cli: Cli, write: Write) -> None:
    model = write("model.py", BAD_VIEW)
    result = cli("--write-baseline", "model.py")
    assert result.exit_code == 2
    assert "model.py: refusing to write a baseline to a .py file" in result.output
    assert model.read_text() == BAD_VIEW


def test_d8_write_baseline_refuses_a_file_that_is_not_a_baseline(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    notes = write("notes.json", '{"mine": true}\n')
    result = cli("--write-baseline", "notes.json", "model.py")
    assert result.exit_code == 2
    assert "notes.json: not a shapecheck baseline" in result.output
    assert "refusing to overwrite it" in result.output
    assert notes.read_text() == '{"mine": true}\n'


def test_d8_write_baseline_writes_through_a_symlink(cli: Cli, write: Write, tmp_path: Path) -> None:
    write("model.py", BAD_VIEW)
    real = write("baselines/real.json", '{"version": 1, "findings": []}\n')
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert cli("--write-baseline", "link.json", "model.py").exit_code == 0
    assert link.is_symlink()
    assert [e["code"] for e in json.loads(real.read_text())["findings"]] == ["SC101"]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_d8_write_baseline_never_replaces_a_fifo_or_a_device(
    cli: Cli, write: Write, tmp_path: Path, kind: str
) -> None:
    write("model.py", BAD_VIEW)
    special = tmp_path / "special.json"
    if kind == "fifo":
        os.mkfifo(special)
    else:
        special.symlink_to("/dev/null")  # a link, so that nothing can replace the device
    result = cli("--write-baseline", "special.json", "model.py")
    assert result.exit_code == 2
    assert "special.json: cannot write: not a regular file" in result.output
    if kind == "fifo":
        assert stat.S_ISFIFO(special.lstat().st_mode)
    else:
        assert special.is_symlink() and stat.S_ISCHR(special.stat().st_mode)


def test_d20_a_failed_write_keeps_the_findings_and_fixes_nothing(cli: Cli, write: Write) -> None:
    model = write("model.py", BAD_VIEW)
    os.chmod(model, 0o444)
    result = cli("--fix", "model.py")
    assert result.exit_code == 2
    assert "model.py: cannot write: the file is read-only; left unchanged" in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(FINDING)
    assert lines[-1] == "1 finding in 1 file (0 fixed)"


def test_d20_a_fix_that_does_not_parse_keeps_the_file_in_the_report(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("model.py", BAD_VIEW)
    monkeypatch.setattr(fixer, "apply_fixes", _fails_to_parse)
    result = cli("--fix", "model.py")
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert lines[0].startswith(FINDING)
    assert lines[-1] == "1 finding in 1 file (0 fixed)"


def test_d23_fix_on_stdin_prints_the_source_back_when_it_does_not_parse(cli: Cli) -> None:
    """An editor replaces its buffer with stdout: it must never get an empty one."""
    result = cli("--fix", "-", stdin=b"x = (\n")
    assert (result.exit_code, result.stdout) == (2, "x = (\n")
    assert "SC000" in result.stderr


def test_d23_fix_on_stdin_prints_the_source_back_when_the_fix_fails(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fixer, "apply_fixes", _fails_to_parse)
    result = cli("--fix", "-", "--stdin-filename", "model.py", stdin=BAD_VIEW.encode())
    assert (result.exit_code, result.stdout) == (2, BAD_VIEW)
    assert "model.py: the fixed code does not parse" in result.stderr


def test_diff_names_a_file_it_cannot_parse_and_exits_2(cli: Cli, write: Write) -> None:
    """``--diff`` has nothing to show for such a file; silence and exit 0 would pass CI."""
    write("broken.py", "x = (\n")
    write("model.py", BAD_VIEW)
    result = cli("--diff", "broken.py", "model.py")
    assert result.exit_code == 2
    assert "broken.py: syntax error" in result.stderr
    assert "+++ model.py" in result.stdout


def test_d26_control_characters_in_paths_are_shown_escaped(cli: Cli, write: Write) -> None:
    """click strips colour codes from output that is not a terminal: the name would lose
    ``\\x1b[31m`` and name another file."""
    write("a\x1b[31mb.py", BAD_VIEW)
    for output_format in ("text", "github"):
        result = cli("--format", output_format, ".")
        assert "a\\x1b[31mb.py" in result.output


def test_d8_the_writer_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    with pytest.raises(writing.WriteError, match="not a regular file"):
        writing.write_file(str(fifo), b"x = 1\n", expected=b"")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
