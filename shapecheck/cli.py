"""The command line: ``shapecheck [OPTIONS] [PATH]...``.

Everything is a flag, never a subcommand, so a folder called ``explain`` is still a path.
Heavy imports (the analysis, the rules) happen only when there is linting to do, so ``--version``
starts as fast as Python does.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from shapecheck import __version__
from shapecheck.config import ConfigError, Settings, find_config, load_settings
from shapecheck.discovery import discover
from shapecheck.record import record
from shapecheck.report import FORMATS, WITH_EDITS, count
from shapecheck.selection import SelectionError, enabled_codes

if TYPE_CHECKING:
    from collections import Counter

    from shapecheck.baseline import Key as BaselineKey
    from shapecheck.diagnostics import Diagnostic, FileResult
    from shapecheck.rule import Rule
    from shapecheck.run import Target

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class InputError(click.ClickException):
    """A file that cannot be read or a name that is not there: exit status 2, no usage text."""

    exit_code = EXIT_ERROR


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Output format: sarif for code-scanning tools, github for pull-request annotations.",
)
@click.option(
    "--statistics", "show_statistics", is_flag=True, help="Count the findings of each rule."
)
@click.option("-q", "--quiet", is_flag=True, help="Print the findings only, no summary.")
@click.option(
    "--exit-zero", is_flag=True, help="Exit with 0 even when there are findings (not errors)."
)
@click.option("--select", multiple=True, help="Codes or prefixes to enable (e.g. SC1,SC301).")
@click.option(
    "--extend-select", multiple=True, help="Codes or prefixes to enable, added to the selection."
)
@click.option("--ignore", multiple=True, help="Codes or prefixes to disable.")
@click.option("--exclude", multiple=True, help="Glob patterns to skip, replacing the defaults.")
@click.option(
    "--extend-exclude", multiple=True, help="Glob patterns to skip, added to the defaults."
)
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply excludes to files named on the command line too (for pre-commit).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read settings from this pyproject.toml instead of the nearest one.",
)
@click.option("--isolated", is_flag=True, help="Ignore configuration files.")
@click.option(
    "--stdin-filename", help="With PATH '-': the path to report for source read from stdin."
)
@click.option(
    "--show-shapes",
    is_flag=True,
    help="Print each FILE.py[:Class.method | :Class | :LINE | :FIRST-LAST] with the shapes the "
    "analysis infers (text or json), and exit.",
)
@click.option(
    "--coverage",
    "show_coverage",
    is_flag=True,
    help="Print how much the analysis knew of each file's tensors (text or json), and exit.",
)
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option(
    "--fix-only",
    is_flag=True,
    help="Apply safe fixes in place and report no findings: exit 0 unless a file could not be "
    "checked or fixed.",
)
@click.option(
    "--show-fixes",
    is_flag=True,
    help="List, per file and rule, the fixes applied (--fix, --fix-only), that would be "
    "applied (--diff), or that --fix would apply.",
)
@click.option(
    "--exit-non-zero-on-fix",
    is_flag=True,
    help="Exit with 1 when --fix or --fix-only fixed anything, even if no finding remains.",
)
@click.option(
    "--unsafe-fixes",
    is_flag=True,
    help="With --fix or --diff, also apply fixes that change results on purpose.",
)
@click.option(
    "--diff",
    is_flag=True,
    help="Print the fixes as a unified diff and write nothing (exit 1 if there are any).",
)
@click.option(
    "--no-cache", is_flag=True, help="Check every file again; neither read nor write the cache."
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SHAPECHECK_CACHE_DIR",
    help="Where results are cached [default: .shapecheck_cache beside the configuration].",
)
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Report only findings this baseline file does not record.",
)
@click.option(
    "--write-baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Record today's findings in this file (for --baseline) and exit 0.",
)
@click.option(
    "--lsp", is_flag=True, help="Run as a Language Server over stdio (needs the lsp extra)."
)
@click.option("--list-rules", is_flag=True, help="List every rule and exit.")
@click.option("--explain", metavar="CODE", help="Print a rule's documentation and exit.")
@click.version_option(__version__, "--version", prog_name="shapecheck")
def main(
    paths: tuple[str, ...],
    output_format: str,
    show_statistics: bool,
    quiet: bool,
    exit_zero: bool,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    force_exclude: bool,
    config_path: Path | None,
    isolated: bool,
    stdin_filename: str | None,
    show_shapes: bool,
    show_coverage: bool,
    fix: bool,
    fix_only: bool,
    show_fixes: bool,
    exit_non_zero_on_fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    no_cache: bool,
    cache_dir: Path | None,
    baseline_path: Path | None,
    write_baseline: Path | None,
    lsp: bool,
    list_rules: bool,
    explain: str | None,
) -> None:
    """Find tensor-shape and attention mistakes in PyTorch code before it runs.

    PATHS are files or directories (default: the current directory); '-' reads stdin.
    Exit status: 0 no findings, 1 findings, 2 usage error or unreadable input.
    """
    if lsp:
        try:
            from shapecheck.lsp import serve
        except ImportError as error:
            raise InputError(
                f"--lsp needs pygls ({error.name} is missing): pip install 'torch-shapecheck[lsp]'"
            ) from error
        serve()
        return
    # Checking allocates many objects that form few cycles: a collection every 700
    # allocations cost about 5% of a cold check of timm; every 50,000 it costs nothing.
    gc.set_threshold(50_000, 20, 20)
    if explain is not None:
        from shapecheck.rule import rule_by_code

        rule = rule_by_code(explain)
        if rule is None:
            raise click.UsageError(f"no rule {explain!r} (see --list-rules)")
        click.echo(f"{rule.code} {rule.name} ({rule.severity})\n\n{rule.documentation()}")
        return
    if show_shapes:
        _show_shapes(paths, output_format, config_path, isolated)
        return
    if list_rules:
        _list_rules(output_format)
        return

    settings = _settings(paths, config_path, isolated, stdin_filename)
    _read_known_modules(settings)
    if exclude:
        settings.exclude = _split(exclude)
    settings.extend_exclude += _split(extend_exclude)
    from shapecheck.rule import rule_codes
    from shapecheck.run import check_files

    try:
        codes = enabled_codes(rule_codes(), settings, select, ignore, extend_select)
    except SelectionError as error:
        raise click.UsageError(str(error)) from error

    targets = _targets(paths or (".",), settings, stdin_filename, force_exclude)
    if show_coverage:
        _coverage(targets, output_format)
    output = Output(
        output_format,
        unsafe_fixes,
        show_statistics,
        quiet,
        exit_zero,
        show_fixes=show_fixes,
        fix_only=fix_only and not diff,
        exit_non_zero_on_fix=exit_non_zero_on_fix,
    )
    if fix or fix_only or diff:
        from shapecheck.rule import all_rules

        rules = [rule() for rule in all_rules() if rule.code in codes]
        _fix(targets, settings, rules, diff, output)
    recorded_before = _read_baseline(baseline_path) if baseline_path is not None else None
    if write_baseline is not None:
        _check_baseline_target(write_baseline)
    cache = None
    if not no_cache:
        from shapecheck.cache import DEFAULT_DIRECTORY, ResultCache

        directory = cache_dir or settings.root / DEFAULT_DIRECTORY
        cache = ResultCache(directory, codes, settings.known_modules)
    results = check_files(targets, codes, cache, write_fixes=output_format in WITH_EDITS)
    diagnostics = _kept(results, settings)
    if write_baseline is not None:
        _write_baseline(write_baseline, diagnostics)
    known = 0
    if baseline_path is not None and recorded_before is not None:
        from shapecheck.baseline import new_findings

        diagnostics, known = new_findings(baseline_path, recorded_before, diagnostics)
    output.finish(results, diagnostics, known=known)


def _read_baseline(path: Path) -> Counter[BaselineKey]:
    """Read before checking anything: a wrong path fails at once, not after the run."""
    from shapecheck.baseline import BaselineError, read_baseline

    try:
        return read_baseline(path)
    except BaselineError as error:
        raise InputError(str(error)) from error


def _check_baseline_target(path: Path) -> None:
    """Refuse a path a baseline must not replace before checking anything, not after."""
    from shapecheck.baseline import BaselineError, check_baseline_target

    try:
        check_baseline_target(path)
    except BaselineError as error:
        raise InputError(_printable(str(error))) from error


def _write_baseline(path: Path, diagnostics: list[Diagnostic]) -> NoReturn:
    from shapecheck.baseline import BaselineError, write_baseline

    try:
        recorded = write_baseline(path, diagnostics)
    except BaselineError as error:
        raise InputError(_printable(str(error))) from error
    click.echo(f"{count(recorded, 'finding')} recorded in {_printable(str(path))}", err=True)
    sys.exit(EXIT_CLEAN)


@record
class Output:
    """How to report: the format, and the flags that shape the report and the exit status."""

    output_format: str
    unsafe: bool
    statistics: bool
    quiet: bool
    exit_zero: bool
    show_fixes: bool
    fix_only: bool
    """Report no findings (``--fix-only``): only what was fixed."""
    exit_non_zero_on_fix: bool

    def finish(
        self,
        results: list[FileResult],
        diagnostics: list[Diagnostic],
        *,
        fixes: dict[str, Counter[tuple[str, str]]] | None = None,
        known: int = 0,
        failed: bool = False,
        to_stderr: bool = False,
    ) -> NoReturn:
        """Print the report and exit: 2 when a file could not be checked (or fixed); else,
        unless ``--exit-zero``, 1 for findings (not with ``--fix-only``) or, with
        ``--exit-non-zero-on-fix``, for anything fixed; else 0. ``fixes``: what ``--fix``
        fixed in each file, ``(code, name)`` -> count; ``None`` when not fixing."""
        from shapecheck import report
        from shapecheck.record import replace

        fixed = None if fixes is None else sum(counts.total() for counts in fixes.values())
        if self.statistics:
            text = report.statistics(diagnostics, self.output_format, self.unsafe)
        else:
            if self.output_format in ("text", "github"):  # json and sarif escape on their own
                diagnostics = [replace(d, path=_printable(d.path)) for d in diagnostics]
            text = report.render(
                diagnostics,
                self.output_format,
                len(results),
                unsafe=self.unsafe,
                fixed=fixed,
                quiet=self.quiet,
                known=known,
                fix_only=self.fix_only,
                fix_list=self._fix_list(diagnostics, fixes),
            )
        if text:
            # colour only on a terminal (click strips it elsewhere), and never under NO_COLOR
            click.echo(text, color=_colour(), err=to_stderr)
        if failed or any(result.unreadable for result in results):
            sys.exit(EXIT_ERROR)
        reported = bool(diagnostics) and not self.fix_only
        if self.exit_zero or not (reported or (self.exit_non_zero_on_fix and fixed)):
            sys.exit(EXIT_CLEAN)
        sys.exit(EXIT_FINDINGS)

    def _fix_list(
        self, diagnostics: list[Diagnostic], fixes: dict[str, Counter[tuple[str, str]]] | None
    ) -> str:
        """``--show-fixes``, in text: what was fixed, or (no ``--fix``) what would be."""
        from shapecheck import report

        if not self.show_fixes or self.output_format != "text":
            return ""
        if fixes is not None:
            return report.fix_list({_printable(p): c for p, c in fixes.items()}, "Fixed")
        flag = "--fix --unsafe-fixes" if self.unsafe else "--fix"
        return report.fix_list(report.fixable(diagnostics, self.unsafe), "Would fix", flag)


def _fix(
    targets: list[Target],
    settings: Settings,
    rules: list[Rule],
    diff: bool,
    output: Output,
) -> NoReturn:
    """``--fix`` writes each fixed file (stdin: prints it) and reports what remains
    (``--fix-only``: reports only what it fixed); ``--diff`` prints what it would change and
    exits 1 if anything. A file that cannot be fixed or written keeps its findings in the
    report, and the exit status is 2."""
    from shapecheck import report
    from shapecheck.diagnostics import INPUT_ERROR_CODE, FileResult
    from shapecheck.fixer import FixError, fix_source
    from shapecheck.linter import lint_parsed
    from shapecheck.run import failure, read
    from shapecheck.source import Source, parse_source
    from shapecheck.writing import WriteError, write_file

    keep = settings.keeps
    results: list[FileResult] = []
    fixes: dict[str, Counter[tuple[str, str]]] = {}
    failed = False
    for path, data in targets:
        raw = read(path) if data is None else data
        if isinstance(raw, FileResult):
            results.append(raw)
            continue
        # stdin gets the source back unchanged when it cannot be fixed: an editor that
        # replaces its buffer with the output must never get an empty one
        printed = raw
        source = parse_source(raw, path)
        if not isinstance(source, Source):
            results.append(FileResult(path, [source]))
        else:
            try:
                outcome = fix_source(source, rules, keep, output.unsafe, original=raw)
                if diff:
                    _print_diff(path, raw, outcome.data, source.encoding)
                elif data is None and outcome.fixed:
                    write_file(path, outcome.data, expected=raw)
                printed = outcome.data
                if outcome.fixed:
                    fixes[path] = outcome.rules_fixed
                results.append(outcome.remaining)
            except (FixError, WriteError) as error:
                click.echo(f"{_printable(path)}: {error}; left unchanged", err=True)
                failed = True
                found = lint_parsed(source, rules).diagnostics
                results.append(FileResult(path, [d for d in found if keep(d)]))
            except Exception as error:  # a bug in shapecheck must not stop the other files
                results.append(failure(path, error))
        if data is not None and not diff:
            sys.stdout.buffer.write(printed)
    if diff:
        # a file that could not be read, parsed or checked has no diff to show: say so
        for problem in (d for result in results for d in result.diagnostics):
            if problem.code == INPUT_ERROR_CODE:
                click.echo(f"{_printable(problem.path)}: {problem.message}", err=True)
        failed = failed or any(result.unreadable for result in results)
        listed = report.fix_list({_printable(p): c for p, c in fixes.items()}, "Would fix")
        if output.show_fixes and listed:
            click.echo(listed, color=_colour(), err=True)
        fixed = sum(counts.total() for counts in fixes.values())
        click.echo(f"{count(fixed, 'fix')} would be applied", err=True)
        sys.exit(EXIT_ERROR if failed else EXIT_FINDINGS if fixed else EXIT_CLEAN)
    stdin_only = all(isinstance(data, bytes) for _, data in targets)
    output.finish(
        results, _kept(results, settings), fixes=fixes, failed=failed, to_stderr=stdin_only
    )


def _coverage(targets: list[Target], output_format: str) -> NoReturn:
    """``--coverage``: per file and in total, what the analysis knew; exit 2 when a file
    could not be read or parsed, or a function in it analysed (each is named on stderr),
    else 0."""
    import json

    from shapecheck.coverage import Coverage, measure, render_text
    from shapecheck.diagnostics import FileResult
    from shapecheck.run import map_files, read

    if output_format not in ("text", "json"):
        raise click.UsageError("--coverage prints text or json")
    items: list[tuple[str, bytes]] = []
    problems: list[Diagnostic] = []
    for path, data in targets:
        content = read(path) if data is None else data
        if isinstance(content, FileResult):
            problems += content.diagnostics
        else:
            items.append((path, content))
    reports: list[Coverage] = []
    for measured, unread in map_files(measure, items):
        reports += [measured] if measured is not None else []
        problems += unread
    total = Coverage("total", files=0)
    for report in reports:
        total.add(report)
    if output_format == "json":
        document = {
            "files": [report.as_json(top=10) for report in reports],
            "total": total.as_json(top=20),
        }
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo(render_text(reports, total, top=15))
    _echo_problems(problems)
    sys.exit(EXIT_ERROR if problems else EXIT_CLEAN)


def _show_shapes(
    paths: Sequence[str], output_format: str, config_path: Path | None, isolated: bool
) -> None:
    """``--show-shapes``: each FILE.py[:SELECTOR] listed with its shapes (text), or the same
    notes as one JSON array over every file, seeing the project's other files as a check
    does (under the same settings); exit 2 when a function could not be analysed."""
    import json

    from shapecheck.diagnostics import Diagnostic, internal_error
    from shapecheck.files import read_regular_file
    from shapecheck.show import Shown, show_shapes
    from shapecheck.source import parse_source

    if output_format not in ("text", "json"):
        raise click.UsageError("--show-shapes prints text or json")
    if not paths:
        raise click.UsageError(
            "--show-shapes needs FILE.py[:Class.method | :Class | :LINE | :FIRST-LAST] arguments"
        )
    selected = []
    for argument in paths:
        path, _, selector = argument.partition(".py:")
        selected.append((path + ".py" if selector else argument, selector))
    _read_known_modules(_settings([path for path, _ in selected], config_path, isolated, None))
    shown: list[Shown] = []
    for path, selector in selected:
        try:
            source = parse_source(read_regular_file(path), path)
        except OSError as error:
            raise InputError(f"{path}: cannot read: {error.strerror}") from error
        if isinstance(source, Diagnostic):
            raise InputError(f"{path}:{source.line}:{source.column}: {source.message}")
        try:
            shown.append(show_shapes(source, selector or None))
        except LookupError as error:
            raise InputError(str(error)) from error
        except Exception as error:  # a bug in shapecheck: said as a check says it, no traceback
            problem = internal_error(path, "while showing shapes", error)
            raise InputError(f"{path}: {problem.message}") from error
    if output_format == "json":
        click.echo(json.dumps([record for one in shown for record in one.records()], indent=2))
    else:
        listings = [listing for one in shown if (listing := one.listing())]
        if listings:
            click.echo("\n\n".join(listings))
    problems = [problem for one in shown for problem in one.problems]
    _echo_problems(problems)
    if problems:
        sys.exit(EXIT_ERROR)


def _echo_problems(problems: list[Diagnostic]) -> None:
    """Each file or function that could not be read or analysed, on stderr."""
    for problem in problems:
        click.echo(f"{problem.path}:{problem.line}:{problem.column}: {problem.message}", err=True)


def _list_rules(output_format: str) -> None:
    """``--list-rules``: one line per rule, or (``--format json``) one object per rule."""
    import json

    from shapecheck.rule import all_rules

    if output_format not in ("text", "json"):
        raise click.UsageError("--list-rules prints text or json")
    if output_format == "json":
        listed = [
            {
                "code": rule.code,
                "name": rule.name,
                "severity": rule.severity,
                "fix": rule.fix_safety(),
                "summary": rule.summary,
            }
            for rule in all_rules()
        ]
        click.echo(json.dumps(listed, indent=2))
        return
    for rule in all_rules():
        click.echo(f"{rule.code}  {rule.name:<32} {rule.severity:<8} {rule.summary}")


def _settings(
    paths: Sequence[str], config_path: Path | None, isolated: bool, stdin_filename: str | None
) -> Settings:
    if isolated:
        return Settings()
    if config_path is None:
        anchors = [Path(stdin_filename if p == "-" and stdin_filename else p) for p in paths]
        anchors = [p for p in anchors if str(p) != "-"] or [Path.cwd()]
        start = Path(os.path.commonpath([str(p.absolute()) for p in anchors]))
        config_path = find_config(start)
    try:
        return load_settings(config_path)
    except ConfigError as error:  # a file that cannot be used, not a usage mistake
        raise InputError(str(error)) from error


def _read_known_modules(settings: Settings) -> None:
    """Let the analysis read the modules ``known-modules`` names (set before any is read)."""
    from shapecheck.project import know

    know(settings.known_modules)


def _split(values: Sequence[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _targets(
    paths: Sequence[str], settings: Settings, stdin_filename: str | None, force_exclude: bool
) -> list[Target]:
    """The files to check; a directory that cannot be listed is one SC000 finding."""
    from shapecheck.diagnostics import FileResult, input_error

    targets: list[Target] = []
    if "-" in paths:
        targets.append((stdin_filename or "-", sys.stdin.buffer.read()))
    files = [Path(p) for p in paths if p != "-"]
    for found in discover(files, settings.excludes, settings.root, force_exclude=force_exclude):
        if isinstance(found, OSError):
            folder = str(Path(found.filename))  # as files are shown: no leading "./"
            reason = found.strerror or type(found).__name__
            unlisted = input_error(folder, f"cannot list directory: {reason}")
            targets.append((folder, FileResult(folder, [unlisted])))
        else:
            targets.append((str(found), None))
    return targets


def _print_diff(path: str, before: bytes, after: bytes, encoding: str) -> None:
    import difflib

    from shapecheck.source import physical_lines

    old = physical_lines(before.decode(encoding))
    new = physical_lines(after.decode(encoding))
    shown = _printable(path)
    for line in difflib.unified_diff(old, new, shown, shown):
        click.echo(line if line.endswith("\n") else line + "\n", nl=False)


def _kept(results: list[FileResult], settings: Settings) -> list[Diagnostic]:
    return sorted(
        diagnostic
        for result in results
        for diagnostic in result.diagnostics
        if settings.keeps(diagnostic)
    )


def _printable(path: str) -> str:
    """``path`` with control characters escaped (``\\x1b``), so that a terminal, or click's
    stripping of colour codes, cannot hide or change part of a name."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in path)


def _colour() -> bool | None:
    """Colour on a terminal; never under ``NO_COLOR``, always under ``FORCE_COLOR`` (CI logs
    that render it), both as ruff reads them (set and not empty)."""
    if os.environ.get("NO_COLOR"):
        return False
    return True if os.environ.get("FORCE_COLOR") else None
