"""What a plain install gives a user: the wheel pip builds, installed (not editable) in a fresh
venv, and every entry point of it run from outside the checkout and from its root.

The wheel is built once, as ``pip install .`` builds it. The venv holds nothing but that wheel:
torch is truly absent there for the runtime half's "what to install" messages. The linter's
own dependencies (and torch, for one confirmation run) come from this test environment's
site-packages on PYTHONPATH, which adds their folder but none of its ``.pth`` hooks, so the
editable install of the checkout stays out of it. (``.ci/run`` repeats the no-torch checks
after a real ``pip install .`` with its dependencies.)
"""

from __future__ import annotations

import ast
import email.parser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from shapecheck.confirm.fixtures import fixture_files
from shapecheck.extras import DISTRIBUTION, TORCH_EXTRA_MODULES, torch_extra_message
from tests.conftest import ROOT, run_python

EXAMPLE = "examples/attention_mistakes.py"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build", reason="the wheel test needs `build` (dev extra)")
    outdir = tmp_path_factory.mktemp("wheel")
    process = run_python("-m", "build", "--wheel", "--outdir", str(outdir), str(ROOT))
    assert process.returncode == 0, process.stdout + process.stderr
    [built] = outdir.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed, nothing else: its ``bin`` folder."""
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    install = run_python(
        "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
        str(wheel),
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    return folder / "bin"


@pytest.fixture(scope="module")
def installed(venv: Path) -> Path:
    """The ``shapecheck`` package folder the venv imports, outside the checkout."""
    probe = "import shapecheck; print(shapecheck.__file__)"
    found = _run([str(venv / "python"), "-c", probe], venv, with_dependencies=False)
    package = Path(found.stdout.strip()).parent
    assert package.is_relative_to(venv.parent), found.stdout + found.stderr
    return package


def _run(
    command: list[str], cwd: Path, *, with_dependencies: bool
) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if with_dependencies:
        environment["PYTHONPATH"] = os.pathsep.join(sorted(_dependency_folders()))
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, check=False
    )


def _dependency_folders() -> set[str]:
    """Where this environment keeps the linter's dependencies and torch."""
    specs = (importlib.util.find_spec(name) for name in ("click", "libcst", "torch"))
    folders = {Path(spec.origin).parents[1] for spec in specs if spec and spec.origin}
    # a shapecheck installed there would come first on PYTHONPATH, ahead of the venv's
    assert not any((folder / "shapecheck").exists() for folder in folders), folders
    return {str(folder) for folder in folders}


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def test_the_wheel_is_our_distribution_and_installs_the_shapecheck_command(wheel: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    metadata = _metadata(wheel)
    assert metadata["Name"] == DISTRIBUTION
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(name).decode()
    assert entry_points.split() == ["[console_scripts]", "shapecheck", "=", "shapecheck.cli:main"]
    # what a "what to install" message promises is what the extra installs
    extra = metadata.get_all("Requires-Dist") or []
    torch_extra = [r for r in extra if r.replace(" ", "").endswith('extra=="torch"')]
    assert sorted(re.split(r"[<>=;\s]", r, maxsplit=1)[0] for r in torch_extra) == sorted(
        TORCH_EXTRA_MODULES
    )


def test_the_wheel_requires_every_package_the_linter_imports(wheel: Path) -> None:
    """``pip install torch-shapecheck`` must bring what ``--fix`` loads (libcst) as well as
    what every check loads; the runtime half (torch extra) and the editor server (lsp extra)
    say what to install instead."""
    extras = ("reference", "confirm", "lsp.py")
    imported: set[str] = set()
    for path in (ROOT / "shapecheck").rglob("*.py"):
        if path.relative_to(ROOT / "shapecheck").parts[0] in extras:
            continue
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"shapecheck"}
    assert {"click", "libcst"} <= third_party, third_party  # the scan sees the imports
    required = _metadata(wheel).get_all("Requires-Dist") or []
    core = {re.split(r"[<>=!~;\s\[]", r, maxsplit=1)[0] for r in required if "extra" not in r}
    assert third_party <= core, sorted(third_party - core)


def test_the_wheel_ships_rules_and_fixtures_inside_the_package_only(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"shapecheck"}
    assert "shapecheck/rules/sc101_view_without_contiguous.py" in names
    for folder, pattern in (
        ("fixtures", "SC*.py"),
        ("fixtures/fixed", "SC*.py"),
        ("fixtures/project", "*.py"),  # a fixture package: its modules import each other
        ("fixtures/project/fixed", "*.py"),
    ):
        shipped = f"shapecheck/{folder}"
        expected = sorted(path.name for path in (ROOT / folder).glob(pattern))
        found = sorted(n.rsplit("/", 1)[1] for n in names if n.rsplit("/", 1)[0] == shipped)
        assert found == expected


def _install_hints(text: str) -> list[str]:
    """The distribution each ``pip install NAME[extra]`` or ``pip install shapecheck`` names."""
    quoted = r"""['"]?"""
    with_extra = re.findall(rf"pip\s+install\s+{quoted}([\w.\-]+)\[", text)
    bare = re.findall(rf"pip\s+install\s+{quoted}(shapecheck)(?![\w.\-\[])", text)
    return with_extra + bare


def test_every_install_hint_names_our_distribution() -> None:
    assert _install_hints("see `pip install\n'shapecheck[lsp]'` and pip install shapecheck") == [
        "shapecheck",
        "shapecheck",
    ]
    texts = [ROOT / "README.md", *sorted((ROOT / "shapecheck").rglob("*.py"))]
    hints = {
        (path.name, name)
        for path in texts
        for name in _install_hints(path.read_text(encoding="utf-8"))
    }
    assert hints, "no hints found: the scan is broken"
    assert {name for _, name in hints} <= {DISTRIBUTION, "."}, sorted(hints)


def test_without_torch_the_runtime_half_says_what_to_install(venv: Path, tmp_path: Path) -> None:
    python = str(venv / "python")
    probe = _run([python, "-c", "import torch"], tmp_path, with_dependencies=False)
    assert "No module named 'torch'" in probe.stderr  # the premise: torch is truly absent

    confirm = _run([python, "-m", "shapecheck.confirm"], tmp_path, with_dependencies=False)
    assert (confirm.returncode, confirm.stdout) == (2, "")
    assert confirm.stderr == torch_extra_message("python -m shapecheck.confirm", "torch") + "\n"
    assert f"pip install '{DISTRIBUTION}[torch]'" in confirm.stderr

    importing = (
        "try:\n    import shapecheck.reference\n"
        "except ImportError as error:\n    print(type(error).__name__, error.name, error)\n"
    )
    reference = _run([python, "-c", importing], tmp_path, with_dependencies=False)
    assert reference.stdout == (
        "ModuleNotFoundError torch " + torch_extra_message("shapecheck.reference", "torch") + "\n"
    ), reference.stderr


def test_the_installed_confirmation_finds_the_fixtures_it_ships(
    venv: Path, installed: Path, tmp_path: Path
) -> None:
    python = str(venv / "python")
    probe = (
        "from shapecheck.confirm.fixtures import FIXTURES_DIR, fixture_files\n"
        "print(FIXTURES_DIR)\nprint(*(path.as_posix() for path in fixture_files()))\n"
    )
    found = _run([python, "-c", probe], tmp_path, with_dependencies=False)
    folder, names = found.stdout.splitlines()
    assert Path(folder) == installed / "fixtures"
    shipped = [Path(name).relative_to(installed / "fixtures").as_posix() for name in names.split()]
    checkout = ROOT / "fixtures"
    assert shipped == [path.relative_to(checkout).as_posix() for path in fixture_files(checkout)]

    nowhere = _run(
        [python, "-m", "shapecheck.confirm", "--fixtures", "nowhere"],
        tmp_path,
        with_dependencies=False,
    )
    assert (nowhere.returncode, nowhere.stdout) == (2, "")
    assert nowhere.stderr.splitlines() == [
        "no fixtures (SCNNN_*.py) in nowhere: point --fixtures at the fixtures/ folder of a "
        "shapecheck checkout"
    ]


def test_the_installed_confirmation_runs_a_fixture_outside_the_checkout(
    venv: Path, installed: Path, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    # one small shipped fixture, with its fixed version: the whole set takes ~10 s
    name = "SC101_merge_heads.py"
    (tmp_path / "fixed").mkdir()
    shutil.copy(installed / "fixtures" / name, tmp_path / name)
    shutil.copy(installed / "fixtures" / "fixed" / name, tmp_path / "fixed" / name)
    command = [str(venv / "python"), "-m", "shapecheck.confirm", "--device", "cpu"]
    ran = _run([*command, "--fixtures", str(tmp_path)], tmp_path, with_dependencies=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "SC101 view-without-contiguous — cpu" in ran.stdout
    assert ran.stdout.rstrip().endswith("every fixed case proven")


def test_python_m_shapecheck_works_from_outside_and_from_the_checkout_root(
    venv: Path, tmp_path: Path
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    expected = readme.split(f"$ shapecheck {EXAMPLE}\n", 1)[1].split("```", 1)[0]
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / EXAMPLE, tmp_path / EXAMPLE)
    # --no-cache: a warm cache would answer without importing a single rule
    runs = {
        "the command, outside": ([str(venv / "shapecheck")], tmp_path),
        "python -m, outside": ([str(venv / "python"), "-m", "shapecheck"], tmp_path),
        # the checkout's own shapecheck/ comes first on sys.path, its rules/ mapped by no install
        "python -m, checkout root": ([str(venv / "python"), "-m", "shapecheck"], ROOT),
    }
    for label, (command, cwd) in runs.items():
        ran = _run([*command, "--no-cache", EXAMPLE], cwd, with_dependencies=True)
        assert (ran.returncode, ran.stdout, ran.stderr) == (1, expected, ""), label
