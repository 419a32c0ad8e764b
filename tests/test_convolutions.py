"""Convolutions in the analysis (their output's channels and spatial sizes, and the channels
axis it carries), and the views that move that axis without its data (SC104)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from shapecheck.analysis import analyse
from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.layout import ChannelsMove, moved_channels
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules

B, C, H, W, L = (Dim.symbol(name) for name in "BCHWL")
ONE = Dim.constant(1)


def bound(source: str, name: str) -> TensorFact:
    """What the last assignment to ``name`` in ``Model.forward`` binds."""
    text = textwrap.dedent(source)
    [forward] = [f for f in analyse(ast.parse(text), text).functions if f.name == "Model.forward"]
    facts = [fact for _, target, fact in forward.bindings if target == name]
    assert facts and isinstance(facts[-1], TensorFact)
    return facts[-1]


def written(fact: TensorFact) -> list[str] | None:
    """The shape as its sizes read (``None``: the rank is unknown)."""
    return None if fact.shape is None else [str(dim) for dim in fact.shape]


CONVOLVED = """\
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, patch: int = 4):
            super().__init__()
            self.conv = {layer}

        def forward(self, x):
            B, C, H, W = x.shape
            y = self.conv(x)
            flat = y.flatten(2)
            tokens = flat.transpose(1, 2)
            return tokens
    """


@pytest.mark.parametrize(
    ("layer", "shape"),
    [
        ("nn.Conv2d(3, 16, kernel_size=1)", ["B", "16", "H", "W"]),
        ("nn.Conv2d(3, 16, 3, padding=1)", ["B", "16", "H", "W"]),
        ("nn.Conv2d(3, 16, (5, 3), padding=(2, 1))", ["B", "16", "H", "W"]),
        ('nn.Conv2d(3, 16, 7, padding="same")', ["B", "16", "H", "W"]),
        ("nn.Conv2d(3, 16, kernel_size=patch, stride=patch)", ["B", "16", "H//patch", "W//patch"]),
        ("nn.Conv2d(3, 16, 3, stride=2, padding=1)", ["B", "16", "?", "?"]),
        ("nn.Conv2d(3, 16, kernel_size=patch // 2, stride=patch // 2)", ["B", "16", "?", "?"]),
    ],
)
def test_a_convolution_gives_its_channels_and_the_spatial_sizes_it_keeps_or_divides(
    layer: str, shape: list[str]
) -> None:
    output = bound(CONVOLVED.format(layer=layer), "y")
    assert written(output) == shape
    assert output.channels is not None and (output.channels.axis, output.channels.rank) == (1, 4)


def test_the_channels_axis_stays_through_flatten_and_moves_with_a_transpose() -> None:
    source = CONVOLVED.format(layer="nn.Conv2d(3, 16, kernel_size=1)")
    flat, tokens = bound(source, "flat"), bound(source, "tokens")
    assert flat.channels is not None and (flat.channels.axis, flat.channels.rank) == (1, 3)
    assert tokens.channels is not None and tokens.channels.axis == 2


def test_a_convolution_of_a_tensor_of_unknown_rank_gives_one_of_unknown_rank() -> None:
    source = """\
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 16, kernel_size=1)

            def forward(self, x):
                y = self.conv(x)
                return y
        """
    output = bound(source, "y")
    assert output.shape is None and output.channels is None


@pytest.mark.parametrize(
    ("old", "new", "moved"),
    [
        ((B, C, H, W), (B, H * W, C), ChannelsMove(C, to_last=True)),  # a map read as tokens
        ((B, C, H, W), (B, H, W, C), ChannelsMove(C, to_last=True)),  # ... as a channels-last map
        ((B, L, C), (B, C, H, W), ChannelsMove(C, to_last=False)),  # tokens read as a map
        ((B, H, W, C), (B, C, H * W), ChannelsMove(C, to_last=False)),  # SAM-Adapter#134
        (
            (B, Dim.constant(6), H, W),
            (B, H * W, Dim.constant(6)),
            ChannelsMove(Dim.constant(6), True),
        ),
    ],
)
def test_views_that_move_the_channels_without_their_data(
    old: tuple[Dim, ...], new: tuple[Dim, ...], moved: ChannelsMove
) -> None:
    assert moved_channels(old, new) == moved


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ((B, H, W, C), (B, H * W, C)),  # channels-last code, as timm writes it
        ((B, C, H, W), (B, C, H * W)),  # flatten(2): the channels stay first
        ((B, ONE, H, W), (B, H * W, ONE)),  # one channel reads the same either way
        ((B, C, ONE, ONE), (B, ONE, C)),  # so does one pixel
        ((B, L, C), (B, C, L)),  # no map on either side
        ((B, C, Dim.symbol("?"), Dim.symbol("?")), (B, Dim.symbol("?"), C)),  # pixels unknown
    ],
)
def test_views_that_leave_the_channels_in_place_or_cannot_mix_them(
    old: tuple[Dim, ...], new: tuple[Dim, ...]
) -> None:
    assert moved_channels(old, new) is None


def test_keys_out_of_a_convolution_are_not_blamed_for_queries_laid_out_like_them() -> None:
    """Self-Attention-GAN's queries and keys are both ``[B, C/8, N]``: the queries miss their
    permute (SC202 where it is written as a no-op), the keys are laid out as they should be."""
    source = textwrap.dedent(
        """\
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, dim: int):
                super().__init__()
                self.query = nn.Conv2d(dim, dim // 8, kernel_size=1)
                self.key = nn.Conv2d(dim, dim // 8, kernel_size=1)

            def forward(self, x):
                B, C, H, W = x.size()
                q = self.query(x).view(B, -1, H * W)
                k = self.key(x).flatten(2)
                return torch.bmm(q, k).softmax(dim=-1)
        """
    )
    rules = [rule() for rule in all_rules()]
    result = lint_source(source.encode(), "sagan.py", rules)
    assert "SC201" not in {diagnostic.code for diagnostic in result.diagnostics}
