"""The confirmation report: every fixture, linted and run, on each device.

    python -m shapecheck.confirm [--device cpu|cuda|all] [--fixtures DIR]
    python -m shapecheck.confirm --write-fixed

For each rule: how many bad lines the linter flags, how many PyTorch confirms (which error,
or how far the numbers diverge from the reference), how many look-alikes stay quiet and
match; and for each fixed fixture (``fixtures/fixed/``), whether every repaired case now
runs, matches the reference, or computes what it did without the problem. Exit status 1 when
anything disagrees, 2 when it cannot run. ``--write-fixed`` regenerates the fixed fixtures
(``shapecheck --fix --unsafe-fixes`` on a copy of each fixture) and exits.

The fixtures are those installed with the package (a checkout's ``fixtures/`` when run from
one) unless ``--fixtures DIR`` names others. Running them needs the ``torch`` extra.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from shapecheck.confirm.fixtures import (
    CHECKOUT_FIXTURES,
    FIXTURES_DIR,
    SHIPPED_FIXTURES,
    FixedReport,
    FixtureReport,
    LineVerdict,
    confirm,
    confirm_fixed,
    fixed_text,
    fixed_version,
    fixture_files,
)
from shapecheck.extras import DISTRIBUTION, missing_torch_extra, torch_extra_message


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shapecheck.confirm", description=__doc__)
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument(
        "--fixtures",
        type=Path,
        metavar="DIR",
        help="the folder of SCNNN_*.py fixtures (default: those installed with shapecheck, "
        "or a checkout's fixtures/)",
    )
    parser.add_argument("--write-fixed", action="store_true", help="regenerate fixtures/fixed/")
    options = parser.parse_args(argv)
    folder = options.fixtures or FIXTURES_DIR
    files = fixture_files(folder)
    if not files:
        print(_no_fixtures(options.fixtures), file=sys.stderr)
        return 2
    if options.write_fixed:
        return _write_fixed(files)

    missing = missing_torch_extra()
    if missing is not None:
        print(torch_extra_message("python -m shapecheck.confirm", missing), file=sys.stderr)
        return 2
    import torch

    cuda = torch.cuda.is_available()
    if options.device == "cuda" and not cuda:
        print("CUDA is not available on this machine", file=sys.stderr)
        return 2
    devices = {"cpu": ["cpu"], "cuda": ["cuda"], "all": ["cpu", "cuda"] if cuda else ["cpu"]}
    gpu = f" ({torch.cuda.get_device_name(0)})" if cuda else ""
    print("shapecheck confirmation report")
    print(
        f"torch {torch.__version__} · python {platform.python_version()} · devices: "
        f"{', '.join(devices[options.device])}{gpu}" + ("" if cuda else " (cuda: not available)")
    )
    reports = [confirm(path, device) for device in devices[options.device] for path in files]
    fixed = [
        confirm_fixed(path, device)
        for device in devices[options.device]
        for path in files
        if fixed_version(path).exists()
    ]
    return print_report(reports, fixed)


def print_report(reports: list[FixtureReport], fixed: list[FixedReport]) -> int:
    """The tables per rule and per fixed fixture, then every disagreement; the exit status."""
    disagreements = _print_tables(reports) + _print_fixes(fixed)
    print()
    if disagreements:
        print(f"{len(disagreements)} disagreement(s):")
        for line in disagreements:
            print(f"  {line}")
        return 1
    print(
        "all agree: every bad line flagged and confirmed, every look-alike quiet and matching, "
        "every fixed case proven"
    )
    return 0


def _no_fixtures(given: Path | None) -> str:
    """One line: where it looked, and how to point it elsewhere."""
    if given is not None:
        return (
            f"no fixtures (SCNNN_*.py) in {given}: point --fixtures at the fixtures/ folder of "
            "a shapecheck checkout"
        )
    return (
        f"no fixtures (SCNNN_*.py) in {SHIPPED_FIXTURES} nor {CHECKOUT_FIXTURES}: reinstall "
        f"{DISTRIBUTION}, or point --fixtures DIR at the fixtures/ folder of a shapecheck checkout"
    )


def _write_fixed(files: list[Path]) -> int:
    """Write each fixture as the fixes leave it, into ``fixed/`` beside it (a fixture
    package has its own), and remove the fixed versions of fixtures nothing applies to."""
    written: dict[Path, set[str]] = {fixed_version(path).parent: set() for path in files}
    for path in files:
        text = fixed_text(path)
        if text is not None:
            fixed_version(path).parent.mkdir(exist_ok=True)
            fixed_version(path).write_text(text, encoding="utf-8", newline="")
            written[fixed_version(path).parent].add(path.name)
    for folder, names in written.items():
        for stale in folder.glob("*.py"):
            if stale.name not in names:
                stale.unlink()
        if names:
            print(f"{len(names)} fixed fixtures in {folder}")
    return 0


def _print_tables(reports: list[FixtureReport]) -> list[str]:
    by_rule: dict[tuple[str, str], list[LineVerdict]] = defaultdict(list)
    for report in reports:
        for verdict in report.verdicts:
            by_rule[(verdict.code, report.device)].append(verdict)
    from shapecheck.rule import rule_by_code

    for (code, device), verdicts in sorted(by_rule.items()):
        rule = rule_by_code(code)
        print(f"\n{code} {rule.name if rule else '?'} — {device}")
        bad = [v for v in verdicts if v.bad]
        clean = [v for v in verdicts if not v.bad]
        _row("bad lines flagged by the linter", bad, lambda v: v.static_agrees)
        _row("bad lines confirmed at run time", bad, lambda v: v.runtime_agrees)
        for evidence in _evidence(bad):
            print(f"      {evidence}")
        _row("look-alikes quiet", clean, lambda v: v.static_agrees)
        _row("look-alikes matching the reference", clean, lambda v: v.runtime_agrees)
        print(f"      {_gaps(clean)}")
    return [problem for report in reports for problem in report.disagreements]


def _print_fixes(reports: list[FixedReport]) -> list[str]:
    """One line per fixed fixture: cases repaired, and how many did what their fix promises."""
    disagreements: list[str] = []
    for device in sorted({report.device for report in reports}):
        print(f"\nfixtures/fixed/ (shapecheck --fix --unsafe-fixes) — {device}")
        for report in (report for report in reports if report.device == device):
            problems = report.disagreements
            proven = len(report.repairs) - len(problems)
            print(f"  {report.path.name:<38} {proven:>3} / {len(report.repairs)} cases proven")
            disagreements += [f"{report.path.name} ({device}): {p}" for p in problems]
    return disagreements


def _row(label: str, verdicts: list[LineVerdict], agrees: Callable[[LineVerdict], bool]) -> None:
    count = sum(1 for verdict in verdicts if agrees(verdict))
    print(f"  {label:<38} {count:>3} / {len(verdicts)}")


def _evidence(verdicts: list[LineVerdict]) -> list[str]:
    """What PyTorch did on the bad lines: each distinct error (or allocation, or non-finite
    output), and the range of the divergences."""
    errors: Counter[str] = Counter()
    diverging: list[float] = []
    for verdict in verdicts:
        outcome = verdict.outcome
        if outcome is None:
            continue
        if outcome.kind in ("raises", "allocates"):
            errors[_shorten(outcome.detail)] += 1
        elif outcome.kind == "differs" and outcome.gap is None:
            errors[f"differs: {outcome.detail}"] += 1
        elif outcome.kind == "differs" and outcome.gap is not None:
            diverging.append(outcome.gap)
    lines = [f"x{count}: {message}" for message, count in errors.most_common()]
    if diverging:
        lines.append(
            f"differs x{len(diverging)}: max |output - reference| from "
            f"{min(diverging):.2g} to {max(diverging):.2g}"
        )
    return lines


def _gaps(verdicts: list[LineVerdict]) -> str:
    gaps = [
        verdict.outcome.gap
        for verdict in verdicts
        if verdict.outcome is not None
        and verdict.outcome.kind == "matches"
        and verdict.outcome.gap is not None
    ]
    return f"max |output - reference| {max(gaps):.2g}" if gaps else ""


def _shorten(message: str, limit: int = 110) -> str:
    return message if len(message) <= limit else message[: limit - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
