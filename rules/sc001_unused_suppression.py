"""SC001: a suppression comment that silences nothing (ruff's RUF100, ``unused-noqa``)."""

from __future__ import annotations

from collections.abc import Iterator

from shapecheck.diagnostics import FixEdits
from shapecheck.rule import CommentViolation, SuppressionRule, rule_codes
from shapecheck.selection import COMMENT_FAMILY
from shapecheck.suppression import Directive, Suppressions


class UnusedSuppression(SuppressionRule):
    """
    ## What it does
    Finds `# noqa: SC101` and `# shapecheck: ignore[SC101]` comments that silence nothing: a
    code whose rule ran and reported nothing on that line (*unused*), a code that names no rule
    (*unknown*: a typo such as `SC310`), a code listed twice (*duplicated*), and a bare
    `# shapecheck: ignore` on a line where no rule reports anything.

    It is opt-in: the default selection (`ALL`) leaves it out; turn it on with
    `--extend-select SC001` or `extend-select = ["SC001"]`.

    What it leaves alone, because silence there proves nothing: a code whose rule did not run
    (not selected, failed on the file, or saw only part of it: a function too deeply nested to
    analyse), so that a narrower `--select` never strips the suppressions the full run needs;
    a code of another tool (`# noqa: E501`); a bare `# noqa`, which flake8 and ruff read too;
    a bare `# shapecheck: ignore` unless every rule ran; file-level `# shapecheck: noqa`
    comments. A line whose suppression lists SC001 itself is never reported.

    ## Why is this bad?
    A suppression outlives the finding it was written for. Once the code is mended, the stale
    comment says the line is wrong on purpose when it is not, and it silences the very rule in
    advance: the next time someone breaks that line the same way, nothing is reported. An
    unknown code silences nothing while its author believes it silences something.

    ## Example
    ```python
    out = x.transpose(1, 2).reshape(b, t, h * d)  # noqa: SC101
    scores = q @ k.transpose(-2, -1)  # shapecheck: ignore[SC310]  (meant SC301)
    ```

    ## Use instead
    ```python
    out = x.transpose(1, 2).reshape(b, t, h * d)
    scores = q @ k.transpose(-2, -1)  # shapecheck: ignore[SC301]
    ```

    ## Fix safety
    Safe: it removes the codes that silence nothing and keeps the rest (`# noqa: E501, SC101`
    becomes `# noqa: E501`), or removes the whole comment, as ruff does: with its line when
    the comment is all the line holds, with the reason written after it, but not with another
    comment that follows it (`# noqa: SC101  # type: ignore` keeps `# type: ignore`). Code is
    never touched.

    ## Runtime evidence
    What this rule reports is a comment, which PyTorch never runs; what it runs is the code
    under it. Under a stale suppression that code is right: it matches the reference (a
    `.reshape` under `# noqa: SC101`, a scaled product under `ignore[SC301]`). Under a
    suppression in use it raises or differs, and SC001 stays quiet (fixtures/SC001_*.py).
    """

    code = "SC001"
    name = "unused-suppression"
    severity = "warning"
    summary = "`# noqa`/`# shapecheck: ignore` code that silences nothing (opt-in)"

    def check_suppressions(
        self, suppressions: Suppressions, ran: frozenset[str]
    ) -> Iterator[CommentViolation]:
        known = frozenset(rule_codes())
        every_rule_ran = ran >= {c for c in known if not c.startswith(COMMENT_FAMILY)}
        silenced = {d.line for d in suppressions.directives if d.codes and self.code in d.codes}
        for directive in suppressions.directives:
            if directive.line in silenced:
                continue
            used = suppressions.used(directive)
            if directive.codes is None:
                if directive.shapecheck_only and not used and every_rule_ran:
                    yield self._bare(directive)
                continue
            kept: list[str] = []
            problems: dict[str, list[str]] = {"unused": [], "unknown": [], "duplicated": []}
            for code in directive.codes:
                if code in kept or any(code in listed for listed in problems.values()):
                    problems["duplicated"].append(code)
                elif code in ran and code not in used:
                    problems["unused"].append(code)
                elif code.startswith("SC") and code not in known:
                    problems["unknown"].append(code)
                else:  # it silenced something, its rule did not run, or another tool's
                    kept.append(code)
            if kept != list(directive.codes):
                yield self._listed(directive, kept, problems)

    def _bare(self, directive: Directive) -> CommentViolation:
        return CommentViolation(
            directive,
            "unused suppression: nothing is reported on this line",
            FixEdits("Remove the unused suppression", True, (directive.keeping(()),), True),
        )

    def _listed(
        self, directive: Directive, kept: list[str], problems: dict[str, list[str]]
    ) -> CommentViolation:
        reasons = "; ".join(
            f"{kind}: {', '.join(codes)}" for kind, codes in problems.items() if codes
        )
        removed = sorted({code for codes in problems.values() for code in codes})
        description = (
            f"Remove {', '.join(removed)} from the suppression"
            if kept
            else "Remove the unused suppression"
        )
        fix = FixEdits(description, True, (directive.keeping(kept),), True)
        return CommentViolation(directive, f"unused suppression ({reasons})", fix)
