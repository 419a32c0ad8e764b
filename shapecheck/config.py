"""Settings: ``[tool.shapecheck]`` in the nearest pyproject.toml, then the command line.

Keys (ruff's spelling): ``select``, ``ignore``, ``exclude``, ``extend-exclude``,
``per-file-ignores``, and ``known-modules`` (installed packages whose source the analysis may
read: see :func:`shapecheck.project.know`). Codes may be prefixes (``SC1``) or ``ALL``.
Patterns are globs matched against any path component or the path relative to the
configuration's directory.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shapecheck.diagnostics import INPUT_ERROR_CODE, Diagnostic
from shapecheck.discovery import is_excluded
from shapecheck.files import read_regular_file
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

_KEYS = {
    "select",
    "extend-select",
    "ignore",
    "exclude",
    "extend-exclude",
    "per-file-ignores",
    "known-modules",
}


class ConfigError(Exception):
    """The configuration cannot be used; the message says why and where."""


@dataclass
class Settings:
    select: list[str] = field(default_factory=lambda: ["ALL"])
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    known_modules: list[str] = field(default_factory=list)
    """Modules whose source is read wherever Python would import them from, even installed."""
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
    """The nearest pyproject.toml at or above ``start`` that has a ``[tool.shapecheck]`` table.

    As with ruff, the search stops at one that cannot be read, even a parent project's: it may
    be ours, and skipping it would apply other settings in silence. ``load_settings`` says
    what is wrong with it.
    """
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            try:
                if "shapecheck" in _tools(path):
                    return path
            except ConfigError:
                return path
    return None


def load_settings(path: Path | None) -> Settings:
    if path is None:
        return Settings()
    data = _tools(path).get("shapecheck", {})
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
        settings.select = _strings(data["select"], "select", path)
    if "extend-select" in data:
        settings.extend_select = _strings(data["extend-select"], "extend-select", path)
    if "ignore" in data:
        settings.ignore = _strings(data["ignore"], "ignore", path)
    if "exclude" in data:
        settings.exclude = _strings(data["exclude"], "exclude", path)
    if "extend-exclude" in data:
        settings.extend_exclude = _strings(data["extend-exclude"], "extend-exclude", path)
    per_file = data.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(
            f"{path}: [tool.shapecheck] per-file-ignores must be a table of pattern = [codes]"
        )
    settings.per_file_ignores = {
        pattern: _strings(codes, f"per-file-ignores {pattern!r}", path)
        for pattern, codes in per_file.items()
    }
    if "known-modules" in data:
        settings.known_modules = _modules(data["known-modules"], path)
    return settings


def _modules(value: object, path: Path) -> list[str]:
    """``known-modules``: absolute module names, none of those the analysis knows by name."""
    from shapecheck.project import modelled  # not imported by ``--version``

    modules = _strings(value, "known-modules", path)
    for module in modules:
        where = f"{path}: [tool.shapecheck] known-modules"
        if not all(part.isidentifier() for part in module.split(".")):
            raise ConfigError(
                f"{where}: {module!r} is not a module name (write it as an absolute import "
                'does: "mylib", "pkg.sub")'
            )
        if modelled(module):
            raise ConfigError(
                f"{where}: {module!r} is never read: the analysis knows it by its name"
            )
    return modules


def _tools(path: Path) -> dict[str, Any]:
    """The ``[tool]`` table of a pyproject.toml (empty if it has none)."""
    tools = _read(path).get("tool", {})
    if not isinstance(tools, dict):
        raise ConfigError(f"{path}: tool must be a table, not {_kind(tools)}")
    return tools


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_regular_file(path).decode("utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 (byte {error.start}: {error.reason})") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: {error}") from error
    except RecursionError as error:  # tomllib recurses once per level of nesting
        raise ConfigError(f"{path}: nested too deeply to read") from error


def _strings(value: object, name: str, path: Path) -> list[str]:
    """A string or a list of strings, as a list."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        others = [item for item in value if not isinstance(item, str)]
        if not others:
            return list(value)
        found = f"an array holding {_kind(others[0])}"
    else:
        found = _kind(value)
    raise ConfigError(f"{path}: [tool.shapecheck] {name} must be a list of strings, not {found}")


_TOML_KINDS = {
    bool: "a boolean",
    int: "an integer",
    float: "a float",
    str: "a string",
    list: "an array",
    dict: "a table",
}


def _kind(value: object) -> str:
    """What TOML calls a value's type (tomllib gives dates and times their own types)."""
    return _TOML_KINDS.get(type(value), "a date or time")
