"""Idioms of research attention code (lucidrains, x-transformers, vit-pytorch): einops layers
built in ``__init__``, ``nn.Sequential``, a softmax kept as ``partial(F.softmax, dim=-1)``, a
tensor unpacked along its first axis and keys joined to a cache (sizes as sums)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from shapecheck.analysis import analyse
from shapecheck.analysis.dims import Dim, format_shape
from shapecheck.analysis.facts import TensorFact
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules

MODEL = """\
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import pack, unpack
from einops.layers.torch import Rearrange, Reduce


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.scale = dim_head**-0.5
        self.to_qkv = nn.Linear(dim, inner * 3)
        self.to_q = nn.Sequential(nn.Linear(dim, inner), Rearrange("b n (h d) -> b h n d", h=heads))
        self.to_k = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, inner), nn.GELU())
        self.split = Rearrange("b n (h d) -> b h n d", h=heads)
        self.merge = Rearrange("b h n d -> b n (h d)")
        self.pool = Reduce("b n d -> b d", "mean")
        self.attn_fn = partial(F.softmax, dim={dim})

    def forward(self, x):
        {body}
"""


def bindings(body: str, dim: str = "-1") -> dict[str, TensorFact]:
    """What ``Attention.forward`` binds each name to (the last binding of it)."""
    indented = textwrap.indent(textwrap.dedent(body), " " * 8).lstrip()
    text = MODEL.format(body=indented, dim=dim)
    functions = analyse(ast.parse(text), text).functions
    [forward] = [f for f in functions if f.name == "Attention.forward"]
    return {
        name: fact
        for node, name, fact in forward.bindings
        if isinstance(fact, TensorFact) and not isinstance(node, ast.arg)
    }


def shape_of(body: str, name: str) -> str:
    return format_shape(bindings(body)[name].shape)


def findings(body: str, dim: str) -> list[str]:
    indented = textwrap.indent(textwrap.dedent(body), " " * 8).lstrip()
    text = MODEL.format(body=indented, dim=dim)
    rules = [rule() for rule in all_rules()]
    result = lint_source(text.encode(), "snippet.py", rules)
    return [d.code for d in result.diagnostics]


SPLIT = """\
b, n, _ = x.shape
q = self.split(self.to_qkv(x).chunk(3, dim=-1)[0])
"""


def test_an_einops_layer_built_in_init_applies_its_pattern() -> None:
    assert shape_of(SPLIT, "q") == "[b, self.heads, n, dim_head]"
    merged = SPLIT + "out = self.merge(q)\npooled = self.pool(out)\n"
    assert shape_of(merged, "out") == "[b, n, dim_head*self.heads]"
    assert shape_of(merged, "pooled") == "[b, dim_head*self.heads]"


def test_a_sequential_applies_its_layers_in_order() -> None:
    body = "b, n, _ = x.shape\nq = self.to_q(x)\nk = self.to_k(x)\n"
    assert shape_of(body, "q") == "[b, self.heads, n, dim_head]"
    assert shape_of(body, "k") == "[b, n, dim_head*self.heads]"


def test_a_pattern_after_layers_that_keep_the_rank_shows_the_input_rank() -> None:
    """``to_q(x)`` with ``to_q = nn.Sequential(nn.Linear(...), Rearrange("b n (h d) -> ..."))``:
    ``x`` has three axes (einops raises otherwise), named from then on."""
    assert shape_of("q = self.to_q(x)\n", "q") == "[x.shape[0], self.heads, x.shape[1], dim_head]"


QKV = """\
b, n, _ = x.shape
qkv = self.to_qkv(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
q, k, v = qkv
"""


def test_a_tensor_unpacks_along_its_first_axis() -> None:
    facts = bindings(QKV)
    for name in "qkv":
        assert format_shape(facts[name].shape) == "[b, self.heads, n, dim_head]"


@pytest.mark.parametrize("collect", ["tuple", "list"])
def test_a_comprehension_collected_in_a_sequence_unpacks_to_its_elements(collect: str) -> None:
    """x-transformers: ``k, v = tuple(rearrange(t, ...) for t in (k, v))``."""
    body = QKV + f"k, v = {collect}(t.transpose(1, 2) for t in (k, v))\n"
    facts = bindings(body)
    for name in "kv":
        assert format_shape(facts[name].shape) == "[b, n, self.heads, dim_head]"


@pytest.mark.parametrize(
    "loop",
    [
        "k, m = tuple(t.transpose(1, 2) for t in (k, memory))",
        "k, m = [t.transpose(1, 2) for t in (k, memory)]",
        "k, m = map(lambda t: t.transpose(1, 2), (k, memory))",
    ],
)
def test_a_loop_over_tensors_that_differ_gives_each_its_own_element(loop: str) -> None:
    """x-transformers' ``tuple(repeat(t, ...) for t in (k, v, added_k, added_v))``: the keys
    keep their shape beside a tensor of unknown rank (a joined item would know nothing)."""
    body = QKV + "memory = self.memory(x)\n" + loop + "\n"
    facts = bindings(body)
    assert format_shape(facts["k"].shape) == "[b, n, self.heads, dim_head]"
    assert facts["m"].shape is None


@pytest.mark.parametrize(
    "loop",
    [
        "[t.transpose(1, 2).view(b, -1, h * d) for t in (q, k)]",
        "map(lambda t: t.transpose(1, 2).view(b, -1, h * d), (q, k))",
    ],
)
def test_code_run_once_per_item_is_one_place_to_report(loop: str) -> None:
    """Each item of the loop is observed apart (``q``'s view merges two axes, ``k``'s, of
    other sizes, four): one finding at the one place to fix."""
    text = textwrap.dedent(
        f"""\
        import torch

        def f(q, k):
            b, h, n, d = q.shape
            b2, h2, m, d2 = k.shape
            q2, k2 = {loop}
            return q2, k2
        """
    )
    result = lint_source(text.encode(), "snippet.py", [rule() for rule in all_rules()])
    assert [(d.code, d.line) for d in result.diagnostics] == [("SC101", 6)]


def test_masks_combined_with_and_or_broadcast_and_keep_their_meaning() -> None:
    body = QKV + (
        "keep = torch.ones(b, 1, 1, n, dtype=torch.bool)\n"
        "future = torch.ones(n, n, dtype=torch.bool).triu(1)\n"
        "visible = keep & ~future\n"
        "hidden = ~keep | future\n"
        "disputed = ~future & future\n"
        "bits = torch.arange(n) & 3\n"
    )
    facts = bindings(body)
    assert format_shape(facts["visible"].shape) == "[b, 1, n, n]"
    assert (facts["visible"].dtype, facts["visible"].polarity) == ("bool", "attend")
    assert (facts["hidden"].dtype, facts["hidden"].polarity) == ("bool", "block")
    assert facts["disputed"].polarity is None
    assert facts["bits"].dtype == "int64"


def test_broadcast_to_is_expand() -> None:
    """Falcon's ``key = torch.broadcast_to(key, query.shape)``."""
    body = QKV + (
        "one = k[:, :1]\n"
        "wide = torch.broadcast_to(one, q.shape)\n"
        "same = one.broadcast_to(q.shape)\n"
    )
    facts = bindings(body)
    assert format_shape(facts["wide"].shape) == "[b, self.heads, n, dim_head]"
    assert format_shape(facts["same"].shape) == "[b, self.heads, n, dim_head]"


def test_unpacking_more_names_than_the_first_axis_holds_tells_nothing() -> None:
    body = QKV.replace("q, k, v = qkv", "q, k = qkv")
    assert "q" not in bindings(body)


def test_keys_joined_to_earlier_ones_are_as_long_as_both() -> None:
    body = QKV + (
        "past = torch.zeros(b, self.heads, 5, k.shape[-1])\n"
        "keys = torch.cat([past, k], dim=-2)\n"
        "again = torch.cat([k, k], dim=2)\n"
        "unknown = torch.cat([torch.zeros(self.num_buckets), k], dim=-2)\n"
    )
    assert shape_of(body, "keys") == "[b, self.heads, (5+n), dim_head]"
    assert shape_of(body, "again") == "[b, self.heads, 2*n, dim_head]"
    assert shape_of(body, "unknown") == "[b, self.heads, ?, dim_head]"


@pytest.mark.parametrize(
    ("made", "shape"),
    [
        # x-transformers' selective attention: ``(1. - torch.eye(i)) * gate``, the eye padded
        # on the left to the keys' length, the gate shifted down a row by a pad of -1
        ("torch.eye(i, device=x.device)", "[n, n]"),
        ("torch.eye(i, 2 * j)", "[n, 2*n]"),
        ("F.pad(torch.eye(i), (j - i, 0), value=1.0)", "[n, n]"),
        ("F.pad(q, (0, 0, 1, -1))", "[b, self.heads, n, dim_head]"),
        ("F.pad(q, (0, 0, 2, -1))", "[b, self.heads, (1+n), dim_head]"),
        ("F.pad(q, (0, -1))", "[b, self.heads, n, (-1+dim_head)]"),
    ],
)
def test_identity_matrices_and_pads_that_crop(made: str, shape: str) -> None:
    body = QKV + f"i, j = (q @ k.transpose(-1, -2)).shape[-2:]\nmade = {made}\n"
    assert shape_of(body, "made") == shape
    assert made.startswith("F.pad") or bindings(body)["made"].dtype == "float32"


def test_a_bias_of_unknown_sizes_broadcasts_onto_the_scores() -> None:
    """beit's ``attn + self._get_rel_pos_bias()``, a ``[1, ?, ?, ?]`` bias: the scores keep
    their axes (the bias's unknown sizes must be theirs or 1), so a softmax over the wrong one
    is seen."""
    body = QKV + (
        "scores = q @ k.transpose(-2, -1) * self.scale\n"
        "bias = torch.zeros(self.num_buckets).view(1, -1, 1, 1)\n"
        "biased = scores + bias\n"
        "other = bias + scores\n"
        "weights = biased.softmax(dim=1)\n"
    )
    facts = bindings(body)
    assert format_shape(facts["bias"].shape) == "[1, ?, 1, 1]"
    assert format_shape(facts["biased"].shape) == "[b, self.heads, n, n]"
    assert format_shape(facts["other"].shape) == "[b, self.heads, n, n]"
    assert findings(body, "-1") == ["SC303"]


@pytest.mark.parametrize(("dim", "found"), [("1", ["SC303"]), ("-1", [])])
def test_soft_capped_scores_are_still_the_scores(dim: str, found: list[str]) -> None:
    """gemma 2 and 3: ``50.0 * torch.tanh(scores / 50.0)`` before the softmax."""
    body = QKV + (
        "scores = q @ k.transpose(-2, -1) * self.scale\n"
        "scores = torch.tanh(scores / 50.0) * 50.0\n"
        f"weights = scores.softmax(dim={dim})\n"
    )
    assert findings(body, "-1") == found


@pytest.mark.parametrize(("scale", "found"), [(" * self.scale", []), ("", ["SC301"])])
def test_a_soft_cap_keeps_the_scale_of_the_scores(scale: str, found: list[str]) -> None:
    """``tanh(scores / c) * c`` undoes its division: the capped scores are as scaled as the
    scores were, whatever ``c`` is (gemma's ``softcap`` parameter)."""
    body = QKV + (
        f"scores = q @ k.transpose(-2, -1){scale}\n"
        "if self.softcap is not None:\n"
        "    scores = scores / self.softcap\n"
        "    scores = torch.tanh(scores)\n"
        "    scores = scores * self.softcap\n"
        "weights = scores.softmax(dim=-1)\n"
    )
    assert findings(body, "-1") == found


@pytest.mark.parametrize(
    ("scale", "dim", "found"),
    [(" * self.scale", "-1", []), ("", "-1", ["SC301"]), (" * self.scale", "1", ["SC303"])],
)
def test_scores_joined_to_attention_sinks_are_still_the_scores(
    scale: str, dim: str, found: list[str]
) -> None:
    """GPT-OSS and MiMo: ``cat([scores, sinks], dim=-1)``, on some branches only, before the
    softmax; the sinks are learned logits of one more key."""
    body = QKV + (
        f"scores = q @ k.transpose(-2, -1){scale}\n"
        "if self.sinks is not None:\n"
        "    sinks = self.sinks.reshape(1, -1, 1, 1).expand(b, -1, n, -1)\n"
        "    scores = torch.cat([scores, sinks], dim=-1)\n"
        f"weights = scores.softmax(dim={dim})\n"
    )
    assert findings(body, "-1") == found


def test_padded_keys_cut_into_windows_are_the_keys_values() -> None:
    """timm's halo attention: keys padded (``F.pad``) and cut into overlapping windows
    (``unfold``) hold the keys' values, unscaled, so scores of them that nothing scales are
    seen."""
    body = QKV + (
        "padded = F.pad(k, [1, 1, 2, 2])\n"
        "windows = padded.unfold(2, 3, 1)\n"
        "scores = q.unsqueeze(-2) @ windows.transpose(-1, -2)\n"
        "weights = scores.softmax(dim=-1)\n"
    )
    facts = bindings(body)
    assert facts["padded"].scaling == facts["windows"].scaling == ()
    windows = bindings(QKV + "windows = k.unfold(2, 3, 1)\n")["windows"]
    assert format_shape(windows.shape) == "[b, self.heads, ?, dim_head, 3]"
    assert findings(body, "-1") == ["SC301"]


CONV_NORM = """\
import torch
import torch.nn as nn


class ConvNorm(nn.Sequential):
    def __init__(self, in_channels, out_channels):
        super().__init__({handed})
        self.add_module("c", nn.Conv2d(in_channels, out_channels, 1, bias=False))
        self.bn = nn.BatchNorm2d(out_channels)


class Attention(nn.Module):
    def __init__(self, dim, key_dim):
        super().__init__()
        self.key_dim = key_dim
        self.qk = ConvNorm(dim, key_dim * 2)

    def forward(self, x):
        B, C, H, W = x.shape
        q, k = torch.split(self.qk(x), [self.key_dim, self.key_dim], dim=1)
        return (q.flatten(2).transpose(-2, -1) @ k.flatten(2)).softmax(dim=-1)
"""


@pytest.mark.parametrize(("handed", "found"), [("", ["SC301"]), ("nn.Identity()", [])])
def test_a_sequential_subclass_applies_the_layers_it_registered(
    handed: str, found: list[str]
) -> None:
    """SHViT's ``Conv2dNorm(nn.Sequential)``, built by ``add_module`` and assignments: a
    call applies them in that order, a convolution then a norm, which scale nothing. Layers
    handed to ``nn.Sequential.__init__`` come first, and are not followed."""
    rules = [rule() for rule in all_rules()]
    text = CONV_NORM.format(handed=handed)
    assert [d.code for d in lint_source(text.encode(), "shvit.py", rules).diagnostics] == found


POOLED_QUERIES = """\
from collections import OrderedDict
from functools import partial

import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, key_dim, use_pool):
        super().__init__()
        self.scale = key_dim**-0.5
        if use_pool:
            sub_layer = partial(nn.AvgPool2d, kernel_size=3, padding=1)
        else:
            sub_layer = partial(nn.MaxPool2d, kernel_size=1)
        self.q = nn.Sequential(
            OrderedDict([("down", sub_layer(stride=2)), ("ln", nn.Conv2d(dim, key_dim, 1))])
        )
        self.k = nn.Conv2d(dim, key_dim, 1)

    def forward(self, x):
        B, C, H, W = x.shape
        q, k = self.q(x).flatten(2), self.k(x).flatten(2)
        return ((q.transpose(-2, -1) @ k){scale}).softmax(dim=-1)
"""


@pytest.mark.parametrize(("scale", "found"), [("", ["SC301"]), (" * self.scale", [])])
def test_queries_pooled_by_a_chosen_layer_of_a_named_sequential(
    scale: str, found: list[str]
) -> None:
    """LeViT's ``nn.Sequential(OrderedDict([("down", sub_layer(stride=stride)), ("ln",
    ...)]))``, ``sub_layer`` a pooling chosen by a flag: the layers apply in order, either
    pooling averages or picks values, which scales nothing."""
    rules = [rule() for rule in all_rules()]
    text = POOLED_QUERIES.format(scale=scale)
    assert [d.code for d in lint_source(text.encode(), "levit.py", rules).diagnostics] == found


def test_an_empty_sequential_applies_nothing() -> None:
    """``nn.Sequential()`` (timm's ``MultiQueryAttention2d`` fills its ``query`` and ``key``
    by ``add_module`` later, when a stride asks for it) returns what it is given."""
    text = CONV_NORM.format(handed="").replace("ConvNorm(dim, key_dim * 2)", "nn.Sequential()")
    rules = [rule() for rule in all_rules()]
    assert [d.code for d in lint_source(text.encode(), "mqa.py", rules).diagnostics] == ["SC301"]


def test_einsum_operands_may_come_in_one_list() -> None:
    """cvt: ``torch.einsum("bhlk,bhtk->bhlt", [query, key])``."""
    body = QKV + (
        'listed = torch.einsum("bhlk,bhtk->bhlt", [q, k]) * self.scale\n'
        'apart = torch.einsum("bhlk,bhtk->bhlt", q, k)\n'
        "weights = listed.softmax(dim=1)\n"
    )
    facts = bindings(body)
    assert format_shape(facts["listed"].shape) == format_shape(facts["apart"].shape)
    assert format_shape(facts["listed"].shape) == "[b, self.heads, n, n]"
    assert findings(body, "-1") == ["SC303"]


@pytest.mark.parametrize(
    ("keys", "shape"),
    [
        ("k", "[b, self.heads, n, n]"),  # four axes: only "bhjd" reads them
        ("k[:, 0]", "[b, self.heads, n, n]"),  # three: only "bjd"
        ("self.unknown(k)", "[b, self.heads, n, ?]"),  # either: the axes both give
    ],
)
def test_an_einsum_equation_chosen_between_literals_is_each_of_them(keys: str, shape: str) -> None:
    """x-transformers' ``Attend``: ``f"b h i d, {kv_einsum_eq} -> b h i j"`` where
    ``kv_einsum_eq`` is ``"b j d"`` or ``"b h j d"`` by the keys' rank."""
    body = QKV + (
        f"keys = {keys}\n"
        'kv_eq = "bjd" if keys.ndim == 3 else "bhjd"\n'
        'sim = torch.einsum(f"bhid,{kv_eq}->bhij", q, keys)\n'
    )
    assert shape_of(body, "sim") == shape


@pytest.mark.parametrize(
    ("equation", "shape"),
    [
        ('"...id,...jd->...ij", q, k', "[b, self.heads, n, n]"),
        ('"b...d,b...d->b...", q, k', "[b, self.heads, n]"),
        ('"...id,...jd->...ij", q[0:1], k', "[b, self.heads, n, n]"),  # [1, ...] broadcasts
        ('"h ... d, h ... d -> ... h", q.transpose(0, 1), k.transpose(0, 1)', "[b, n, self.heads]"),
    ],
)
def test_an_ellipsis_stands_for_the_axes_no_letter_names(equation: str, shape: str) -> None:
    """Longt5's ``"...qhd,...khd->...hqk"``, IDEFICS' perceiver: ``...`` covers the axes the
    letters leave, lined up from the right to broadcast, and the output's covers the longer."""
    body = QKV + f"sim = torch.einsum({equation})\n"
    assert shape_of(body, "sim") == shape


@pytest.mark.parametrize(("scale", "found"), [("", ["SC301"]), (" * self.scale", [])])
def test_keys_on_an_axis_before_an_ellipsis_of_unknown_extent(scale: str, found: list[str]) -> None:
    """x-transformers' attention over layers: ``'v b ... d, l b ... d -> v l b ...'`` with
    queries and keys of unknown rank; the keys' axis is counted from the front, and the
    softmax over it (``dim=1``) reads attention scores."""
    body = (
        "query, keys = x.unsqueeze(0), self.to_k(x)\n"
        f"sim = torch.einsum('v b ... d, l b ... d -> v l b ...', query, keys){scale}\n"
        "weights = sim.softmax(dim=1)\n"
    )
    facts = bindings(body)
    assert facts["sim"].shape is None
    assert facts["sim"].product is not None and facts["sim"].product.key_axis == 1
    assert findings(body, "-1") == found


@pytest.mark.parametrize(
    ("keys_eq", "found"),
    [
        ('"bjhd"', ["SC501"]),  # the one equation: h is 4 in q and 5 in k
        ('"bhjd" if heads_first else "bjhd"', []),  # one of two: either may be what runs
    ],
)
def test_sizes_that_disagree_in_one_of_two_equations_are_not_reported(
    keys_eq: str, found: list[str]
) -> None:
    body = (
        "q, k = x.view(2, 4, 3, 8), x.view(2, 4, 5, 8)\n"
        "heads_first = self.heads > 1\n"
        f"kv_eq = {keys_eq}\n"
        'sim = torch.einsum(f"bhid,{kv_eq}->bhij", q, k) * self.scale\n'
    )
    assert findings(body, "-1") == found


def test_a_pattern_handed_to_a_helper_is_read_there() -> None:
    """x-transformers' ``pack_one(t, pattern)``, which calls ``pack([t], pattern)``."""
    text = textwrap.dedent(
        """\
        import torch
        from einops import pack

        def pack_one(t, pattern):
            return pack([t], pattern)

        def attend(q):
            q = q.view(2, 3, 4, 5)
            packed, _ = pack_one(q, "* i d")
        """
    )
    [attend] = [f for f in analyse(ast.parse(text), text).functions if f.name == "attend"]
    [packed] = [fact for _, name, fact in attend.bindings if name == "packed"]
    assert isinstance(packed, TensorFact) and format_shape(packed.shape) == "[6, 4, 5]"


@pytest.mark.parametrize(
    ("packed", "shape"),
    [
        ("self.unknown(x), x", "[b, ?, x.shape[2]]"),  # the named axes from the one known
        ("self.unknown(x), self.unknown(x)", "[?, ?, ?]"),  # none known
        ("x, x", "[b, 2*n, x.shape[2]]"),  # all known: the lengths add up
    ],
)
def test_a_pack_takes_the_named_axes_from_a_tensor_that_has_them(packed: str, shape: str) -> None:
    """x-transformers' ``pack((mem, x), 'b * d')`` where ``mem`` came from a call it cannot
    follow: ``b`` and ``d`` are the same in every tensor packed (einops checks them), so
    ``x``'s give them; the length ``*`` gathers is unknown."""
    body = f"b, n, _ = x.shape\npacked, ps = pack(({packed}), 'b * d')\n"
    assert shape_of(body, "packed") == shape


@pytest.mark.parametrize(
    ("collected", "shape"),
    [
        ("torch.stack(outs, dim=1)", "[b, ?, n, dim_head]"),
        ("torch.cat(outs, dim=-1)", "[b, n, ?]"),
    ],
)
def test_tensors_appended_in_a_loop_are_collected_alike(collected: str, shape: str) -> None:
    """Chunked and per-head attention: ``outs = []``, ``outs.append(head)`` in a loop, then
    ``torch.cat(outs, ...)``: every item like the one appended, how many unknown."""
    body = QKV + (
        "outs = []\n"
        "for head in range(self.heads):\n"
        "    outs.append(q[:, head])\n"
        f"collected = {collected}\n"
    )
    assert shape_of(body, "collected") == shape


MAYBE = """\
from functools import wraps

import torch
import torch.nn as nn


def identity(t, *args, **kwargs):
    return t


def maybe(fn=None):
    if fn is None:
        fn = identity

    @wraps(fn)
    def inner(x, *args, **kwargs):
        if x is None:
            return x
        return fn(x, *args, **kwargs)

    return inner


class Attention(nn.Module):
    def __init__(self, dim, qk_norm=False):
        super().__init__()
        self.to_q = nn.Linear(dim, dim)
        self.q_norm = nn.LayerNorm(dim) if qk_norm else None

    def forward(self, x, **options):
        b, n, d = x.shape
        q = self.to_q(x)
        normed = maybe(self.q_norm)(q)
        same = identity(q)
        filled = identity(q, q)
        splatted = identity(q, **options)
"""


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("normed", "[b, n, dim]"),  # inner(x, *args, **kwargs) handed x alone
        ("same", "[b, n, dim]"),
        ("filled", "?"),  # what *args collects: not followed
        ("splatted", "?"),  # nor what **options may fill **kwargs with
    ],
)
def test_a_function_taking_star_args_is_followed_where_the_call_hands_them_nothing(
    name: str, shape: str
) -> None:
    """x-transformers' ``maybe(self.q_rmsnorm)(q)``: a decorator-style wrapper whose ``*args``
    and ``**kwargs`` the call leaves empty."""
    functions = analyse(ast.parse(MAYBE), MAYBE).functions
    [forward] = [f for f in functions if f.name == "Attention.forward"]
    [fact] = [fact for _, bound, fact in forward.bindings if bound == name]
    described = format_shape(fact.shape) if isinstance(fact, TensorFact) else "?"
    assert described == shape


def test_sums_of_sizes_are_sizes_like_any_other() -> None:
    past, length = Dim.symbol("past"), Dim.symbol("n")
    assert past + length == length + past and str(past + length) == "(n+past)"
    assert length + length == Dim.constant(2) * length
    assert Dim.constant(3) + Dim.constant(5) == Dim.constant(8)
    assert (past + length).is_named and (past + Dim.symbol("?")).has_unknown
    heads = Dim.symbol("H")
    width = Dim.symbol("E").floordiv(heads) * heads  # E, taking E // H to be exact
    assert (width + length).assumes == width.assumes != frozenset()  # still checked (SC502)


ATTENTION = (
    QKV
    + """\
sim = q @ k.transpose(-2, -1) * self.scale
attn = self.attn_fn(sim)
out = attn @ v
"""
)


def test_a_partial_softmax_computes_attention_weights() -> None:
    facts = bindings(ATTENTION)
    assert facts["attn"].weights and format_shape(facts["attn"].shape) == "[b, self.heads, n, n]"


@pytest.mark.parametrize(("dim", "found"), [("-1", []), ("3", []), ("-2", ["SC303"])])
def test_a_partial_softmax_over_the_wrong_axis_is_reported(dim: str, found: list[str]) -> None:
    assert findings(ATTENTION, dim) == found


def test_a_partial_softmax_of_unscaled_scores_is_reported() -> None:
    unscaled = ATTENTION.replace(" * self.scale", "")
    assert findings(unscaled, "-1") == ["SC301"]


def test_pack_joins_along_its_star_and_unpack_splits_back() -> None:
    body = QKV + (
        "memory = torch.zeros(b, self.heads, 2, 7, k.shape[-1])\n"
        'packed, sizes = pack([memory, k], "b h * d")\n'
        'mem, keys = unpack(packed, sizes, "b h * d")\n'
        'unknown, unknown_sizes = pack([x[0], k], "b h * d")\n'
    )
    assert shape_of(body, "packed") == "[b, self.heads, (14+n), dim_head]"
    assert shape_of(body, "mem") == "[b, self.heads, 2, 7, dim_head]"
    assert shape_of(body, "keys") == "[b, self.heads, n, dim_head]"
    assert shape_of(body, "unknown") == "[?, ?, ?, ?]"


# --- ranks through layers that keep them ------------------------------------------------------

VIT = """\
import torch
import torch.nn as nn
from einops import rearrange


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, dim_head * heads * 3, bias=False)

    def forward(self, x):
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), qkv)
        return q
"""


def _entry(text: str, function: str, name: str) -> TensorFact:
    functions = analyse(ast.parse(text), text).functions
    [found] = [f for f in functions if f.name == function]
    [fact] = [
        fact for node, bound, fact in found.bindings if bound == name and isinstance(node, ast.arg)
    ]
    assert isinstance(fact, TensorFact)
    return fact


def test_a_pattern_shows_the_rank_of_what_a_norm_and_a_linear_layer_were_handed() -> None:
    """vit-pytorch: ``x`` goes through a norm, a linear layer and ``chunk``, which all keep
    its rank, before a pattern names three axes: ``x`` has three."""
    assert _entry(VIT, "Attention.forward", "x").rank == 3


@pytest.mark.parametrize(
    "changed",
    [
        "qkv = self.to_qkv(x).view(-1, 3).chunk(3, dim=-1)",  # a view: another rank
        "qkv = (self.to_qkv(x) + x.new_ones(1)).chunk(3, dim=-1)",  # may broadcast to more axes
    ],
)
def test_ops_that_may_change_the_rank_show_nothing_of_it(changed: str) -> None:
    text = VIT.replace("qkv = self.to_qkv(x).chunk(3, dim=-1)", changed)
    assert _entry(text, "Attention.forward", "x").rank is None


SPLICED = """\
import torch.nn.functional as F


def attend(q, k, v, mask):
    scale = q.shape[-1] ** -0.5
    batch, heads, q_len, _, k_len = *q.shape, k.shape[-2]
    mask = mask.expand(batch, heads, q_len, k_len)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
"""


def _bound(text: str, function: str, name: str) -> str:
    functions = analyse(ast.parse(text), text).functions
    [found] = [f for f in functions if f.name == function]
    facts = [fact for node, bound, fact in found.bindings if bound == name]
    assert isinstance(facts[-1], TensorFact)
    return format_shape(facts[-1].shape)


def test_a_shape_spliced_into_an_unpacking_names_its_sizes() -> None:
    """x-transformers' ``Attend.flash_attn``: ``q``'s rank is known before (``q.shape[-1]``
    is read first, so the function is read again with it), its sizes unnamed until the
    unpacking names them; ``mask.expand`` of them has four axes whatever ``mask`` had, and
    the attention output has the queries' axes."""
    assert _bound(SPLICED, "attend", "mask") == "[batch, heads, q_len, k.shape[-2]]"
    assert _bound(SPLICED, "attend", "out") == "[batch, heads, q_len, ?]"


def test_a_shape_spliced_after_a_use_showed_its_rank_names_its_sizes() -> None:
    """``permute`` shows ``q`` 4-D with sizes of its own, unnamed; the spliced unpacking
    binds its names to those very sizes (``moved`` holds them too)."""
    text = (
        "import torch\n\n\n"
        "def attend(q, k):\n"
        "    moved = q.permute(0, 2, 1, 3)\n"
        "    batch, heads, q_len, _, k_len = *q.shape, k.shape[-2]\n"
        "    again = q * 2\n"
    )
    assert _bound(text, "attend", "again") == "[q.shape[0], q.shape[1], q.shape[2], q.shape[3]]"


KERNELS = """\
import torch
from flash_attn import flash_attn_func
from xformers.ops import memory_efficient_attention


def attend(x, v):
    b, n, h, d = x.shape
    packed = x[None, ...]
    flash = flash_attn_func(x, x, x)
    xformers = memory_efficient_attention(x, x, v)
"""


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("packed", "[1, b, n, h, d]"),  # an ellipsis after another index
        ("flash", "[b, n, h, d]"),
        ("xformers", "[b, n, h, ?]"),  # the values' features are unknown
    ],
)
def test_attention_kernels_of_other_libraries_keep_the_queries_axes(name: str, shape: str) -> None:
    assert _bound(KERNELS, "attend", name) == shape


def test_coverage_counts_functions_that_call_attention_kernels() -> None:
    from shapecheck.coverage import coverage

    report = coverage("k.py", analyse(ast.parse(KERNELS), KERNELS))
    assert report.attention_functions == 1
    assert report.tensors - report.rank_known == 1  # only `v`, whose rank nothing shows


THROUGH_HELPER = """\
import torch
import torch.nn as nn
from einops import rearrange


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def helper(self, q, x):
        z = q * 2
        y = rearrange(z, "b n d -> b d n")
        return x

    def forward(self, x, mask):
        h = self.norm(x)
        return self.helper(h, mask)
"""


def test_a_helper_shows_the_rank_of_what_was_made_from_a_parameter_and_no_other() -> None:
    """``helper``'s ``q`` is 3-D (a pattern of ``q * 2``): so is ``h``, the norm of ``x``.
    ``helper``'s own ``x`` is ``mask``, whose rank nothing shows."""
    assert _entry(THROUGH_HELPER, "Block.forward", "x").rank == 3
    assert _entry(THROUGH_HELPER, "Block.forward", "mask").rank is None


def test_an_axis_length_named_by_an_unknown_is_a_size_of_its_own() -> None:
    """x-transformers: ``Rearrange("b n (h d) -> b h n d", d=dim_head)`` with ``dim_head``
    defaulted to a module constant: ``d`` is ``dim_head``, ``h`` what the features leave."""
    text = MODEL.replace("dim_head=64", "dim_head=DIM_HEAD").replace(
        'self.split = Rearrange("b n (h d) -> b h n d", h=heads)',
        'self.split = Rearrange("b n (h d) -> b h n d", d=dim_head)',
    )
    body = "b, n, e = x.shape\nq = self.split(x)\n"
    indented = textwrap.indent(body, " " * 8).lstrip()
    source = "DIM_HEAD = 64\n" + text.format(body=indented, dim="-1")
    functions = analyse(ast.parse(source), source).functions
    [forward] = [f for f in functions if f.name == "Attention.forward"]
    [q] = [fact for _, name, fact in forward.bindings if name == "q"]
    assert isinstance(q, TensorFact) and format_shape(q.shape) == "[b, e//dim_head, n, dim_head]"


CACHED = """\
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, batch, length, heads, head_dim):
        super().__init__()
        self.cache_k = torch.zeros(batch, length, heads, head_dim)

    def forward(self, x, start_pos: int):
        bsz, seqlen, _ = x.shape
        keys = self.cache_k[:bsz, : start_pos + seqlen]
        window = self.cache_k[:, start_pos : start_pos + seqlen]
        last = self.cache_k[:, -seqlen:]
        literal = self.cache_k[:, 2:5, :3]
        shorter = self.cache_k[:, 1:]
        stepped = self.cache_k[:, ::2]
        mixed = self.cache_k[:, 1:-1]
"""


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("keys", "[bsz, (seqlen+start_pos), heads, head_dim]"),  # llama's KV cache
        ("window", "[batch, seqlen, heads, head_dim]"),  # (start+n) - start
        ("last", "[batch, seqlen, heads, head_dim]"),
        ("literal", "[batch, 3, 3, head_dim]"),
        ("shorter", "[batch, ?, heads, head_dim]"),  # length - 1: no size names it
        ("stepped", "[batch, ?, heads, head_dim]"),
        ("mixed", "[batch, ?, heads, head_dim]"),
    ],
)
def test_a_slice_is_as_long_as_its_bounds_say(name: str, shape: str) -> None:
    """A slice whose bounds are known sizes is ``stop - start`` long, taking the slice to lie
    within the axis (code slices a cache up to what it filled)."""
    assert _bound(CACHED, "Attention.forward", name) == shape


def test_a_slice_of_an_axis_of_known_length_is_cut_where_python_cuts_it() -> None:
    text = CACHED.replace("torch.zeros(batch, length,", "torch.zeros(batch, 4,")
    assert _bound(text, "Attention.forward", "literal") == "[batch, 2, 3, head_dim]"


def test_sums_and_differences_of_sizes() -> None:
    start, length = Dim.symbol("start"), Dim.symbol("n")
    assert (start + length) - start == length and (start + length) - length == start
    assert Dim.constant(3) * length - length == Dim.constant(2) * length
    assert length - length == Dim.constant(0) and Dim.constant(5) - Dim.constant(3) == Dim.constant(
        2
    )
    assert (length - start).has_unknown  # no size names it


RANK_TESTS = """\
import torch
from einops import repeat


def attend(q, k, mask, x, bias):
    before = k
    if k.ndim == 3:
        inside = k * 2
        k = repeat(k, "b ... -> b h ...", h=q.shape[1])
    elif k.dim() == 4:
        four = k
    after = k
    if mask.dim() != 4:
        raise ValueError("a 4-D mask")
    guarded = mask
    assert len(x.shape) == 2 and x.shape[0] > 0
    asserted = x
    if bias.ndim == 2:
        kept = bias
    untouched = bias
    if bias is not None or bias.ndim == 2:
        either = bias
"""


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("inside", "[k.shape[0], k.shape[1], k.shape[2]]"),  # where the test holds
        ("k", "[k.shape[0], q.shape[1], k.shape[1], k.shape[2]]"),  # its rank known there
        ("four", "[k.shape[0], k.shape[1], k.shape[2], k.shape[3]]"),  # elif
        ("after", "?"),  # 4-D on one branch, of unknown rank on the other
        # the code after the test runs only where it held
        ("guarded", "[mask.shape[0], mask.shape[1], mask.shape[2], mask.shape[3]]"),
        ("asserted", "[x.shape[0], x.shape[1]]"),  # each test an `and` joins
        ("either", "?"),  # `or`: neither need hold
    ],
)
def test_a_rank_test_gives_the_rank_where_it_holds(name: str, shape: str) -> None:
    """``if k.ndim == 3:`` (``k.dim()``, ``len(k.shape)``; ``!=`` for the other branch, an
    ``assert``): where the test holds, the tensor has that rank, its sizes its own, unnamed
    (``k.shape[0]``); past the ``if``, where either branch may have run, only what both
    say."""
    functions = analyse(ast.parse(RANK_TESTS), RANK_TESTS).functions
    [found] = [f for f in functions if f.name == "attend"]
    facts = {bound: fact for node, bound, fact in found.bindings if bound == name}
    assert isinstance(facts[name], TensorFact) and format_shape(facts[name].shape) == shape


def test_a_rank_test_leaves_a_name_the_branch_did_not_bind_as_it_came() -> None:
    """Past an ``if`` that ran either way, a parameter that only its test narrowed still holds
    what was passed in (so uses after it still show its rank)."""
    functions = analyse(ast.parse(RANK_TESTS), RANK_TESTS).functions
    [found] = [f for f in functions if f.name == "attend"]
    facts = {bound: fact for _, bound, fact in found.bindings}
    [passed] = [fact for node, bound, fact in found.bindings if bound == "bias"]
    kept = format_shape(facts["kept"].shape)
    assert facts["untouched"] is passed and kept == "[bias.shape[0], bias.shape[1]]"


def test_a_tensor_whose_rank_alone_a_test_gave_broadcasts_onto_the_scores() -> None:
    """mpt: ``len(position_bias.shape) != 3`` raises, so the bias is 3-D, none of its sizes
    known; added to the scores it broadcasts onto them, as one of unknown rank would (a
    guess, said where a finding rests on it), so the scores keep their sizes."""
    text = (
        "import torch\n\n\n"
        "def attend(scores, bias):\n"
        "    b, h, i, j = scores.shape\n"
        "    if len(bias.shape) != 3:\n"
        "        raise ValueError('a 3-D bias')\n"
        "    biased = scores + bias\n"
    )
    assert _bound(text, "attend", "biased") == "[b, h, i, j]"


def test_an_axis_of_unknown_size_expands_to_the_size_given() -> None:
    """x-transformers' ``flash_attn``: ``assert mask.ndim == 4`` then ``mask.expand(batch,
    heads, q_len, k_len)``: each axis of unknown size is 1 or already that size (PyTorch
    raises otherwise), so the mask has the sizes given (``-1`` keeps the mask's own, unnamed);
    its memory order is unknown."""
    text = (
        "import torch\n\n\n"
        "def attend(mask, b: int, h: int):\n"
        "    assert mask.ndim == 3\n"
        "    grown = mask.expand(b, h, -1)\n"
    )
    assert _bound(text, "attend", "grown") == "[b, h, mask.shape[2]]"


CHOSEN = """\
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


def double(t):
    return t * 2


def first(t):
    return t[0]


class Attend(nn.Module):
    def __init__(self, sigmoid, doubled, custom: Callable | None = None):
        super().__init__()
        if sigmoid:
            self.attn_fn = F.sigmoid
        elif doubled:
            self.attn_fn = double
        else:
            self.attn_fn = nn.Softmax(dim=-1)
        self.mixed_fn = double if doubled else first
        if custom is not None:
            self.unsure_fn = custom
        else:
            self.unsure_fn = nn.Softmax(dim=-1)

    def forward(self, x):
        b, n, d = x.shape
        chosen = self.attn_fn(x)
        mixed = self.mixed_fn(x)
        unsure = self.unsure_fn(x)
"""


@pytest.mark.parametrize(
    ("name", "shape", "uncertain"),
    [
        ("chosen", "[b, n, d]", False),  # each of the three keeps the shape
        ("mixed", "?", False),  # [b, n, d] or [n, d]: no rank they agree on
        ("unsure", "[b, n, d]", True),  # a callable the analysis cannot follow, or a softmax
    ],
)
def test_a_function_chosen_among_several_returns_what_their_results_share(
    name: str, shape: str, uncertain: bool
) -> None:
    """x-transformers' ``self.attn_fn``, chosen in ``__init__`` among ``F.sigmoid``, a
    function of the module and a softmax: a call is a call of each, and its result what their
    results share (their join); one the analysis cannot follow leaves the others' result,
    known on some paths only."""
    functions = analyse(ast.parse(CHOSEN), CHOSEN).functions
    [forward] = [f for f in functions if f.name == "Attend.forward"]
    [fact] = [fact for _, bound, fact in forward.bindings if bound == name]
    assert isinstance(fact, TensorFact) and format_shape(fact.shape) == shape
    assert fact.uncertain is uncertain


def test_coverage_counts_a_function_that_may_call_a_softmax_it_chose() -> None:
    """``self.attn_fn(x)``, one of ``F.sigmoid``, a function and a softmax: a function that
    computes attention on some paths, whose tensors ``--coverage`` counts."""
    from shapecheck.coverage import coverage

    report = coverage("chosen.py", analyse(ast.parse(CHOSEN), CHOSEN))
    # ``__init__`` builds two softmaxes; ``forward`` may call each
    assert (report.attention_functions, report.softmax_calls) == (2, 4)


ROTATE_HALF = """\
import torch


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def attend(q):
    b, h, n, d = q.shape
    rotated = rotate_half(q)
    rest = q[:, 1:]
"""


def test_rotating_halves_keeps_the_features() -> None:
    """Every transformers model's ``rotate_half``: the second half starts at ``d // 2`` and
    runs to the end, ``d - d//2`` long, which is ``d//2`` taking the halving to be exact (as
    a view sizing a tensor by it does); the two halves joined are ``d`` again."""
    assert _bound(ROTATE_HALF, "attend", "rotated") == "[b, h, n, d]"
    assert _bound(ROTATE_HALF, "attend", "rest") == "[b, ?, n, d]"  # h - 1: no size names it


def test_a_size_less_a_part_of_it_is_the_rest() -> None:
    width = Dim.symbol("d")
    half = width.floordiv(Dim.constant(2))
    assert width - half == half and (width - half).assumes == frozenset(half.quotients)
    assert half + half == width
    third = width.floordiv(Dim.constant(3))
    assert width - third == Dim.constant(2) * third
    assert (width - Dim.constant(1)).has_unknown


DECOMPOSED_POSITIONS = """\
import torch
import torch.nn as nn


def get_rel_pos(q_size, k_size, rel_pos):
    q_coords = torch.arange(q_size)[:, None]
    k_coords = torch.arange(k_size)[None, :]
    relative_coords = (q_coords - k_coords) + (k_size - 1)
    return rel_pos[relative_coords.long()]


class Attention(nn.Module):
    def __init__(self, dim, heads, size):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.rel_pos_h = nn.Parameter(torch.zeros(2 * size - 1, dim // heads))

    def forward(self, x):
        b, height, width, _ = x.shape
        qkv = self.qkv(x).reshape(b, height * width, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.reshape(3, b * self.heads, height * width, -1).unbind(0)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        relative_height = get_rel_pos(height, height, self.rel_pos_h)
        r_q = q.reshape(b * self.heads, height, width, -1)
        relative_height = torch.einsum("bhwc,hkc->bhwk", r_q, relative_height)
        attn = (
            attn.view(b * self.heads, height, width, height, width)
            + relative_height[:, :, :, :, None]
        ).view(b * self.heads, height * width, height * width)
        return attn.softmax(dim=-1)
"""


def test_a_decomposed_relative_position_bias_is_no_query_mask() -> None:
    """SAM's and ViTDet's decomposed relative positions: the scores viewed as ``[B*H, qh, qw,
    kh, kw]``, the keys over two axes, and a bias along ``kh`` added as ``[..., kh, 1]``. Its
    table is looked up by an index tensor (``rel_pos[coords.long()]``), now of known shape."""
    rules = [rule() for rule in all_rules()]
    found = lint_source(DECOMPOSED_POSITIONS.encode(), "decomposed.py", rules).diagnostics
    bias = _bound(DECOMPOSED_POSITIONS, "Attention.forward", "relative_height")
    assert bias == "[b*self.heads, height, width, height]"
    assert [d.code for d in found if d.code == "SC404"] == []


SELECTIVE_SCAN = """\
import torch
import torch.nn as nn


class Mixer(nn.Module):
    def __init__(self, heads, width, rank):
        super().__init__()
        self.dt_weight = nn.Parameter(torch.ones(heads, width, rank))
        self.dt_bias = nn.Parameter(torch.ones(heads, width))

    def forward(self, steps, pad):
        heads, batch, rank, length = steps.shape
        dt = self.dt_weight[:, None] @ steps
        for head in range(heads):
            shifted = dt[head] + self.dt_bias[head][..., None]
        return shifted
"""


def test_a_bias_on_a_product_no_softmax_takes_is_no_query_mask() -> None:
    """Mamba's time steps are a matrix product (``dt_proj_weight @ steps``), and a bias per
    channel is added along their next-to-last axis: no softmax takes them, so they are no
    attention scores and the bias masks nothing. The same product taken by a softmax over
    its last axis is scores, and the same bias masks its queries."""
    rules = [rule() for rule in all_rules()]
    quiet = lint_source(SELECTIVE_SCAN.encode(), "scan.py", rules).diagnostics
    assert _bound(SELECTIVE_SCAN, "Mixer.forward", "shifted") == "[batch, width, length]"
    assert [d.code for d in quiet if d.code == "SC404"] == []
    normalised = SELECTIVE_SCAN.replace("return shifted", "return shifted.softmax(dim=-1)")
    found = lint_source(normalised.encode(), "scan.py", rules).diagnostics
    assert [d.code for d in found if d.code == "SC404"] == ["SC404"]


RELATIVE_SHIFT = """\
import torch
import torch.nn as nn


class RelativeAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.pos = nn.Linear(dim, dim)

    def forward(self, q, pos_emb):
        b, h, n, d = q.shape
        _, m, _ = pos_emb.shape
        p = self.pos(pos_emb).view(b, m, self.heads, self.head_dim).permute(0, 2, 3, 1)
        scores = torch.matmul(q, p)
        shape = scores.shape
        scores = nn.functional.pad(scores, (1, 0)).view(*shape[:2], shape[3] + 1, shape[2])
        return scores[..., 1:, :].view(shape)
"""


def test_the_relative_shift_of_transformer_xl_is_no_head_split() -> None:
    """wav2vec2-conformer's relative positions (Transformer-XL's skew): the scores padded by
    a column, read as ``[.., m+1, n]``, the first row dropped and read back as ``[.., n, m]``.
    The views move positions on purpose, on values ``F.pad`` lengthened with a column that
    is none of the positions: no axis there is known to hold what its size names, so none
    provably moves onto other data."""
    rules = [rule() for rule in all_rules()]
    found = lint_source(RELATIVE_SHIFT.encode(), "shift.py", rules).diagnostics
    assert [d.code for d in found if d.code in ("SC102", "SC103")] == []


FUNNEL_SHIFT = """\
import torch
from jaxtyping import Float
from torch import Tensor


def relative_shift(scores, context_len: int, shift: int):
    batch_size, n_head, seq_len, max_rel_len = scores.shape
    scores = torch.reshape(scores, [batch_size, n_head, max_rel_len, seq_len])
    scores = scores[:, :, shift:, :]
    scores = torch.reshape(scores, [batch_size, n_head, seq_len, max_rel_len - shift])
    return scores[..., :context_len]


def positional_scores(q: Float[Tensor, "b l h d"], r: Float[Tensor, "p h d"]):
    return relative_shift(torch.einsum("binh,jnh->bnij", q, r), q.shape[1], 1)
"""


def test_funnels_relative_shift_of_position_scores_is_no_head_split() -> None:
    """Funnel Transformer's relative shift drops rows instead of padding a column: the
    product of queries and positions, ``[b, h, l, p]``, is read as ``[b, h, p, l]`` on
    purpose. Known in its caller's sizes (each function is interpreted after its callers),
    the view is still no head split; the same view of keys, which no product made, is."""
    rules = [rule() for rule in all_rules()]
    found = lint_source(FUNNEL_SHIFT.encode(), "shift.py", rules).diagnostics
    assert [d.code for d in found if d.code in ("SC102", "SC103")] == []
    keys = FUNNEL_SHIFT.replace('torch.einsum("binh,jnh->bnij", q, r)', "q.transpose(1, 2)")
    found = lint_source(keys.encode(), "shift.py", rules).diagnostics
    assert [(d.line, d.code) for d in found if d.code in ("SC102", "SC103")] == [(8, "SC102")]


PARTIAL = """\
from functools import partial

import torch
import torch.nn as nn

LinearNoBias = partial(nn.Linear, bias=False)


def gate(t, scale):
    return t * scale


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.proj = LinearNoBias(dim, hidden)
        self.gate = partial(gate, scale=2.0)

    def forward(self, x):
        b, n, d = x.shape
        projected = self.proj(x)
        gated = self.gate(x)
"""


@pytest.mark.parametrize(
    ("name", "shape"), [("projected", "[b, n, hidden]"), ("gated", "[b, n, d]")]
)
def test_a_partial_calls_its_function_with_the_arguments_it_bound(name: str, shape: str) -> None:
    """x-transformers' ``LinearNoBias = partial(nn.Linear, bias=False)``, and a partial of a
    function of the module: called, each is its function called with the arguments bound
    first and the call's own after them."""
    functions = analyse(ast.parse(PARTIAL), PARTIAL).functions
    [forward] = [f for f in functions if f.name == "Block.forward"]
    [fact] = [fact for _, bound, fact in forward.bindings if bound == name]
    assert isinstance(fact, TensorFact) and format_shape(fact.shape) == shape


@pytest.mark.parametrize(
    ("replaced", "tiled"),
    [
        ("reps[1] = n", "[b, n, self.heads, n, dim_head]"),
        ("reps[-1] = 2", "[b, 1, self.heads, n, 2*dim_head]"),
        ("reps[self.heads] = 2", "?"),  # an index the analysis cannot read: nothing is known
    ],
)
def test_a_list_with_an_item_replaced_holds_the_new_item(replaced: str, tiled: str) -> None:
    """LongT5's ``reps = [1] * (k.ndim + 1)`` then ``reps[1] = blocks``; ``sizes =
    list(k.shape)`` then ``sizes[-1] = 2``: later reads see the item written."""
    body = QKV + (
        "reps = [1] * (k.ndim + 1)\n"
        f"{replaced}\n"
        "tiled = k.unsqueeze(1).repeat(reps)\n"
        "sizes = list(k.shape)\n"
        "sizes[-1] = 2\n"
        "halved = k.new_zeros(sizes)\n"
    )
    assert shape_of(body, "tiled") == tiled
    assert shape_of(body, "halved") == "[b, self.heads, n, 2]"


SCALED_THEN_NORMED = """\
import torch
import torch.nn as nn


class OwnRMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = dim**-0.5
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.norm = {norm}

    def forward(self, x):
        q = self.norm(self.to_q(x) * self.scale)
        return (q @ self.to_k(x).transpose(-2, -1)).softmax(dim=-1)
"""


@pytest.mark.parametrize(
    ("norm", "found"),
    [
        ("nn.LayerNorm(dim)", ["SC301"]),
        ("nn.RMSNorm(dim)", ["SC301"]),
        ("OwnRMSNorm(dim)", ["SC301"]),  # the module's own norm class
        ("nn.BatchNorm1d(dim)", []),  # in eval mode, an affine map: the scale passes
        ("nn.Identity()", []),
    ],
)
def test_a_norm_divides_out_a_scale_applied_before_it(norm: str, found: list[str]) -> None:
    rules = [rule() for rule in all_rules()]
    text = SCALED_THEN_NORMED.format(norm=norm)
    assert [d.code for d in lint_source(text.encode(), "normed.py", rules).diagnostics] == found


def test_keys_broadcast_over_a_batch_the_queries_lack_keep_their_axis() -> None:
    """``"...id,...jd->...ij"`` with queries ``[h, n, d]`` and keys ``[b, h, n, d]``: the batch
    only the keys' ellipsis covers is no axis of keys, so a softmax over the heads is SC303."""
    body = QKV + (
        'sim = torch.einsum("...id,...jd->...ij", q[0], k) * self.scale\n'
        "weights = sim.softmax(dim=1)\n"
    )
    assert shape_of(body, "sim") == "[b, self.heads, n, n]"
    assert findings(body, "-1") == ["SC303"]
