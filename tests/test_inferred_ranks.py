"""Ranks read from how a function uses its parameters (``shapecheck.analysis.usage``): what
each use shows, from the start where it comes after the first reads, the guesses and how
findings state them, and the look-alikes that show nothing."""

from __future__ import annotations

import ast
import textwrap
from collections import Counter
from collections.abc import Mapping

import pytest

from shapecheck.analysis import analyse
from shapecheck.analysis.facts import Fact, FunctionNode, IntFact, TensorFact
from shapecheck.analysis.interpreter import Interpreter
from shapecheck.analysis.usage import LIKELY_FROM, RankByUse
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport einops\n\n"


def _function_facts(source: str, function: str) -> list[tuple[ast.AST, str, Fact]]:
    text = HEADER + textwrap.dedent(source)
    functions = analyse(ast.parse(text), text).functions
    [found] = [f for f in functions if f.name.rpartition(".")[2] == function]
    return found.bindings


def entry(source: str, name: str, function: str = "f") -> TensorFact:
    """The fact parameter ``name`` of ``function`` starts from (in the interpretation kept:
    the second, where its uses showed its rank only after it was read)."""
    [fact] = [
        fact
        for node, bound, fact in _function_facts(source, function)
        if bound == name and isinstance(node, ast.arg)
    ]
    assert isinstance(fact, TensorFact)
    return fact


def bound(source: str, name: str, function: str = "f") -> TensorFact:
    """The fact the last assignment to ``name`` in ``function`` binds."""
    facts = [
        fact
        for node, bound, fact in _function_facts(source, function)
        if bound == name and not isinstance(node, ast.arg)
    ]
    assert isinstance(facts[-1], TensorFact)
    return facts[-1]


def shape(fact: TensorFact) -> list[str] | None:
    return None if fact.shape is None else [str(dim) for dim in fact.shape]


def findings(source: str) -> list[tuple[int, str, str]]:
    rules = [rule() for rule in all_rules()]
    result = lint_source((HEADER + textwrap.dedent(source)).encode(), "snippet.py", rules)
    lines = HEADER.count("\n")
    return [(d.line - lines, d.code, d.message) for d in result.diagnostics]


# --- uses that fix the rank ---------------------------------------------------------------


@pytest.mark.parametrize("unpacked", ["x.shape", "x.size()"])
def test_an_unpacking_after_the_first_use_names_the_sizes_from_the_start(unpacked: str) -> None:
    source = f"""\
        def f(self, x):
            qkv = x.relu()
            B, N, C = {unpacked}
            return qkv
        """
    assert shape(entry(source, "x")) == ["B", "N", "C"]
    assert shape(bound(source, "qkv")) == ["B", "N", "C"]
    assert entry(source, "x").guess is None


def test_a_shape_spliced_into_an_unpacking_has_the_names_it_is_given() -> None:
    """... and the axis ``_`` skips is ``q``'s own size, unnamed."""
    source = """\
        def f(self, q, k):
            y = q.relu()
            batch, heads, length, _, keys, device = *q.shape, k.shape[-2], q.device
            return y
        """
    assert shape(entry(source, "q")) == ["batch", "heads", "length", "q.shape[3]"]
    assert entry(source, "q").shape[3].is_unnamed  # type: ignore[index]
    assert entry(source, "k").rank is None


def test_an_unpacking_names_the_very_sizes_a_use_left_unnamed() -> None:
    """``permute`` shows four axes but not their sizes, which are ``x``'s own, unnamed (rules
    take two named sizes for two different ones); ``B, H, L, D = x.shape`` after it binds
    the names to those very sizes, which ``y`` holds too: one axis, one symbol."""
    source = """\
        def f(x):
            y = x.permute(0, 2, 1, 3)
            B, H, L, D = x.shape
            z = x
            w = y.reshape(B, L, H * D)
            return y
        """
    assert shape(bound(source, "y")) == ["x.shape[0]", "x.shape[2]", "x.shape[1]", "x.shape[3]"]
    facts = {name: fact for _, name, fact in _function_facts(source, "f")}
    y, z = facts["y"], facts["z"]
    assert isinstance(y, TensorFact) and isinstance(z, TensorFact)
    assert y.shape is not None and z.shape == (y.shape[0], y.shape[2], y.shape[1], y.shape[3])
    assert all(dim.is_named for dim in y.shape)  # named now, where ``y`` holds them too
    assert shape(bound(source, "w")) == ["x.shape[0]", "x.shape[2]", "x.shape[1]*x.shape[3]"]


def test_an_unpacking_makes_a_size_nobody_knew_the_tensors_own_unnamed() -> None:
    """A sliced axis whose length no size names (``n - 2``) is unknown until an unpacking
    reads it: then it is ``y``'s own size, unnamed, not ``N``: named, rules would take it for
    different from every other."""
    source = """\
        def f(x, n: int):
            y = torch.zeros(4, n)[:, 2:]
            B, N = y.shape
            z = y
            return z
        """
    z = bound(source, "z")
    assert shape(z) == ["4", "y.shape[1]"]
    assert z.shape is not None and z.shape[1].is_unnamed and not z.shape[1].is_named


@pytest.mark.parametrize(
    ("call", "ranks"),
    [
        ("torch.bmm(a, b)", {"a": 3, "b": 3}),
        ("a.bmm(b)", {"a": 3, "b": 3}),
        ("torch.bmm(input=a, mat2=b)", {"a": 3, "b": 3}),
        ("torch.baddbmm(c, a, b)", {"a": 3, "b": 3, "c": None}),
        ("c.baddbmm(a, b)", {"a": 3, "b": 3, "c": None}),
        ("torch.mm(a, b)", {"a": 2, "b": 2}),
        ("torch.addmm(c, a, b)", {"a": 2, "b": 2, "c": None}),
        ("a.permute(0, 2, 1, 3)", {"a": 4}),
        ("a.view(a.size(0), a.size(1) * a.size(2))", {"a": 3}),
        ("a.reshape((a.shape[0], a.shape[1]))", {"a": 2}),
        ("a.view(a.size(0), -1)", {"a": None}),
        ("a.view(a.size(1), a.size(0))", {"a": None}),
        ("a.permute((0, 2, 1))", {"a": 3}),
        ("torch.permute(a, (1, 0))", {"a": 2}),
        ('torch.einsum("bhid,bhjd->bhij", a, b)', {"a": 4, "b": 4}),
        ('torch.einsum("bid,...jd->bij", a, b)', {"a": 3, "b": None}),
        ('einops.rearrange(a, "b n (h d) -> b h n d", h=4)', {"a": 3}),
        ('einops.rearrange(a, "b ... d -> b d ...")', {"a": None}),
        # gather's input and index have one rank: each shows the other's
        ("a.gather(-1, b.permute(0, 2, 1))", {"a": 3, "b": 3}),
        ("a.permute(1, 0).gather(1, index=b)", {"a": 2, "b": 2}),
        ("torch.gather(a.permute(0, 2, 1, 3), 3, b)", {"a": 4, "b": 4}),
        ("a.gather(1, b)", {"a": None, "b": None}),
    ],
)
def test_uses_that_fix_the_rank(call: str, ranks: dict[str, int | None]) -> None:
    source = f"""\
        def f(a, b, c):
            first = a.relu(), b.relu(), c.relu()
            z = {call}
            return first
        """
    for name, rank in ranks.items():
        fact = entry(source, name)
        assert fact.rank == rank, name
        assert fact.guess is None


@pytest.mark.parametrize(
    ("chosen", "call", "ranks"),
    [
        ('""', 'torch.einsum(f"bhid,bhjd->bhij", a, b)', {"a": 4, "b": 4}),
        ('"bjd" if c else "bhjd"', 'torch.einsum(f"bhid,{eq}->bhij", a, b)', {"a": 4, "b": None}),
        ('"i j" if c else "k j"', 'einops.einsum(a, b, f"b {eq}, b j -> b")', {"a": 3, "b": 2}),
        ('"b n d" if c else "n b d"', 'einops.rearrange(a, f"{eq} -> b d n")', {"a": 3}),
        ('"b n d" if c else "b h n d"', 'einops.rearrange(a, f"{eq} -> b n (h d)")', {"a": None}),
        ('"b n" if c else "b ..."', 'einops.rearrange(a, f"{eq} -> b n")', {"a": None}),
    ],
)
def test_text_chosen_between_literals_fixes_the_rank_they_agree_on(
    chosen: str, call: str, ranks: dict[str, int | None]
) -> None:
    """x-transformers' ``einsum(f"b h i d, {kv_einsum_eq} -> b h i j", q, k)``: each string
    the equation may be gives the queries four axes; the keys have three in one, four in the
    other, and so no rank."""
    source = f"""\
        import einops
        def f(a, b, c):
            first = a.relu(), b.relu()
            eq = {chosen}
            z = {call}
            return first
        """
    for name, rank in ranks.items():
        assert entry(source, name).rank == rank, name


def test_a_rank_asked_of_what_a_name_holds_later_leaves_the_parameter_its_own() -> None:
    source = """\
        def f(x):
            y = x.relu()
            B, N, C = x.shape
            x = x.flatten(1)
            return x if x.ndim == 2 else y
        """
    assert shape(entry(source, "x")) == ["B", "N", "C"]


def test_a_function_of_the_module_shows_the_rank_of_what_it_is_handed() -> None:
    source = """\
        def repeat_kv(hidden_states, n_rep):
            batch, heads, length, head_dim = hidden_states.shape
            return hidden_states

        def f(module, key, value):
            first = key.relu()
            key_states = repeat_kv(key, module.groups)
            value_states = repeat_kv(n_rep=2, hidden_states=value)
            after = value
            return key_states
        """
    assert entry(source, "key").rank == 4 and entry(source, "key").guess is None
    assert bound(source, "first").rank == 4
    assert bound(source, "after").rank == 4


def test_a_method_shows_the_rank_of_what_it_is_handed() -> None:
    source = """\
        class Attention(nn.Module):
            def split(self, t):
                return t.permute(0, 2, 1, 3)

            def f(self, x):
                y = x.relu()
                return self.split(x)
        """
    assert entry(source, "x").rank == 4


def test_a_call_whose_value_is_dropped_still_shows_the_rank_of_what_it_is_handed() -> None:
    """Such a call is followed only for what it shows (most are weight initialisations,
    not worth their cost): a tensor of unknown rank handed to it."""
    source = """\
        def check_heads(t, weight):
            batch, heads, length, head_dim = t.shape
            weight.normal_()

        def f(x, module):
            first = x.relu()
            check_heads(x, module.weight)
            return x
        """
    assert entry(source, "x").rank == 4 and bound(source, "first").rank == 4


def test_calls_that_hand_a_tensor_round_in_a_circle_show_nothing() -> None:
    source = """\
        def g(x):
            return f(x)

        def f(x):
            return g(x)
        """
    assert entry(source, "x").rank is None
    assert entry(source, "x", "g").rank is None


def test_a_linear_layer_shows_the_width_of_its_input() -> None:
    source = """\
        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.qkv = nn.Linear(dim, dim * 3)
                self.weight = nn.Parameter(torch.randn(7, 5))

            def forward(self, x):
                qkv = self.qkv(x)
                B, N, C = x.shape
                return qkv

            def f(self, x):
                out = F.linear(x, self.qkv.weight)
                after = x
                return out

            def g(self, x):
                out = F.linear(x, self.weight)
                after = x
                return out
        """
    assert shape(entry(source, "x", "forward")) == ["B", "N", "dim"]
    assert str(bound(source, "after", "f").known_last) == "dim"
    assert str(bound(source, "after", "g").known_last) == "5"


def test_unpacking_the_shape_of_what_a_layer_made_fixes_the_rank_of_its_input() -> None:
    """Mllama's ``batch_size, q_seq_len, _ = query.shape`` after ``query =
    self.q_proj(hidden_states)``: a linear layer keeps the rank, so ``hidden_states`` is 3-D,
    and the keys made from it have its batch and length (a head split that writes the heads
    before them moves the length)."""
    source = """\
        class A(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                self.heads = heads
                self.q = nn.Linear(dim, dim)
                self.k = nn.Linear(dim, dim)

            def forward(self, x):
                query = self.q(x)
                key = self.k(x)
                batch, length, _ = query.shape
                _, keys, _ = key.shape
                return key.view(batch, self.heads, keys, -1)
        """
    assert shape(entry(source, "x", "forward")) == ["x.shape[0]", "x.shape[1]", "dim"]
    assert [(line, code) for line, code, _ in findings(source)] == [(13, "SC102")]


@pytest.mark.parametrize(
    ("asserted", "expected"),
    [
        ("query.size() == key.size()", ["batch", "length", "heads", "size"]),
        ("key.shape == query.shape", ["batch", "length", "heads", "size"]),
        ("query.size() != key.size()", None),
        ("query.size(0) == key.size(0)", None),
    ],
)
def test_an_asserted_equal_shape_is_the_shape(asserted: str, expected: list[str] | None) -> None:
    """Longformer's ``assert query.size() == key.size()``: past it, the keys have the
    queries' sizes (and folding them into the batch without moving the heads is a split's
    bug)."""
    source = f"""\
        def f(query, key):
            batch, length, heads, size = query.size()
            assert {asserted}
            after = key
            return key.reshape(batch * heads, length, size)
        """
    assert shape(bound(source, "after")) == expected
    found = [(line, code) for line, code, _ in findings(source)]
    assert found == ([(5, "SC102")] if expected else [])


def test_leading_sizes_are_named_before_the_rank_is_known() -> None:
    source = """\
        def f(x, y):
            batch, length = x.shape[:2]
            z = y.view(*x.shape[:2], -1)
            return x.view(batch, length, 4, -1)
        """
    assert shape(bound(source, "z")) == ["batch", "length", "?"]


@pytest.mark.parametrize(
    ("unpacking", "expected"),
    [
        ("n, d = x.shape[1:]", ["x.shape[0]", "n", "d"]),
        ("h, n, d = x.size()[1:]", ["x.shape[0]", "h", "n", "d"]),
        ("n, d = x.shape[2:]", ["x.shape[0]", "x.shape[1]", "n", "d"]),
        ("n, d = x.shape[-2:]", None),  # the last two of any number of axes
        ("n, *rest = x.shape[1:]", None),
        ("b, n = x.shape[:-1]", ["b", "n", "x.shape[2]"]),
        ("b, n = x.size()[:-2]", ["b", "n", "x.shape[2]", "x.shape[3]"]),
        ("n, d = x.shape[1:-1]", ["x.shape[0]", "n", "d", "x.shape[3]"]),
        ("b, n = x.shape[:2]", None),  # the first two of any number of axes
        ("b, n = x.shape[1:0]", None),
    ],
)
def test_unpacking_a_slice_of_the_shape_fixes_the_rank(
    unpacking: str, expected: list[str] | None
) -> None:
    """x-transformers' ``prepend_seq, prepend_dim = prepend_embeds.shape[1:]``, Moonshine's
    ``bsz, q_len = hidden_states.shape[:-1]``: Python raises unless the slice holds as many
    sizes as names."""
    source = f"""\
        def f(x):
            first = x.relu()
            {unpacking}
            return first
        """
    assert shape(entry(source, "x")) == expected


# --- guesses --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("use", "shown"),
    [
        ("x.transpose(2, 3)", "x.transpose(2, 3)"),
        ("x.size(3)", "x.size(3)"),
        ("x.shape[-4]", "x.shape[-4]"),
        ("x[:, :, 0, :]", "x[:, :, 0, :]"),
    ],
)
def test_a_use_of_the_fourth_axis_makes_it_4_d_on_a_guess(use: str, shown: str) -> None:
    source = f"""\
        def f(x):
            first = x.relu()
            y = {use}
            return first
        """
    fact = entry(source, "x")
    assert bound(source, "first").rank == LIKELY_FROM == 4
    assert fact.guess == f"`x` has 4 axes, the fewest `{shown}` allows"


@pytest.mark.parametrize("use", ["x.transpose(1, 2)", "x.size(2)", "x[:, :, 0]", "x.shape[:3]"])
def test_a_use_of_the_first_three_axes_guesses_nothing(use: str) -> None:
    source = f"""\
        def f(x):
            first = x.relu()
            y = {use}
            return first
        """
    assert entry(source, "x").rank is None


def test_a_guess_a_function_makes_travels_to_its_callers_as_a_guess() -> None:
    source = """\
        def helper(t):
            return t.transpose(2, 3)

        def f(x):
            first = x.relu()
            return helper(x)
        """
    fact = entry(source, "x")
    assert fact.rank == 4
    assert fact.guess == "`x` has 4 axes, as its use in `helper` suggests"


def test_a_factor_of_a_batched_product_takes_the_others_rank_on_a_guess() -> None:
    source = """\
        def f(q, k, value, x, weight):
            scores = torch.matmul(q, k.transpose(2, 3))
            out = torch.matmul(scores.softmax(dim=-1), value)
            v = value
            projected = x @ weight.permute(1, 0)
            return out
        """
    assert bound(source, "out").rank == 4
    v = bound(source, "v")
    assert v.rank == 4
    assert v.guess == "`value` has 4 axes, as the other factor of its matrix product does"
    assert bound(source, "projected").rank is None  # a matrix is no batch of matrices


def test_a_term_added_to_4d_attention_scores_takes_their_rank_on_a_guess() -> None:
    source = """\
        def f(q, k, attention_mask, bias):
            B, H, L, D = q.shape
            _, _, S, _ = k.shape
            scores = torch.matmul(q, k.transpose(-1, -2))
            if attention_mask is not None:
                scores = scores + attention_mask
            scores -= bias
            blocked = attention_mask.bool()
            b = bias
            return scores.softmax(dim=-1), blocked
        """
    mask = bound(source, "blocked")
    assert mask.rank == 4
    assert mask.guess == "`attention_mask` has 4 axes, as the attention scores it is added to do"
    assert bound(source, "b").rank == 4
    assert shape(bound(source, "scores")) == ["B", "H", "L", "S"]


@pytest.mark.parametrize("passed", ["attn_mask=mask", "mask"])
def test_the_mask_of_fused_attention_takes_the_scores_rank_on_a_guess(passed: str) -> None:
    """SDPA adds the mask to scores of the queries' rank (PyTorch raises where it has more)."""
    source = f"""\
        def f(q, k, v, mask):
            B, H, L, D = q.shape
            out = F.scaled_dot_product_attention(q, k, v, {passed})
            m = mask
            return out
        """
    mask = bound(source, "m")
    assert mask.rank == 4
    assert mask.guess == "`mask` has 4 axes, as the attention scores it is added to do"


def test_the_mask_of_fused_attention_on_fewer_axes_shows_no_rank() -> None:
    source = """\
        def f(q, k, v, mask):
            L, D = q.shape
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            m = mask
            return out
        """
    assert bound(source, "m").rank is None


def test_a_masks_own_sizes_say_nothing_of_the_scores_it_is_added_to() -> None:
    """A mask's sizes are mostly 1 (``[batch, 1, 1, k]``): the scores' unknown size of the
    queries stays unknown, not ``attention_mask.shape[2]``."""
    source = """\
        def f(a, b, k, attention_mask, flag):
            q = a.permute(0, 2, 1, 3) if flag else b.permute(0, 2, 1, 3)
            scores = q @ k.permute(0, 2, 3, 1)
            scores = scores + attention_mask
            return scores.softmax(dim=-1)
        """
    assert shape(bound(source, "scores")) == ["k.shape[0]", "k.shape[2]", "?", "k.shape[1]"]


@pytest.mark.parametrize(
    "scores",
    [
        "torch.bmm(q, k.transpose(1, 2))",  # 3-D: a [q, k] mask is as common as [b, q, k]
        "q * k",  # no product of queries and keys
    ],
)
def test_a_term_added_to_other_tensors_shows_no_rank(scores: str) -> None:
    source = f"""\
        def f(q, k, mask):
            B, L, D = q.shape
            _, S, _ = k.shape
            scores = {scores}
            scores = scores + mask
            return scores.softmax(dim=-1)
        """
    assert entry(source, "mask").rank is None
    assert bound(source, "scores").rank == 3


def test_findings_on_a_guessed_rank_say_what_they_assume() -> None:
    source = """\
        def f(q, k):
            d = k.size(3)
            scores = torch.matmul(q, k.transpose(1, 2)) / d ** 0.5
            return scores.softmax(dim=-1)
        """
    [(line, code, message)] = findings(source)
    assert (line, code) == (3, "SC201")
    assert message.endswith(
        "(assuming `q` has 4 axes, as the other factor of its matrix product does)"
    )


def test_a_guessed_rank_proves_no_transpose_useless() -> None:
    """``transpose(3, -1)`` does nothing only on exactly 4 axes, which is only a guess here."""
    source = """\
        def f(x):
            first = x.relu()
            return x.transpose(3, -1), first
        """
    assert entry(source, "x").guess is not None
    assert findings(source) == []


# --- look-alikes that show nothing -------------------------------------------------------------


LOOK_ALIKES = {
    "two ranks on two branches": """\
        def f(x, flag):
            if flag:
                B, N, C = x.shape
            else:
                B, C, H, W = x.shape
            return x.relu()
        """,
    "a rank the code tests": """\
        def f(x):
            if x.ndim == 4:
                return x.flatten(2)
            B, N, C = x.shape
            return x
        """,
    "a rank the code asks with dim()": """\
        def f(x):
            y = x.relu()
            B, N, C = x.shape
            return y if x.dim() == 3 else y.flatten(1)
        """,
    "a rank the code asks with len()": """\
        def f(x):
            y = x.relu()
            B, N, C = x.shape
            return y if len(x.shape) == 3 else y
        """,
    "a name bound again before the use": """\
        def f(x):
            y = x.relu()
            x = x.flatten(2)
            B, N, C = x.shape
            return y
        """,
    "a name bound again before a permute": """\
        def f(x):
            first = x.relu()
            x = x.flatten(2)
            return x.permute(0, 2, 1), first
        """,
    "a shape changed in place before a permute": """\
        def f(x):
            first = x.relu()
            x.unsqueeze_(0)
            return x.permute(0, 2, 1, 3), first
        """,
    "a name bound again in a loop before its use": """\
        def f(x, layers):
            first = x.relu()
            for layer in layers:
                x = layer(x)
                B, N, C = x.shape
            return first
        """,
    "a shape changed in place": """\
        def f(x):
            y = x.relu()
            x.unsqueeze_(0)
            B, N, C = x.shape
            return y
        """,
    "a shape changed in place through an alias": """\
        def f(x):
            alias = x
            alias.unsqueeze_(0)
            B, N, C = x.shape
            return alias
        """,
    "a comprehension's own name": """\
        def f(x, xs):
            y = x.relu()
            return [x.permute(0, 2, 1) for x in xs]
        """,
    "a nested function's own name": """\
        def f(x):
            def inner(x):
                B, N, C = x.shape
            return x.relu()
        """,
    "a lambda's own name": """\
        def f(x, xs):
            return map(lambda x: x.permute(0, 2, 1), xs), x.relu()
        """,
    "a fixed rank below a bound": """\
        def f(x):
            first = x.relu()
            y = x.size(3)
            return x.permute(0, 2, 1)
        """,
    "a local that shadows a function of the module": """\
        def helper(t):
            return t.permute(0, 2, 1)

        def f(x, other):
            helper = other
            return helper(x)
        """,
    "a layer, not a method": """\
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.split = nn.Identity()

            def f(self, x):
                return self.split(x)
        """,
}


@pytest.mark.parametrize("source", LOOK_ALIKES.values(), ids=LOOK_ALIKES)
def test_look_alikes_show_no_rank(source: str) -> None:
    assert entry(source, "x").rank is None


def test_a_function_is_read_again_only_where_a_rank_came_to_light_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No walk of its own: the uses are those the interpretation meets, and a function is
    interpreted a second time only where a parameter was read before its rank was learned;
    a helper called from a hundred places is followed, never read again for it."""
    kept = Counter[str]()
    run_function = Interpreter.run_function

    def counting(
        self: Interpreter,
        node: FunctionNode,
        arguments: Mapping[str, Fact] | None = None,
        shown: Mapping[str, RankByUse] | None = None,
    ) -> Fact:
        if self.record:
            kept[node.name] += 1
        return run_function(self, node, arguments, shown)

    monkeypatch.setattr(Interpreter, "run_function", counting)
    calls = "\n".join(f"    y{index} = helper(x{index})" for index in range(100))
    parameters = ", ".join(f"x{index}" for index in range(100))
    source = f"""\
def helper(t):
    return t.permute(0, 2, 1)

def f({parameters}):
{calls}

def late(x):
    y = x.relu()
    B, N, C = x.shape
    return y

def early(x):
    B, N, C = x.shape
    return x.relu()
"""
    assert bound(source, "y99").rank == 3
    # (``helper`` once: after ``f``, with what its hundred calls agree on)
    assert kept == {"helper": 1, "f": 1, "late": 2, "early": 1}


def test_sizes_each_caller_names_differently_are_named_by_the_helpers_unpacking() -> None:
    """hyunwoongko/transformer before 391c9cd: q, k and v (each of its own length) handed to
    one helper that splits the heads without a transpose; the helper's ``batch_size, length,
    d_model = tensor.size()`` names what the callers agree exists."""
    source = """\
        class MultiHeadAttention(nn.Module):
            def __init__(self, d_model, n_head):
                super().__init__()
                self.n_head = n_head
                self.w_q = nn.Linear(d_model, d_model)
                self.w_k = nn.Linear(d_model, d_model)

            def forward(self, q, k):
                q, k = self.w_q(q), self.w_k(k)
                q, k = self.project(q), self.project(k)
                return q @ k.transpose(2, 3)

            def project(self, tensor):
                batch_size, length, d_model = tensor.size()
                return tensor.view(batch_size, self.n_head, length, d_model // self.n_head)
        """
    assert [(line, code) for line, code, _ in findings(source)] == [(15, "SC102")]


def _read_facts(source: str, function: str = "f") -> dict[str, list[Fact]]:
    """Each name of ``function`` -> the facts of its reads, in the interpretation kept."""
    text = HEADER + textwrap.dedent(source)
    [found] = [f for f in analyse(ast.parse(text), text).functions if f.name == function]
    reads: dict[str, list[Fact]] = {}
    for node, fact in found.facts.items():
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.setdefault(node.id, []).append(fact)
    return reads


def test_a_test_for_none_needs_no_second_interpretation(monkeypatch: pytest.MonkeyPatch) -> None:
    """``if attention_mask is not None`` reads the mask before the sum shows its rank, but
    asks nothing of its shape: the function is interpreted once, and the mask there is
    given the rank learned after."""
    source = """\
        def f(q, k, attention_mask):
            scores = torch.matmul(q, k.transpose(2, 3))
            if attention_mask is not None:
                scores = scores + attention_mask
            return scores.softmax(dim=-1)
        """
    runs: list[str] = []
    interpret = Interpreter.run_function

    def counted(self: Interpreter, node: FunctionNode, *args: object) -> Fact:
        runs.append(node.name)
        return interpret(self, node, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Interpreter, "run_function", counted)
    masks = _read_facts(source)["attention_mask"]
    assert runs == ["f"]
    assert [mask.rank for mask in masks if isinstance(mask, TensorFact)] == [4, 4]


def test_a_parameter_used_as_a_size_is_an_int() -> None:
    """BigBird's ``bigbird_block_sparse_attention(..., from_block_size, to_block_size, ...)``
    takes its sizes unannotated: a parameter used as a size (in a view's sizes, ``zeros``)
    is an int wherever it is read, before the use too (the function is read again), and the
    sizes it makes are named after it."""
    source = """
        def f(key_layer, n_heads, to_seq_len, to_block_size):
            blocks = to_seq_len * to_block_size
            blocked = key_layer.view(2, n_heads, -1, to_block_size, 64)
            counts = torch.zeros(n_heads)
        """
    reads = _read_facts(source)
    assert all(isinstance(fact, IntFact) for fact in reads["to_block_size"])
    assert all(isinstance(fact, IntFact) for fact in reads["n_heads"])
    assert not any(isinstance(fact, IntFact) for fact in reads["to_seq_len"])  # no size use
    assert shape(bound(source, "blocked")) == ["2", "n_heads", "?", "to_block_size", "64"]


@pytest.mark.parametrize(
    "use",
    [
        "key_layer.view(shape)",  # a lone argument may be a whole shape
        "key_layer.view(2, shape, -1)",  # after a use that shows axes: no rank agreed
    ],
)
def test_what_may_be_a_shape_or_a_tensor_is_no_int(use: str) -> None:
    source = f"""
        def f(key_layer, shape):
            if key_layer.ndim > 4:
                flipped = shape.transpose(0, 1)
            out = {use}
        """
    reads = _read_facts(source)
    assert not any(isinstance(fact, IntFact) for fact in reads["shape"])


def test_one_side_of_a_choice_takes_the_others_rank_on_a_guess() -> None:
    """Hugging Face's cross-attention reads the encoder's states where it is handed them, its
    own otherwise: ``current_states`` is ``[batch, seq, features]`` either way."""
    source = """\
        def f(hidden_states, key_value_states, is_cross_attention, scale):
            b, n, d = hidden_states.shape
            current_states = key_value_states if is_cross_attention else hidden_states
            kv = key_value_states
            scaled = scale if scale is not None else 1.0
            s = scale
            return current_states, scaled
        """
    kv = bound(source, "kv")
    assert kv.rank == 3
    assert kv.guess == (
        "`key_value_states` has 3 axes, as the tensor it stands in for on the other branch does"
    )
    assert bound(source, "current_states").rank == 3
    assert bound(source, "s").rank is None  # a number on the other branch: no tensor's rank


def test_a_choice_between_two_tensors_of_unknown_rank_shows_none() -> None:
    source = """\
        def f(key_value_states, hidden_states, is_cross_attention):
            current_states = key_value_states if is_cross_attention else hidden_states
            kv = key_value_states
            return current_states
        """
    assert bound(source, "kv").rank is None
    assert bound(source, "current_states").rank is None
