"""CI turns skips into failures (``SHAPECHECK_STRICT_SKIPS=1``), but for want of a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SKIPPING_TESTS = """\
import pytest


def test_that_passes():
    pass


def test_that_needs_a_tool():
    pytest.skip("ruff not installed")


def test_on_a_gpu():
    pytest.skip("no CUDA device")
"""

SKIPPING_MODULE = """\
import pytest

pytest.importorskip("a_module_that_is_not_installed")


def test_never_collected():
    pass
"""


def _pytest(folder: Path, strict: bool) -> str:
    environment = {**os.environ, "SHAPECHECK_STRICT_SKIPS": "1" if strict else "0"}
    command = [sys.executable, "-m", "pytest", "-p", "tests.strict_skips", "-p", "no:cacheprovider"]
    process = subprocess.run(
        [*command, "-q", "--continue-on-collection-errors", str(folder)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return process.stdout.strip().splitlines()[-1]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "test_skipping_tests.py").write_text(SKIPPING_TESTS, encoding="utf-8")
    (tmp_path / "test_skipping_module.py").write_text(SKIPPING_MODULE, encoding="utf-8")
    return tmp_path


def test_strict_skips_fail_every_skip_but_the_gpu(folder: Path) -> None:
    summary = _pytest(folder, strict=True)
    assert summary.startswith("1 failed, 1 passed, 1 skipped, 1 error"), summary


def test_without_strict_skips_a_skip_is_a_skip(folder: Path) -> None:
    summary = _pytest(folder, strict=False)
    assert summary.startswith("1 passed, 3 skipped"), summary
