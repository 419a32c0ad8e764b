"""Which rules apply: ``select``/``ignore`` lists of codes and prefixes."""

from __future__ import annotations

from collections.abc import Iterable

from shapecheck.diagnostics import INPUT_ERROR_CODE


class SelectionError(ValueError):
    """A code or prefix that matches no rule."""


def parse_codes(values: Iterable[str]) -> list[str]:
    """``["SC1,SC301", "SC2"]`` -> ``["SC1", "SC301", "SC2"]`` (comma lists, any case)."""
    codes: list[str] = []
    for value in values:
        codes.extend(part.strip().upper() for part in value.split(",") if part.strip())
    return codes


def validate(codes: Iterable[str], known: Iterable[str], where: str) -> None:
    known = [*known, INPUT_ERROR_CODE]
    for code in codes:
        if code != "ALL" and not any(candidate.startswith(code) for candidate in known):
            raise SelectionError(f"{where}: {code!r} matches no rule (see --list-rules)")


def matches(code: str, selectors: Iterable[str]) -> bool:
    return any(selector == "ALL" or code.startswith(selector) for selector in selectors)


def enabled(code: str, select: Iterable[str], ignore: Iterable[str]) -> bool:
    """Selected and not ignored; SC000 (unreadable input) can never be turned off."""
    if code == INPUT_ERROR_CODE:
        return True
    return matches(code, select) and not matches(code, ignore)
