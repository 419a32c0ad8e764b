"""Results cache: a file whose content was checked before is not parsed again.

Entries live in ``<cache dir>/<fingerprint>/<hash of the content>.json``. The fingerprint
covers the shapecheck version, the Python that runs it (which decides what parses), its own
source files (so an edited rule invalidates everything), the rules that run, and the modules
``known-modules`` names with the folders they are looked for in; the key is
the file's content, not its path or mtime, so a checkout, a rename or a ``touch`` costs
nothing. A result that rests on other files of the project (an imported class's model, a
helper followed into another file: see :mod:`shapecheck.project`) is stored with the path it
was checked at and the content digest of every file it rests on (or that there was none
where a module was looked for): it is a hit only at that path and while each of them is as
it was, so editing ``layers.py`` checks ``model.py`` again. Each entry is written to a
temporary file and renamed into place: concurrent runs see a whole entry or none, never half
of one. An entry that cannot be read, or holds
anything but diagnostics of the rules that run, is a miss: the file is checked again and the
entry rewritten. A result whose fixes were only offered, not written (a text report needs no
edits), serves only the runs that need none. Entries get the permissions of any file the user
creates (the umask), so a cache shared by a team hits for everyone.

This module must stay cheap to import: a warm run never imports the analysis or the rules.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shapecheck import __version__
from shapecheck.diagnostics import INPUT_ERROR_CODE, Diagnostic, FixEdits, TextEdit
from shapecheck.files import read_regular_file
from shapecheck.project import Evidence, digest, search_path
from shapecheck.record import as_dict, fields

DEFAULT_DIRECTORY = ".shapecheck_cache"


class ResultCache:
    def __init__(
        self, directory: Path, codes: Sequence[str], known_modules: Sequence[str] = ()
    ) -> None:
        self.root = directory
        self.folder = directory / _fingerprint(codes, known_modules)
        self.codes = frozenset([*codes, INPUT_ERROR_CODE])
        self._folder = os.fspath(self.folder)
        self._digests: dict[str, str | None] = {}
        """The content digest of each file, hashed once per run: as a file looked up, or as
        one a result rests on."""

    def entry(self, path: str, data: bytes, *, read_from_disk: bool = True) -> Any:
        """What is stored for ``data`` (``None``: nothing readable), not yet trusted. The
        digest of ``data`` is the key; where ``data`` was read from the file at ``path`` (not
        an editor's unsaved text given for it), it is kept as that file's digest: a result
        that rests on the file does not read and hash it again."""
        key = _key(data)
        if read_from_disk:
            self._digests[os.path.abspath(path)] = key
        try:
            return json.loads(read_regular_file(os.path.join(self._folder, key + ".json")))
        except (OSError, ValueError, RecursionError):
            return None

    @staticmethod
    def rests_on_others(entry: Any) -> bool:
        """Was the result an :meth:`entry` holds worked out from other files too?"""
        return isinstance(entry, dict)

    def diagnostics(self, path: str, entry: Any, *, edits: bool = True) -> list[Diagnostic] | None:
        """The diagnostics of an :meth:`entry`, reported at ``path``; ``None`` on a miss. An
        entry that :meth:`rests_on_others` is read against the digests of the files it rests
        on. ``edits``: the run needs the fixes' edits, so a result whose fixes were only
        offered (a text report's) is a miss too, checked again with them written."""
        entries = self._still_valid(path, entry) if self.rests_on_others(entry) else entry
        if not isinstance(entries, list):
            return None
        diagnostics: list[Diagnostic] = []
        for each in entries:
            diagnostic = _diagnostic(path, each, self.codes)
            if diagnostic is None:
                return None  # never trusted in part: the file is checked again
            if edits and diagnostic.fix is not None and diagnostic.fix.edits is None:
                return None
            diagnostics.append(diagnostic)
        return diagnostics

    def _still_valid(self, path: str, entry: dict[str, Any]) -> list[Any] | None:
        """The diagnostics of an entry that rests on other files, if it was checked at
        ``path`` and every one of them is as it was."""
        dependencies = entry.get("dependencies")
        if (
            set(entry) != {"checked", "dependencies", "diagnostics"}
            or entry["checked"] != os.path.abspath(path)
            or not isinstance(dependencies, dict)
        ):
            return None
        for dependency, recorded in dependencies.items():
            if dependency not in self._digests:
                self._digests[dependency] = digest(dependency)
            if self._digests[dependency] != recorded:
                return None
        diagnostics = entry["diagnostics"]
        return diagnostics if isinstance(diagnostics, list) else None

    def put(
        self,
        data: bytes,
        diagnostics: Sequence[Diagnostic],
        checked: str | None = None,
        dependencies: Evidence | None = None,
    ) -> None:
        """Store ``diagnostics`` for ``data``, checked at the path ``checked`` with a result
        that rests on ``dependencies``; a cache that cannot be written is skipped."""
        entries: Any = [{**as_dict(diagnostic), "path": None} for diagnostic in diagnostics]
        if dependencies:
            assert checked is not None
            entries = {
                "checked": os.path.abspath(checked),
                "dependencies": dependencies,
                "diagnostics": entries,
            }
        key = _key(data)
        temporary = self.folder / f"{key}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            self._prepare()
            # not mkstemp, whose files only their owner may read: the umask decides
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                    json.dump(entries, file)
                os.replace(temporary, self.folder / f"{key}.json")
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError:
            pass

    def _prepare(self) -> None:
        if self.folder.is_dir():
            return
        ours = not self.root.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        if not ours:
            return  # a folder the user named: never write over their files
        # like .ruff_cache: invisible to git and to backup tools
        (self.root / ".gitignore").write_text("# created by shapecheck\n*\n", encoding="utf-8")
        (self.root / "CACHEDIR.TAG").write_text(
            "Signature: 8a477f597d28d172789f06886806bc55\n# created by shapecheck\n",
            encoding="utf-8",
        )


def _key(data: bytes) -> str:
    """The entry's name without ``.json``: the SHA-256 of the content, the digest
    :func:`shapecheck.project.digest` gives for the same file."""
    return hashlib.sha256(data).hexdigest()


def _fingerprint(codes: Sequence[str], known_modules: Sequence[str]) -> str:
    """Version, the Python that runs it, the size and mtime of each of shapecheck's own
    files, the rules run, and the modules read wherever Python finds them, with where it
    looks (another environment may hold others: what it held is not in an entry's
    evidence)."""
    python = f"{sys.implementation.name} {sys.version}"
    digest = hashlib.sha256(f"{__version__}\0{python}\0{','.join(sorted(codes))}".encode())
    if known_modules:
        known = [*sorted(set(known_modules)), *search_path()]
        digest.update(f"\0known-modules\0{chr(0).join(known)}".encode())
    for location in _source_folders():
        for folder, _, files in sorted(os.walk(location)):
            for name in sorted(files):
                if name.endswith(".py"):
                    status = os.stat(os.path.join(folder, name))
                    stamp = f"{folder}/{name}:{status.st_size}:{status.st_mtime_ns}"
                    digest.update(stamp.encode())
    return f"{__version__}-{digest.hexdigest()[:16]}"


def _source_folders() -> list[str]:
    """shapecheck's package and its rules (a folder of their own in an editable install)."""
    from shapecheck.rule import rules_folders

    package = str(Path(__file__).resolve().parent)
    outside = [f for f in rules_folders() if not f.startswith(package + os.sep)]
    return [package, *outside]


_DIAGNOSTIC_FIELDS = {field.name for field in fields(Diagnostic)}
_FIX_FIELDS = {field.name for field in fields(FixEdits)}
_EDIT_FIELDS = {field.name for field in fields(TextEdit)}
_PLACE = ("line", "column", "end_line", "end_column")


def _diagnostic(path: str, entry: Any, codes: frozenset[str]) -> Diagnostic | None:
    """The diagnostic an entry records, reported at ``path``; ``None`` unless the entry has
    exactly the shape :meth:`ResultCache.put` writes, for one of the rules ``codes``."""
    if not isinstance(entry, dict) or set(entry) != _DIAGNOSTIC_FIELDS or entry["path"] is not None:
        return None
    texts = (entry["code"], entry["name"], entry["message"], entry["anchor"])
    if not (
        _is_place(entry)
        and all(isinstance(text, str) for text in texts)
        and entry["code"] in codes
        and entry["severity"] in ("error", "warning")
    ):
        return None
    fix = entry["fix"]
    if fix is None:
        return Diagnostic(**{**entry, "path": path})
    if not isinstance(fix, dict) or set(fix) != _FIX_FIELDS:
        return None
    edits = fix["edits"]
    if not (
        isinstance(fix["description"], str)
        and isinstance(fix["safe"], bool)
        and isinstance(fix["keeps_results"], bool)
        and (edits is None or (isinstance(edits, list) and all(map(_is_edit, edits))))
    ):
        return None
    recorded = FixEdits(
        fix["description"],
        fix["safe"],
        None if edits is None else tuple(TextEdit(**edit) for edit in edits),
        fix["keeps_results"],
    )
    return Diagnostic(**{**entry, "path": path, "fix": recorded})


def _is_edit(edit: Any) -> bool:
    return (
        isinstance(edit, dict)
        and set(edit) == _EDIT_FIELDS
        and _is_place(edit)
        and isinstance(edit["content"], str)
    )


def _is_place(entry: dict[str, Any]) -> bool:
    """Lines and columns are counted from 1 (``type(...) is int``: JSON's true is a bool)."""
    return all(type(entry[name]) is int and entry[name] >= 1 for name in _PLACE)
