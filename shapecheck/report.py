"""Output formats: ``text`` (``path:line:col: CODE message``), ``json`` (DESIGN.md), ``sarif``
(SARIF 2.1.0, for code-scanning tools) and ``github`` (workflow commands that annotate a pull
request); and ``--statistics``, a count per rule."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import click

from shapecheck import __version__
from shapecheck.diagnostics import INPUT_ERROR_CODE, INPUT_ERROR_NAME, Diagnostic, applicable

FORMATS = ("text", "json", "sarif", "github")
WITH_EDITS = frozenset({"json", "sarif"})
"""The formats that print each fix's edits (the others say only which findings have one)."""


def render(
    diagnostics: Sequence[Diagnostic],
    output_format: str,
    files_checked: int,
    *,
    unsafe: bool = False,
    fixed: int | None = None,
    quiet: bool = False,
    known: int = 0,
    fix_only: bool = False,
    fix_list: str = "",
) -> str:
    """``fixed`` is how many findings ``--fix`` mended (``None`` when not fixing);
    ``unsafe`` counts unsafe fixes as available; ``quiet`` drops the summary line; ``known``
    findings were left out because the baseline records them. ``fix_only``
    (``--fix-only``): the findings are not reported, only what was fixed and what could not
    be checked (SC000, why the exit status is 2). ``fix_list`` (``--show-fixes``, text only)
    goes between the findings and the summary."""
    shown = [d for d in diagnostics if d.code == INPUT_ERROR_CODE] if fix_only else diagnostics
    if output_format == "json":
        return json.dumps([d.to_json() for d in shown], indent=2)
    if output_format == "sarif":
        return json.dumps(_sarif(shown), indent=2)
    if output_format == "github":
        return "\n".join(map(_github, shown))
    lines = [_line(d, unsafe) for d in shown]
    if fix_list:
        lines.append(fix_list)
    if not quiet:
        lines.append(
            _fixed_only(fixed or 0, diagnostics, unsafe)
            if fix_only
            else _summary(diagnostics, files_checked, unsafe, fixed, known)
        )
    return "\n".join(lines)


def statistics(diagnostics: Sequence[Diagnostic], output_format: str, unsafe: bool) -> str:
    """How many findings each rule made, most first (``--statistics``)."""
    counts: Counter[tuple[str, str]] = Counter((d.code, d.name) for d in diagnostics)
    fixable = Counter(d.code for d in diagnostics if applicable(d.fix, unsafe))
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if output_format == "json":
        return json.dumps(
            [
                {"code": code, "name": name, "count": n, "fixable": fixable[code]}
                for (code, name), n in rows
            ],
            indent=2,
        )
    width = max((len(str(n)) for _, n in rows), default=1)
    return "\n".join(
        f"{n:>{width}}  {code}  {'[*] ' if fixable[code] else ''}{name}" for (code, name), n in rows
    )


def _line(d: Diagnostic, unsafe: bool) -> str:
    return (
        f"{click.style(d.path, bold=True)}:{d.line}:{d.column}: "
        f"{click.style(d.code, fg='red' if d.severity == 'error' else 'yellow', bold=True)} "
        f"{'[*] ' if applicable(d.fix, unsafe) else ''}{d.message}"
    )


def _summary(
    diagnostics: Sequence[Diagnostic],
    files_checked: int,
    unsafe: bool,
    fixed: int | None,
    known: int,
) -> str:
    files = len({d.path for d in diagnostics})
    if diagnostics:
        summary = f"{count(len(diagnostics), 'finding')} in {count(files, 'file')}"
    else:
        summary = f"No findings in {count(files_checked, 'file')}"
    if known:
        summary += f" ({known} more in the baseline)"
    if fixed is not None:
        return summary + f" ({fixed} fixed)"
    return summary + _fixable(diagnostics, unsafe)


def _fixable(diagnostics: Sequence[Diagnostic], unsafe: bool) -> str:
    """``; [*] 2 fixable with --fix (1 more with --unsafe-fixes)``, like ruff's hint."""
    ready = sum(1 for d in diagnostics if applicable(d.fix, unsafe))
    hidden = sum(1 for d in diagnostics if d.fix is not None and not applicable(d.fix, unsafe))
    flag = "--fix --unsafe-fixes" if unsafe else "--fix"
    if ready and hidden:
        return f"; [*] {ready} fixable with {flag} ({hidden} more with --unsafe-fixes)"
    if ready:
        return f"; [*] {ready} fixable with {flag}"
    if hidden:
        return f"; {hidden} fixable with --fix --unsafe-fixes"
    return ""


def _fixed_only(fixed: int, remaining: Sequence[Diagnostic], unsafe: bool) -> str:
    """``--fix-only``'s summary, like ruff's: ``Fixed 2 findings (1 more fixable with
    --unsafe-fixes)``, ``No findings fixed``."""
    hidden = sum(1 for d in remaining if d.fix is not None and not applicable(d.fix, unsafe))
    more = f" ({hidden} {'more ' if fixed else ''}fixable with --unsafe-fixes)" if hidden else ""
    return (f"Fixed {count(fixed, 'finding')}" if fixed else "No findings fixed") + more


RuleCounts = Counter[tuple[str, str]]
"""``(code, name)`` -> how many findings of that rule."""


def fixable(diagnostics: Sequence[Diagnostic], unsafe: bool) -> dict[str, RuleCounts]:
    """Per file, the findings whose fixes ``--fix`` would apply."""
    counts: dict[str, RuleCounts] = {}
    for d in diagnostics:
        if applicable(d.fix, unsafe):
            counts.setdefault(d.path, Counter())[(d.code, d.name)] += 1
    return counts


def fix_list(fixes: Mapping[str, RuleCounts], verb: str, flag: str = "") -> str:
    """``--show-fixes``, as ruff lists them: a heading (``Fixed 2 findings:``), then per file
    (``- model.py:``) the count of each rule, most first; empty when there is nothing to list."""
    total = sum(counts.total() for counts in fixes.values())
    if not total:
        return ""
    width = len(str(max(n for counts in fixes.values() for n in counts.values())))
    heading = f"{verb} {count(total, 'finding')}{f' with {flag}' if flag else ''}:"
    lines = [click.style(heading, bold=True)]
    for path in sorted(fixes):
        lines.append(f"- {click.style(path, bold=True)}:")
        rows = sorted(fixes[path].items(), key=lambda item: (-item[1], item[0]))
        lines += [
            f"    {n:>{width}} \N{MULTIPLICATION SIGN} {code} ({name})" for (code, name), n in rows
        ]
    return "\n".join(lines)


def count(number: int, noun: str) -> str:
    """``1 finding``, ``2 findings``, ``2 fixes``, ``2 classes``."""
    plural = "es" if noun.endswith(("x", "s")) else "s"
    return f"{number} {noun}{'' if number == 1 else plural}"


def _github(diagnostic: Diagnostic) -> str:
    """``::error file=…,line=…,col=…,title=SC101::message``: GitHub Actions annotates the line."""
    where = {
        "file": diagnostic.path,
        "line": diagnostic.line,
        "col": diagnostic.column,
        "endLine": diagnostic.end_line,
        "endColumn": diagnostic.end_column,
        "title": f"{diagnostic.code} {diagnostic.name}",
    }
    properties = ",".join(f"{key}={_escape(str(value), True)}" for key, value in where.items())
    return f"::{diagnostic.severity} {properties}::{_escape(diagnostic.message, False)}"


def _escape(text: str, property_value: bool) -> str:
    """Workflow-command escaping; property values also escape ``:`` and ``,``."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


_INPUT_ERROR_HELP = """\
## What it does
Reports a file shapecheck could not check: it could not be read (a FIFO, a device, a symlink
loop, a folder that cannot be listed), decoded (its coding cookie or UTF-8) or parsed (a
syntax error, or nesting too deep for Python), or a rule failed on it (an internal error,
which costs only that rule's findings in that file; please report it).

## Why is this bad?
Nothing in the file was checked, so its silence means nothing. The exit status is 2.

## Fix safety
No fix: mend the file, or exclude it."""

_TAGS = {
    "0": "suppression",
    "1": "views",
    "2": "axes",
    "3": "attention",
    "4": "masks",
    "5": "shapes",
    "6": "numerics",
    "7": "modes",
}
"""A tag per family of rules (the code's first digit), for code scanning's filters."""


def _sarif(diagnostics: Sequence[Diagnostic]) -> dict[str, Any]:
    """One SARIF 2.1.0 run: every rule's metadata, the results, and fixes where there are.
    Written for GitHub code scanning: each rule has a full description, help in text and
    Markdown, a precision and tags."""
    from shapecheck.rule import all_rules

    rules: list[dict[str, Any]] = [
        _sarif_rule(
            INPUT_ERROR_CODE,
            INPUT_ERROR_NAME,
            "input that could not be read, decoded or parsed",
            _INPUT_ERROR_HELP,
            "error",
            {"tags": ["input"]},
        )
    ]
    rules += [
        _sarif_rule(
            rule.code,
            rule.name,
            rule.summary,
            rule.documentation(),
            rule.severity,
            {"fix": rule.fix_safety() or "none", "tags": ["pytorch", _TAGS[rule.code[2]]]},
        )
        for rule in all_rules()
    ]
    index = {rule["id"]: position for position, rule in enumerate(rules)}
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "shapecheck", "version": __version__, "rules": rules}},
                "columnKind": "unicodeCodePoints",
                "results": [_sarif_result(d, index[d.code]) for d in diagnostics],
            }
        ],
    }


def _sarif_rule(
    code: str, name: str, summary: str, documentation: str, level: str, properties: dict[str, Any]
) -> dict[str, Any]:
    # an error is a crash PyTorch raises or a result it proves wrong: as sure as a finding gets
    precision = "very-high" if level == "error" else "high"
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": _section(documentation, "What it does")},
        "help": {"text": _plain(documentation), "markdown": documentation},
        "defaultConfiguration": {"level": level},
        "properties": {"precision": precision, **properties},
    }


def _section(documentation: str, title: str) -> str:
    """One ``## title`` section of a rule's documentation, as one paragraph of text."""
    section = documentation.partition(f"## {title}")[2].split("\n## ", 1)[0]
    return " ".join(section.split())


def _plain(markdown: str) -> str:
    """The documentation without Markdown's headings and fences, for viewers of plain text."""
    lines = [line for line in markdown.splitlines() if not line.startswith("```")]
    return "\n".join(line.removeprefix("## ") for line in lines)


def _artifact_uri(path: str) -> str:
    """A relative path stays relative (code scanning resolves it against the repository), an
    absolute one becomes a ``file://`` URI; either is percent-encoded."""
    from pathlib import PurePosixPath, PureWindowsPath
    from urllib.parse import quote

    windows = PureWindowsPath(path)
    if windows.drive:  # C:\\model.py
        return "file:///" + quote(windows.as_posix(), safe="/:")
    posix = path.replace("\\", "/")
    if PurePosixPath(posix).is_absolute():
        return "file://" + quote(posix)
    return quote(posix)


def _sarif_result(diagnostic: Diagnostic, rule_index: int) -> dict[str, Any]:
    import hashlib

    location = {"uri": _artifact_uri(diagnostic.path)}
    result: dict[str, Any] = {
        "ruleId": diagnostic.code,
        "ruleIndex": rule_index,
        "level": diagnostic.severity,
        "message": {"text": diagnostic.message},
        # stable across edits elsewhere in the file, so code scanning follows a finding
        "partialFingerprints": {
            "shapecheckAnchor/v1": hashlib.sha256(
                f"{diagnostic.code}\0{diagnostic.anchor}".encode()
            ).hexdigest()
        },
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": location,
                    "region": _region(
                        diagnostic.line,
                        diagnostic.column,
                        diagnostic.end_line,
                        diagnostic.end_column,
                    ),
                }
            }
        ],
    }
    fix = diagnostic.fix
    if fix is not None:
        replacements = [
            {
                "deletedRegion": _region(e.line, e.column, e.end_line, e.end_column),
                "insertedContent": {"text": e.content},
            }
            for e in fix.written
        ]
        description = f"{fix.description} ({'safe' if fix.safe else 'unsafe'})"
        result["fixes"] = [
            {
                "description": {"text": description},
                "artifactChanges": [{"artifactLocation": location, "replacements": replacements}],
            }
        ]
    return result


def _region(line: int, column: int, end_line: int, end_column: int) -> dict[str, int]:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}
