"""Reading, decoding and parsing one file; every failure becomes an SC000 diagnostic."""

from __future__ import annotations

import ast
import io
import sys
import tokenize
import warnings
from typing import Protocol, cast

from shapecheck.diagnostics import Diagnostic, input_error
from shapecheck.record import record

STDIN = "-"
"""The path of text that lies nowhere: standard input without ``--stdin-filename``."""


@record
class Source:
    path: str
    text: str
    module: ast.Module
    encoding: str
    """How the text was decoded (``utf-8-sig`` keeps a BOM): fixed text is encoded back so."""

    @property
    def location(self) -> str | None:
        """Where the file lies, from which the project's other files its imports name are
        found (``None``: it lies nowhere, and only its own code is known)."""
        return None if self.path == STDIN else self.path


_PARSE_DEPTH = 10_000

OUT_OF_MEMORY = "cannot parse: out of memory while parsing"
"""A bare ``MemoryError``: memory ran out, which says nothing about the file (never cached)."""
if sys.version_info < (3, 12):  # whose parser reports its own stack limit the same way
    OUT_OF_MEMORY += " (or the input is too deeply nested for Python 3.11's parser)"


def parse_source(data: bytes, path: str) -> Source | Diagnostic:
    """Decode ``data`` (BOM, PEP 263 cookie, else UTF-8) and parse it with Python's own parser."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        return input_error(path, f"cannot decode: {error}")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        line, column = _byte_position(data, error.start)
        return input_error(path, f"cannot decode as {encoding}: {error.reason}", line, column)
    except LookupError:
        return input_error(path, f"cannot decode: unknown encoding {encoding!r}")
    if "\x00" in text:
        line, column = _text_position(text, text.index("\x00"))
        return input_error(path, "source contains a null byte", line, column)
    limit = sys.getrecursionlimit()
    try:
        # Building the tree recurses once per nesting level (a 3,000-term sum is 3,000 deep);
        # Python's parser itself stops long before the C stack is at risk.
        sys.setrecursionlimit(max(limit, _PARSE_DEPTH))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes are the code's own business
            module = ast.parse(text, path)
    except SyntaxError as error:
        line = error.lineno or 1
        return input_error(path, f"syntax error: {error.msg}", line, error.offset or 1)
    except RecursionError:  # at a depth this function sets: the same each run, so cached
        return input_error(path, "cannot parse: RecursionError (input too deeply nested)")
    except MemoryError as error:
        if str(error):  # Python 3.12+ names its parser's own stack limit: a fact about the input
            return input_error(path, f"cannot parse: input too deeply nested ({error})")
        return input_error(path, OUT_OF_MEMORY)
    except ValueError as error:
        return input_error(path, f"cannot parse: {error}")
    finally:
        sys.setrecursionlimit(limit)
    return Source(path, text, module, encoding)


class _Located(Protocol):
    lineno: int
    col_offset: int
    end_lineno: int | None
    end_col_offset: int | None


class Lines:
    """A text's physical lines: where a node is, with columns in characters (``ast`` counts
    UTF-8 bytes; editors, libcst and our reports count characters)."""

    def __init__(self, text: str) -> None:
        self.lines = physical_lines(text)

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """``(line, column, end line, end column)``, lines from 1, columns from 0."""
        located = cast(_Located, node)  # every node a rule points at has a position
        line, end_line, end_offset = located.lineno, located.end_lineno, located.end_col_offset
        assert end_line is not None and end_offset is not None
        start = self._column(line, located.col_offset)
        return line, start, end_line, self._column(end_line, end_offset)

    def flattened(self, node: ast.AST) -> str:
        """``node``'s code as written on one line: its whitespace collapsed to single spaces."""
        return " ".join(self.segment(node).split())

    def segment(self, node: ast.AST) -> str:
        """``node``'s code as written, as ``ast.get_source_segment`` gives it, from the lines
        it spans (that function splits the whole text on every call)."""
        line, column, end_line, end_column = self.span(node)
        if line == end_line:
            return self.lines[line - 1][column:end_column]
        first, last = self.lines[line - 1][column:], self.lines[end_line - 1][:end_column]
        return "".join([first, *self.lines[line : end_line - 1], last])

    def _column(self, line: int, offset: int) -> int:
        text = self.lines[line - 1] if line <= len(self.lines) else ""
        return offset if text.isascii() else len(text.encode("utf-8")[:offset].decode("utf-8"))


def physical_lines(text: str) -> list[str]:
    """``text``'s lines as Python counts them, ends kept: ``str.splitlines`` also breaks at form
    feeds and Unicode separators, which would put every later line off by one."""
    return io.StringIO(text, newline="").readlines()


def _byte_position(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def _text_position(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1
