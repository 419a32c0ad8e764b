"""Which rules apply: ``select``/``ignore`` lists of codes and prefixes.

``ALL``, the default selection, is every rule but the SC0 family, rules about shapecheck's own
suppression comments (SC001, like ruff's RUF100): only a selector that names them turns them on
(``SC0``, ``SC00``, ``SC001``). In ruff ``ALL`` includes RUF100, which the default leaves out;
here ``ALL`` is the default, so it cannot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from shapecheck.diagnostics import INPUT_ERROR_CODE

if TYPE_CHECKING:
    from shapecheck.config import Settings


COMMENT_FAMILY = "SC0"
"""The codes of rules about suppression comments (``shapecheck.rule.SuppressionRule``)."""


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


def enabled_codes(
    codes: Sequence[str],
    settings: Settings,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    extend_select: Iterable[str] = (),
) -> list[str]:
    """The rules to run, as ruff resolves them: ``select`` (from the command line) replaces
    the configuration's selection, its ``extend-select`` included; ``extend_select`` and
    ``ignore`` add to what is left. Every code listed anywhere must name a rule
    (SelectionError)."""
    cli_select, cli_ignore = parse_codes(select), parse_codes(ignore)
    cli_extend = parse_codes(extend_select)
    config_select, config_ignore = parse_codes(settings.select), parse_codes(settings.ignore)
    config_extend = parse_codes(settings.extend_select)
    where = str(settings.config_path or "configuration")
    listings = [("--select", cli_select), ("--extend-select", cli_extend)]
    listings += [("--ignore", cli_ignore), (where, config_select), (where, config_extend)]
    listings += [(where, config_ignore)]
    listings += [
        (f"{where}: per-file-ignores {pattern!r}", parse_codes(listed))
        for pattern, listed in settings.per_file_ignores.items()
    ]
    for label, listed in listings:
        validate(listed, codes, label)
    selected = [*(cli_select or [*config_select, *config_extend]), *cli_extend]
    ignored = [*config_ignore, *cli_ignore]
    return [code for code in codes if enabled(code, selected, ignored)]


def matches(code: str, selectors: Iterable[str]) -> bool:
    return any(selector == "ALL" or code.startswith(selector) for selector in selectors)


def enabled(code: str, select: Iterable[str], ignore: Iterable[str]) -> bool:
    """Selected and not ignored; SC000 (unreadable input) can never be turned off."""
    if code == INPUT_ERROR_CODE:
        return True
    if code.startswith(COMMENT_FAMILY):
        selected = any(len(s) > len("SC") and code.startswith(s) for s in select)
    else:
        selected = matches(code, select)
    return selected and not matches(code, ignore)
