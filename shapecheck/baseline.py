"""Baselines, for adopting shapecheck in a codebase that already has findings.

``--write-baseline FILE`` records today's findings; ``--baseline FILE`` then reports only the
others. A finding is recorded by its file (relative to the baseline, so the run's directory
does not matter), its rule and its :attr:`~shapecheck.diagnostics.Diagnostic.anchor` (the
enclosing function and the flagged code), never by line: code added above it, reformatting
and comments leave it known. Identical findings are counted, so a second copy of a known
mistake in the same function is new. SC000 is never recorded: unreadable input always shows.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from shapecheck.diagnostics import INPUT_ERROR_CODE, Diagnostic
from shapecheck.files import read_regular_file
from shapecheck.writing import WriteError, writable_target, write_file

VERSION = 1

Key = tuple[str, str, str]


class BaselineError(Exception):
    """A baseline file that cannot be read or written, or is not one."""


def write_baseline(path: Path, diagnostics: Sequence[Diagnostic]) -> int:
    """Record ``diagnostics`` in ``path`` (see :func:`check_baseline_target` for what it
    refuses to replace; never half-written); how many."""
    check_baseline_target(path)
    counts = Counter(_key(path, d) for d in diagnostics if d.code != INPUT_ERROR_CODE)
    findings = [
        {"path": file, "code": code, "anchor": anchor, "count": count}
        for (file, code, anchor), count in sorted(counts.items())
    ]
    text = json.dumps({"version": VERSION, "findings": findings}, indent=2) + "\n"
    try:
        write_file(str(path), text.encode("utf-8"))
    except WriteError as error:
        raise BaselineError(f"{path}: {error}") from error
    return sum(counts.values())


def check_baseline_target(path: Path) -> None:
    """Refuse to write a baseline to a ``.py`` file (a source named by mistake), over anything
    but a regular file, or over a file that holds something else than a baseline; a symlink
    is followed to its target."""
    try:
        real, status = writable_target(str(path))
    except WriteError as error:
        raise BaselineError(f"{path}: {error}") from error
    if path.suffix == ".py" or real.endswith(".py"):
        raise BaselineError(f"{path}: refusing to write a baseline to a .py file")
    if status is not None and status.st_size:  # an empty file holds nothing to lose
        try:
            read_baseline(path)
        except BaselineError as error:
            raise BaselineError(f"{error}; refusing to overwrite it") from error


def read_baseline(path: Path) -> Counter[Key]:
    """What the baseline at ``path`` records; BaselineError unless it is exactly what
    :func:`write_baseline` writes (a hand-edited or foreign file is never half-trusted)."""
    try:
        content = json.loads(read_regular_file(path).decode("utf-8"))
    except OSError as error:
        raise BaselineError(f"{path}: cannot read: {error.strerror}") from error
    except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, or nested too deeply
        raise _not_a_baseline(path, str(error)) from error
    if not isinstance(content, dict) or set(content) != {"version", "findings"}:
        raise _not_a_baseline(path, 'expected an object with "version" and "findings"')
    # ``type(...) is int``: JSON's true is a bool, which Python would take for 1
    if type(content["version"]) is not int or content["version"] != VERSION:
        raise _not_a_baseline(path, f"version {VERSION} expected")
    if not isinstance(content["findings"], list):
        raise _not_a_baseline(path, '"findings" must be a list')
    recorded: Counter[Key] = Counter()
    for number, entry in enumerate(content["findings"], start=1):
        if not isinstance(entry, dict) or set(entry) != {"path", "code", "anchor", "count"}:
            raise _not_a_baseline(
                path, f'finding {number}: expected "path", "code", "anchor" and "count"'
            )
        key = (entry["path"], entry["code"], entry["anchor"])
        if not all(isinstance(part, str) for part in key):
            raise _not_a_baseline(
                path, f'finding {number}: "path", "code" and "anchor" must be strings'
            )
        if type(entry["count"]) is not int or entry["count"] < 1:
            raise _not_a_baseline(path, f'finding {number}: "count" must be a positive integer')
        recorded[key] += entry["count"]
    return recorded


def _not_a_baseline(path: Path, reason: str) -> BaselineError:
    return BaselineError(f"{path}: not a shapecheck baseline ({reason})")


def new_findings(
    path: Path, baseline: Counter[Key], diagnostics: Sequence[Diagnostic]
) -> tuple[list[Diagnostic], int]:
    """The findings the baseline at ``path`` does not know, and how many it knew."""
    remaining = Counter(baseline)
    new: list[Diagnostic] = []
    for diagnostic in diagnostics:
        key = _key(path, diagnostic)
        if diagnostic.code != INPUT_ERROR_CODE and remaining[key] > 0:
            remaining[key] -= 1
        else:
            new.append(diagnostic)
    return new, len(diagnostics) - len(new)


def _key(baseline: Path, diagnostic: Diagnostic) -> Key:
    folder = os.path.dirname(os.path.abspath(baseline))
    relative = os.path.relpath(os.path.abspath(diagnostic.path), folder)
    return (Path(relative).as_posix(), diagnostic.code, diagnostic.anchor)
