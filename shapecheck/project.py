"""The project a checked file belongs to: the files of it that its imports name, found on disk.

Where a module is looked for depends only on where the importing file lies, never on which
files a run was given, so a file checked alone (a pre-commit hook passes only the changed
ones) finds the same modules as a check of the whole project:

- a relative import (``from .layers import MultiHeadAttention``, ``from .. import utils``)
  counts its dots from the importing file's folder;
- an absolute import (``from pkg.attention import Head``, ``import pkg.model as m``) is looked
  for under the importing file's *import root* (the folder above its topmost package: the
  first folder up without an ``__init__.py``; a script's own folder), then under the
  project's root (the nearest folder up with a ``pyproject.toml``, ``setup.py`` or
  ``setup.cfg``) and its ``src/`` folder (the ``src/`` layout);
- a module is ``name.py`` or ``name/__init__.py``.

Never read: a path through ``site-packages`` or ``dist-packages`` (installed packages: results
never depend on what is installed), the standard library, and the libraries the analysis
models itself (torch, einops, jaxtyping, numpy). The one exception is the user's to make: the
modules named by ``known-modules`` (see :func:`know`), and those under them, are also looked
for, after the project's roots, in the folders of ``sys.path`` (where the Python running
shapecheck would import them from: its ``site-packages``, ``PYTHONPATH``, the folders ``.pth``
files add), and read even when installed. Files are read as the checked ones are (regular
files only) and parsed with CPython's ``ast``; one that cannot be read or parsed is simply not
known. Nothing is imported or run.

Each file is read and parsed once per process. Every file whose content an answer rested on,
and every place looked at where no file was, is written to the :class:`Evidence` of the file
being checked: its cached result stays valid only while all of them are as they were.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from shapecheck.files import read_regular_file
from shapecheck.record import record

if TYPE_CHECKING:
    import ast

    from shapecheck.source import Source

INSTALLED = frozenset({"site-packages", "dist-packages"})
"""Folders of installed packages: nothing below them is ever read."""

MODELLED = frozenset({"torch", "einops", "jaxtyping", "numpy", "beartype", "__future__"})
"""Top-level packages the analysis knows by their names (or never needs): never looked for."""

PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg")

_MAX_LEVELS = 64
"""How many folders up a package or a project root is looked for."""


class ProjectFile:
    """A module of the project, found on disk: parsed the first time its code is asked for."""

    def __init__(self, path: str, digest: str) -> None:
        self.path = path
        """Absolute and normalised."""
        self.digest = digest
        """The SHA-256 of its content when it was found."""

    @functools.cached_property
    def name(self) -> str:
        """Its dotted name from its import root (``pkg.layers``; ``layers`` for a script)."""
        return locate(self.path).name

    @property
    def is_package(self) -> bool:
        return os.path.basename(self.path) == "__init__.py"

    @property
    def module(self) -> ast.Module | None:
        """Its syntax tree (``None``: it cannot be read or parsed, or changed since found)."""
        source = self._source
        return source.module if source is not None else None

    @property
    def text(self) -> str:
        source = self._source
        return source.text if source is not None else ""

    @functools.cached_property
    def data(self) -> bytes:
        """Its content (empty: it cannot be read, or changed since found, so it is known
        neither way this time)."""
        try:
            data = read_regular_file(self.path)
        except OSError:
            return b""
        return data if hashlib.sha256(data).hexdigest() == self.digest else b""

    @functools.cached_property
    def _source(self) -> Source | None:
        from shapecheck.source import Source, parse_source  # a warm run parses nothing

        data = self.data
        if not data and self.digest != _EMPTY:
            return None
        source = parse_source(data, self.path)
        # A dependency's tree lives as long as the process: the cyclic collector need not walk
        # it again at every collection (it would, for each file checked after it).
        gc.freeze()
        return source if isinstance(source, Source) else None


def parsed(path: str, data: bytes) -> Source | None:
    """The tree this process made of ``path`` as another file's dependency, if its content
    is ``data`` (``None``: none yet): a file checked after one that imports it is not parsed
    again (on timm, in one process, 55 files and 0.4 s of 12). Nothing writes to a tree, so
    the check and the dependency's readers may share it."""
    known = _files.get(os.path.normpath(os.path.abspath(path)))
    if known is None or "_source" not in vars(known) or known.data != data:
        return None
    return known._source


Evidence = dict[str, str | None]
"""Path -> the SHA-256 of the content an answer rested on, or ``None``: no regular file there."""

_seen: dict[str, tuple[tuple[int, int, int] | None, str | None]] = {}
"""Path -> (its size, modification time and inode when looked at; its digest)."""
_files: dict[str, ProjectFile] = {}
_locations: dict[str, Location] = {}
_sinks: list[Evidence] = []
"""Where what is looked at is written: the checked file's evidence, and that of every
dependency being worked in (see :func:`active`)."""
_known: tuple[str, ...] = ()
"""The modules ``known-modules`` names (see :func:`know`)."""
_search_path: tuple[str, ...] = ()
"""The folders they are looked for in (absolute): ``sys.path``'s, while any are named."""


def know(modules: Sequence[str]) -> None:
    """Read the modules named (``mylib``, ``pkg.sub``) and those under them (``mylib.layers``)
    wherever Python would import them from, installed or not; ``[]``: none (the default).
    Set once per run, before anything is checked: what was found under other settings is
    looked for again."""
    global _known, _search_path
    named = tuple(sorted(set(modules)))
    if named == _known:
        return
    _known = named
    _search_path = search_path() if named else ()
    _files.clear()  # a new file for every path: what was analysed from the old ones is not used
    _locations.clear()


def search_path() -> tuple[str, ...]:
    """The folders of ``sys.path``, absolute, in order (zip files and missing folders left
    out): where the modules ``known-modules`` names are looked for."""
    folders = (os.path.abspath(entry) for entry in sys.path)
    return tuple(dict.fromkeys(folder for folder in folders if os.path.isdir(folder)))


def _named(dotted: str) -> bool:
    """Does ``known-modules`` name ``dotted`` or a package above it?"""
    return any(dotted == module or dotted.startswith(module + ".") for module in _known)


def _named_file(path: str) -> bool:
    """Is the file at ``path`` a module ``known-modules`` names, under a folder of the search
    path (``.../site-packages/mylib/layers.py`` is ``mylib.layers``)?"""
    for folder in _search_path:
        if path.startswith(folder + os.sep):
            parts = os.path.splitext(os.path.relpath(path, folder))[0].split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            if _named(".".join(parts)):
                return True
    return False


def begin(evidence: Evidence | None) -> None:
    """Write what is looked at from now on to ``evidence`` (``None``: to nothing)."""
    _sinks[:] = [] if evidence is None else [evidence]
    _locations.clear()  # where files lie is looked at again for each checked file


@contextlib.contextmanager
def active(evidence: Evidence) -> Iterator[None]:
    """Work in a dependency whose answers rest on ``evidence``: whoever uses it rests on all
    of it (replayed now), and what is looked at meanwhile is added to it."""
    touch(evidence)
    _sinks.append(evidence)
    try:
        yield
    finally:
        _sinks.pop()


def touch(evidence: Evidence) -> None:
    """An answer worked out earlier is used again: what it rested on, the user rests on."""
    for sink in _sinks:
        if sink is not evidence:
            sink.update(evidence)


_EMPTY = hashlib.sha256(b"").hexdigest()

MAX_NEIGHBOURS = 32
"""A folder of more modules is a collection (``timm/models``), not a package whose few
modules build each other's classes: their constructions are not looked for there."""


def neighbours(path: str) -> list[ProjectFile]:
    """The other modules in the folder of the file at ``path``, where it holds at most
    :data:`MAX_NEIGHBOURS`. Which modules are there is written to the evidence (as the
    folder's path, ending in a separator): a module added there may build the file's
    classes."""
    folder = os.path.dirname(path)
    if installed(folder) or _looked_at(folder + os.sep) is None:
        return []
    names = _module_names(folder)
    if names is None or len(names) > MAX_NEIGHBOURS:
        return []
    paths = [os.path.join(folder, name) for name in names]
    return [found for each in paths if each != path and (found := _read(each)) is not None]


def _module_names(folder: str) -> list[str] | None:
    try:
        return sorted(name for name in os.listdir(folder) if name.endswith(".py"))
    except OSError:
        return None


def digest(path: str) -> str | None:
    """The SHA-256 of a regular file's content, or, for a folder (a path ending in a
    separator), of the names of its modules (``None``: nothing there, or unreadable)."""
    if path.endswith(os.sep):
        names = _module_names(path)
        return None if names is None else hashlib.sha256("\0".join(names).encode()).hexdigest()
    try:
        return hashlib.sha256(read_regular_file(path)).hexdigest()
    except OSError:
        return None


def _looked_at(path: str) -> str | None:
    """The digest of what is at ``path`` (read again only once the file changed), written to
    the evidence."""
    try:
        status = os.stat(path)
        signature = (status.st_size, status.st_mtime_ns, status.st_ino)
    except OSError:
        signature = None
    known = _seen.get(path)
    if known is not None and known[0] == signature:
        found = known[1]
    else:
        found = digest(path) if signature is not None else None
        _seen[path] = (signature, found)
    for sink in _sinks:
        sink[path] = found
    return found


def installed(path: str) -> bool:
    """Is ``path`` inside an installed package's folder?"""
    return not INSTALLED.isdisjoint(path.split(os.sep))


@record
class Location:
    """Where a file lies, as imports see it."""

    folder: str
    name: str
    """The file's dotted module name from its import root."""
    roots: tuple[str, ...]
    """Where absolute imports are looked for, in order."""
    looked: tuple[tuple[str, str | None], ...]
    """The files looked at to find them, and what was there."""


def locate(path: str) -> Location:
    """The import root and name of the file at ``path`` (absolute), and where absolute imports
    from it are looked for."""
    if path in _locations:
        location = _locations[path]
        for looked, found in location.looked:  # the same answer rests on the same files
            for sink in _sinks:
                sink[looked] = found
        return location
    evidence: Evidence = {}
    with active(evidence):
        location = _located(path, evidence)
    _locations[path] = location
    return location


def _located(path: str, evidence: Evidence) -> Location:
    folder = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    parts = [] if stem == "__init__" else [stem]
    root = folder
    for _ in range(_MAX_LEVELS):
        if _looked_at(os.path.join(root, "__init__.py")) is None:
            break
        parts.insert(0, os.path.basename(root))
        parent = os.path.dirname(root)
        if parent == root:
            break
        root = parent
    roots = [root]
    project = _project_root(folder)
    if project is not None:
        roots += [project, os.path.join(project, "src")]
    located = ".".join(parts)
    return Location(folder, located, tuple(dict.fromkeys(roots)), tuple(evidence.items()))


def _project_root(folder: str) -> str | None:
    """The nearest folder up from ``folder`` with a project file (``pyproject.toml`` ...)."""
    current = folder
    for _ in range(_MAX_LEVELS):
        if any(_looked_at(os.path.join(current, marker)) for marker in PROJECT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None


def _up(folder: str, levels: int) -> str:
    for _ in range(levels):
        folder = os.path.dirname(folder)
    return folder


def modelled(dotted: str) -> bool:
    """Is ``dotted`` (``torch.nn``, ``os.path``) a module never looked for in the project?"""
    top = dotted.partition(".")[0]
    return top in MODELLED or top in sys.stdlib_module_names


def find_module(importer: str, dotted: str, level: int = 0) -> ProjectFile | None:
    """The project module ``importer`` (an absolute path) names: ``dotted`` after ``level``
    dots (``from ..utils import x``: level 2, ``utils``), or absolute with ``level`` 0."""
    if level:
        base = _up(os.path.dirname(importer), level - 1)
        return _module_under(base, dotted.split(".") if dotted else [])
    if not dotted or modelled(dotted):
        return None
    roots = locate(importer).roots
    for root in (*roots, *_search_path) if _named(dotted) else roots:
        found = _module_under(root, dotted.split("."))
        if found is not None:
            return found
    return None


def submodule(package: ProjectFile, name: str) -> ProjectFile | None:
    """``package``'s submodule ``name`` (``from pkg import layers``), if it is a file."""
    if not package.is_package:
        return None
    return _module_under(os.path.dirname(package.path), [name])


def _module_under(base: str, parts: list[str]) -> ProjectFile | None:
    folder = os.path.join(base, *parts)
    if not parts:
        return _read(os.path.join(folder, "__init__.py"))
    return _read(folder + ".py") or _read(os.path.join(folder, "__init__.py"))


def _read(path: str) -> ProjectFile | None:
    """The module at ``path``, once per process and content (``None``: no regular file there,
    or an installed one ``known-modules`` does not name)."""
    path = os.path.normpath(path)
    if installed(path) and not _named_file(path):
        return None
    found = _looked_at(path)
    if found is None:
        return None
    known = _files.get(path)
    if known is None or known.digest != found:  # one version a path: an edited file replaces
        known = _files[path] = ProjectFile(path, found)
    return known
