"""Which files to check: directories recurse into ``*.py``; excluded names are skipped."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path


def is_excluded(path: Path, patterns: Iterable[str], root: Path, below: Path | None = None) -> bool:
    """Does a pattern match one of the path's components, or the path relative to ``root``?

    With ``below`` (a directory named on the command line), only what lies below it counts:
    naming an excluded directory explicitly checks it.
    """
    patterns = [pattern.rstrip("/") for pattern in patterns]
    if not patterns:
        return False
    absolute = path.absolute()
    relative = _relative(absolute, root)
    start = below.absolute() if below is not None else None
    if start is not None and _relative(absolute, start) is not None:
        parts = Path(_relative(absolute, start) or "").parts
        relative = None if is_excluded(start, patterns, root) else relative
    else:
        parts = Path(relative).parts if relative is not None else absolute.parts
    for pattern in patterns:
        if "/" in pattern:
            if relative is not None and (
                fnmatch.fnmatchcase(relative, pattern) or relative.startswith(pattern + "/")
            ):
                return True
        elif any(fnmatch.fnmatchcase(part, pattern) for part in parts):
            return True
    return False


def _relative(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base.absolute()).as_posix()
    except ValueError:
        return None


def discover(
    paths: Iterable[Path], excludes: list[str], root: Path, *, force_exclude: bool = False
) -> Iterator[Path | OSError]:
    """Python files under ``paths``, each once, in a stable order.

    A path named on the command line is always checked (excludes apply below it) unless
    ``force_exclude`` (for pre-commit, which names every changed file); a path that does not
    exist, or cannot be read, is yielded as is, so the caller reports it. A directory that
    cannot be listed is yielded as the ``OSError`` that says why (its ``filename``).
    """
    seen: set[str] = set()
    identity = _identities()
    for path in paths:
        if force_exclude and is_excluded(path, excludes, root):
            continue
        for found in _walk(path, excludes, root) if path.is_dir() else [path]:
            if isinstance(found, OSError):
                yield found
                continue
            key = identity(found)
            if key not in seen:
                seen.add(key)
                yield found


def _identities() -> Callable[[Path], str]:
    """The file a path names (its real path), so that each is checked once. A symlink loop
    resolves to a path of the loop: it stands for itself, and reading it reports the loop.
    Each folder's real path is found once, from its parent's where it is no symlink:
    resolving every file's, or every folder's, whole path would look at each folder above
    it again (most of a warm run's time on thousands of files)."""
    folders: dict[str, str] = {}

    def real_folder(folder: str) -> str:
        real = folders.get(folder)
        if real is None:
            parent, name = os.path.split(folder)
            if name in ("", ".", "..") or os.path.islink(folder):
                real = os.path.realpath(folder)
            else:
                real = os.path.join(real_folder(parent), name)
            folders[folder] = real
        return real

    def identity(path: Path) -> str:
        if os.path.islink(path):
            return os.path.realpath(path)
        folder, name = os.path.split(path)
        return os.path.join(real_folder(folder), name)

    return identity


def _walk(directory: Path, excludes: list[str], root: Path) -> Iterator[Path | OSError]:
    """The ``*.py`` files below ``directory``, and the error of each folder that cannot be
    listed (reported, never skipped in silence). A symlinked folder is followed only where it
    leads back inside ``directory``: one that leads elsewhere (an installed package, a
    shared checkout) is not part of what was named, and ``--fix`` would write there."""
    excluded = _below(directory, excludes, root)
    inside = _inside(directory)
    visited: set[tuple[int, int]] = set()
    unlistable: list[OSError] = []
    walk = os.walk(directory, followlinks=True, onerror=unlistable.append)
    for current, subdirectories, files in walk:
        yield from unlistable
        unlistable.clear()
        here = Path(current)
        try:
            status = here.stat()
        except OSError:
            subdirectories[:] = []
            continue
        identity = (status.st_dev, status.st_ino)
        if identity in visited:  # a symlink loop
            subdirectories[:] = []
            continue
        visited.add(identity)
        subdirectories[:] = sorted(
            name for name in subdirectories if not excluded(here, name) and inside(here / name)
        )
        for name in sorted(files):
            if name.endswith(".py") and not excluded(here, name):
                yield here / name
    yield from unlistable


def _inside(directory: Path) -> Callable[[Path], bool]:
    """Does a folder found below ``directory`` lie inside it once symlinks are resolved?"""
    top = os.path.realpath(directory)
    prefix = top.rstrip(os.sep) + os.sep

    def inside(folder: Path) -> bool:
        if not os.path.islink(folder):
            return True  # below an inside folder: inside
        real = os.path.realpath(folder)
        return real == top or real.startswith(prefix)

    return inside


def _below(directory: Path, excludes: list[str], root: Path) -> Callable[[Path, str], bool]:
    """``is_excluded(folder / name, excludes, root, below=directory)`` for a walk that has
    already pruned every excluded folder above ``name``: only the name itself and the path
    patterns are left to match, with the patterns compiled once (thousands of files)."""
    patterns = [pattern.rstrip("/") for pattern in excludes]
    names = [pattern for pattern in patterns if "/" not in pattern]
    name_match = re.compile("|".join(map(fnmatch.translate, names))).match if names else None
    paths = [pattern for pattern in patterns if "/" in pattern]
    if paths and is_excluded(directory, patterns, root):
        paths = []  # an excluded directory named explicitly: its own path does not count

    def excluded(folder: Path, name: str) -> bool:
        if name_match is not None and name_match(name):
            return True
        if not paths:
            return False
        relative = _relative((folder / name).absolute(), root)
        return relative is not None and any(
            fnmatch.fnmatchcase(relative, pattern) or relative.startswith(pattern + "/")
            for pattern in paths
        )

    return excluded
