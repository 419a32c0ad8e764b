"""The project keeps its own promises: light start-up, clean self-check, lint, types, packaging
(the wheel and a plain install of it: ``tests/test_install.py``)."""

from __future__ import annotations

import importlib.util
import operator
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest

from tests.conftest import ROOT, run_python

HEAVY = ("torch", "jaxtyping", "beartype")


def test_version_imports_no_torch_jaxtyping_or_beartype() -> None:
    process = run_python("-X", "importtime", "-m", "shapecheck", "--version")
    assert process.returncode == 0, process.stderr
    imported = {line.split("|")[-1].strip().split(".")[0] for line in process.stderr.splitlines()}
    assert "shapecheck" in imported
    assert not imported & set(HEAVY)
    assert "libcst" not in imported  # --version needs no parser


def test_linting_imports_nothing_heavy_and_never_runs_the_code(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    checked = tmp_path / "model.py"
    checked.write_text(
        f"import torch\nopen({str(marker)!r}, 'w').close()\n"
        "def f(x):\n    return x.transpose(1, 2).view(x.size(0), -1)\n",
        encoding="utf-8",
    )
    probe = (
        "import sys\n"
        "from shapecheck.cli import main\n"
        f"try:\n    main([{str(checked)!r}])\n"
        "except SystemExit:\n    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    process = run_python("-c", probe)
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip().splitlines()[-1] == "[]"
    assert not marker.exists()


def test_shapecheck_finds_nothing_in_its_own_source() -> None:
    process = run_python("-m", "shapecheck", "shapecheck", "rules", "tests", "benchmarks")
    assert process.returncode == 0, process.stdout + process.stderr


@pytest.mark.skipif(
    shutil.which("ruff") is None and importlib.util.find_spec("ruff") is None,
    reason="ruff not installed",
)
def test_ruff_format_and_check() -> None:
    for command in (["format", "--check"], ["check"]):
        process = run_python("-m", "ruff", *command, "shapecheck", "rules", "tests", "benchmarks")
        assert process.returncode == 0, process.stdout + process.stderr


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed")
def test_mypy_strict() -> None:
    process = run_python("-m", "mypy")
    assert process.returncode == 0, process.stdout + process.stderr


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed")
def test_mypy_rejects_a_write_to_a_record(tmp_path: Path) -> None:
    # records are plain dataclasses at run time: their immutability rests on this check
    program = tmp_path / "writes.py"
    written = (
        "from shapecheck.record import record\n\n"
        "@record\nclass Size:\n    value: int\n\n"
        "@record(order=True)\nclass Place:\n    line: int\n\n"
        "size = Size(1)\nplaces = sorted([Place(2), Place(1)])\n"
        "sizes = {size}\n"
    )
    arguments = ("-m", "mypy", "--strict", "--no-incremental", str(program))
    program.write_text(written)
    clean = run_python(*arguments)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    program.write_text(written + "size.value = 2\nplaces[0].line = 3\n")
    writes = run_python(*arguments)
    assert writes.returncode == 1
    assert writes.stdout.count("is read-only") == 2, writes.stdout


def test_records_hash_compare_and_order_by_their_fields() -> None:
    from shapecheck.record import record, replace

    @record
    class Size:
        value: int

    @record(order=True)
    class Place:
        line: int
        column: int = 0

    @record
    class Named(Size):
        name: str = field(default="", compare=False)

    @record
    class Nothing:
        pass

    @record
    class Loose:
        value: int

        def __eq__(self, other: object) -> bool:  # its own: kept
            return True

    assert Size(1) == Size(1) != Size(2)
    assert len({Size(1), Size(1), Size(2)}) == 2
    assert replace(Size(1), value=2) == Size(2)
    assert sorted([Place(2), Place(1, 5), Place(1)]) == [Place(1), Place(1, 5), Place(2)]
    assert Place(1, 5) >= Place(1, 5) > Place(1) and Place(1) <= Place(1) < Place(2)
    # a field left out of comparison is out of the hash; another class is never equal
    assert Named(1, "a") == Named(1, "b") and hash(Named(1, "a")) == hash(Named(1, "b"))
    assert Named(1) != Size(1) and Size(1) != 1 and Nothing() == Nothing()
    assert Loose(1) == Loose(2)


def test_records_behave_as_frozen_dataclasses() -> None:
    from shapecheck.record import record

    def made(declare: Callable[[type], type]) -> list[object]:
        @declare
        class Box:
            first: int
            second: tuple[int, ...] = ()
            note: str = field(default="", compare=False)

        return [Box(1), Box(1, (2,)), Box(1, note="x"), Box(2), Box(1, (2,), "y")]

    ours, theirs = made(record(order=True)), made(dataclass(frozen=True, order=True))
    for mine, a in zip(ours, theirs, strict=True):
        assert hash(mine) == hash(a) and repr(mine) == repr(a)
        for other, b in zip(ours, theirs, strict=True):
            for test in (operator.eq, operator.ne, operator.lt, operator.le):
                assert test(mine, other) == test(a, b)


def test_records_build_fields_replace_and_match_as_dataclasses_do() -> None:
    from shapecheck.record import as_dict, fields, is_record, record, replace

    @record
    class Base:
        first: int
        extra: str = field(default="", compare=False, repr=False)

    @record
    class Derived(Base):
        items: list[int] = field(default_factory=list)
        kind: ClassVar[str] = "derived"  # a class variable: no field

    @dataclass(frozen=True)
    class Theirs:
        first: int
        extra: str = field(default="", compare=False, repr=False)
        items: list[int] = field(default_factory=list)

    assert [each.name for each in fields(Derived)] == ["first", "extra", "items"]
    assert Derived.__match_args__ == Theirs.__match_args__
    one, two = Derived(1), Derived(1)
    assert one.items == [] and one.items is not two.items  # a factory per instance
    assert repr(Derived(1, "x", [2])).endswith(".Derived(first=1, items=[2])")
    assert Derived(1, "x") == Derived(1, "y") and Derived.kind == "derived"
    changed = replace(Derived(1, "x", [2]), first=3)
    assert changed == Derived(3, "x", [2]) and changed.extra == "x"
    with pytest.raises(TypeError, match="no field 'second'"):
        replace(one, second=2)
    assert as_dict(Derived(1, "x", [2])) == {"first": 1, "extra": "x", "items": [2]}
    assert as_dict([(Base(4),)]) == [({"first": 4, "extra": ""},)]
    assert is_record(one) and not is_record(Derived) and not is_record(Theirs(1))
    match Derived(5, "x"):
        case Derived(first, extra):
            assert (first, extra) == (5, "x")
        case _:
            pytest.fail("a record matches by position")
    with pytest.raises(TypeError, match="without a default follows"):

        @record
        class Unordered:
            given: int = 0
            needed: int


def test_installed_package_finds_its_rules() -> None:
    # the test environment is an editable install: the rules must be discovered through it
    from shapecheck.rule import all_rules

    spec = importlib.util.find_spec("shapecheck.rules")
    assert spec is not None and spec.submodule_search_locations is not None
    assert [Path(p).resolve() for p in spec.submodule_search_locations] == [ROOT / "rules"]
    modules = sorted(path.name[:5].upper() for path in (ROOT / "rules").glob("sc[0-9]*.py"))
    assert [rule.code for rule in all_rules()] == modules
