"""The command line as users see it: output, exit codes, selection, configuration, input."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from shapecheck.cli import main
from shapecheck.rule import all_rules
from tests.conftest import BAD_VIEW, CLEAN, UNSCALED

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]


def test_text_output_names_path_line_column_code_and_counts(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    write("other.py", UNSCALED)
    result = cli("model.py", "other.py")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("model.py:6:37: SC101 [*] `.view()` merges axes 2 and 3")
    assert lines[1].startswith("other.py:5:14: SC301 softmax")  # its fix is unsafe: no [*]
    assert lines[-1] == (
        "2 findings in 2 files; [*] 1 fixable with --fix (1 more with --unsafe-fixes)"
    )
    assert "\x1b[" not in result.output  # colour only on a terminal


def test_colour_on_a_terminal_unless_no_color(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("model.py", BAD_VIEW)
    terminal = CliRunner()  # color=True: output as a terminal would receive it
    assert "\x1b[" in terminal.invoke(main, ["model.py"], color=True).output
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in terminal.invoke(main, ["model.py"], color=True).output


def test_force_color_colours_output_that_is_not_a_terminal(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("model.py", BAD_VIEW)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in cli("model.py").output
    monkeypatch.setenv("NO_COLOR", "1")  # no-color.org wins
    assert "\x1b[" not in cli("model.py").output


def test_clean_code_exits_zero(cli: Cli, write: Write) -> None:
    write("model.py", CLEAN)
    result = cli("model.py")
    assert result.exit_code == 0
    assert result.output.strip() == "No findings in 1 file"


def test_findings_are_sorted_by_path_and_position(cli: Cli, write: Write) -> None:
    write("b.py", BAD_VIEW + "\n\n" + UNSCALED.replace("import torch\n", ""))
    write("a.py", UNSCALED)
    result = cli(".")
    places = [line.split(" ")[0] for line in result.output.splitlines()[:-1]]
    assert places == ["a.py:5:14:", "b.py:6:37:", "b.py:12:14:"]


def test_json_output_follows_the_contract(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    result = cli("--format", "json", "model.py")
    assert result.exit_code == 1
    [finding] = json.loads(result.output)
    assert finding == {
        "path": "model.py",
        "line": 6,
        "column": 37,
        "end_line": 6,
        "end_column": 41,
        "code": "SC101",
        "name": "view-without-contiguous",
        "severity": "error",
        "message": finding["message"],
        "fix": {
            "description": "insert `.contiguous()` before `.view()`",
            "applicability": "safe",
            "edits": [
                {
                    "line": 6,
                    "column": 37,
                    "end_line": 6,
                    "end_column": 41,
                    "content": "contiguous().view",
                }
            ],
        },
    }
    assert "contiguous" in finding["message"]


def test_json_output_without_findings_is_an_empty_array(cli: Cli, write: Write) -> None:
    write("model.py", CLEAN)
    result = cli("--format", "json", "model.py")
    assert (result.exit_code, json.loads(result.output)) == (0, [])


def test_no_path_means_the_current_directory(cli: Cli, write: Write) -> None:
    write("pkg/model.py", BAD_VIEW)
    result = cli()
    assert result.exit_code == 1
    assert result.output.startswith(os.path.join("pkg", "model.py") + ":6:37: SC101")


def test_select_and_ignore_take_codes_and_prefixes(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW + "\n\n" + UNSCALED.replace("import torch\n", ""))
    assert _codes(cli("--select", "SC3", "model.py")) == ["SC301"]
    assert _codes(cli("--ignore", "SC1", "model.py")) == ["SC301"]
    assert _codes(cli("--select", "SC101,SC301", "--ignore", "SC301", "model.py")) == ["SC101"]
    assert _codes(cli("--select", "sc1", "model.py")) == ["SC101"]


def test_extend_select_adds_to_the_selection(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW + "\n\n" + UNSCALED.replace("import torch\n", ""))
    assert _codes(cli("--select", "SC1", "--extend-select", "SC3", "model.py")) == [
        "SC101",
        "SC301",
    ]
    write("pyproject.toml", '[tool.shapecheck]\nselect = ["SC1"]\nextend-select = ["SC301"]\n')
    assert _codes(cli("model.py")) == ["SC101", "SC301"]
    # as in ruff, --select on the command line replaces the configuration's extend-select too
    assert _codes(cli("--select", "SC1", "model.py")) == ["SC101"]
    assert cli("--extend-select", "SC9", "model.py").exit_code == 2


def test_unknown_code_is_a_usage_error(cli: Cli, write: Write) -> None:
    write("model.py", CLEAN)
    result = cli("--select", "SC9", "model.py")
    assert result.exit_code == 2
    assert "'SC9' matches no rule" in result.output


def test_unknown_option_is_a_usage_error(cli: Cli) -> None:
    assert cli("--no-such-flag").exit_code == 2


def test_inline_suppression(cli: Cli, write: Write) -> None:
    line = "    return attn_out.transpose(1, 2).view(batch, seq, heads * head_dim)"
    for comment, suppressed in [
        ("  # shapecheck: ignore[SC101]", True),
        ("  # shapecheck: ignore[SC301, SC101]", True),
        ("  # shapecheck: ignore", True),
        ("  # noqa: SC101", True),
        ("  # noqa", True),
        ("  # noqa: E501", False),
        ("  # shapecheck: ignore[SC301]", False),
    ]:
        write("model.py", BAD_VIEW.replace(line, line + comment))
        assert (cli("model.py").exit_code == 0) == suppressed, comment


def test_suppression_in_a_string_does_not_count(cli: Cli, write: Write) -> None:
    line = "    return attn_out.transpose(1, 2).view(batch, seq, heads * head_dim)"
    write("model.py", BAD_VIEW.replace(line, line.replace("return ", 'return "# noqa" and ')))
    assert cli("model.py").exit_code == 1


def test_pyproject_configuration(cli: Cli, write: Write) -> None:
    write("pkg/model.py", BAD_VIEW + "\n\n" + UNSCALED.replace("import torch\n", ""))
    write("pkg/legacy/old.py", BAD_VIEW)
    write("pkg/generated/gen.py", BAD_VIEW)
    write(
        "pyproject.toml",
        '[tool.shapecheck]\nignore = ["sc3"]\nextend-exclude = ["generated"]\n'
        '[tool.shapecheck.per-file-ignores]\n"pkg/legacy/*" = ["SC101"]\n',
    )
    result = cli(".")
    assert _places(result) == [(os.path.join("pkg", "model.py"), "SC101")]
    # the command line's --select replaces the configured selection; ignores still apply
    assert _codes(cli("--select", "SC301", "pkg/model.py")) == []
    assert _codes(cli("--isolated", "pkg/model.py")) == ["SC101", "SC301"]


def test_configuration_is_found_from_a_subdirectory(cli: Cli, write: Write, tmp_path: Path) -> None:
    write("pyproject.toml", '[tool.shapecheck]\nselect = ["SC3"]\n')
    write("pkg/model.py", BAD_VIEW + "\n\n" + UNSCALED.replace("import torch\n", ""))
    os.chdir(tmp_path / "pkg")
    assert _codes(cli("model.py")) == ["SC301"]


def test_bad_configuration_is_a_clear_error(cli: Cli, write: Write) -> None:
    write("model.py", CLEAN)
    write("pyproject.toml", "[tool.shapecheck]\nselekt = ['SC1']\n")
    result = cli("model.py")
    assert result.exit_code == 2
    assert "unknown key(s) in [tool.shapecheck]: selekt" in result.output
    write("pyproject.toml", "[tool.shapecheck]\nselect = ['SC9']\n")
    assert "'SC9' matches no rule" in cli("model.py").output
    write("pyproject.toml", "[tool.shapecheck\n")
    result = cli("model.py")
    assert result.exit_code == 2
    assert "pyproject.toml" in result.output


def test_directories_recurse_and_skip_default_excludes(cli: Cli, write: Write) -> None:
    write("src/model.py", BAD_VIEW)
    write("src/.venv/lib/site.py", BAD_VIEW)
    write("build/lib/model.py", BAD_VIEW)
    write("src/notes.txt", BAD_VIEW)
    result = cli(".")
    assert _places(result) == [(os.path.join("src", "model.py"), "SC101")]


def test_exclude_options(cli: Cli, write: Write) -> None:
    write("a/model.py", BAD_VIEW)
    write("b/model.py", BAD_VIEW)
    assert len(_places(cli("--extend-exclude", "b", "."))) == 1
    # --exclude replaces the defaults: build/ is checked again
    write("build/model.py", BAD_VIEW)
    assert len(_places(cli("--exclude", "a", "."))) == 2
    # a file named on the command line is checked unless --force-exclude
    assert len(_places(cli("--extend-exclude", "b", "b/model.py"))) == 1
    assert cli("--extend-exclude", "b", "--force-exclude", "b/model.py").exit_code == 0


def test_a_path_is_never_taken_for_a_subcommand(cli: Cli, write: Write) -> None:
    write("explain/model.py", BAD_VIEW)
    write("list-rules/model.py", BAD_VIEW)
    result = cli("explain", "list-rules")
    assert result.exit_code == 1
    assert len(_places(result)) == 2


def test_stdin(cli: Cli) -> None:
    result = cli("-", "--stdin-filename", "pkg/model.py", stdin=BAD_VIEW.encode())
    assert result.exit_code == 1
    assert result.output.startswith("pkg/model.py:6:37: SC101")
    result = cli("-", stdin=CLEAN.encode())
    assert result.exit_code == 0


def test_list_rules(cli: Cli) -> None:
    result = cli("--list-rules")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[1].split()[:3] == ["SC101", "view-without-contiguous", "error"]
    assert [line.split()[0] for line in lines] == [rule.code for rule in all_rules()]


def test_list_rules_as_json(cli: Cli) -> None:
    result = cli("--list-rules", "--format", "json")
    assert result.exit_code == 0
    listed = json.loads(result.output)
    assert [rule["code"] for rule in listed] == [rule.code for rule in all_rules()]
    assert listed[1] == {
        "code": "SC101",
        "name": "view-without-contiguous",
        "severity": "error",
        "fix": "safe",
        "summary": all_rules()[1].summary,
    }
    assert cli("--list-rules", "--format", "sarif").exit_code == 2


def test_explain(cli: Cli) -> None:
    result = cli("--explain", "sc201")
    assert result.exit_code == 0
    assert result.output.startswith("SC201 key-not-transposed (error)")
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in result.output
    result = cli("--explain", "SC999")
    assert result.exit_code == 2
    assert "no rule 'SC999'" in result.output


def test_version(cli: Cli) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.output.startswith("shapecheck, version ")


def _codes(result: Result) -> list[str]:
    return [code for _, code in _places(result)]


def _places(result: Result) -> list[tuple[str, str]]:
    found = []
    for line in result.output.splitlines():
        parts = line.split(" ")
        if len(parts) > 1 and parts[1].startswith("SC") and parts[0].count(":") >= 3:
            found.append((parts[0].split(":")[0], parts[1]))
    return found


def test_show_shapes_annotates_each_assignment(cli: Cli, write: Write) -> None:
    write(
        "model.py",
        "import torch\n\n\n"
        "class Attention(torch.nn.Module):\n"
        "    def __init__(self, d_model, num_heads):\n"
        "        super().__init__()\n"
        "        self.num_heads = num_heads\n"
        "        self.head_dim = d_model // num_heads\n"
        "        self.wq = torch.nn.Linear(d_model, d_model)\n\n"
        "    def forward(self, x):\n"
        "        B, L, _ = x.shape\n"
        "        q = self.wq(x).view(B, -1, self.num_heads, self.head_dim).transpose(1, 2)\n"
        "        return q\n",
    )
    result = cli("--show-shapes", "model.py:Attention.forward")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "model.py:11 Attention.forward"
    assert lines[1].endswith("# x: ?")
    assert lines[3].endswith("# q: [B, self.num_heads, L, self.head_dim]")
    assert len(lines) == 5


def test_show_shapes_errors(cli: Cli, write: Write) -> None:
    write("model.py", CLEAN)
    result = cli("--show-shapes", "model.py:nothing")
    assert result.exit_code == 2
    assert "no function 'nothing'; functions: merge_heads" in result.output
    assert cli("--show-shapes", "missing.py").exit_code == 2
    assert cli("--show-shapes").exit_code == 2
