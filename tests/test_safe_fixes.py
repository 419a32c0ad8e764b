"""A safe fix never changes what working code computes.

Random programs of tensor ops, written to trap the analysis (in-place shape changes, aliases,
``nonlocal``, broadcasting that adds axes, fills that are read after masking, float64
inputs), are run with torch before and after ``--fix`` (safe fixes only): every program that
ran must compute the very same values, and leave its input the same. Seeded and bounded, so
the same programs run every time; the defects it was written for (DEFECTS.md D1-D4, D21,
D22) each also have a test of their own below.
"""

from __future__ import annotations

import random
import textwrap
from collections import Counter
from types import ModuleType
from typing import Any

import pytest

from shapecheck.diagnostics import Diagnostic
from shapecheck.fixer import fix_source
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules
from shapecheck.source import Source, parse_source

torch = pytest.importorskip("torch")

PROGRAMS = 240
STEPS = 6
SEED = 20261201
DTYPES = ("float32", "float64")


# --- the programs ------------------------------------------------------------------------------


def _step(rng: random.Random, shape: tuple[int, ...]) -> list[str]:
    """One random step on ``y`` (whose shape is ``shape`` when the step runs)."""
    rank = len(shape)

    def axis() -> int:
        return rng.randrange(-rank, rank)

    order = list(range(rank))
    if rng.random() < 0.5:
        rng.shuffle(order)
    merge = rng.randrange(rank - 1) if rank > 1 else 0
    merged = [*shape[:merge], shape[merge] * shape[merge + 1], *shape[merge + 2 :]]
    grown = ", ".join(["2", *["1"] * rank])
    return rng.choice(
        [
            [f"y = y.transpose({axis()}, {axis()})"],
            ["y = y.transpose(-1, 3)"],
            [f"y = y.permute({', '.join(map(str, order))})"],
            [f"y = y.view({', '.join(map(str, merged))})"],
            [f"y.view({', '.join(map(str, merged))}).mul_(2)"],  # a write through a view
            ["y = y.contiguous()"],
            ["y.unsqueeze_(0)"],
            ["y.squeeze_(0)"],
            [f"y.transpose_({axis()}, {axis()})"],
            ["z = y", "z.unsqueeze_(0)"],
            ["z = y", f"z.transpose_({axis()}, {axis()})"],
            ["torch.Tensor.unsqueeze_(y, 0)"],
            [f"torch.Tensor.transpose_(y, {axis()}, {axis()})"],
            ["box = [y]", "box[0].unsqueeze_(0)"],
            [f"y.resize_(1, {', '.join(map(str, shape))})"],
            [f"y.data = y.reshape(1, {', '.join(map(str, shape))})"],
            ["def grow():", "    nonlocal y", "    y = y.unsqueeze(0)", "grow()"],
            [f"y = y.masked_fill(m.view({grown}), 0.0)"],
            [f"y = (y > t.view({grown})).to(x.dtype)"],
            [f"y = y.div(t.view({grown}))"],
            [f"y = y + t.view({grown})"],
            *_masking(rng),
            ["y = y * torch.tensor(0.1)"],
            ["y = y / torch.sqrt(torch.tensor(80))"],
            ["y = y / torch.sqrt(torch.tensor(64))"],
            ["y = y * torch.tensor(0.1, dtype=torch.float16)"],
            ["y = y * torch.tensor(0.1, dtype=torch.float64)"],
        ]
    )


def _masking(rng: random.Random) -> list[list[str]]:
    """Scores filled with -1e9, then maybe read other than by a softmax."""
    read = rng.choice(["", "s = s * 100.0", "s = s + s.masked_fill(s > 1, -1e9)", "y = s"])
    steps = [
        "s = y @ y.transpose(-2, -1)",
        "s = s.masked_fill(s > 0, -1e9)",
        *([read] if read else []),
        "y = s.softmax(-1)",
    ]
    return [steps, ["s = y @ y.transpose(-2, -1)", "s.masked_fill_(s > 0, -1e9)", "y = s"]]


def _function(name: str, body: list[str]) -> str:
    lines = "\n".join(f"        {line}" for line in body)
    return (
        f"class {name}:\n"
        "    def forward(self, x, m, t):\n"
        "        y = x.view(2, 3, 4, 5)\n"
        f"{lines}\n"
        "        return y\n"
    )


def _shape_after(body: list[str]) -> tuple[int, ...] | None:
    """The shape ``y`` has after ``body`` in float32, or ``None`` where it raises."""
    try:
        result = _load(_function("Case", body)).Case().forward(*_inputs("float32"))
    except Exception:  # a step that does not run is not part of a program that works
        return None
    return tuple(result.shape) if isinstance(result, torch.Tensor) and result.dim() else None


def programs(seed: int = SEED, count: int = PROGRAMS) -> str:
    """``count`` classes ``Case0`` ... whose ``forward`` runs (in float32) a random program."""
    rng = random.Random(seed)
    written = ["import torch\n"]
    for number in range(count):
        body: list[str] = []
        shape: tuple[int, ...] | None = (2, 3, 4, 5)
        for _ in range(STEPS):
            for _attempt in range(10):
                assert shape is not None
                candidate = body + _step(rng, shape)
                reached = _shape_after(candidate)
                if reached is not None and len(reached) <= 7:
                    body, shape = candidate, reached
                    break
        written.append(_function(f"Case{number}", body))
    return "\n\n".join(written)


def _inputs(dtype: str) -> tuple[Any, ...]:
    kind = getattr(torch, dtype)
    x = torch.arange(1, 121, dtype=kind) / 7
    return x, torch.tensor([False, True]), torch.tensor([0.5, 3.0], dtype=kind)


def _load(text: str) -> ModuleType:
    module = ModuleType("program")
    module.__dict__["torch"] = torch  # as `import torch` would
    exec(compile(text, "<program>", "exec"), module.__dict__)  # our own generated code
    return module


# --- the comparison ----------------------------------------------------------------------------


def differences(original: str, fixed: str, count: int) -> list[str]:
    """Cases ``Case0`` ... that ran before the fix and compute otherwise after it (the result,
    or what they did to their input)."""
    before, after = _load(original), _load(fixed)
    found = []
    for number in range(count):
        name = f"Case{number}"
        for dtype in DTYPES:
            expected = _outcome(getattr(before, name), dtype)
            if expected is None:
                continue  # code that raised may change: the fix is allowed to repair it
            actual = _outcome(getattr(after, name), dtype)
            if actual is None or not all(map(_identical, expected, actual)):
                found.append(f"{name} ({dtype})")
    return found


def _outcome(case: type, dtype: str) -> tuple[Any, Any] | None:
    inputs = _inputs(dtype)
    try:
        result = case().forward(*inputs)
    except Exception:
        return None
    return result, inputs[0]


def _identical(a: Any, b: Any) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.shape == b.shape
        and a.dtype == b.dtype
        and bool(torch.equal(a.isnan(), b.isnan()))
        and bool(torch.equal(a.nan_to_num(), b.nan_to_num()))
    )


def _safe_fix(text: str, *, unsafe: bool = False) -> tuple[str, list[Diagnostic]]:
    """The text after ``--fix`` (safe fixes only, unless ``unsafe``), and the findings with a
    safe fix."""
    data = text.encode()
    source = parse_source(data, "program.py")
    assert isinstance(source, Source)
    outcome = fix_source(source, _rules(), lambda _: True, unsafe, original=data)
    found = lint_source(data, "program.py", _rules()).diagnostics
    return outcome.data.decode(), [d for d in found if d.fix is not None and d.fix.safe]


def _rules() -> list[Any]:
    return [rule() for rule in all_rules()]


def test_safe_fixes_keep_what_random_programs_compute() -> None:
    text = programs()
    fixed, safe = _safe_fix(text)
    assert differences(text, fixed, PROGRAMS) == []
    # the programs reach every rule with a safe fix, many times: the test cannot pass idle;
    # SC101's fix is safe only where the view raises, so working programs reach it only as a
    # trap (a write through a view after an aliased transpose_), where it must not be safe
    reached = Counter(diagnostic.code for diagnostic in safe)
    assert {code: reached[code] >= 5 for code in ("SC202", "SC401", "SC601")} == {
        "SC202": True,
        "SC401": True,
        "SC601": True,
    }, reached
    assert "SC101" in {d.code for d in lint_source(text.encode(), "p.py", _rules()).diagnostics}


def test_the_comparison_finds_a_fix_that_changes_results() -> None:
    """The claim can fail: deleting a transpose that does something is caught, and so is a
    copy that stops a write through a view from reaching the input."""
    case = _function("Case0", ["y.unsqueeze_(0)", "y = y.transpose(-1, 3)"])
    assert differences(case, case.replace(".transpose(-1, 3)", ""), 1) == [
        "Case0 (float32)",
        "Case0 (float64)",
    ]
    write = _function("Case0", ["y = y.transpose(0, 1)", "y.view(3, 2, 20).mul_(2)"])
    copied = write.replace("y.view", "y.contiguous().view")
    assert len(differences(write, copied, 1)) == 2
    assert differences(write, write, 1) == []


# --- one test per defect -------------------------------------------------------------------------


def _fixed_codes(code: str) -> list[tuple[str, bool]]:
    """``(rule, safe)`` of each finding with a fix in ``code`` (which must parse)."""
    found = lint_source(textwrap.dedent(code).encode(), "case.py", _rules()).diagnostics
    assert "SC000" not in {d.code for d in found}
    return [(d.code, d.fix.safe) for d in found if d.fix is not None]


RESHAPED = """
import torch
def f(x, w, keep):
    y = x.view(2, 3, 4, 5)
    {change}
    return y.transpose(-1, 3)
"""


@pytest.mark.parametrize(
    "change",
    [
        "y.resize_(1, 2, 3, 4, 5)",
        "z = y\n    z.unsqueeze_(0)",
        "torch.Tensor.unsqueeze_(y, 0)",
        "box = [y]\n    box[0].unsqueeze_(0)",
        "y.data = w.view(1, 2, 3, 4, 5)",
        "def grow():\n        nonlocal y\n        y = w.view(1, 2, 3, 4, 5)\n    grow()",
        "y = y.masked_fill(keep.view(2, 1, 1, 1, 1), 0.0)",
        "y = torch.masked_fill(y, keep.view(2, 1, 1, 1, 1), 0.0)",
        "y = (y > w.view(2, 1, 1, 1, 1)).float()",
        "y = (y == w.view(2, 1, 1, 1, 1)).float()",
        "y = y.div(w.view(2, 1, 1, 1, 1))",
    ],
)
def test_d1_a_rank_changed_behind_the_analysis_proves_no_transpose_useless(change: str) -> None:
    code = RESHAPED.format(change=change)
    assert _fixed_codes(code) == []
    assert _fixed_codes(code.replace(change, "pass")) == [("SC202", True)]  # the rank-4 twin


CLEARED = """
import torch
def clear(x, A, B, C, D):
    y = x.view(A, B, C, D).transpose(0, 1).transpose(2, 3)
    {change}
    y.view(B, A, C * D).zero_()
    return x
"""


@pytest.mark.parametrize(
    "change",
    [
        "z = y\n    z.transpose_(2, 3)",
        "torch.Tensor.transpose_(y, 2, 3)",
        "def swap():\n        nonlocal y\n        y = y.transpose(2, 3)\n    swap()",
    ],
)
def test_d2_contiguous_is_no_safe_fix_where_the_layout_may_have_changed(change: str) -> None:
    code = CLEARED.format(change=change)
    assert ("SC101", True) not in _fixed_codes(code)
    assert _fixed_codes(code.replace(change, "pass")) == [("SC101", True)]


def test_d2_contiguous_is_inserted_as_a_name_and_nothing_else_is_rewritten() -> None:
    code = textwrap.dedent(
        """\
        import torch
        def f(x, B, L, H, D):
            y = (x.view(B, H, L, D)  # heads
                    .transpose(1, 2))
            return (y
                    # merge
                    .view(B, L, H * D))
        """
    )
    fixed, _ = _safe_fix(code)
    assert fixed == code.replace(".view(B, L", ".contiguous().view(B, L")


SCORES = """
import torch
def attend(q, k, v, mask, t):
    scores = q @ k.transpose(-2, -1) / 8
    {body}
"""


FILLED = "scores = scores.masked_fill(mask, -1e9)\n    "


@pytest.mark.parametrize(
    ("body", "safe"),
    [
        (FILLED + "return scores.softmax(-1) @ v", True),
        ("return torch.softmax(scores.masked_fill(mask, -1e9), dim=-1) @ v", True),
        (FILLED + "scores = scores.softmax(-1)\n    return scores @ v", True),
        ("scores.masked_fill_(mask, -1e9)\n    return scores.softmax(-1) @ v", True),
        ("scores = scores.masked_fill(mask, -1e9) * t.exp()\n    return scores.softmax(-1)", False),
        (FILLED + "return scores.softmax(-1) @ v, scores", False),
        (FILLED + "return scores.log_softmax(-1)", False),
        (
            "for m in mask:\n        scores = scores.masked_fill(m, -1e9)\n"
            "    return scores.softmax(-1)",
            False,
        ),
        (FILLED + "if t:\n        scores = scores.softmax(-1)\n    return scores @ v", False),
    ],
)
def test_d3_the_dtype_minimum_is_safe_only_where_a_softmax_alone_reads_the_fill(
    body: str, safe: bool
) -> None:
    assert _fixed_codes(SCORES.format(body=body)) == [("SC401", safe)]


def test_d3_the_unsafe_cases_do_change_results() -> None:
    """What makes them unsafe, run: an int tensor makes ``finfo`` raise, and a temperature
    after the fill turns a fully masked row to NaN."""
    rel = torch.arange(4)[:, None] - torch.arange(4)[None, :]
    with pytest.raises(TypeError, match="floating point"):
        rel.masked_fill(torch.eye(4, dtype=torch.bool), torch.finfo(rel.dtype).min)
    scores, mask = torch.zeros(1, 3), torch.ones(1, 3, dtype=torch.bool)
    assert scores.masked_fill(mask, -1e9).mul(100).softmax(-1).isfinite().all()
    minimum = torch.finfo(scores.dtype).min
    assert scores.masked_fill(mask, minimum).mul(100).softmax(-1).isnan().all()


@pytest.mark.parametrize(
    ("constant", "fixed"),
    [
        ("torch.sqrt(torch.tensor(64))", ("SC601", True)),
        ("torch.tensor(0.125)", ("SC601", True)),
        ("torch.tensor(-1e4)", ("SC601", True)),
        ("torch.sqrt(torch.tensor(80, dtype=torch.float64))", ("SC601", True)),
        ("torch.sqrt(torch.tensor(80))", ("SC601", False)),
        ("torch.tensor(0.1)", ("SC601", False)),
        ("torch.sqrt(torch.tensor(self.d, dtype=torch.float32))", ("SC601", False)),
        ("torch.sqrt(torch.tensor(self.d, dtype=torch.float16))", None),
    ],
)
def test_d4_a_constant_becomes_a_number_safely_only_where_no_rounding_differs(
    constant: str, fixed: tuple[str, bool] | None
) -> None:
    code = f"""
    import torch
    class A(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.d = d
            self.q = torch.nn.Linear(d, d)

        def forward(self, x):
            return self.q(x) / {constant}
    """
    assert _fixed_codes(code) == ([fixed] if fixed else [])


def test_d4_float64_activations_see_the_float32_rounding() -> None:
    x = torch.randn(100, dtype=torch.float64)
    assert not torch.equal(x / torch.sqrt(torch.tensor(80)), x / 80**0.5)
    assert torch.equal(x / torch.sqrt(torch.tensor(64)), x / 64**0.5)
    assert torch.equal(x / torch.sqrt(torch.tensor(80, dtype=torch.float64)), x / 80**0.5)


def test_d21_a_walrus_stays_parenthesised() -> None:
    code = textwrap.dedent(
        """\
        import torch
        class A(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.p = torch.nn.Linear(4, 4)

            def forward(self, x, mask):
                h = self.p(x)
                return h.masked_fill(mask, value=torch.tensor(v := -1e4))
        """
    )
    fixed, _ = _safe_fix(code, unsafe=True)  # a walrus is no literal: not provably exact
    assert "value=(v := -1e4))" in fixed


def test_d21_import_math_after_a_last_line_without_a_line_break() -> None:
    # the imports come last (none at the top), so `import math` joins them there
    code = textwrap.dedent(
        """\
        class A(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.q = torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.q(x) / torch.sqrt(torch.tensor(64))
        import torch"""
    )
    fixed, _ = _safe_fix(code)
    assert fixed == code.replace("torch.sqrt(torch.tensor(64))", "math.sqrt(64)") + "\nimport math"


def test_d22_a_fix_that_would_delete_a_comment_is_unsafe() -> None:
    removed = textwrap.dedent(
        """\
        import torch
        def f(x):
            y = x.view(2, 3, 4)
            z = (y  # keep
                 .permute(0, 1, 2)  # no-op
                 .sum())
            return z
        """
    )
    assert _fixed_codes(removed) == [("SC202", False)]
    assert _fixed_codes(removed.replace("  # keep", "")) == [("SC202", True)]
