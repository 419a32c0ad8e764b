"""Reading, decoding and parsing one file; every failure becomes an SC000 diagnostic."""

from __future__ import annotations

import ast
import io
import tokenize
import warnings
from dataclasses import dataclass

import libcst as cst

from shapecheck.diagnostics import Diagnostic, input_error


@dataclass(frozen=True)
class Source:
    path: str
    text: str
    module: cst.Module
    encoding: str
    """How the text was decoded (``utf-8-sig`` keeps a BOM): fixed text is encoded back so."""


def parse_source(data: bytes, path: str, *, prescan: bool = False) -> Source | Diagnostic:
    """Decode ``data`` (BOM, PEP 263 cookie, else UTF-8) and parse it with libcst.

    With ``prescan``, only what can produce a finding is parsed (``shapecheck.prescan``): the
    module has the same lines, some blank, or is empty. ``text`` is always the whole file.
    """
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
    if prescan:
        from shapecheck.prescan import relevant_source  # it reads lines with physical_lines

        relevant = relevant_source(text)
    else:
        relevant = text
    if relevant is None:
        return Source(path, text, cst.Module(body=[]), encoding)
    try:
        module = cst.parse_module(relevant)
    except cst.ParserSyntaxError as error:
        return _syntax_error(path, text, error)
    except (RecursionError, MemoryError) as error:
        return input_error(path, f"cannot parse: {type(error).__name__} (input too deeply nested)")
    return Source(path, text, module, encoding)


def physical_lines(text: str) -> list[str]:
    """``text``'s lines as Python counts them, ends kept: ``str.splitlines`` also breaks at form
    feeds and Unicode separators, which would put every later line off by one."""
    return io.StringIO(text, newline="").readlines()


def _syntax_error(path: str, text: str, error: cst.ParserSyntaxError) -> Diagnostic:
    # CPython's own parser names the problem and its place more precisely than libcst does.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as python_error:
        line = python_error.lineno or error.raw_line
        column = python_error.offset or error.raw_column + 1
        return input_error(path, f"syntax error: {python_error.msg}", line, column)
    except (RecursionError, MemoryError, ValueError):
        pass
    message = error.message.splitlines()[0] if error.message else "invalid syntax"
    return input_error(path, f"syntax error: {message}", error.raw_line, error.raw_column + 1)


def _byte_position(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def _text_position(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1
