"""How the time of a cold check grows with each dimension of its input, side by side.

    python benchmarks/growth.py [--repeat 3] [--scale 1.0]

Generates one file per dimension at size n and 10n and times checking it in this process,
from the bytes, with every rule and no cache (best of ``--repeat``):

- functions: n top-level functions with nothing to report;
- findings: n functions with one SC101 finding each;
- literal: one list literal of n elements, on one line, and one finding;
- depth: ten functions returning a sum of n terms (each an SC401 finding); 25 and 250 terms
  whatever the scale, well under the depth Python's stack allows;
- line: one line holding n statements, each an SC101 finding, after a non-ASCII string.

Prints the times and the slope, the time at 10n over the time at n: a check whose cost is
linear in its input stays at or under 10x (plus noise; 12x is the target), a quadratic one
heads for 100x. The last column is the slope with Python's cyclic garbage collector off: the
work of the check alone. The collector walks every live object each time it collects them all,
which it does more often as the heap grows (not at all for the smaller files here), so the
slope with it on is a little over the work's own. ``--scale`` multiplies n (not the depth).
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

from shapecheck.linter import lint_source
from shapecheck.rule import Rule, all_rules

TARGET_SLOPE = 12.0
HEADER = "import torch\n"
FINDING = (
    "def f{i}(x, B, L, H, D):\n"
    "    y = x.view(B, H, L, D).transpose(1, 2)\n"
    "    return y.view(B, L, H * D)\n"
)
"""A function with one SC101 finding (a view of a transposed tensor)."""
CLEAN = (
    "def g{i}(x, B, L, H, D):\n"
    "    y = x.view(B, L, H, D).transpose(1, 2)\n"
    "    return y.reshape(B, H, L, D)\n"
)
"""A function with nothing to report."""
DEPTH_FUNCTIONS = 10


def functions(n: int) -> str:
    return HEADER + "".join(CLEAN.format(i=i) for i in range(n))


def findings(n: int) -> str:
    return HEADER + "".join(FINDING.format(i=i) for i in range(n))


def literal(n: int) -> str:
    return HEADER + f"DATA = [{', '.join(map(str, range(n)))}]\n" + FINDING.format(i=0)


def depth(n: int) -> str:
    return HEADER + "".join(
        f"def h{i}(scores, mask):\n"
        "    y = scores.masked_fill(mask, -1e9)\n"
        f"    return y{' + y' * (n - 1)}\n"
        for i in range(DEPTH_FUNCTIONS)
    )


def line(n: int) -> str:
    statements = "; ".join(
        f"y{i} = x.view(B, H, L, D).transpose(1, 2).view(B, L, H * D)" for i in range(n)
    )
    return HEADER + f'def k(x, B, L, H, D):\n    label = "é"; {statements}\n'


# dimension -> (generator, n at scale 1, whether --scale applies)
DIMENSIONS: dict[str, tuple[Callable[[int], str], int, bool]] = {
    "functions": (functions, 200, True),
    "findings": (findings, 30, True),
    "literal": (literal, 10000, True),
    "depth": (depth, 25, False),
    "line": (line, 10, True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    options = parser.parse_args()

    rules = [rule() for rule in all_rules()]
    lint_source(findings(1).encode(), "warm-up.py", rules)  # imports, first-call costs
    print(f"cold check in one process, best of {options.repeat}; slope = time(10n) / time(n)")
    print(
        f"{'dimension':<10} {'n':>6} {'time n':>9} {'10n':>7} {'time 10n':>9} {'slope':>7}"
        f"  {'gc off':>7}"
    )
    for name, (generate, base, scales) in DIMENSIONS.items():
        n = max(1, round(base * options.scale)) if scales else base
        small, large = (generate(size).encode() for size in (n, 10 * n))
        times = [_best(small, rules, options.repeat), _best(large, rules, options.repeat)]
        gc.disable()
        try:
            work = _best(large, rules, options.repeat) / _best(small, rules, options.repeat)
        finally:
            gc.enable()
        slope = times[1] / times[0]
        verdict = "" if slope <= TARGET_SLOPE else f"  over {TARGET_SLOPE:.0f}x"
        print(
            f"{name:<10} {n:>6} {times[0]:>8.3f}s {10 * n:>7} {times[1]:>8.3f}s {slope:>6.1f}x"
            f"  {work:>6.1f}x{verdict}"
        )


def _best(source: bytes, rules: list[Rule], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = lint_source(source, "growth.py", rules)
        timings.append(time.perf_counter() - start)
        if any(diagnostic.code == "SC000" for diagnostic in result.diagnostics):
            raise SystemExit(f"the generated file is not analysed: {result.diagnostics[0]}")
    return min(timings)


if __name__ == "__main__":
    main()
