"""Baselines: today's findings recorded, then only new ones reported, whatever moved."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests.conftest import BAD_VIEW, UNSCALED

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]

BOTH = BAD_VIEW + UNSCALED.replace("import torch\n", "")


def test_a_recorded_finding_is_not_reported_again(cli: Cli, write: Write) -> None:
    write("model.py", BOTH)
    recorded = cli("--write-baseline", "baseline.json", "model.py")
    assert recorded.exit_code == 0
    assert recorded.stderr == "2 findings recorded in baseline.json\n"
    entries = json.loads(Path("baseline.json").read_text(encoding="utf-8"))["findings"]
    assert [(e["path"], e["code"], e["count"]) for e in entries] == [
        ("model.py", "SC101", 1),
        ("model.py", "SC301", 1),
    ]
    assert entries[0]["anchor"].startswith("merge_heads: return attn_out . transpose ( 1 , 2 )")
    result = cli("--baseline", "baseline.json", "model.py")
    assert (result.exit_code, result.output) == (
        0,
        "No findings in 1 file (2 more in the baseline)\n",
    )


def test_known_findings_survive_edits_elsewhere(cli: Cli, write: Write) -> None:
    model = write("model.py", BOTH)
    cli("--write-baseline", "baseline.json", "model.py")
    moved = "import math\n\n\ndef unrelated():\n    return 1\n\n" + BOTH
    moved = moved.replace(".view(batch, seq,", ".view(batch,  seq,")  # reformatted
    moved = moved.replace("head_dim)\n", "head_dim)  # noted\n", 1)  # a comment added
    model.write_text(moved, encoding="utf-8")
    assert cli("--baseline", "baseline.json", "model.py").exit_code == 0


def test_a_new_copy_of_a_known_mistake_is_new(cli: Cli, write: Write) -> None:
    model = write("model.py", BOTH)
    cli("--write-baseline", "baseline.json", "model.py")
    model.write_text(BOTH + BAD_VIEW.replace("import torch\n", "").replace("merge_heads", "again"))
    result = cli("--baseline", "baseline.json", "model.py")
    assert result.exit_code == 1
    [finding, summary] = result.output.splitlines()
    assert finding.startswith("model.py:") and " SC101 " in finding
    assert summary.endswith("(2 more in the baseline); [*] 1 fixable with --fix")


def test_the_baseline_is_found_from_any_directory(
    cli: Cli, write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("src/model.py", BOTH)
    cli("--write-baseline", "baseline.json", "src/model.py")
    monkeypatch.chdir(tmp_path / "src")
    assert cli("--baseline", "../baseline.json", "model.py").exit_code == 0


def test_unreadable_input_is_never_recorded(cli: Cli, write: Write) -> None:
    write("broken.py", "def f(:\n")
    assert cli("--write-baseline", "baseline.json", "broken.py").exit_code == 0
    assert json.loads(Path("baseline.json").read_text(encoding="utf-8"))["findings"] == []
    assert cli("--baseline", "baseline.json", "broken.py").exit_code == 2


def test_a_bad_baseline_is_a_clear_error(cli: Cli, write: Write) -> None:
    write("model.py", BOTH)
    write("baseline.json", "{}")
    result = cli("--baseline", "baseline.json", "model.py")
    assert result.exit_code == 2
    assert "baseline.json: not a shapecheck baseline" in result.output
    missing = cli("--baseline", "missing.json", "model.py")
    assert missing.exit_code == 2 and "missing.json: cannot read" in missing.output


def test_a_baseline_that_cannot_be_written_is_a_clear_error(cli: Cli, write: Write) -> None:
    write("model.py", BOTH)
    result = cli("--write-baseline", "missing-folder/baseline.json", "model.py")
    assert result.exit_code == 2
    assert "missing-folder/baseline.json: cannot write" in result.output
    assert not list(Path(".").glob("**/*.tmp"))
