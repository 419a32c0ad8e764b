"""The speed-ups change nothing but speed: the results cache and the process pool each give
the findings the plain path gives, on the fixtures and on real code."""

from __future__ import annotations

import ast
import gc
import json
import os
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from shapecheck.cache import ResultCache
from shapecheck.confirm.fixtures import fixture_files
from shapecheck.diagnostics import Diagnostic, FileResult
from shapecheck.linter import lint_parsed
from shapecheck.rule import SuppressionRule, all_rules, rule_codes
from shapecheck.run import POOL_MIN_FILES, check_files, map_files
from shapecheck.source import Source
from tests.conftest import BAD_VIEW, ROOT

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


def _by_file(results: list[FileResult]) -> list[tuple[str, list[Diagnostic], bool]]:
    return [(result.path, result.diagnostics, result.complete) for result in results]


def _targets_with_findings_at_the_edges() -> list[tuple[str, bytes | None]]:
    """The corpus with the first, the last and the smallest inputs each holding a finding:
    a pool that loses or misplaces the result of any of them differs from one process."""
    fixtures = fixture_files()
    smallest = ("smallest.py", BAD_VIEW.encode())
    middle = [(str(path), None) for path in _corpus()[1:] if path.stat().st_size > 200]
    targets: list[tuple[str, bytes | None]] = [
        (str(fixtures[0]), None),
        *middle,
        smallest,
        (str(fixtures[-1]), None),
    ]
    sizes = [len(data) if data else Path(path).stat().st_size for path, data in targets]
    assert sizes.index(min(sizes)) == len(targets) - 2
    return targets


def test_the_pool_finds_what_one_process_finds_file_by_file() -> None:
    targets = _targets_with_findings_at_the_edges()
    one = check_files(targets, CODES, None, jobs=1)
    two = check_files(targets, CODES, None, jobs=2)
    assert _by_file(two) == _by_file(one)
    assert [result.path for result in one] == [path for path, _ in targets]
    assert all(one[index].diagnostics for index in (0, -2, -1))


def test_the_pool_reports_every_finding_of_many_small_files(
    write: Callable[[str, str | bytes], Path],
    cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More files than start the pool, each with exactly one finding: the summary counts each."""
    monkeypatch.setattr("shapecheck.run._cpus", lambda: 2)
    count = POOL_MIN_FILES + 3
    for index in range(count):
        write(f"model_{index:02}.py", BAD_VIEW + f"\nSIZE = {index}\n" * index)
    result = cli("--no-cache", ".")
    assert result.exit_code == 1
    assert result.output.count(": SC101 ") == count
    assert f"{count} findings in {count} files" in result.output


def test_cached_results_equal_fresh_ones(tmp_path: Path) -> None:
    files = _corpus()
    targets = [(str(path), None) for path in files]
    cache = ResultCache(tmp_path / "cache", CODES)
    fresh = check_files(targets, CODES, cache, jobs=1)
    cached_entries = list((tmp_path / "cache").rglob("*.json"))
    assert len(cached_entries) == len({path.read_bytes() for path in files})
    warm = check_files(targets, CODES, cache, jobs=1)
    assert [r.diagnostics for r in warm] == [r.diagnostics for r in fresh]
    assert [[d.fix for d in r.diagnostics] for r in warm] == [
        [d.fix for d in r.diagnostics] for r in fresh
    ]


def test_the_pool_fills_the_cache_as_one_process_does(tmp_path: Path) -> None:
    """Results are written to the cache as they arrive from the workers (while they go on):
    every entry is written, and a warm run serves what each process found."""
    targets = _targets_with_findings_at_the_edges()
    pooled = ResultCache(tmp_path / "pooled", CODES)
    fresh = check_files(targets, CODES, pooled, jobs=2)
    alone = ResultCache(tmp_path / "alone", CODES)
    check_files(targets, CODES, alone, jobs=1)
    names = sorted(path.name for path in (tmp_path / "pooled").rglob("*.json"))
    assert names == sorted(path.name for path in (tmp_path / "alone").rglob("*.json"))
    warm = check_files(targets, CODES, pooled, jobs=2)
    assert _by_file(warm) == _by_file(fresh)


_PARENT = os.getpid()


def _dies_in_a_worker_at_c(item: tuple[str, bytes]) -> str:
    if item[0] == "c" and os.getpid() != _PARENT:
        os._exit(1)  # a worker killed (out of memory): the pool breaks
    return item[0].upper()


def test_a_dead_worker_leaves_the_rest_to_this_process_each_file_once() -> None:
    items = [(name, b"x" * (20 - index)) for index, name in enumerate("abcdefghijkl")]
    seen: list[int] = []
    results = map_files(_dies_in_a_worker_at_c, items, 2, lambda index, _: seen.append(index))
    assert results == [name.upper() for name, _ in items]
    assert sorted(seen) == list(range(len(items)))


def test_files_checked_here_go_largest_first_and_come_back_in_order() -> None:
    # a package's large modules import its small ones: checked first, they leave the trees
    # of the small ones made for the small ones' own check (project.parsed)
    items = [(name, b"x" * size) for name, size in (("small", 1), ("large", 30), ("mid", 9))]
    seen: list[int] = []
    results = map_files(_upper, items, 1, lambda index, _: seen.append(index))
    assert results == ["SMALL", "LARGE", "MID"]
    assert seen == [1, 2, 0]


def _upper(item: tuple[str, bytes]) -> str:
    return item[0].upper()


def _looked_up(
    cache: ResultCache, path: str, data: bytes, *, edits: bool = True
) -> list[Diagnostic] | None:
    """What a run finds in the cache for ``data`` checked at ``path`` (``None``: a miss)."""
    return cache.diagnostics(path, cache.entry(path, data), edits=edits)


def test_a_changed_file_or_other_rules_miss_the_cache(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, CODES)
    cache.put(b"x = 1\n", [])
    assert _looked_up(cache, "a.py", b"x = 1\n") == []
    assert _looked_up(cache, "a.py", b"x = 2\n") is None
    assert _looked_up(ResultCache(tmp_path, ["SC101"]), "a.py", b"x = 1\n") is None


@pytest.mark.parametrize(
    "edited",
    [
        "shapecheck/analysis/ops/views.py",
        "shapecheck/linter.py",
        "rules/sc101_view_without_contiguous.py",
    ],
)
def test_editing_shapecheck_or_a_rule_changes_the_cache_folder(edited: str) -> None:
    """An edited rule in an editable install must not serve the findings of the old one."""
    path = ROOT / edited
    status = path.stat()
    before = ResultCache(Path("cache"), CODES).folder
    try:
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 1_000_000_000))
        assert ResultCache(Path("cache"), CODES).folder != before
    finally:
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert ResultCache(Path("cache"), CODES).folder == before


def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, CODES)
    cache.put(b"x = 1\n", [])
    [entry] = tmp_path.rglob("*.json")
    entry.write_text("{not json", encoding="utf-8")
    assert _looked_up(cache, "a.py", b"x = 1\n") is None


def test_an_unwritable_cache_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    cache = ResultCache(blocker, CODES)
    cache.put(b"x = 1\n", [])  # no error
    assert _looked_up(cache, "a.py", b"x = 1\n") is None


def _shapecheck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "shapecheck", "--format", "json", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def _run_and_report_loaded(module: str, cwd: Path, *arguments: str) -> tuple[str, bool]:
    """Run the CLI in a fresh interpreter: its output, and whether it loaded ``module``."""
    probe = (
        "import sys\nfrom shapecheck.cli import main\n"
        f"try:\n    main({list(arguments)!r})\n"
        "except SystemExit:\n    pass\n"
        f"print({module!r} in sys.modules, file=sys.stderr)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert run.stderr.strip() in ("True", "False"), run.stderr
    return run.stdout, run.stderr.strip() == "True"


def test_warm_runs_read_the_cache_without_the_analysis(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_bytes((ROOT / "examples" / "attention_mistakes.py").read_bytes())
    cold = _shapecheck("--format", "json", "model.py", cwd=tmp_path)
    assert (tmp_path / ".shapecheck_cache" / "CACHEDIR.TAG").exists()
    warm, loaded = _run_and_report_loaded(
        "shapecheck.analysis", tmp_path, "--format", "json", "model.py"
    )
    assert json.loads(warm) == json.loads(cold.stdout) != []
    assert not loaded


def test_libcst_loads_only_to_write_a_fix(tmp_path: Path) -> None:
    """The analysis reads ``ast`` and rules decide their fixes there; libcst parses code only
    where a fix's edits are printed or applied (JSON and SARIF print them; a text report, as
    a pre-commit hook prints it, says only which findings have one)."""
    (tmp_path / "clean.py").write_bytes(
        (ROOT / "shapecheck" / "reference" / "attention.py").read_bytes()
    )
    (tmp_path / "model.py").write_bytes((ROOT / "examples" / "attention_mistakes.py").read_bytes())
    clean, loaded = _run_and_report_loaded("libcst", tmp_path, "--no-cache", "clean.py")
    assert "No findings" in clean and not loaded
    found, loaded = _run_and_report_loaded("libcst", tmp_path, "--no-cache", "model.py")
    assert "[*]" in found and not loaded
    found, loaded = _run_and_report_loaded(
        "libcst", tmp_path, "--no-cache", "--format", "json", "model.py"
    )
    assert any(finding["fix"] and finding["fix"]["edits"] for finding in json.loads(found))
    assert loaded


def test_a_report_without_edits_offers_the_fixes_writing_them_finds() -> None:
    """Without libcst, each fix is decided on the ``ast`` side: the same fixes, as safe, as
    writing their edits gives (on the fixtures, the example and ``torch.nn``)."""
    targets = [(str(path), None) for path in _corpus()]
    offered = check_files(targets, CODES, None, jobs=1, write_fixes=False)
    written = check_files(targets, CODES, None, jobs=1)

    def fixes(results: list[FileResult]) -> list[tuple[Diagnostic, object]]:
        return [
            (d, d.fix and (d.fix.description, d.fix.safe, d.fix.keeps_results))
            for result in results
            for d in result.diagnostics
        ]

    assert fixes(offered) == fixes(written)
    # (a suppression comment's fix is a text edit from the start: no libcst to spare)
    comments = {rule.code for rule in all_rules() if issubclass(rule, SuppressionRule)}
    offers = [d for d, _ in fixes(offered) if d.fix is not None and d.code not in comments]
    assert offers and all(d.fix is not None and d.fix.edits is None for d in offers)
    assert sum(1 for d, _ in fixes(written) if d.fix is not None and d.fix.edits) > 50


def test_offered_fixes_serve_only_reports_without_edits(tmp_path: Path) -> None:
    """A text report's entry (fixes offered, not written) is a miss for a run that needs the
    edits; that run's entry serves both."""
    model = tmp_path / "model.py"
    model.write_text(BAD_VIEW, encoding="utf-8")
    cache, target, data = (
        ResultCache(tmp_path / "cache", CODES),
        [(str(model), None)],
        model.read_bytes(),
    )
    check_files(target, CODES, cache, jobs=1, write_fixes=False)
    offered = _looked_up(cache, str(model), data, edits=False)
    assert offered and offered[0].fix is not None and offered[0].fix.edits is None
    assert _looked_up(cache, str(model), data) is None
    [written] = check_files(target, CODES, cache, jobs=1)
    for edits in (True, False):
        cached = _looked_up(cache, str(model), data, edits=edits)
        assert cached and [d.fix for d in cached] == [d.fix for d in written.diagnostics]
    assert written.diagnostics[0].fix is not None and written.diagnostics[0].fix.edits


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
    entries = [json.loads(e.read_bytes()) for e in (tmp_path / ".shapecheck_cache").rglob("*.json")]
    # whole entries: a list of diagnostics, or one that rests on other files with its evidence
    assert entries and all(
        isinstance(entry, list) or isinstance(entry["diagnostics"], list) for entry in entries
    )
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


def test_a_checked_files_tree_is_freed_when_its_check_ends() -> None:
    """No cache of a speed-up outlives the file it was filled from: one keyed by functions
    that held their trees kept every checked file's alive (twice the peak memory on timm)."""
    text = (ROOT / "fixtures" / "SC301_module_styles.py").read_text(encoding="utf-8")
    module = ast.parse(text)
    functions = [node for node in ast.walk(module) if isinstance(node, ast.FunctionDef)]
    assert functions
    alive = [weakref.ref(node) for node in functions]
    result = lint_parsed(Source("snippet.py", text, module, "utf-8"), [r() for r in all_rules()])
    assert result.diagnostics
    del module, functions, result
    gc.collect()
    assert [ref for ref in alive if ref() is not None] == []
