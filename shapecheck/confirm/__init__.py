"""Runtime confirmation: what PyTorch really does with a fixture's code.

Runtime half of shapecheck (needs the ``torch`` extra); the linter never imports it.

A fixture's ``run(device)`` calls one helper per case — a function or ``nn.Module`` that holds
the bad or look-alike line (``allocates`` proves a hygiene problem: tensors built from
Python numbers at every call)::

    raises(merge_heads_view, scores, match="view size is not compatible")
    differs(UnscaledAttention(E, H), x, expected=reference(x))
    matches(ScaledAttention(E, H), x, expected=reference(x))

Each helper asserts what it claims, so a plain ``run("cpu")`` fails loudly when PyTorch
disagrees. Inside :func:`recording` it also records an :class:`Outcome` per case, with the
case's source lines, so the test suite can prove that every ``# expect:`` line sits in a case
that crashed or diverged and every ``# ok:`` line in a case that matched.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

OutcomeKind = Literal["raises", "differs", "allocates", "matches"]


@dataclass(frozen=True)
class Outcome:
    """What one case did at run time."""

    case: str
    path: str
    first_line: int
    last_line: int
    kind: OutcomeKind
    detail: str

    def covers(self, path: str, line: int) -> bool:
        """Does this case hold ``line`` of ``path`` (an absolute, resolved path)?"""
        return self.path == path and self.first_line <= line <= self.last_line

    @property
    def span(self) -> int:
        return self.last_line - self.first_line


_recorded: list[Outcome] | None = None


@contextlib.contextmanager
def recording() -> Iterator[list[Outcome]]:
    """Collect the outcomes of every helper called inside the block."""
    global _recorded
    outer, _recorded = _recorded, []
    try:
        yield _recorded
    finally:
        _recorded = outer


def load_fixture(path: Path) -> ModuleType:
    """Import a fixture file as a module of its own (so its classes have source lines)."""
    name = f"shapecheck_fixture_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load fixture {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_fixture(path: Path, device: str) -> list[Outcome]:
    """Run a fixture's ``run(device)`` and return what each of its cases did."""
    module = load_fixture(path)
    with recording() as outcomes:
        module.run(device)
    return list(outcomes)


def raises(case: Callable[..., Any], *args: Any, match: str, **kwargs: Any) -> str:
    """Call ``case``; it must raise an exception whose text contains ``match``."""
    try:
        case(*args, **kwargs)
    except Exception as error:  # the point is to catch what PyTorch raises
        message = f"{type(error).__name__}: {error}".strip()
        if match not in message:
            raise AssertionError(f"{_name(case)} raised {message!r}, not {match!r}") from error
        _record(case, "raises", message.splitlines()[0])
        return message
    raise AssertionError(f"{_name(case)} ran without raising {match!r}")


def differs(
    case: Callable[..., Any], *args: Any, expected: Any, atol: float = 1e-4, **kwargs: Any
) -> float:
    """Call ``case``; its output must have ``expected``'s shape and differ from it."""
    actual = case(*args, **kwargs)
    gap = _max_gap(case, actual, expected)
    if gap <= atol:
        raise AssertionError(f"{_name(case)} matches the reference (max gap {gap:.3g})")
    _record(case, "differs", f"max |actual - expected| = {gap:.3g}")
    return gap


def matches(
    case: Callable[..., Any], *args: Any, expected: Any, atol: float = 1e-5, **kwargs: Any
) -> float:
    """Call ``case``; its output must equal ``expected`` within ``atol``."""
    actual = case(*args, **kwargs)
    gap = _max_gap(case, actual, expected)
    if gap > atol:
        raise AssertionError(f"{_name(case)} differs from the reference (max gap {gap:.3g})")
    _record(case, "matches", f"max |actual - expected| = {gap:.3g}")
    return gap


def allocates(case: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Call ``case``; it must build new tensors from Python numbers (``torch.tensor(3.0)``)
    while it runs — the hygiene problem SC601 names, shown by counting the calls. The outcome
    covers only the lines that made those calls, so other marks in the case need their own."""
    import torch

    built: list[tuple[str, int]] = []
    original = torch.tensor

    def counting(data: Any, *rest: Any, **options: Any) -> Any:
        if isinstance(data, int | float | bool):
            caller = sys._getframe(1)
            built.append((caller.f_code.co_filename, caller.f_lineno))
        return original(data, *rest, **options)

    torch.tensor = counting
    try:
        case(*args, **kwargs)
    finally:
        torch.tensor = original
    if not built:
        raise AssertionError(f"{_name(case)} built no tensor from a Python number")
    if _recorded is not None:
        for (filename, line), count in Counter(built).items():
            path = str(Path(filename).resolve())
            detail = f"{count} torch.tensor(<number>) per call"
            _recorded.append(Outcome(_name(case), path, line, line, "allocates", detail))
    return len(built)


def _max_gap(case: Callable[..., Any], actual: Any, expected: Any) -> float:
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(
            f"{_name(case)} returned shape {tuple(actual.shape)}, "
            f"the reference {tuple(expected.shape)}"
        )
    return float((actual.double() - expected.double()).abs().max())


def _record(case: Callable[..., Any], kind: OutcomeKind, detail: str) -> None:
    if _recorded is None:
        return
    subject = case if inspect.isfunction(case) or inspect.isclass(case) else type(case)
    lines, first_line = inspect.getsourcelines(subject)
    # a decorated function (@jaxtyped, functools.wraps) is recorded where it is written
    source = inspect.getsourcefile(inspect.unwrap(subject)) if callable(subject) else None
    path = str(Path(source or "<unknown>").resolve())
    detail = re.sub(r"\s+", " ", detail)
    _recorded.append(
        Outcome(_name(case), path, first_line, first_line + len(lines) - 1, kind, detail)
    )


def _name(case: Callable[..., Any]) -> str:
    if inspect.isfunction(case) or inspect.isclass(case):
        return case.__qualname__
    return type(case).__qualname__
