"""Suppression comments: reading them, matching findings to them, and rewriting them.

Line-level, on the line reported: ``# noqa: SC101`` or ``# shapecheck: ignore[SC101]``; a bare
``# noqa`` or ``# shapecheck: ignore`` silences every code on its line, as flake8 and ruff do.

File-level, on a line of its own (anywhere, as ruff's ``# ruff: noqa``): ``# shapecheck: noqa``
silences the whole file, ``# shapecheck: noqa: SC301, SC302`` those codes in it. After code on
the same line it is no directive, as in ruff. ``# flake8: noqa`` and ``# ruff: noqa`` name the
tools they silence, so shapecheck leaves them to those tools.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import field

from shapecheck.diagnostics import TextEdit
from shapecheck.record import record
from shapecheck.source import physical_lines

_CODES = r"[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*"
_LINE_DIRECTIVE = re.compile(
    rf"#\s*(?:(?P<ignore>shapecheck:\s*ignore)(?P<bracketed>\[[^\]]*\])?|noqa(?::\s*(?P<listed>{_CODES}))?)",
    re.IGNORECASE,
)
# a colon with no code after it is a mistake, not a blanket exemption of the whole file
_FILE_DIRECTIVE = re.compile(
    rf"#\s*shapecheck\s*:\s*noqa(?:\s*:\s*(?P<listed>{_CODES})|(?!\s*:))", re.IGNORECASE
)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
_DIRECTIVE_WORDS = ("noqa", "shapecheck")
"""A word every directive holds: a file without one has none to tokenize for."""


@record
class Directive:
    """One line-level suppression comment."""

    line: int
    column: int
    """Where its ``#`` is on the line, from 0 in characters."""
    end_column: int
    """Just past its last code (past the ``]`` of ``ignore[...]``, past ``noqa`` when bare)."""
    codes: tuple[str, ...] | None
    """Upper-cased, in the order written, repeats kept; ``None``: bare, every code."""
    shapecheck_only: bool
    """``# shapecheck: ignore``, which no other tool reads; ``# noqa`` is flake8's and ruff's
    too."""
    text: str = field(compare=False)
    """Its whole line, without the line break."""

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes

    def keeping(self, codes: Sequence[str]) -> TextEdit:
        """The edit that leaves only ``codes`` of this directive, written in its own form
        (``# noqa: A, B``, ``# shapecheck: ignore[A, B]``), or, without codes, removes it as
        ruff's RUF100 fix does: with its own line when it is all the line holds, with the
        reason written after it unless another comment follows (``# noqa: SC101  # type:
        ignore`` keeps ``# type: ignore``)."""
        if codes:
            listed = ", ".join(codes)
            written = (
                f"# shapecheck: ignore[{listed}]" if self.shapecheck_only else f"# noqa: {listed}"
            )
            return self._replace(self.column, self.end_column, written)
        before, after = self.text[: self.column], self.text[self.end_column :]
        rest = after.lstrip()
        if rest.startswith("#"):
            return self._replace(self.column, len(self.text) - len(rest), "")
        if not before.strip():
            return TextEdit(self.line, 1, self.line + 1, 1, "")
        return self._replace(len(before.rstrip()), len(self.text), "")

    def _replace(self, start: int, end: int, content: str) -> TextEdit:
        return TextEdit(self.line, start + 1, self.line, end + 1, content)


class Suppressions:
    """The suppression comments of one file, and which findings each one silenced."""

    def __init__(self, text: str) -> None:
        self.directives: list[Directive] = []
        self.file_codes: frozenset[str] = frozenset()
        self.whole_file = False
        self._used: dict[Directive, set[str]] = {}
        for token in _comments(text):
            own_line = not token.line[: token.start[1]].strip()
            for match in _FILE_DIRECTIVE.finditer(token.string):
                if own_line:
                    listed = match.group("listed")
                    self.whole_file = self.whole_file or listed is None
                    self.file_codes |= frozenset(_codes(listed or ""))
            for match in _LINE_DIRECTIVE.finditer(token.string):
                listed = match.group("bracketed") or match.group("listed")
                self.directives.append(
                    Directive(
                        token.start[0],
                        token.start[1] + match.start(),
                        token.start[1] + match.end(),
                        None if listed is None else _codes(listed),
                        match.group("ignore") is not None,
                        token.line.rstrip("\r\n"),
                    )
                )
        self._on_line: dict[int, list[Directive]] = {}
        for directive in self.directives:
            self._on_line.setdefault(directive.line, []).append(directive)

    def exempts(self, code: str) -> bool:
        """Does a file-level directive silence ``code`` everywhere in the file?"""
        return self.whole_file or code in self.file_codes

    def suppresses(self, code: str, line: int) -> bool:
        """Is a finding of ``code`` at ``line`` silenced? A file-level directive is asked
        first, as ruff does; otherwise the first directive on the line that covers the code
        silences it, and remembers so (:meth:`used`)."""
        if self.exempts(code):
            return True
        for directive in self._on_line.get(line, ()):
            if directive.covers(code):
                self._used.setdefault(directive, set()).add(code)
                return True
        return False

    def used(self, directive: Directive) -> frozenset[str]:
        """The codes whose findings ``directive`` silenced."""
        return frozenset(self._used.get(directive, ()))


def _codes(listed: str) -> tuple[str, ...]:
    return tuple(code.upper() for code in _CODE.findall(listed))


def _may_direct(text: str) -> bool:
    """Does ``text`` hold a directive's word in any case? Every character the directives'
    ``re.IGNORECASE`` takes for one of the words' letters case-folds to that letter, so this
    finds every file they would; a case-insensitive regular expression searched 25x slower
    (17.6 ms on timm's 234 kB ``vision_transformer.py``)."""
    folded = text.casefold()
    return any(word in folded for word in _DIRECTIVE_WORDS)


def _comments(text: str) -> list[tokenize.TokenInfo]:
    """Every comment, numbered as ``ast`` numbers lines: Python (and so ``ast``) also ends a
    line at a lone \\r, which tokenize reading a StringIO would not, so the lines are fed to
    tokenize with \\n ends."""
    if "#" not in text or not _may_direct(text):
        return []  # most files: tokenizing them was a third of a whole check's time
    with_newlines = "\n".join(line.rstrip("\r\n") for line in physical_lines(text))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(with_newlines).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [token for token in tokens if token.type == tokenize.COMMENT]
