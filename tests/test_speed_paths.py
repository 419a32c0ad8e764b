"""The speed-ups change nothing but speed: the pre-scan, the results cache and the process
pool each give the findings the plain path gives, on the fixtures and on real code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shapecheck.cache import ResultCache
from shapecheck.confirm.fixtures import fixture_files
from shapecheck.linter import lint_source
from shapecheck.prescan import relevant_source
from shapecheck.rule import all_rules, rule_codes
from shapecheck.run import check_files
from tests.conftest import ROOT

CODES = rule_codes()


def _corpus() -> list[Path]:
    """The fixtures, the example, and PyTorch's own ``torch.nn`` when torch is installed."""
    files = [*fixture_files(), *sorted((ROOT / "examples").glob("*.py"))]
    try:
        import torch
    except ImportError:
        return files
    return files + sorted((Path(torch.__file__).parent / "nn").rglob("*.py"))


def test_rule_codes_are_read_from_module_names() -> None:
    assert rule_codes() == tuple(rule.code for rule in all_rules())


def test_prescan_changes_no_finding() -> None:
    rules = [rule() for rule in all_rules()]
    for path in _corpus():
        data = path.read_bytes()
        with_prescan = lint_source(data, str(path), rules, prescan=True).diagnostics
        without = lint_source(data, str(path), rules, prescan=False).diagnostics
        assert with_prescan == without, path
        assert [d.fix for d in with_prescan] == [d.fix for d in without], path


def test_prescan_blanks_what_cannot_matter_and_keeps_every_line_in_place() -> None:
    source = textwrap.dedent(
        '''\
        """Doc."""
        import torch

        REGISTRY = {"small": 1, "large": 2}

        def merge(x):
            return x.transpose(1, 2).view(2, 3, 4)

        def caller(x):
            return merge(x) + 1

        def unrelated(name):
            return REGISTRY[name]
        '''
    )
    relevant = relevant_source(source)
    assert relevant is not None
    lines = relevant.splitlines()
    assert len(lines) == len(source.splitlines())
    kept = [line for line in lines if line.strip()]
    # the trigger, its caller and the imports stay; the registry and its reader go
    assert kept == [
        '"""Doc."""',
        "import torch",
        "def merge(x):",
        "    return x.transpose(1, 2).view(2, 3, 4)",
        "def caller(x):",
        "    return merge(x) + 1",
    ]
    assert lines.index("def merge(x):") == source.splitlines().index("def merge(x):")


def test_prescan_keeps_what_a_kept_statement_reads() -> None:
    source = "import torch\nHEADS = 8\ndef split(x):\n    return x.view(2, HEADS, 3)\n"
    assert relevant_source(source) == source


def test_prescan_skips_files_without_torch_or_without_anything_to_check() -> None:
    assert relevant_source("import numpy\nx = numpy.ones(3).reshape(3, 1)\n") is None
    assert relevant_source("import torch\n\ndef add(a, b):\n    return a + b\n") is None


def test_prescan_leaves_syntax_errors_to_the_parser() -> None:
    broken = "import torch\ndef f(:\n"
    assert relevant_source(broken) == broken


def test_a_shared_line_stays_when_one_of_its_statements_is_kept() -> None:
    source = "import torch\nUNUSED = 1; x = torch.ones(2).view(2, 1)\n"
    assert relevant_source(source) == source


def test_the_pool_finds_what_one_process_finds(tmp_path: Path) -> None:
    targets = [(str(path), None) for path in fixture_files()]
    one = check_files(targets, CODES, None, jobs=1)
    two = check_files(targets, CODES, None, jobs=2)
    assert [r.diagnostics for r in one] == [r.diagnostics for r in two]
    assert sum(len(r.diagnostics) for r in one) > 100


def test_cached_results_equal_fresh_ones(tmp_path: Path) -> None:
    targets = [(str(path), None) for path in fixture_files()]
    cache = ResultCache(tmp_path / "cache", CODES)
    fresh = check_files(targets, CODES, cache, jobs=1)
    cached_entries = list((tmp_path / "cache").rglob("*.json"))
    assert len(cached_entries) == len({p.read_bytes() for p in fixture_files()})
    warm = check_files(targets, CODES, cache, jobs=1)
    assert [r.diagnostics for r in warm] == [r.diagnostics for r in fresh]
    assert [[d.fix for d in r.diagnostics] for r in warm] == [
        [d.fix for d in r.diagnostics] for r in fresh
    ]


def test_a_changed_file_or_other_rules_miss_the_cache(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, CODES)
    cache.put(b"x = 1\n", [])
    assert cache.get("a.py", b"x = 1\n") == []
    assert cache.get("a.py", b"x = 2\n") is None
    assert ResultCache(tmp_path, ["SC101"]).get("a.py", b"x = 1\n") is None


def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, CODES)
    cache.put(b"x = 1\n", [])
    [entry] = tmp_path.rglob("*.json")
    entry.write_text("{not json", encoding="utf-8")
    assert cache.get("a.py", b"x = 1\n") is None


def test_an_unwritable_cache_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    cache = ResultCache(blocker, CODES)
    cache.put(b"x = 1\n", [])  # no error
    assert cache.get("a.py", b"x = 1\n") is None


def _shapecheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "shapecheck", "--format", "json", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_warm_runs_read_the_cache_without_libcst(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_bytes((ROOT / "examples" / "attention_mistakes.py").read_bytes())
    cold = _shapecheck("model.py", cwd=tmp_path)
    assert (tmp_path / ".shapecheck_cache" / "CACHEDIR.TAG").exists()
    probe = (
        "import sys\nfrom shapecheck.cli import main\n"
        "try:\n    main(['--format', 'json', 'model.py'])\n"
        "except SystemExit:\n    pass\n"
        "print('libcst' in sys.modules, file=sys.stderr)\n"
    )
    warm = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert json.loads(warm.stdout) == json.loads(cold.stdout) != []
    assert warm.stderr.strip() == "False"


def test_no_cache_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("import torch\n", encoding="utf-8")
    assert _shapecheck("--no-cache", "model.py", cwd=tmp_path).returncode == 0
    assert not (tmp_path / ".shapecheck_cache").exists()


def test_concurrent_runs_share_a_cache_safely(tmp_path: Path) -> None:
    for path in fixture_files()[:12]:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    command = [sys.executable, "-m", "shapecheck", "--format", "json", "."]
    runs = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    outputs = [json.loads(run.communicate(timeout=300)[0]) for run in runs]
    assert all(output == outputs[0] for output in outputs)
    entries = list((tmp_path / ".shapecheck_cache").rglob("*.json"))
    assert entries and all(isinstance(json.loads(e.read_bytes()), list) for e in entries)
    assert not list((tmp_path / ".shapecheck_cache").rglob("*.tmp"))
    assert json.loads(_shapecheck(".", cwd=tmp_path).stdout) == outputs[0]


@pytest.mark.parametrize("flag", ["--no-cache", "--cache-dir=elsewhere"])
def test_cache_flags_keep_the_findings(tmp_path: Path, flag: str) -> None:
    (tmp_path / "model.py").write_bytes((ROOT / "examples" / "attention_mistakes.py").read_bytes())
    plain = json.loads(_shapecheck("model.py", cwd=tmp_path).stdout)
    assert json.loads(_shapecheck(flag, "model.py", cwd=tmp_path).stdout) == plain


def test_a_cache_folder_that_exists_keeps_its_files(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("build/\n", encoding="utf-8")
    ResultCache(tmp_path, CODES).put(b"x = 1\n", [])
    assert (tmp_path / ".gitignore").read_text(encoding="utf-8") == "build/\n"
    assert not (tmp_path / "CACHEDIR.TAG").exists()
