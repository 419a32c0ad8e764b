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

VERSION = 1

Key = tuple[str, str, str]


class BaselineError(Exception):
    """A baseline file that cannot be read or is not one."""


def write_baseline(path: Path, diagnostics: Sequence[Diagnostic]) -> int:
    """Record ``diagnostics`` in ``path`` (replaced whole, never half-written); how many."""
    counts = Counter(_key(path, d) for d in diagnostics if d.code != INPUT_ERROR_CODE)
    findings = [
        {"path": file, "code": code, "anchor": anchor, "count": count}
        for (file, code, anchor), count in sorted(counts.items())
    ]
    text = json.dumps({"version": VERSION, "findings": findings}, indent=2) + "\n"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return sum(counts.values())


def read_baseline(path: Path) -> Counter[Key]:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
        if content.get("version") != VERSION:
            raise BaselineError(f"{path}: not a shapecheck baseline (version {VERSION})")
        return Counter(
            {
                (entry["path"], entry["code"], entry["anchor"]): int(entry["count"])
                for entry in content["findings"]
            }
        )
    except OSError as error:
        raise BaselineError(f"{path}: cannot read: {error.strerror}") from error
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise BaselineError(f"{path}: not a shapecheck baseline ({error})") from error


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
