"""Runtime confirmation: what PyTorch really does with a fixture's code.

Runtime half of shapecheck (needs the ``torch`` extra); the linter never imports it.

A fixture's ``run(device)`` calls one helper per case — a function or ``nn.Module`` that holds
the bad or look-alike line (``allocates`` proves a hygiene problem: tensors built from
Python numbers at every call; ``discards_weights`` proves attention weights computed only to
be thrown away)::

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
import copy
import importlib.util
import inspect
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from shapecheck.record import record

OutcomeKind = Literal["raises", "differs", "allocates", "matches", "runs", "same"]
"""``runs`` and ``same`` judge a *fixed* fixture's case: it no longer raises; it computes
exactly what the unfixed case did, without the problem (see :func:`judging_fixed`)."""


@record
class Outcome:
    """What one case did at run time."""

    case: str
    path: str
    first_line: int
    last_line: int
    kind: OutcomeKind
    detail: str
    gap: float | None = None
    """For ``differs`` and ``matches``: the largest |actual - expected|, always finite; ``None``
    where the evidence is not a distance (an error, allocations, non-finite outputs)."""

    def covers(self, path: str, line: int) -> bool:
        """Does this case hold ``line`` of ``path`` (an absolute, resolved path)?"""
        return self.path == path and self.first_line <= line <= self.last_line

    @property
    def span(self) -> int:
        return self.last_line - self.first_line


_recorded: list[Outcome] | None = None


@record
class Repair:
    """A case of a fixed fixture whose every finding was fixed."""

    keeps_results: bool
    """Every fix in it keeps results (SC202, SC601): it must compute exactly what the unfixed
    case computed (raise what it raised). Otherwise a fix mends it: it must now run, and
    match the reference where the fixture gives one."""
    original: ModuleType
    """The unfixed fixture, to run the same case as it was."""


_repairs: dict[str, Repair] = {}


@contextlib.contextmanager
def judging_fixed(repairs: dict[str, Repair]) -> Iterator[None]:
    """Inside the block, the helpers judge the named cases as fixed. A mended case: ``raises``
    must not raise, ``differs`` must match the reference. A case whose fixes keep results
    must raise or return what the unfixed case did; ``allocates`` must build nothing."""
    global _repairs
    outer, _repairs = _repairs, repairs
    try:
        yield
    finally:
        _repairs = outer


@contextlib.contextmanager
def recording() -> Iterator[list[Outcome]]:
    """Collect the outcomes of every helper called inside the block."""
    global _recorded
    outer, _recorded = _recorded, []
    try:
        yield _recorded
    finally:
        _recorded = outer


def load_fixture(path: Path, prefix: str = "shapecheck_fixture") -> ModuleType:
    """Import a fixture file as a module of its own (so its classes have source lines); a
    module of a fixture package (a folder with an ``__init__.py``) as a member of the package,
    so that its relative imports find the package's other modules."""
    package = _package_folders(path)
    if package is not None:
        return _load_member(path, package, prefix)
    name = f"{prefix}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load fixture {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _package_folders(path: Path) -> list[Path] | None:
    """Where the package of a fixture package's module looks for its modules: the package's
    folder; for a fixed module (``fixed/`` inside the package), ``fixed/`` first, so that a
    module with no fixes to apply is imported as it is. ``None``: no package's module."""
    folder = path.parent
    if folder.name == "fixed" and (folder.parent / "__init__.py").is_file():
        return [folder, folder.parent]
    return [folder] if (folder / "__init__.py").is_file() else None


def _load_member(path: Path, folders: list[Path], prefix: str) -> ModuleType:
    """Import module ``path`` of the fixture package searched in ``folders``, the package
    itself imported first under a name of its own."""
    package = f"{prefix}_{folders[-1].name}"
    for name in [key for key in sys.modules if key == package or key.startswith(package + ".")]:
        del sys.modules[name]  # each load runs the package's modules afresh
    spec = importlib.util.spec_from_file_location(
        package, folders[-1] / "__init__.py", submodule_search_locations=[str(f) for f in folders]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load fixture package {folders[-1]}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    spec.loader.exec_module(module)
    return importlib.import_module(f"{package}.{path.stem}")


@record
class FixtureRun:
    outcomes: list[Outcome]
    failure: str | None
    """A helper's claim that PyTorch contradicted; the cases after it did not run."""


def run_fixture(path: Path, device: str, module: ModuleType | None = None) -> FixtureRun:
    """Run a fixture's ``run(device)`` and return what each of its cases did."""
    module = module or load_fixture(path)
    with recording() as outcomes:
        try:
            module.run(device)
        except AssertionError as error:  # what the helpers raise when a claim fails
            return FixtureRun(list(outcomes), str(error))
    return FixtureRun(list(outcomes), None)


def raises(case: Callable[..., Any], *args: Any, match: str, **kwargs: Any) -> str:
    """Call ``case``; it must raise an exception whose text contains ``match``."""
    repair = _repairs.get(_name(case))
    if repair is not None and not repair.keeps_results:
        case(*args, **kwargs)
        _record(case, "runs", "no longer raises")
        return ""
    try:
        case(*args, **kwargs)
    except Exception as error:  # the point is to catch what PyTorch raises
        message = f"{type(error).__name__}: {error}".strip()
        if match not in message:
            raise AssertionError(f"{_name(case)} raised {message!r}, not {match!r}") from error
        if repair is not None:
            _record(case, "same", f"raises as the unfixed case did: {message.splitlines()[0]}")
        else:
            _record(case, "raises", message.splitlines()[0])
        return message
    raise AssertionError(f"{_name(case)} ran without raising {match!r}")


def differs(
    case: Callable[..., Any],
    *args: Any,
    expected: Any,
    atol: float = 1e-4,
    non_finite: bool = False,
    **kwargs: Any,
) -> float:
    """Call ``case``; its output must have ``expected``'s shape and differ from it by more than
    ``atol``. Both must be finite: a NaN is no distance. Where the rule's evidence *is*
    non-finite output (a fill that overflows to -inf, a fully masked row that becomes NaN),
    say so with ``non_finite=True``: the output must then hold NaN or inf where the finite
    reference does not, and the outcome says how many (the returned gap is ``inf``)."""
    actual = case(*args, **kwargs)
    repair = _repairs.get(_name(case))
    if repair is not None:
        if not repair.keeps_results:
            return matches(case, *args, expected=expected, **kwargs)
        _same_as_unfixed(case, repair, actual, args, kwargs)
        return 0.0
    _require_finite(case, "the reference", expected)
    if non_finite:
        _check_shapes(case, actual, expected)
        broken = int((~actual.isfinite()).sum())
        if not broken:
            raise AssertionError(f"{_name(case)} returned no NaN or inf")
        detail = f"{broken} of {actual.numel()} outputs are NaN or inf; the reference is finite"
        _record(case, "differs", detail)
        return math.inf
    _require_finite(case, "the output", actual)
    gap = _max_gap(case, actual, expected)
    if not gap > atol:
        raise AssertionError(f"{_name(case)} matches the reference (max gap {gap:.3g})")
    _record(case, "differs", f"max |actual - expected| = {gap:.3g}", gap)
    return gap


def matches(
    case: Callable[..., Any], *args: Any, expected: Any, atol: float = 1e-5, **kwargs: Any
) -> float:
    """Call ``case``; its output must equal ``expected`` within ``atol``, both finite. A case
    repaired by fixes that keep results (a stale suppression removed) must also compute
    exactly what the unfixed case did."""
    actual = case(*args, **kwargs)
    _require_finite(case, "the reference", expected)
    _require_finite(case, "the output", actual)
    gap = _max_gap(case, actual, expected)
    if not gap <= atol:
        raise AssertionError(f"{_name(case)} differs from the reference (max gap {gap:.3g})")
    repair = _repairs.get(_name(case))
    if repair is not None and repair.keeps_results:
        _same_as_unfixed(case, repair, actual, args, kwargs)
        return gap
    _record(case, "matches", f"max |actual - expected| = {gap:.3g}", gap)
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
        actual = case(*args, **kwargs)
    finally:
        torch.tensor = original
    repair = _repairs.get(_name(case))
    if repair is not None:
        if built:
            raise AssertionError(f"fixed {_name(case)} still builds {len(built)} tensor(s)")
        _same_as_unfixed(case, repair, actual, args, kwargs)
        return 0
    if not built:
        raise AssertionError(f"{_name(case)} built no tensor from a Python number")
    if _recorded is not None:
        for (filename, line), count in Counter(built).items():
            path = str(Path(filename).resolve())
            detail = f"{count} torch.tensor(<number>) per call"
            _recorded.append(Outcome(_name(case), path, line, line, "allocates", detail))
    return len(built)


def discards_weights(
    case: Callable[..., Any], *args: Any, expected: Any, atol: float = 1e-5, **kwargs: Any
) -> int:
    """Call ``case``; an ``nn.MultiheadAttention`` inside it must compute and return attention
    weights that the case throws away — the waste SC603 names. Shown in two runs: the first
    records each call that returned weights; the second forces ``need_weights=False`` on every
    call, so no weights exist, and the output must still equal ``expected`` (as the first
    run's must). A case that reads the weights fails the second run. The outcome covers only
    the lines that made those calls. A repaired case must return no weights and match."""
    import torch

    calls: list[tuple[str, int, tuple[int, ...]]] = []
    original = torch.nn.MultiheadAttention.forward
    inside = str(Path(torch.__file__).parent)

    def recording_weights(module: Any, *inputs: Any, **options: Any) -> Any:
        out, weights = original(module, *inputs, **options)
        if weights is not None:
            caller = sys._getframe(1)
            while caller.f_back is not None and caller.f_code.co_filename.startswith(inside):
                caller = caller.f_back  # nn.Module.__call__ and its hooks
            calls.append((caller.f_code.co_filename, caller.f_lineno, tuple(weights.shape)))
        return out, weights

    def without_weights(module: Any, *inputs: Any, **options: Any) -> Any:
        if len(inputs) > 4:  # query, key, value, key_padding_mask, need_weights, ...
            inputs = (*inputs[:4], False, *inputs[5:])
        else:
            options["need_weights"] = False
        return original(module, *inputs, **options)

    with _forward_replaced(torch.nn.MultiheadAttention, recording_weights):
        actual = case(*args, **kwargs)
    _require_finite(case, "the output", actual)
    gap = _max_gap(case, actual, expected)
    if not gap <= atol:
        raise AssertionError(f"{_name(case)} differs from the reference (max gap {gap:.3g})")
    if _repairs.get(_name(case)) is not None:
        if calls:
            raise AssertionError(f"fixed {_name(case)} still computes attention weights")
        _record(case, "matches", f"max |actual - expected| = {gap:.3g}", gap)
        return 0
    if not calls:
        raise AssertionError(f"{_name(case)} computed no attention weights")
    try:
        with _forward_replaced(torch.nn.MultiheadAttention, without_weights):
            unweighted = case(*args, **kwargs)
    except (TypeError, AttributeError) as error:  # ``None`` where the weights were: read
        raise AssertionError(f"{_name(case)} uses its attention weights: {error}") from error
    without = _max_gap(case, unweighted, expected)
    if not without <= atol:
        raise AssertionError(
            f"{_name(case)} computes something else without its weights (gap {without:.3g})"
        )
    if _recorded is not None:
        for filename, line, shape in dict.fromkeys(calls):
            path = str(Path(filename).resolve())
            detail = f"allocates {list(shape)} attention weights per call, never read"
            _recorded.append(Outcome(_name(case), path, line, line, "allocates", detail))
    return len(calls)


@contextlib.contextmanager
def _forward_replaced(module_class: type[Any], forward: Callable[..., Any]) -> Iterator[None]:
    """Every instance of ``module_class`` runs ``forward`` inside the block."""
    original = module_class.__dict__["forward"]
    module_class.forward = forward
    try:
        yield
    finally:
        module_class.forward = original


def _same_as_unfixed(
    case: Callable[..., Any], repair: Repair, actual: Any, args: Any, kwargs: Any
) -> None:
    """A fix that keeps results: the unfixed case, on the same inputs and weights, computes
    the very same values (NaN where it had NaN)."""
    if inspect.isfunction(case):
        unfixed: Callable[..., Any] = getattr(repair.original, case.__name__)
    else:
        unfixed = copy.copy(case)
        unfixed.__class__ = getattr(repair.original, type(case).__name__)
    before = unfixed(*args, **kwargs)
    _check_shapes(case, actual, before)
    if not bool((actual == before).logical_or(actual.isnan() & before.isnan()).all()):
        gap = _max_gap(case, actual, before)
        raise AssertionError(f"fixed {_name(case)} differs from the unfixed case by {gap:.3g}")
    _record(case, "same", "computes exactly what the unfixed case computed")


def _require_finite(case: Callable[..., Any], what: str, values: Any) -> None:
    broken = int((~values.isfinite()).sum())
    if broken:
        raise AssertionError(
            f"{_name(case)}: {what} has {broken} NaN or inf value(s); a NaN is no evidence of "
            "a match or a difference (pass non_finite=True to differs if it is the evidence)"
        )


def _check_shapes(case: Callable[..., Any], actual: Any, expected: Any) -> None:
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(
            f"{_name(case)} returned shape {tuple(actual.shape)}, "
            f"the reference {tuple(expected.shape)}"
        )


def _max_gap(case: Callable[..., Any], actual: Any, expected: Any) -> float:
    _check_shapes(case, actual, expected)
    return float((actual.double() - expected.double()).abs().max())


def _record(
    case: Callable[..., Any], kind: OutcomeKind, detail: str, gap: float | None = None
) -> None:
    if _recorded is None:
        return
    subject = case if inspect.isfunction(case) or inspect.isclass(case) else type(case)
    lines, first_line = inspect.getsourcelines(subject)
    # a decorated function (@jaxtyped, functools.wraps) is recorded where it is written
    source = inspect.getsourcefile(inspect.unwrap(subject)) if callable(subject) else None
    path = str(Path(source or "<unknown>").resolve())
    detail = re.sub(r"\s+", " ", detail)
    _recorded.append(
        Outcome(_name(case), path, first_line, first_line + len(lines) - 1, kind, detail, gap)
    )


def _name(case: Callable[..., Any]) -> str:
    if inspect.isfunction(case) or inspect.isclass(case):
        return case.__qualname__
    return type(case).__qualname__
