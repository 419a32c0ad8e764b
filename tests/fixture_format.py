"""Reading the `# expect:` / `# ok:` annotations of fixture files."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_MARK = re.compile(r"#\s*(expect|ok):\s*(SC\d{3}(?:\s*,\s*SC\d{3})*)")


@dataclass(frozen=True)
class Marks:
    expect: frozenset[tuple[int, str]]
    ok: frozenset[tuple[int, str]]


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("SC[0-9][0-9][0-9]*.py"))


def read_marks(path: Path) -> Marks:
    expect: set[tuple[int, str]] = set()
    ok: set[tuple[int, str]] = set()
    with path.open(encoding="utf-8") as file:
        text = file.read()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.COMMENT:
            continue
        for kind, codes in _MARK.findall(token.string):
            for code in re.findall(r"SC\d{3}", codes):
                (expect if kind == "expect" else ok).add((token.start[0], code))
    return Marks(frozenset(expect), frozenset(ok))
