"""Mutation check of the proof: break one piece at a time, and the test named for it must fail.

    python -m tests.mutation               # every mutant, against the tests meant to kill it
    python -m tests.mutation --full        # every mutant, against the whole suite (slow)
    python -m tests.mutation NAME ...      # only these mutants

Each mutant replaces one exact piece of text in one file of this checkout (the text must occur
exactly once, so a mutant that no longer applies is reported, never silently skipped), runs
pytest, and restores the file byte for byte with its modification time. Killed: the tests
failed. Survived: they passed, and the proof has a hole. The unmutated tests must pass first.
Exit status 1 when a mutant survives or no longer applies.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONFIRM = "shapecheck/confirm/__init__.py"
FIXTURES = "shapecheck/confirm/fixtures.py"
HELPERS = "tests/test_confirm_helpers.py"
REPORT = "tests/test_confirm.py"
SPEED = "tests/test_speed_paths.py"
LATTICE = "shapecheck/analysis/lattice.py"
LATTICE_TESTS = "tests/test_lattice.py"
PROJECT = "tests/test_project_files.py"
MASKS = "shapecheck/analysis/ops/masks.py"
CACHED_MASKS = (
    "tests/test_fixtures.py::test_linter_says_exactly_what_the_fixture_expects"
    "[SC403_cached_and_combined_masks.py]"
)


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    original: str
    mutated: str
    killers: tuple[str, ...]
    """The tests that must fail (pytest node ids, relative to the checkout)."""


MUTANTS = [
    Mutant(
        "raises-records-without-running",
        CONFIRM,
        "    try:\n        case(*args, **kwargs)\n    except Exception as error:",
        "    try:\n        raise RuntimeError(match)\n    except Exception as error:",
        (
            f"{HELPERS}::test_raises_runs_the_case",
            f"{HELPERS}::test_raises_fails_when_the_case_runs",
        ),
    ),
    Mutant(
        "raises-accepts-any-error",
        CONFIRM,
        "        if match not in message:\n",
        "        if False:\n",
        (f"{HELPERS}::test_raises_fails_on_another_error",),
    ),
    Mutant(
        "differs-needs-no-gap",
        CONFIRM,
        "    if not gap > atol:\n",
        "    if False:\n",
        (f"{HELPERS}::test_differs_fails_when_the_output_matches",),
    ),
    Mutant(
        "matches-needs-no-closeness",
        CONFIRM,
        # matches; discards_weights makes the same test after a check of the output alone
        '    _require_finite(case, "the reference", expected)\n'
        '    _require_finite(case, "the output", actual)\n'
        "    gap = _max_gap(case, actual, expected)\n"
        "    if not gap <= atol:\n",
        '    _require_finite(case, "the reference", expected)\n'
        '    _require_finite(case, "the output", actual)\n'
        "    gap = _max_gap(case, actual, expected)\n"
        "    if False:\n",
        (f"{HELPERS}::test_matches_fails_when_the_output_differs",),
    ),
    Mutant(
        "allocates-accepts-nothing-built",
        CONFIRM,
        "    if not built:\n",
        "    if False:\n",
        (f"{HELPERS}::test_allocates_fails_when_nothing_is_built",),
    ),
    Mutant(
        "nan-counts-as-evidence",
        CONFIRM,
        "    broken = int((~values.isfinite()).sum())\n    if broken:\n",
        "    broken = 0\n    if broken:\n",
        (
            f"{HELPERS}::test_a_nan_output_is_no_evidence_of_a_difference",
            f"{HELPERS}::test_a_nan_reference_proves_nothing",
            f"{HELPERS}::test_matching_nans_are_no_match",
        ),
    ),
    Mutant(
        "non-finite-evidence-unchecked",
        CONFIRM,
        "        if not broken:\n",
        "        if False:\n",
        (f"{HELPERS}::test_non_finite_evidence_fails_on_a_finite_output",),
    ),
    Mutant(
        "reference-returns-nan",
        "shapecheck/reference/attention.py",
        "    return weights @ value\n",
        '    return weights @ value * float("nan")\n',
        ("tests/test_fixtures.py::test_runtime_confirms_every_marked_line",),
    ),
    Mutant(
        "kept-results-unchecked",
        CONFIRM,
        "    if not bool((actual == before)",
        "    if False and not bool((actual == before)",
        (f"{HELPERS}::test_a_repair_that_keeps_results_fails_when_the_numbers_move",),
    ),
    Mutant(
        "contradicted-run-swallowed",
        CONFIRM,
        "            return FixtureRun(list(outcomes), str(error))",
        "            return FixtureRun(list(outcomes), None)",
        (f"{REPORT}::test_a_bad_case_that_stops_crashing_is_a_disagreement",),
    ),
    Mutant(
        "contradicted-run-not-a-disagreement",
        FIXTURES,
        "        if self.failure:\n            problems.append(",
        "        if False:\n            problems.append(",
        (f"{REPORT}::test_a_bad_case_that_stops_crashing_is_a_disagreement",),
    ),
    Mutant(
        "unmarked-finding-not-a-disagreement",
        FIXTURES,
        "            for line, code in sorted(self.unmarked_findings)\n",
        "            for line, code in sorted(self.unmarked_findings & set())\n",
        (f"{REPORT}::test_a_finding_on_an_unmarked_line_is_a_disagreement",),
    ),
    Mutant(
        "bad-line-accepts-a-match",
        FIXTURES,
        'wrong = self.outcome.kind in ("raises", "differs", "allocates")',
        'wrong = self.outcome.kind in ("raises", "differs", "allocates", "matches")',
        (f"{REPORT}::test_a_bad_line_needs_a_crash_a_divergence_or_allocations",),
    ),
    Mutant(
        "innermost-case-is-the-outermost",
        FIXTURES,
        "    return min(covering, key=lambda outcome: outcome.span, default=None)",
        "    return max(covering, key=lambda outcome: outcome.span, default=None)",
        (f"{REPORT}::test_a_line_is_judged_by_the_innermost_case_holding_it",),
    ),
    Mutant(
        "repaired-case-never-run-accepted",
        FIXTURES,
        '            if not kinds:\n                problems.append(f"{case}: run() never ran it")',
        '            if False:\n                problems.append(f"{case}: run() never ran it")',
        (f"{REPORT}::test_a_repaired_case_must_run_and_do_what_its_repair_promises",),
    ),
    Mutant(
        "pool-loses-the-last-result",
        "shapecheck/run.py",
        "    return [by_index[index] for index in range(len(items))]",
        "    ordered = [by_index[index] for index in range(len(items))]\n"
        "    return [*ordered[:-1], FileResult(ordered[-1].path, [])]",
        (
            f"{SPEED}::test_the_pool_finds_what_one_process_finds_file_by_file",
            f"{SPEED}::test_the_pool_reports_every_finding_of_many_small_files",
        ),
    ),
    Mutant(
        "pool-loses-the-smallest-result",
        "shapecheck/run.py",
        "                results = pool.map(worker, [items[index] for index in order])\n",
        "                results = list(pool.map(worker, [items[index] for index in order]))\n"
        "                results[-1] = FileResult(results[-1].path, [])\n",
        (
            f"{SPEED}::test_the_pool_finds_what_one_process_finds_file_by_file",
            f"{SPEED}::test_the_pool_reports_every_finding_of_many_small_files",
        ),
    ),
    Mutant(
        "cache-ignores-its-own-source",
        "shapecheck/cache.py",
        "    for location in _source_folders():\n",
        "    for location in []:\n",
        (f"{SPEED}::test_editing_shapecheck_or_a_rule_changes_the_cache_folder",),
    ),
    Mutant(
        "cache-ignores-the-rules-folder",
        "shapecheck/cache.py",
        "    return [package, *outside]\n",
        "    return [package]\n",
        (f"{SPEED}::test_editing_shapecheck_or_a_rule_changes_the_cache_folder",),
    ),
    Mutant(
        "cache-ignores-modification-times",
        "shapecheck/cache.py",
        ':{status.st_size}:{status.st_mtime_ns}"',
        ':{status.st_size}"',
        (f"{SPEED}::test_editing_shapecheck_or_a_rule_changes_the_cache_folder",),
    ),
    Mutant(
        "reference-never-trusts-a-signature",
        "shapecheck/reference/checking.py",
        "            passed.add(key)\n",
        "            pass\n",
        (
            "tests/reference/test_modules.py::"
            "test_a_signature_that_passed_is_trusted_and_a_new_one_is_checked",
        ),
    ),
    Mutant(
        "join-forgets-weights-of-another-dtype",
        LATTICE,
        '    "weights": (_both, ',
        '    "weights": (lambda left, right: False, ',
        (f"{LATTICE_TESTS}::test_weights_of_either_dtype_stay_weights",),
    ),
    Mutant(
        "join-forgets-a-mask-after-the-softmax",
        LATTICE,
        '    "masked_weights": (_either, ',
        '    "masked_weights": (_agree, ',
        (f"{LATTICE_TESTS}::test_masking_after_the_softmax_on_one_branch_is_kept",),
    ),
    Mutant(
        "unmodelled-branch-erases-the-other",
        LATTICE,
        "return replace(known, uncertain=True)  # the eager attention beside kernels",
        "return unknown",
        (
            f"{LATTICE_TESTS}::test_an_unmodelled_branch_keeps_the_other_branchs_tensor_as_uncertain",
        ),
    ),
    Mutant(
        "unmodelled-branch-is-certain",
        LATTICE,
        "return replace(known, uncertain=True)  # the eager attention beside kernels",
        "return known",
        (
            f"{LATTICE_TESTS}::test_an_unmodelled_branch_keeps_the_other_branchs_tensor_as_uncertain",
            "tests/test_analysis.py::test_a_rank_known_on_one_branch_proves_no_transpose_useless",
        ),
    ),
    Mutant(
        "no-op-transpose-trusts-an-uncertain-rank",
        "shapecheck/analysis/ops/axes.py",
        "(not receiver.uncertain and not receiver.guess and a == b)",
        "(not receiver.guess and a == b)",
        ("tests/test_analysis.py::test_a_rank_known_on_one_branch_proves_no_transpose_useless",),
    ),
    Mutant(
        "no-op-transpose-trusts-a-guessed-rank",
        "shapecheck/analysis/ops/axes.py",
        "(not receiver.uncertain and not receiver.guess and a == b)",
        "(not receiver.uncertain and a == b)",
        ("tests/test_analysis.py::test_a_guessed_rank_proves_no_transpose_useless",),
    ),
    Mutant(
        "flow-accepts-a-forgotten-computed-field",
        LATTICE,
        "    if missing:\n",
        "    if False:\n",
        (f"{LATTICE_TESTS}::test_an_op_that_skips_a_computed_field_is_refused",),
    ),
    Mutant(
        "merge-rule-check-ignores-flows",
        LATTICE,
        "        or field.name not in FLOWS\n",
        "        or False\n",
        (f"{LATTICE_TESTS}::test_a_field_with_a_merge_rule_and_no_flow_is_named",),
    ),
    Mutant(
        "install-without-libcst",
        "pyproject.toml",
        'dependencies = ["libcst>=1.1", "click>=8.1"]',
        'dependencies = ["click>=8.1"]',
        ("tests/test_install.py::test_the_wheel_requires_every_package_the_linter_imports",),
    ),
    Mutant(
        "strict-skips-never-strict",
        "tests/strict_skips.py",
        '    return os.environ.get("SHAPECHECK_STRICT_SKIPS") == "1"\n',
        "    return False\n",
        ("tests/test_strict_skips.py::test_strict_skips_fail_every_skip_but_the_gpu",),
    ),
    Mutant(
        "strict-skips-accept-every-reason",
        "tests/strict_skips.py",
        "    if ACCEPTED_REASON in reason:\n",
        "    if True:\n",
        ("tests/test_strict_skips.py::test_strict_skips_fail_every_skip_but_the_gpu",),
    ),
    Mutant(
        "cache-ignores-what-a-result-rests-on",
        "shapecheck/cache.py",
        "            if self._digests[dependency] != recorded:\n",
        "            if False:\n",
        (f"{PROJECT}::test_editing_a_dependency_checks_its_users_again",),
    ),
    Mutant(
        "cache-hashes-a-dependency-checked-in-the-run-again",
        "shapecheck/run.py",
        "        if cache.rests_on_others(entry):\n",
        "        if False:\n",
        (f"{PROJECT}::test_a_dependency_checked_in_the_same_run_is_hashed_once",),
    ),
    Mutant(
        "cache-takes-given-text-for-the-file-on-disk",
        "shapecheck/run.py",
        "        entry = cache.entry(path, content, read_from_disk=data is None)\n",
        "        entry = cache.entry(path, content)\n",
        (f"{PROJECT}::test_text_given_for_a_file_is_not_taken_for_the_file_a_result_rests_on",),
    ),
    Mutant(
        "dependency-evidence-never-replayed",
        "shapecheck/project.py",
        "        if sink is not evidence:\n",
        "        if False:\n",
        (f"{PROJECT}::test_what_a_dependency_rested_on_is_replayed_for_every_file_that_uses_it",),
    ),
    Mutant(
        "helper-read-with-the-callers-imports",
        "shapecheck/analysis/interpreter.py",
        "            context, owner, arguments = home.context, None, entered\n",
        "            context, owner, arguments = self.context, None, entered\n",
        (f"{PROJECT}::test_a_helper_of_another_file_is_followed_with_that_files_imports",),
    ),
    Mutant(
        "construction-sizes-ignored",
        "shapecheck/analysis/imported.py",
        "        if not decided and not layers:\n            return plain\n",
        "        if True:\n            return plain\n",
        (f"{PROJECT}::test_constructor_arguments_give_the_class_its_sizes",),
    ),
    Mutant(
        "second-test-reads-the-join",
        "shapecheck/analysis/interpreter.py",
        "        sides = self._sides_of(test_of) if test_of is not None else {}\n",
        "        sides = {}\n",
        ("tests/test_analysis.py::test_a_second_branch_on_the_same_test_reads_each_side",),
    ),
    Mutant(
        "branch-sides-outlive-their-block",
        "shapecheck/analysis/interpreter.py",
        "        self.conditionals = dict(outer) if outer else {}\n",
        "        self.conditionals = outer\n",
        ("tests/test_analysis.py::test_a_second_branch_on_the_same_test_reads_each_side",),
    ),
    Mutant(
        "construction-widths-ignored",
        "shapecheck/analysis/interpreter.py",
        "            if layer.built_with:\n",
        "            if False:\n",
        ("tests/test_analysis.py::test_a_layers_result_is_in_the_sizes_its_construction_passed",),
    ),
    Mutant(
        "configuration-checks-ignored",
        "shapecheck/analysis/configs.py",
        "            function.observations.append(DivisibilityCheck(names))\n",
        "            pass\n",
        (
            f"{PROJECT}::test_a_configuration_read_through_its_dictionaries_and_the_constructors_callers",
        ),
    ),
    Mutant(
        "installed-packages-read",
        "shapecheck/project.py",
        "    return not INSTALLED.isdisjoint(path.split(os.sep))\n",
        "    return False\n",
        (f"{PROJECT}::test_installed_packages_are_never_read",),
    ),
    Mutant(
        "provenance-kept-across-files",
        "shapecheck/analysis/imported.py",
        "        return reanchored(fact, call, [each for each in handed if isinstance(",
        "        return fact or reanchored(fact, call, [each for each in handed if isinstance(",
        (f"{PROJECT}::test_a_helper_of_another_file_is_followed_with_that_files_imports",),
    ),
    Mutant(
        "mask-polarity-disputed-by-the-unknown",
        LATTICE,
        "    if left is None or right is None:\n        return left if right is None else right\n",
        "    if left is None or right is None:\n        return None\n",
        (CACHED_MASKS,),
    ),
    Mutant(
        "combined-masks-mean-nothing",
        MASKS,
        "    polarity = polarities.pop() if len(polarities) == 1 else None\n",
        "    polarity = None\n",
        (CACHED_MASKS,),
    ),
    Mutant(
        "offset-diagonals-unread",
        MASKS,
        "            return added if isinstance(fact, IntFact) else None\n",
        "            return None\n",
        (CACHED_MASKS,),
    ),
    Mutant(
        "loop-items-joined",
        "shapecheck/analysis/interpreter.py",
        "                    and len(node.generators) == 1\n",
        "                    and len(node.generators) == 0\n",
        (
            "tests/test_research_idioms.py::"
            "test_a_loop_over_tensors_that_differ_gives_each_its_own_element",
        ),
    ),
    Mutant(
        "a-place-reported-per-item",
        "shapecheck/linter.py",
        "        if violation.node not in seen:\n",
        "        if True:\n",
        ("tests/test_research_idioms.py::test_code_run_once_per_item_is_one_place_to_report",),
    ),
]


def _pytest(tests: list[str]) -> tuple[bool, str]:
    """Run pytest on ``tests`` (all of them if empty): did it pass, and the first failure."""
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-rf", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", process.stdout, re.MULTILINE)
    summary = process.stdout.strip().splitlines()[-1] if process.stdout.strip() else ""
    return process.returncode == 0, failed[0] if failed else summary


def _run(mutant: Mutant, full: bool) -> str:
    path = ROOT / mutant.path
    original = path.read_bytes()
    status = path.stat()
    text = original.decode("utf-8")
    if text.count(mutant.original) != 1:
        return f"NO LONGER APPLIES: {mutant.path} holds the text {text.count(mutant.original)}x"
    try:
        path.write_text(text.replace(mutant.original, mutant.mutated), encoding="utf-8")
        passed, failure = _pytest([] if full else list(mutant.killers))
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    return f"survived ({failure.strip()})" if passed else f"killed by {failure}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--full", action="store_true", help="run the whole suite per mutant")
    options = parser.parse_args(argv)
    unknown = set(options.names) - {mutant.name for mutant in MUTANTS}
    if unknown:
        parser.error(f"no such mutant: {', '.join(sorted(unknown))}")
    chosen = [m for m in MUTANTS if not options.names or m.name in options.names]
    killers = sorted({test for mutant in chosen for test in mutant.killers})
    passed, failure = _pytest([] if options.full else killers)
    if not passed:
        print(f"the unmutated tests fail ({failure}): fix them first", file=sys.stderr)
        return 2
    outcomes = {mutant.name: _run(mutant, options.full) for mutant in chosen}
    width = max(len(name) for name in outcomes)
    for name, outcome in outcomes.items():
        print(f"{name:<{width}}  {outcome}", flush=True)
    killed = sum(outcome.startswith("killed") for outcome in outcomes.values())
    print(f"\n{killed} of {len(outcomes)} mutants killed")
    return 0 if killed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
