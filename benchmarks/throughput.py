"""Linter throughput on a source tree, side by side with parse-only baselines.

    python benchmarks/throughput.py PATH [--repeat 3]

Times, in one run and in the same process, what each stage costs over every ``*.py`` file
under PATH: ``ast.parse`` alone, ``libcst.parse_module`` alone (what the analysis stood on
before it moved to ``ast``; fixes still use it), the analysis of the parsed modules without and
with symbolic shapes, and the whole check (parse + analysis + rules + positions + fixes) in one
process. Prints medians, lines per second, and ratios to ``ast.parse`` and to the libcst parse.
Ratios are what to compare across machines; absolute times are noisy here.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import libcst as cst

from shapecheck.analysis import analyse
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()

    sources = [path.read_bytes() for path in sorted(options.path.rglob("*.py"))]
    lines = sum(source.count(b"\n") for source in sources)
    rules = [rule() for rule in all_rules()]

    def parse_ast() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for source in sources:
                with contextlib.suppress(SyntaxError):
                    ast.parse(source)

    def parse_libcst() -> None:
        for source in sources:
            with contextlib.suppress(cst.ParserSyntaxError):
                cst.parse_module(source)

    parsed = [(module, text) for module, text in map(_parsed, sources) if module is not None]

    def analyse_without_shapes() -> None:
        for module, text in parsed:
            analyse(module, text, shapes=False)

    def analyse_with_shapes() -> None:
        for module, text in parsed:
            analyse(module, text)

    def check() -> None:
        for source in sources:
            lint_source(source, "benchmark.py", rules)

    stages: list[tuple[str, Callable[[], None]]] = [
        ("ast.parse", parse_ast),
        ("libcst.parse_module", parse_libcst),
        ("analysis, no shapes", analyse_without_shapes),
        ("analysis", analyse_with_shapes),
        ("shapecheck", check),
    ]
    medians = {name: _median(stage, options.repeat) for name, stage in stages}
    ast_parse, libcst_parse = medians["ast.parse"], medians["libcst.parse_module"]
    print(f"{len(sources)} files, {lines} lines, median of {options.repeat} runs")
    for name, seconds in medians.items():
        print(
            f"{name:22s} {seconds:8.2f} s {lines / seconds:10.0f} lines/s "
            f"{seconds / ast_parse:6.2f}x ast parse {seconds / libcst_parse:6.2f}x libcst parse"
        )


def _parsed(source: bytes) -> tuple[ast.Module | None, str]:
    text = source.decode("utf-8", errors="replace")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text), text
    except SyntaxError:
        return None, text


def _median(stage: Callable[[], None], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        stage()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


if __name__ == "__main__":
    main()
