"""shapecheck as a pre-commit hook in someone else's repository, through the real pre-commit."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BAD_VIEW, ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pre_commit") is None or shutil.which("git") is None,
    reason="pre-commit (the dev extra) and git are needed",
)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("pre-commit-home")
    return {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }


def _try_repo(repo: Path, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "shapecheck", "--all-files"],
        cwd=repo,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


def test_hook_fails_on_a_bad_file_then_passes_without_python_files(
    tmp_path: Path, environment: dict[str, str]
) -> None:
    repo = tmp_path / "user-project"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "model.py").write_text(BAD_VIEW, encoding="utf-8")
    _git(repo, "add", "model.py")

    failing = _try_repo(repo, environment)
    output = failing.stdout + failing.stderr
    # pre-commit says 1 for a hook that crashed too: the finding must be the only reason
    assert failing.returncode == 1, output
    assert "model.py:6:37: SC101" in failing.stdout
    assert "SC000" not in output and "internal error" not in output, output
    assert "1 finding in 1 file" in failing.stdout, output

    _git(repo, "rm", "-q", "--cached", "model.py")
    (repo / "model.py").unlink()
    (repo / "README.md").write_text("no Python here\n", encoding="utf-8")
    _git(repo, "add", "README.md")
    passing = _try_repo(repo, environment)
    assert passing.returncode == 0, passing.stdout + passing.stderr
