"""``--fix``, ``--unsafe-fixes`` and ``--diff`` as users run them: what is written, what is
printed, what is refused."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from shapecheck import fixer
from tests.conftest import BAD_VIEW, CLEAN, UNSCALED

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]

VIEW_FIXED = BAD_VIEW.replace(".transpose(1, 2).view(", ".transpose(1, 2).contiguous().view(")
TIMES = "\N{MULTIPLICATION SIGN}"
"""Between a count and a rule, as ruff lists fixes (``--show-fixes``)."""
UNSCALED_FIXED = UNSCALED.replace("import torch\n", "import math\n\nimport torch\n").replace(
    "scores = q @ k.transpose(-2, -1)", "scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"
)


def test_fix_applies_safe_fixes_and_reports_what_remains(cli: Cli, write: Write) -> None:
    model, other = write("model.py", BAD_VIEW), write("other.py", UNSCALED)
    result = cli("--fix", "model.py", "other.py")
    assert model.read_text() == VIEW_FIXED
    assert other.read_text() == UNSCALED  # SC301's fix changes numbers: unsafe, not applied
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == "1 finding in 1 file (1 fixed)"


def test_unsafe_fixes_apply_with_the_flag_and_add_the_import(cli: Cli, write: Write) -> None:
    other = write("other.py", UNSCALED)
    result = cli("--fix", "--unsafe-fixes", "other.py")
    assert other.read_text() == UNSCALED_FIXED
    assert (result.exit_code, result.output) == (0, "No findings in 1 file (1 fixed)\n")


FUTURE = "from __future__ import annotations\n\n"
ATTEND = "\n\ndef attend(q, k, v):\n    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n"


@pytest.mark.parametrize(
    ("imports", "sorted_imports"),
    [
        (
            "import torch\nimport torch.nn as nn\n",
            "import math\n\nimport torch\nimport torch.nn as nn\n",
        ),
        (
            FUTURE + "import os\nfrom typing import Any\n\nimport torch\n",
            FUTURE + "import math\nimport os\nfrom typing import Any\n\nimport torch\n",
        ),
        (
            '"""Doc."""\n\nfrom __future__ import annotations\n\nimport torch\n',
            '"""Doc."""\n\nfrom __future__ import annotations\n\nimport math\n\nimport torch\n',
        ),
        (
            "import abc\nfrom os import path\n\nimport torch\n",
            "import abc\nimport math\nfrom os import path\n\nimport torch\n",
        ),
        ("import sys\n\nimport torch\n", "import math\nimport sys\n\nimport torch\n"),
    ],
)
def test_an_added_import_goes_where_isort_puts_it(
    cli: Cli, write: Write, imports: str, sorted_imports: str
) -> None:
    """ruff's I001 (isort) accepts the fixed file: ``import math`` joins the standard library's
    section in name order, or opens it between ``__future__`` and the rest."""
    import subprocess
    import sys

    model = write("model.py", imports + ATTEND)
    cli("--fix", "--unsafe-fixes", "--select", "SC301", "model.py")
    assert model.read_text().startswith(sorted_imports)
    ruff = [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "I", str(model)]
    assert subprocess.run(ruff, capture_output=True, text=True).returncode == 0
    model.write_text(imports.replace("import torch\n", "import torch\nimport math\n") + ATTEND)
    assert subprocess.run(ruff, capture_output=True, text=True).returncode == 1  # ruff can tell


def test_a_second_fix_run_changes_nothing(cli: Cli, write: Write) -> None:
    model = write("model.py", BAD_VIEW)
    cli("--fix", "--unsafe-fixes", "model.py")
    once = model.read_bytes()
    result = cli("--fix", "--unsafe-fixes", "model.py")
    assert model.read_bytes() == once
    assert result.output == "No findings in 1 file (0 fixed)\n"


def test_diff_prints_the_change_and_writes_nothing(cli: Cli, write: Write) -> None:
    model = write("model.py", BAD_VIEW)
    result = cli("--diff", "model.py")
    assert model.read_text() == BAD_VIEW
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:2] == ["--- model.py", "+++ model.py"]
    assert (
        "-    return attn_out.transpose(1, 2).view(batch, seq, heads * head_dim)" in result.stdout
    )
    assert "+    return attn_out.transpose(1, 2).contiguous().view(" in result.stdout
    assert result.stderr == "1 fix would be applied\n"


def test_diff_without_anything_to_fix_exits_zero(cli: Cli, write: Write) -> None:
    write("model.py", CLEAN)
    write("other.py", UNSCALED)  # only an unsafe fix, not asked for
    result = cli("--diff", "model.py", "other.py")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "0 fixes would be applied\n")


def test_findings_with_a_fix_say_so(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    write("other.py", UNSCALED)
    lines = cli("model.py", "other.py").output.splitlines()
    assert " SC101 [*] " in lines[0] and "[*]" not in lines[1]
    assert lines[-1].endswith("; [*] 1 fixable with --fix (1 more with --unsafe-fixes)")
    lines = cli("--unsafe-fixes", "model.py", "other.py").output.splitlines()
    assert " SC301 [*] " in lines[1]
    assert lines[-1].endswith("; [*] 2 fixable with --fix --unsafe-fixes")


def test_fix_on_stdin_prints_the_fixed_source(cli: Cli) -> None:
    result = cli("--fix", "-", stdin=BAD_VIEW.encode())
    assert result.stdout == VIEW_FIXED
    assert result.stderr == "No findings in 1 file (1 fixed)\n"
    assert result.exit_code == 0


def test_fix_respects_per_file_ignores(cli: Cli, write: Write) -> None:
    write("pyproject.toml", '[tool.shapecheck]\nper-file-ignores = {"model.py" = ["SC101"]}\n')
    model = write("model.py", BAD_VIEW)
    assert cli("--fix", "model.py").exit_code == 0
    assert model.read_text() == BAD_VIEW


def test_fix_keeps_line_endings_encoding_and_permissions(cli: Cli, write: Write) -> None:
    source = "\ufeff# -*- coding: utf-8 -*-\n# Ünïcode\n" + BAD_VIEW
    model = write("model.py", source.replace("\n", "\r\n").encode("utf-8"))
    os.chmod(model, 0o640)
    cli("--fix", "model.py")
    expected = "\ufeff# -*- coding: utf-8 -*-\n# Ünïcode\n" + VIEW_FIXED
    assert model.read_bytes() == expected.replace("\n", "\r\n").encode("utf-8")
    assert stat.S_IMODE(model.stat().st_mode) == 0o640


def test_a_read_only_file_is_left_untouched_with_a_clear_message(cli: Cli, write: Write) -> None:
    model = write("model.py", BAD_VIEW)
    os.chmod(model, 0o444)
    result = cli("--fix", "model.py")
    assert result.exit_code == 2
    assert "model.py: cannot write: the file is read-only; left unchanged" in result.stderr
    assert model.read_text() == BAD_VIEW
    assert stat.S_IMODE(model.stat().st_mode) == 0o444


def test_a_fix_that_would_break_the_syntax_is_never_written(
    cli: Cli, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = write("model.py", BAD_VIEW)
    monkeypatch.setattr(
        fixer, "apply_fixes", lambda text, found, unsafe: (text + "def (:\n", found)
    )
    result = cli("--fix", "model.py")
    assert result.exit_code == 2
    assert "model.py: the fixed code does not parse" in result.stderr
    assert model.read_text() == BAD_VIEW
    assert [p.name for p in model.parent.iterdir()] == ["model.py"]  # no temporary file left


def test_fixes_that_touch_the_same_code_apply_over_rounds(cli: Cli, write: Write) -> None:
    """The example's line 29 has SC201 (the keys) and SC301 (the scale) in one expression."""
    example = Path(__file__).resolve().parents[1] / "examples" / "attention_mistakes.py"
    model = write("model.py", example.read_bytes())
    result = cli("--fix", "--unsafe-fixes", "model.py")
    assert (result.exit_code, result.output) == (0, "No findings in 1 file (3 fixed)\n")
    fixed = model.read_text()
    assert "torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)" in fixed
    assert ".transpose(1, 2).contiguous().view(batch, q_len, d_model)" in fixed


def test_no_fix_where_a_number_would_not_do(cli: Cli, write: Write) -> None:
    """sew_d (transformers): the constant times a number goes into torch.sqrt, which takes
    only tensors; replacing it with the number would raise. The finding stays, unfixed."""
    write(
        "model.py",
        "import torch\n\n\n"
        "class Attention(torch.nn.Module):\n"
        "    def forward(self, q, k, scale_factor):\n"
        "        scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * scale_factor)\n"
        "        return torch.softmax(q @ k.transpose(-1, -2) / scale.to(q.dtype), dim=-1)\n",
    )
    result = cli("--diff", "model.py")
    assert (result.exit_code, result.stdout) == (0, "")
    assert " SC601 " in cli("model.py").output


def test_form_feeds_do_not_move_the_fixes(cli: Cli, write: Write) -> None:
    """Python counts lines at newlines only; a form feed (old GNU style) is not a line end."""
    source = "\x0c\n" + BAD_VIEW.replace("import torch\n", "import torch\n\x0c\n")
    model = write("model.py", source)
    result = cli("--fix", "model.py")
    assert model.read_text() == source.replace(
        ".transpose(1, 2).view(", ".transpose(1, 2).contiguous().view("
    )
    assert result.output.splitlines()[-1] == "No findings in 1 file (1 fixed)"


def test_columns_count_characters_and_fixes_reach_decorated_statements(
    cli: Cli, write: Write
) -> None:
    """``ast`` counts columns in UTF-8 bytes; findings and fixes count characters. A fix in
    a later, decorated statement is written from libcst's parse of that statement alone."""
    merge = BAD_VIEW.split("\n\n\n")[1].replace("return attn_out", 'tag = "ηθ→"; return attn_out')
    source = f'import torch\n\nNOTE = "ä"\n\n\n@torch.no_grad()\n{merge}'
    model = write("model.py", source)
    line = source.splitlines().index(next(x for x in source.splitlines() if ".view(" in x)) + 1
    column = source.splitlines()[line - 1].index("view") + 1
    assert f"model.py:{line}:{column}: SC101" in cli("model.py").output
    cli("--fix", "model.py")
    assert model.read_text() == source.replace(".view(", ".contiguous().view(")


def test_fixes_are_written_in_nested_statements_and_compound_headers(
    cli: Cli, write: Write
) -> None:
    """libcst reads only the simple statement that holds a fix, from its own column (a line
    continued at less indentation is still inside it), or the whole top-level statement where
    the fix is in a compound statement's header."""
    source = (
        "import torch\n\n\n"
        "class Merge(torch.nn.Module):\n"
        "    def forward(self, attn_out):\n"
        "        batch, heads, seq, head_dim = attn_out.shape\n"
        "        if attn_out.transpose(1, 2).view(batch, seq, heads * head_dim).sum() > 0:\n"
        "            merged = attn_out.transpose(1, 2).view(\n"
        "    batch, seq, heads * head_dim\n"
        "            )\n"
        "            return merged\n"
        "        return attn_out\n"
    )
    model = write("model.py", source)
    assert cli("model.py").output.count(" SC101 [*] ") == 2
    cli("--fix", "model.py")
    assert model.read_text() == source.replace(".view(", ".contiguous().view(")


# --- --show-fixes, --fix-only, --exit-non-zero-on-fix (as ruff has them) ----------------------


def test_show_fixes_lists_what_fix_fixed_per_file_and_rule(cli: Cli, write: Write) -> None:
    write(
        "model.py",
        BAD_VIEW
        + "\n\n"
        + BAD_VIEW.replace("import torch\n", "").replace(
            "def merge_heads", "def merge_heads_again"
        ),
    )
    write("other.py", UNSCALED)
    result = cli("--fix", "--unsafe-fixes", "--show-fixes", "other.py", "model.py")
    assert result.output == (
        "Fixed 3 findings:\n"
        "- model.py:\n"
        f"    2 {TIMES} SC101 (view-without-contiguous)\n"
        "- other.py:\n"
        f"    1 {TIMES} SC301 (missing-attention-scale)\n"
        "No findings in 2 files (3 fixed)\n"
    )
    assert "Fixed" not in cli("--fix", "--show-fixes", "model.py").output  # nothing left to fix


def test_show_fixes_without_fix_lists_what_fix_would_apply(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    write("other.py", UNSCALED)
    lines = cli("--show-fixes", "model.py", "other.py").output.splitlines()
    assert lines[2:] == [
        "Would fix 1 finding with --fix:",
        "- model.py:",
        f"    1 {TIMES} SC101 (view-without-contiguous)",
        "2 findings in 2 files; [*] 1 fixable with --fix (1 more with --unsafe-fixes)",
    ]
    lines = cli("--show-fixes", "--unsafe-fixes", "model.py", "other.py").output.splitlines()
    assert lines[2:7] == [
        "Would fix 2 findings with --fix --unsafe-fixes:",
        "- model.py:",
        f"    1 {TIMES} SC101 (view-without-contiguous)",
        "- other.py:",
        f"    1 {TIMES} SC301 (missing-attention-scale)",
    ]
    assert "Would fix" not in cli("model.py", "other.py").output


def test_show_fixes_with_diff_lists_them_on_stderr(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    result = cli("--diff", "--show-fixes", "model.py")
    assert result.stdout.startswith("--- model.py\n")
    assert result.stderr == (
        f"Would fix 1 finding:\n- model.py:\n    1 {TIMES} SC101 (view-without-contiguous)\n"
        "1 fix would be applied\n"
    )
    write("model.py", CLEAN)
    assert cli("--diff", "--show-fixes", "model.py").stderr == "0 fixes would be applied\n"


def test_show_fixes_leaves_machine_formats_alone(cli: Cli, write: Write) -> None:
    write("model.py", BAD_VIEW)
    assert len(json.loads(cli("--show-fixes", "--format", "json", "model.py").output)) == 1


def test_fix_only_fixes_reports_no_findings_and_exits_zero(cli: Cli, write: Write) -> None:
    model = write("model.py", BAD_VIEW)
    write("other.py", UNSCALED)  # a finding left, its fix unsafe
    result = cli("--fix-only", "--show-fixes", "model.py", "other.py")
    assert model.read_text() == VIEW_FIXED
    assert (result.exit_code, result.output) == (
        0,
        f"Fixed 1 finding:\n- model.py:\n    1 {TIMES} SC101 (view-without-contiguous)\n"
        "Fixed 1 finding (1 more fixable with --unsafe-fixes)\n",
    )
    result = cli("--fix-only", "model.py", "other.py")
    assert (result.exit_code, result.output) == (
        0,
        "No findings fixed (1 fixable with --unsafe-fixes)\n",
    )
    assert json.loads(cli("--fix-only", "--format", "json", "other.py").output) == []


def test_fix_only_still_shows_what_it_could_not_check(cli: Cli, write: Write) -> None:
    write("broken.py", "x = (\n")
    result = cli("--fix-only", "broken.py")
    assert result.exit_code == 2
    assert result.output.startswith("broken.py:1:5: SC000 ")
    assert result.output.splitlines()[-1] == "No findings fixed"


def test_fix_only_on_stdin_prints_the_fixed_source(cli: Cli) -> None:
    result = cli("--fix-only", "-", stdin=(BAD_VIEW + UNSCALED).encode())
    assert result.stdout == VIEW_FIXED + UNSCALED
    assert result.stderr == "Fixed 1 finding (1 more fixable with --unsafe-fixes)\n"
    assert result.exit_code == 0


def test_exit_non_zero_on_fix(cli: Cli, write: Write) -> None:
    model = write("model.py", BAD_VIEW)
    assert cli("--fix-only", "--exit-non-zero-on-fix", "model.py").exit_code == 1
    assert cli("--fix-only", "--exit-non-zero-on-fix", "model.py").exit_code == 0  # all fixed
    model.write_text(BAD_VIEW)
    assert cli("--fix", "--exit-non-zero-on-fix", "model.py").exit_code == 1  # none remain
    model.write_text(BAD_VIEW)
    assert cli("--fix", "--exit-non-zero-on-fix", "--exit-zero", "model.py").exit_code == 0
    model.write_text(BAD_VIEW)
    assert cli("--fix", "model.py").exit_code == 0
