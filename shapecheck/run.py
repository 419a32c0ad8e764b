"""Checking many files: what the cache knows first, the rest in a process pool.

Reading and hashing a file is cheap; parsing it is not. Files are read here, looked up in the
:class:`~shapecheck.cache.ResultCache`, and only the misses are checked, by worker processes
when there are enough of them to pay for the workers (each worker receives file contents and
returns plain diagnostics). The analysis and the rules are imported only when something is
checked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from shapecheck.diagnostics import Diagnostic, FileResult, input_error, internal_error
from shapecheck.files import read_regular_file

if TYPE_CHECKING:
    from shapecheck.cache import ResultCache
    from shapecheck.rule import Rule

ResultT = TypeVar("ResultT")

Target = tuple[str, bytes | FileResult | None]
"""A file to check: the path shown, and its content (from stdin), or what stopped it from
being read (an unlistable directory), or ``None`` to read it from disk."""

POOL_MIN_FILES = 8
"""Fewer files than this are checked in this process: starting workers would cost more."""

_worker_rules: list[Rule] = []
_worker_write_fixes = True


def check_files(
    targets: Sequence[Target],
    codes: Sequence[str],
    cache: ResultCache | None,
    *,
    jobs: int | None = None,
    write_fixes: bool = True,
) -> list[FileResult]:
    """Check each target, running the rules ``codes``; ``write_fixes``: with the edits of
    each fix (a report that prints none needs only the offers: no libcst)."""
    results: dict[int, FileResult] = {}
    pending: list[tuple[str, bytes]] = []
    pending_at: list[int] = []
    resting: list[tuple[int, Any]] = []

    def settle(index: int, content: bytes | FileResult, cached: list[Diagnostic] | None) -> None:
        path = targets[index][0]
        if isinstance(content, FileResult):
            results[index] = content
        elif cached is not None:
            results[index] = FileResult(path, cached)
        else:
            pending.append((path, content))
            pending_at.append(index)

    for index, (path, data) in enumerate(targets):
        content = read(path) if data is None else data
        if cache is None or isinstance(content, FileResult):
            settle(index, content, None)
            continue
        entry = cache.entry(path, content, read_from_disk=data is None)
        if cache.rests_on_others(entry):
            resting.append((index, entry))  # its content is read again on a miss only
        else:
            settle(index, content, cache.diagnostics(path, entry, edits=write_fixes))
    # every file given is hashed now: a result that rests on one of them is trusted or not
    # by that digest, without reading the file a second time
    for index, entry in resting:
        assert cache is not None
        path, data = targets[index]
        cached = cache.diagnostics(path, entry, edits=write_fixes)
        if cached is not None:
            results[index] = FileResult(path, cached)
        else:
            settle(index, read(path) if data is None else data, None)

    def store(index: int, result: FileResult) -> None:
        path, content = pending[index]
        if cache is not None and result.complete:
            cache.put(content, result.diagnostics, path, result.dependencies)

    checked = _check_all(pending, codes, jobs, store, write_fixes)
    for index, result in zip(pending_at, checked, strict=True):
        results[index] = result
    return [results[index] for index in range(len(targets))]


def read(path: str) -> bytes | FileResult:
    try:
        return read_regular_file(path)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        return FileResult(path, [input_error(path, f"cannot read: {reason}")])


def failure(path: str, error: Exception) -> FileResult:
    """An error while checking one file, reported for that file: the others go on."""
    if isinstance(error, RecursionError):
        message = "cannot analyse: input too deeply nested"
        return FileResult(path, [input_error(path, message)], complete=False)
    if isinstance(error, MemoryError):  # not the file's fault: not cached, tried again next run
        message = "cannot analyse: out of memory"
        return FileResult(path, [input_error(path, message)], complete=False)
    diagnostic = internal_error(path, "while checking this file", error)
    return FileResult(path, [diagnostic], complete=False)


def _check_all(
    pending: list[tuple[str, bytes]],
    codes: Sequence[str],
    jobs: int | None,
    done: Callable[[int, FileResult], None],
    write_fixes: bool,
) -> list[FileResult]:
    global _worker_rules, _worker_write_fixes
    if not pending:
        return []
    from shapecheck.rule import all_rules

    _worker_rules = [rule() for rule in all_rules() if rule.code in codes]
    _worker_write_fixes = write_fixes
    return map_files(_check_one, pending, jobs, done)


def map_files(
    worker: Callable[[tuple[str, bytes]], ResultT],
    items: list[tuple[str, bytes]],
    jobs: int | None = None,
    done: Callable[[int, ResultT], None] | None = None,
) -> list[ResultT]:
    """``worker`` on each ``(path, content)``, in order: in forked worker processes when there
    are enough files to pay for them. ``worker`` must be a module-level function (the workers
    inherit what this process imported); where processes cannot fork (Windows), or a worker
    dies, the files are done here. ``done(index, result)`` runs here as each result arrives,
    while the workers go on (writing it to the cache was a serial tail after them)."""
    workers = min(jobs or _cpus(), len(items))
    # largest files first: no worker is left with a big file at the end, and a package's
    # small modules (timm's layers), which its large ones import and so parse, are checked
    # after them, on the trees already made (``project.parsed``)
    order = sorted(range(len(items)), key=lambda index: -len(items[index][1]))
    by_index: dict[int, ResultT] = {}
    if workers >= 2 and len(items) >= POOL_MIN_FILES and _can_fork():
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        try:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(workers, mp_context=context) as pool:
                results = pool.map(worker, [items[index] for index in order])
                for index, result in zip(order, results, strict=True):
                    by_index[index] = result
                    if done is not None:
                        done(index, result)
        except BrokenProcessPool:
            pass  # a worker died: what the pool left is done here, below
    left = [index for index in order if index not in by_index]
    by_index.update(zip(left, _in_this_process(worker, items, left, done), strict=True))
    return [by_index[index] for index in range(len(items))]


def _in_this_process(
    worker: Callable[[tuple[str, bytes]], ResultT],
    items: list[tuple[str, bytes]],
    indices: Iterable[int],
    done: Callable[[int, ResultT], None] | None,
) -> list[ResultT]:
    results = []
    for index in indices:
        result = worker(items[index])
        if done is not None:
            done(index, result)
        results.append(result)
    return results


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def _check_one(item: tuple[str, bytes]) -> FileResult:
    from shapecheck.linter import lint_source

    path, content = item
    try:
        return lint_source(content, path, _worker_rules, write_fixes=_worker_write_fixes)
    except Exception as error:  # reported for this file; the others go on
        return failure(path, error)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
