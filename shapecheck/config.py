"""Settings: ``[tool.shapecheck]`` in the nearest pyproject.toml, then the command line.

Keys (ruff's spelling): ``select``, ``ignore``, ``exclude``, ``extend-exclude``,
``per-file-ignores``. Codes may be prefixes (``SC1``) or ``ALL``. Patterns are globs matched
against any path component or the path relative to the configuration's directory.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shapecheck.diagnostics import INPUT_ERROR_CODE, Diagnostic
from shapecheck.discovery import is_excluded
from shapecheck.selection import matches, parse_codes

DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".shapecheck_cache",
    ".svn",
    ".tox",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "_build",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)

_KEYS = {"select", "ignore", "exclude", "extend-exclude", "per-file-ignores"}


class ConfigError(Exception):
    """The configuration cannot be used; the message says why and where."""


@dataclass
class Settings:
    select: list[str] = field(default_factory=lambda: ["ALL"])
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)
    config_path: Path | None = None

    @property
    def excludes(self) -> list[str]:
        return [*self.exclude, *self.extend_exclude]

    def keeps(self, diagnostic: Diagnostic) -> bool:
        """per-file-ignores: a pattern matching the path silences its codes (never SC000)."""
        if diagnostic.code == INPUT_ERROR_CODE:
            return True
        return not any(
            matches(diagnostic.code, parse_codes(codes))
            and is_excluded(Path(diagnostic.path), [pattern], self.root)
            for pattern, codes in self.per_file_ignores.items()
        )


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` that has a ``[tool.shapecheck]`` table."""
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            try:
                if "shapecheck" in _read(path).get("tool", {}):
                    return path
            except ConfigError:
                return path  # broken but ours to report: load_settings says what is wrong
    return None


def load_settings(path: Path | None) -> Settings:
    if path is None:
        return Settings()
    data = _read(path).get("tool", {}).get("shapecheck", {})
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [tool.shapecheck] must be a table")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) in [tool.shapecheck]: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(_KEYS))})"
        )
    settings = Settings(root=path.parent.resolve(), config_path=path)
    if "select" in data:
        settings.select = _strings(data, "select", path)
    settings.ignore = _strings(data, "ignore", path) if "ignore" in data else []
    if "exclude" in data:
        settings.exclude = _strings(data, "exclude", path)
    if "extend-exclude" in data:
        settings.extend_exclude = _strings(data, "extend-exclude", path)
    per_file = data.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{path}: per-file-ignores must be a table of pattern = [codes]")
    settings.per_file_ignores = {pattern: _strings(per_file, pattern, path) for pattern in per_file}
    return settings


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: {error}") from error


def _strings(table: dict[str, Any], key: str, path: Path) -> list[str]:
    value = table[key]
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: {key} must be a list of strings")
    return list(value)
