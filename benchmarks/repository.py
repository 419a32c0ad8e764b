"""Whole-repository linting as subprocesses, side by side with ruff and parse-only baselines.

    python benchmarks/repository.py [--corpus timm|transformers]... [--repeat 3] [--quick]
                                    [--corpora DIR] [--against CHECKOUT] [--shapecheck-only]

Downloads the corpora once (``pip download`` of timm 1.0.31 and transformers 5.23.0 into
DIR, default ``benchmarks/.corpora/``, each wheel unpacked into ``DIR/<name>/``): the
``timm`` package, and ``transformers/models`` (about 1.05M lines). Over each corpus it times
the wall clock (median of ``--repeat`` runs, ``--quick`` is one) and the peak memory of:

- shapecheck with no result cache (``--no-cache``), with a fresh empty ``--cache-dir``, and
  again with that cache filled and nothing changed (warm);
- ``libcst.parse_module`` and ``ast.parse`` over every file in one Python process, errors
  suppressed: the floor under any libcst-based, and any Python-based, linter;
- ``ruff check --select ALL`` and ``flake8``, where installed;

and prints lines per second and ratios to ruff and to the libcst parse. Then the same for
pre-commit-sized cases, one file checked alone as a hook checks a changed file (it still
reads the modules of its package that it imports), cold and with its result cached: the
timm model file defining attention modules whose length is closest to 1,000 lines (one file
of a 300-file package), and ``PRECOMMIT_TRANSFORMERS`` (one model of transformers, whose
imports reach the package's shared modules). Last, start-up: ``shapecheck --version``
against bare Python. Each shapecheck timed is byte-compiled first, as installing it does.

``--against CHECKOUT`` times, round robin with the same runs, the shapecheck of another
checkout (another commit's worktree, run with ``PYTHONPATH=CHECKOUT``) and prints each
shapecheck line's ratio to it: a change measured side by side on the same noisy machine.
Without it, shapecheck is whatever the environment imports (``PYTHONPATH`` to choose).
The linters run with ``--isolated``: the corpora sit inside this repository, whose
configuration is not theirs. Ratios are what to compare across machines; absolute times
are noisy.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

WHEELS = {
    "timm": "timm==1.0.31",
    "transformers": "transformers==5.23.0",
    "x-transformers": "x-transformers==2.31.10",
}
# what is measured, inside each unpacked wheel
CORPORA = {
    "timm": Path("timm"),
    "transformers": Path("transformers/models"),
    "x-transformers": Path("x_transformers"),
}
PRECOMMIT_LINES = (900, 1000, 1300)  # shortest, ideal, longest
PRECOMMIT_TRANSFORMERS = Path("transformers/models/llama/modeling_llama.py")
STARTUP_REPEAT = 5
# placeholders in a tool's command line
TARGET, CACHE = "<PATH>", "<CACHE>"
# exit codes that mean the tool ran; None: any (flake8's cannot tell findings from failure)
SUCCESS = frozenset({0})
SHAPECHECK_SUCCESS = frozenset({0, 1})  # 1: findings
RUFF, LIBCST = "ruff --select ALL", "libcst parse-only"
BASELINE = "against: "
"""How a run of the ``--against`` checkout is labelled (before its own label)."""
MAXRSS_PER_MIB = 1024 * 1024 if sys.platform == "darwin" else 1024  # bytes there, KiB on Linux

# A child's ru_maxrss starts from its parent's peak (the image it had before exec), so tools
# are forked from this bare Python (about 8 MiB), not from the benchmark. It times the tool,
# waits for it with wait4 and writes "seconds maxrss exit-code" to the file descriptor argv[1].
LAUNCHER = """\
import os, sys, time
report, argv = int(sys.argv[1]), sys.argv[2:]
os.set_inheritable(report, False)
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
os.write(report, f"{seconds} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}".encode())
"""

PARSE_ONLY = """\
import contextlib, sys
from pathlib import Path
import {module}
root = Path(sys.argv[1])
for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
    with contextlib.suppress({errors}):
        {module}.{function}(path.read_bytes())
"""


@dataclass(frozen=True)
class Tool:
    label: str
    argv: tuple[str, ...]
    success: frozenset[int] | None = SUCCESS
    python_path: str | None = None
    """``PYTHONPATH`` for it (``--against``: the other checkout), else the environment's."""


@dataclass
class Timing:
    seconds: list[float] = field(default_factory=list)
    peak_mib: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--corpus", action="append", choices=list(WHEELS), help="repeatable (default: all)"
    )
    parser.add_argument(
        "--corpora", type=Path, default=Path(__file__).parent / ".corpora", metavar="DIR"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run each (--repeat 1)")
    parser.add_argument(
        "--shapecheck-only",
        action="store_true",
        help="time shapecheck (and --against's) alone: no parse-only floors, no other linters",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="CHECKOUT",
        help="also time this checkout's shapecheck, side by side, and print the ratios",
    )
    options = parser.parse_args()
    repeat = 1 if options.quick else options.repeat
    corpora = list(dict.fromkeys(options.corpus or WHEELS))

    prepare(["timm", *corpora], options.corpora)  # timm also gives the pre-commit file
    notes: list[str] = []
    shapecheck = _executable("shapecheck")
    has_libcst = importlib.util.find_spec("libcst") is not None
    corpus_tools, precommit_tools = _tools(
        shapecheck, has_libcst, notes, others=not options.shapecheck_only
    )
    if options.against is not None:
        corpus_tools = _with_baseline(corpus_tools, options.against)
        precommit_tools = _with_baseline(precommit_tools, options.against)
    for python_path in dict.fromkeys(tool.python_path for tool in corpus_tools):
        _compile_bytecode(python_path)
    print(f"{os.cpu_count()} CPUs, median of {repeat} runs; {_versions(corpus_tools)}")
    print("ratios are what to compare across machines; absolute times are noisy")
    for note in notes:
        print(f"note: {note}")

    for name in corpora:
        target = options.corpora / name / CORPORA[name]
        files, lines = _size(target)
        print(f"\n{name} {WHEELS[name]} ({CORPORA[name]}/): {files} files, {lines} lines")
        _table(_measure(corpus_tools, target, repeat, name), lines)

    precommit = [_precommit_file(options.corpora / "timm" / CORPORA["timm"])]
    if "transformers" in corpora:
        precommit.append(options.corpora / "transformers" / PRECOMMIT_TRANSFORMERS)
    for target in precommit:
        _, lines = _size(target)
        print(f"\npre-commit-sized: {target.relative_to(options.corpora)}, {lines} lines")
        _table(_measure(precommit_tools, target, repeat, "pre-commit"), lines)

    startup = [Tool("python -c pass", (sys.executable, "-c", "pass"))]
    if has_libcst:
        startup.append(Tool("python -c 'import libcst'", (sys.executable, "-c", "import libcst")))
    if shapecheck is not None:
        startup.append(Tool("shapecheck --version", (shapecheck, "--version")))
    print(f"\nstart-up, median of {STARTUP_REPEAT} runs")
    _startup_table(_measure(startup, Path(), STARTUP_REPEAT, "start-up"))


def prepare(names: Sequence[str], folder: Path) -> None:
    """Download the wheels not unpacked yet, and unpack each into ``folder/<name>/``."""
    missing = [name for name in dict.fromkeys(names) if not (folder / name).is_dir()]
    if not missing:
        return
    folder.mkdir(parents=True, exist_ok=True)
    specs = [WHEELS[name] for name in missing]
    download = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder)]
    subprocess.run([*download, *specs], check=True)
    for name in missing:
        version = WHEELS[name].partition("==")[2]
        (wheel,) = folder.glob(f"{name.replace('-', '_')}-{version}-*.whl")
        partial = folder / f"{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(partial)
        # renamed only once whole: an interrupted unpack is never taken for a corpus
        partial.rename(folder / name)


def _executable(name: str) -> str | None:
    """Beside this Python first (its virtualenv), then on PATH."""
    return shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)


def _tools(
    shapecheck: str | None, has_libcst: bool, notes: list[str], *, others: bool = True
) -> tuple[list[Tool], list[Tool]]:
    """The tools timed over a corpus, and over the pre-commit file (shapecheck alone unless
    ``others``); what is missing is noted."""
    corpus: list[Tool] = []
    precommit: list[Tool] = []
    if shapecheck is None:
        notes.append("shapecheck is not installed: skipped")
    else:
        base = (shapecheck, "--isolated")
        cold = Tool("shapecheck cold --no-cache", (*base, "--no-cache", TARGET), SHAPECHECK_SUCCESS)
        cached = (*base, "--cache-dir", CACHE, TARGET)
        corpus.append(cold)
        corpus.append(Tool("shapecheck cold --cache-dir", cached, SHAPECHECK_SUCCESS))
        corpus.append(Tool("shapecheck warm --cache-dir", cached, SHAPECHECK_SUCCESS))
        precommit.extend(corpus)
    if not others:
        return corpus, precommit

    parsers = [("ast", "parse", "SyntaxError, ValueError")]
    if has_libcst:
        parsers.insert(0, ("libcst", "parse_module", "libcst.ParserSyntaxError"))
    else:
        notes.append("libcst is not installed: libcst parse-only skipped")
    for module, function, errors in parsers:
        script = PARSE_ONLY.format(module=module, function=function, errors=errors)
        parse = Tool(f"{module} parse-only", (sys.executable, "-W", "ignore", "-c", script, TARGET))
        corpus.append(parse)
        precommit.append(parse)

    ruff = _executable("ruff")
    if ruff is None:
        notes.append("ruff is not installed: skipped")
    else:
        check = (ruff, "check", "--isolated", "--select", "ALL", "--no-cache", "--exit-zero")
        lint = Tool(RUFF, (*check, "-q", TARGET))
        corpus.append(lint)
        precommit.append(lint)
    flake8 = _executable("flake8")
    if flake8 is None:
        notes.append("flake8 is not installed: skipped")
    else:
        corpus.append(Tool("flake8", (flake8, "--isolated", TARGET), None))
    return corpus, precommit


def _with_baseline(tools: list[Tool], checkout: Path) -> list[Tool]:
    """``tools`` with, after each shapecheck run, the same run of ``checkout``'s shapecheck."""
    paired: list[Tool] = []
    for tool in tools:
        paired.append(tool)
        if tool.label.startswith("shapecheck"):
            label = f"{BASELINE}{tool.label}"
            paired.append(Tool(label, tool.argv, tool.success, str(checkout.resolve())))
    return paired


def _compile_bytecode(python_path: str | None) -> None:
    """Byte-compile the shapecheck that ``python_path`` imports, as installing it does: with
    ``PYTHONDONTWRITEBYTECODE`` set (as in some sandboxes and CI images), a checkout's modules
    would otherwise be compiled from source on every run, and the start-up timed would be
    none a user sees."""
    script = (
        "import compileall, shapecheck, shapecheck.rules\n"
        "for package in (shapecheck, shapecheck.rules):\n"
        "    for folder in package.__path__:\n"
        "        compileall.compile_dir(folder, quiet=1)\n"
    )
    env = None if python_path is None else {**os.environ, "PYTHONPATH": python_path}
    subprocess.run([sys.executable, "-c", script], env=env, check=True)


def _versions(tools: list[Tool]) -> str:
    versions = [f"Python {sys.version.split()[0]}"]
    if importlib.util.find_spec("libcst") is not None:
        versions.append(f"libcst {importlib.metadata.version('libcst')}")
    for executable in dict.fromkeys(tool.argv[0] for tool in tools):
        if executable != sys.executable:
            output = subprocess.run([executable, "--version"], capture_output=True, text=True)
            version = re.search(r"\d+(\.\d+)+", output.stdout)
            versions.append(f"{Path(executable).name} {version[0] if version else '?'}")
    return ", ".join(versions)


def _size(target: Path) -> tuple[int, int]:
    """Files and lines; reading them all also warms the page cache for the first tool timed."""
    files = [target] if target.is_file() else sorted(target.rglob("*.py"))
    return len(files), sum(path.read_bytes().count(b"\n") for path in files)


def _precommit_file(timm: Path) -> Path:
    """The model defining an attention module, of 900 to 1,300 lines, closest to 1,000."""
    shortest, ideal, longest = PRECOMMIT_LINES
    candidates = []
    for path in sorted((timm / "models").glob("*.py")):
        source = path.read_bytes()
        lines = source.count(b"\n")
        if shortest <= lines <= longest and re.search(rb"^class \w*Attention", source, re.M):
            candidates.append((abs(lines - ideal), path))
    return min(candidates)[1]


def _measure(tools: list[Tool], target: Path, repeat: int, title: str) -> dict[str, Timing]:
    timings = {tool.label: Timing() for tool in tools}
    # round robin, so a noisy machine's drift falls on every tool alike
    for round_ in range(1, repeat + 1):
        # one cache per round: the cold run fills it, the warm run after it reuses it
        with tempfile.TemporaryDirectory() as cache:
            for tool in tools:
                argv = [
                    str(target) if arg == TARGET else cache if arg == CACHE else arg
                    for arg in tool.argv
                ]
                timing = timings[tool.label]
                seconds, peak_mib, error = _run(argv, tool.success, tool.python_path)
                timing.seconds.append(seconds)
                timing.peak_mib = max(timing.peak_mib, peak_mib)
                if error is not None:
                    timing.errors.append(error)
                print(f"[{title} {round_}/{repeat}] {tool.label}: {seconds:.2f} s", file=sys.stderr)
    return timings


def _run(
    argv: list[str], success: frozenset[int] | None, python_path: str | None
) -> tuple[float, float, str | None]:
    """Wall seconds, peak MiB, and why it failed (None if it did not)."""
    read, write = os.pipe()
    launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(write), *argv]
    env = None if python_path is None else {**os.environ, "PYTHONPATH": python_path}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with subprocess.Popen(launcher, stdout=out, stderr=err, pass_fds=(write,), env=env):
            os.close(write)
            with os.fdopen(read) as report:
                seconds, maxrss, code = report.read().split()
        failed = success is not None and int(code) not in success
        error = f"exit {code}: {_reason(out, err)}" if failed else None
    return float(seconds), int(maxrss) / MAXRSS_PER_MIB, error


def _reason(out: IO[bytes], err: IO[bytes]) -> str:
    """stderr's last line (a traceback ends with the exception), else shapecheck's first
    SC000 report (a file it could not read, parse or analyse)."""
    err.seek(0)
    lines = err.read().decode(errors="replace").strip().splitlines()
    if lines:
        return lines[-1]
    out.seek(0)
    reports = (line for line in out if b" SC000 " in line)
    return next(reports, b"no output").decode(errors="replace").strip()


def _table(timings: dict[str, Timing], lines: int) -> None:
    ruff = timings[RUFF].median if RUFF in timings else None
    libcst = timings[LIBCST].median if LIBCST in timings else None
    print(
        f"{'tool':28s} {'median s':>9s} {'lines/s':>10s} {'peak MiB':>9s} "
        f"{'x ruff':>8s} {'x libcst parse':>15s}"
    )
    for label, timing in timings.items():
        seconds = timing.median
        print(
            f"{_marked(label, timing):28s} {seconds:9.2f} "
            f"{lines / seconds:10.0f} {timing.peak_mib:9.0f} "
            f"{_ratio(seconds, ruff):>8s} {_ratio(seconds, libcst):>15s}"
        )
    _failures(timings)
    against = [label for label in timings if label.startswith(BASELINE)]
    for label in against:
        mine = timings[label.removeprefix(BASELINE)].median
        print(f"  {label.removeprefix(BASELINE)}: {_ratio(mine, timings[label].median)} --against")


def _startup_table(timings: dict[str, Timing]) -> None:
    bare = timings["python -c pass"].median
    print(f"{'command':28s} {'median ms':>9s} {'peak MiB':>9s} {'x bare Python':>14s}")
    for label, timing in timings.items():
        print(
            f"{_marked(label, timing):28s} {timing.median * 1000:9.1f} {timing.peak_mib:9.0f} "
            f"{_ratio(timing.median, bare):>14s}"
        )
    _failures(timings)


def _marked(label: str, timing: Timing) -> str:
    return f"{label} !" if timing.errors else label


def _failures(timings: dict[str, Timing]) -> None:
    for label, timing in timings.items():
        if timing.errors:
            failed = f"{len(timing.errors)}/{len(timing.seconds)}"
            print(f"  ! {label} failed {failed} runs: {timing.errors[0]}")


def _ratio(seconds: float, baseline: float | None) -> str:
    return "-" if baseline is None else f"{seconds / baseline:.2f}x"


if __name__ == "__main__":
    main()
