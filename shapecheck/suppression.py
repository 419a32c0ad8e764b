"""Inline suppression: ``# shapecheck: ignore[SC101]`` and ``# noqa: SC101`` on a line.

A bare ``# shapecheck: ignore`` or ``# noqa`` silences every code on its line, as flake8 and
ruff do.
"""

from __future__ import annotations

import io
import re
import tokenize

from shapecheck.source import physical_lines

_DIRECTIVES = re.compile(
    r"#\s*(?:shapecheck:\s*ignore(?P<codes>\[[^\]]*\])?|noqa(?::\s*(?P<noqa>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?)",
    re.IGNORECASE,
)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)

ALL = frozenset({"*"})


def suppressions(text: str) -> dict[int, frozenset[str]]:
    """Line number -> codes suppressed there (``ALL`` for a bare directive)."""
    found: dict[int, frozenset[str]] = {}
    # Python (and so ``ast``) also ends a line at a lone \r, which tokenize reading a StringIO
    # would not: numbered as ``ast`` numbers them, the lines are fed to tokenize with \n ends.
    with_newlines = "\n".join(line.rstrip("\r\n") for line in physical_lines(text))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(with_newlines).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        for match in _DIRECTIVES.finditer(token.string):
            listed = match.group("codes") or match.group("noqa")
            codes = ALL if listed is None else frozenset(c.upper() for c in _CODE.findall(listed))
            line = token.start[0]
            found[line] = found.get(line, frozenset()) | codes
    return found


def is_suppressed(code: str, line: int, table: dict[int, frozenset[str]]) -> bool:
    codes = table.get(line)
    return codes is not None and ("*" in codes or code in codes)
