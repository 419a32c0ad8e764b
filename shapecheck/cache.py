"""Results cache: a file whose content was checked before is not parsed again.

Entries live in ``<cache dir>/<fingerprint>/<hash of the content>.json``. The fingerprint
covers the shapecheck version, its own source files (so an edited rule invalidates
everything) and the rules that run; the key is the file's content, not its path or mtime,
so a checkout, a rename or a ``touch`` costs nothing. Each entry is written to a temporary
file and renamed into place: concurrent runs see a whole entry or none, never half of one,
and an entry that cannot be read is simply a miss.

This module must stay cheap to import: a warm run never imports the analysis or the rules.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from shapecheck import __version__
from shapecheck.diagnostics import Diagnostic, FixEdits, TextEdit

DEFAULT_DIRECTORY = ".shapecheck_cache"


class ResultCache:
    def __init__(self, directory: Path, codes: Sequence[str]) -> None:
        self.root = directory
        self.folder = directory / _fingerprint(codes)

    def get(self, path: str, data: bytes) -> list[Diagnostic] | None:
        """The diagnostics stored for ``data``, reported at ``path``; ``None`` on a miss."""
        try:
            entries = json.loads((self.folder / _key(data)).read_bytes())
            return [_diagnostic(path, entry) for entry in entries]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, data: bytes, diagnostics: Sequence[Diagnostic]) -> None:
        """Store ``diagnostics`` for ``data``; a cache that cannot be written is skipped."""
        entries = [{**asdict(diagnostic), "path": None} for diagnostic in diagnostics]
        try:
            self._prepare()
            descriptor, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            try:
                with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                    json.dump(entries, file)
                os.replace(temporary, self.folder / _key(data))
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
    return hashlib.sha256(data).hexdigest() + ".json"


def _fingerprint(codes: Sequence[str]) -> str:
    """Version, the size and mtime of each of shapecheck's own files, and the rules run."""
    digest = hashlib.sha256(f"{__version__}\0{','.join(sorted(codes))}".encode())
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


def _diagnostic(path: str, entry: dict[str, object]) -> Diagnostic:
    fix = entry["fix"]
    if isinstance(fix, dict):
        edits = tuple(TextEdit(**edit) for edit in fix["edits"])
        entry = {
            **entry,
            "fix": FixEdits(fix["description"], fix["safe"], edits, fix["keeps_results"]),
        }
    return Diagnostic(**{**entry, "path": path})  # type: ignore[arg-type]
