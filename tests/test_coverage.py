"""``shapecheck --coverage``: what the analysis knew, per file and in total, and why not more."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.conftest import UNSCALED

Cli = Callable[..., Result]
Write = Callable[[str, str | bytes], Path]

KNOWN = textwrap.dedent(
    """\
    import math
    import torch


    def attend(x: torch.Tensor, wq: torch.nn.Linear) -> torch.Tensor:
        b, t, e = x.shape
        q = x.view(b, t, 2, e // 2).transpose(1, 2)
        scores = q @ q.transpose(-2, -1) / math.sqrt(e // 2)
        return scores.softmax(dim=-1) @ q


    def not_attention(x):
        return x.relu()
    """
)
"""Every tensor of the one attention function has a known rank: ``x``'s unpacking shows it."""

CACHED = textwrap.dedent(
    """\
    import torch


    def attend(q, k, cache):
        k = cache.update(k)
        weights = torch.softmax(q @ k.mT, dim=-1)
        return weights
    """
)
"""A parameter of unknown rank and a cache the analysis cannot follow."""


def _json(result: Result) -> dict[str, object]:
    document = json.loads(result.output)
    assert isinstance(document, dict)
    return document


def test_a_file_whose_shapes_are_known(cli: Cli, write: Write) -> None:
    write("model.py", KNOWN)
    result = cli("--coverage", "--format", "json", "model.py")
    assert result.exit_code == 0, result.output
    [report] = _json(result)["files"]  # type: ignore[misc]
    assert report["attention_functions"] == 1
    assert report["softmax"] == {"calls": 1, "attention": 1}
    tensors = report["tensors"]
    assert tensors["expressions"] > 10
    assert tensors["rank_known"] == tensors["expressions"]  # `x` too: its unpacking says
    assert report["reasons"] == []


def test_unknowns_are_counted_with_their_reasons(cli: Cli, write: Write) -> None:
    write("model.py", CACHED)
    report = _json(cli("--coverage", "--format", "json", "model.py"))["total"]
    assert isinstance(report, dict)
    assert report["softmax"] == {"calls": 1, "attention": 1}
    assert report["tensors"]["rank_known"] == 0
    reasons = {item["reason"]: item["count"] for item in report["reasons"]}
    assert reasons["unmodelled call `cache.update`"] >= 1
    assert reasons["parameter of unknown rank"] >= 2
    assert report["unknown_values"] == 1


def test_text_for_a_directory_with_a_total_and_reasons(cli: Cli, write: Write) -> None:
    write("src/known.py", KNOWN)
    write("src/cached.py", CACHED)
    write("src/plain.py", "x = 1\n")
    result = cli("--coverage", "src")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "file",
        "softmax",
        "attention",
        "tensors",
        "rank",
        "shape",
        "layout",
    ]
    assert [line.split()[0] for line in lines[1:4]] == [
        "src/cached.py",
        "src/known.py",
        "total",
    ]  # files without attention are counted in the total only
    assert lines[3].split()[1:3] == ["2/2", "2"]
    assert "3 files: 2 of 2 softmax calls recognised as attention" in result.output
    assert "unmodelled call `cache.update`" in result.output


def test_stdin(cli: Cli) -> None:
    result = cli("--coverage", "-", "--stdin-filename", "model.py", stdin=UNSCALED.encode())
    assert result.exit_code == 0
    assert result.output.splitlines()[1].startswith("model.py ")


def test_a_file_that_cannot_be_parsed_is_named_and_exits_2(cli: Cli, write: Write) -> None:
    write("broken.py", "def f(:\n")
    write("model.py", KNOWN)
    result = cli("--coverage", "broken.py", "model.py")
    assert result.exit_code == 2
    assert "broken.py:1:" in result.output and "model.py" in result.output


def test_only_text_and_json(cli: Cli, write: Write) -> None:
    write("model.py", KNOWN)
    result = cli("--coverage", "--format", "sarif", "model.py")
    assert result.exit_code == 2 and "--coverage prints text or json" in result.output


PROPER = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F


    def attend(q, k, v):
        scores = q @ k.transpose(-2, -1)
        scaled = scores * 0.125
        return F.softmax(scaled, dim=-1) @ v


    def fused(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


    def biased(q, k, bias):
        scores = torch.matmul(q, k.mT)
        scores = bias.apply(scores)
        return torch.softmax(scores, dim=-1)


    def einsum_attention(q, k):
        return torch.einsum("bhid,bhjd->bhij", q, k).softmax(dim=-1)


    def route(hidden, gate):
        logits = gate(hidden)
        return torch.softmax(logits, dim=-1)


    def loss(logits, labels):
        return -(F.softmax(logits / 2.0, dim=-1) * labels).sum()


    def masked_softmax(scores, mask):
        return torch.softmax(scores.masked_fill(mask, -1e4), dim=-1)


    class Block(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(dim, 8)

        def forward(self, x):
            return self.attn(x, x, x)[0]
    """
)
"""Five functions of attention proper (a product written there, through names or not, one
the analysis cannot follow to the softmax, a fused attention, a layer's forward calling
``nn.MultiheadAttention``); a router, a loss, a helper handed its scores, and the
``__init__`` that builds the attention layer are not."""


def test_attention_proper_is_read_from_the_code(cli: Cli, write: Write) -> None:
    write("model.py", PROPER)
    report = _json(cli("--coverage", "--format", "json", "model.py"))["total"]
    assert isinstance(report, dict)
    assert report["attention_functions"] == 9
    assert report["softmax"] == {"calls": 6, "attention": 2}  # not `biased`'s: read from code
    proper = report["attention_proper"]
    assert proper["functions"] == 5
    assert 0 < proper["expressions"] < report["tensors"]["expressions"]
    assert proper["rank_known"] <= report["tensors"]["rank_known"]
    text = cli("--coverage", "model.py").output
    assert "in attention proper (5 functions whose softmax" in text
