"""The README's rule table, generated from the rules themselves.

``python -m shapecheck.docs`` rewrites the table between the markers in README.md;
the test suite fails when the README and the rules disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from shapecheck.rule import all_rules

START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def rule_table() -> str:
    rows = ["| code | name | severity | fix | what it finds |", "|---|---|---|---|---|"]
    rows.extend(
        f"| {rule.code} | `{rule.name}` | {rule.severity} | {rule.fix_safety() or ''} "
        f"| {rule.summary.replace('|', chr(92) + '|')} |"
        for rule in all_rules()
    )
    return "\n".join(rows)


def with_rule_table(readme: str) -> str:
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{rule_table()}\n{END}{tail}"


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    path.write_text(with_rule_table(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
