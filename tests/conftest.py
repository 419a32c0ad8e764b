from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner, Result

from shapecheck.cli import main

if TYPE_CHECKING:
    from shapecheck.confirm.fixtures import FixedReport, FixtureReport

pytest_plugins = ["tests.strict_skips"]

BAD_VIEW = textwrap.dedent(
    """\
    import torch


    def merge_heads(attn_out: torch.Tensor) -> torch.Tensor:
        batch, heads, seq, head_dim = attn_out.shape
        return attn_out.transpose(1, 2).view(batch, seq, heads * head_dim)
    """
)
"""One SC101 finding, at line 6 column 37 (the `view`)."""

CLEAN = textwrap.dedent(
    """\
    import torch


    def merge_heads(attn_out: torch.Tensor) -> torch.Tensor:
        batch, heads, seq, head_dim = attn_out.shape
        return attn_out.transpose(1, 2).reshape(batch, seq, heads * head_dim)
    """
)

UNSCALED = textwrap.dedent(
    """\
    import torch


    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1)
        return scores.softmax(dim=-1) @ v
    """
)
"""One SC301 finding, at line 5 column 14."""


ROOT = Path(__file__).resolve().parent.parent


def run_python(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a fresh interpreter (this one's), output captured as text."""
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    def write_file(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return write_file


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Run the command line in ``tmp_path``, the way a user would, without a subprocess."""
    monkeypatch.chdir(tmp_path)

    def invoke(*args: str, stdin: bytes | None = None) -> Result:
        return CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)

    return invoke


@functools.cache
def confirmation(path: Path, device: str) -> FixtureReport:
    """``confirm(path, device)``, computed once per test run: running every fixture is the
    suite's largest cost, and several tests read the same outcomes."""
    from shapecheck.confirm.fixtures import confirm

    return confirm(path, device)


@functools.cache
def fixed_confirmation(path: Path, device: str) -> FixedReport:
    """``confirm_fixed(path, device)``, computed once per test run."""
    from shapecheck.confirm.fixtures import confirm_fixed

    return confirm_fixed(path, device)
