"""``shapecheck --show-shapes`` as users call it: a class, a line range, ``return`` lines,
names kept to their scope, and ``--format json``."""

from __future__ import annotations

import json
import textwrap

from tests.test_cli import Cli, Write

MODEL = textwrap.dedent(
    """\
    import math

    import torch
    import torch.nn as nn


    def split_heads(t, heads):
        n, s, d = t.shape
        return t.view(n, s, heads, d // heads).transpose(1, 2)


    class Attention(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.num_heads = num_heads
            self.head_dim = d_model // num_heads
            self.wq = nn.Linear(d_model, d_model)

        def forward(self, x):
            batch, seq, width = x.shape
            q = split_heads(self.wq(x), self.num_heads)
            scores = q @ q.transpose(-2, -1) / math.sqrt(self.head_dim)
            causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
            weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
            values = q.half()
            return weights @ values, weights


    class AttentionPool(nn.Module):
        def forward(self, x):
            return x.mean(dim=1)
    """
)
"""``split_heads`` (lines 7-9), ``Attention.__init__`` (13-17), ``Attention.forward``
(19-26), and ``AttentionPool.forward`` (30-31), whose class name starts like the other's."""

HEADS = "[batch, self.num_heads, seq, d_model//self.num_heads]"
"""The shape of ``q`` in ``Attention.forward``."""


def headers(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("model.py:")]


def row(output: str, number: int) -> str:
    """The listing's row for line ``number``."""
    [found] = [line for line in output.splitlines() if line.startswith(f"{number:>5} | ")]
    return found


def test_a_class_lists_each_of_its_methods_and_nothing_else(cli: Cli, write: Write) -> None:
    write("model.py", MODEL)
    result = cli("--show-shapes", "model.py:Attention")
    assert result.exit_code == 0, result.output
    # not AttentionPool.forward, whose class merely starts with the same letters
    assert headers(result.output) == [
        "model.py:13 Attention.__init__",
        "model.py:19 Attention.forward",
    ]
    assert row(result.output, 21).endswith(f"# q: {HEADS}")


def test_a_line_range_lists_the_functions_overlapping_it(cli: Cli, write: Write) -> None:
    write("model.py", MODEL)
    both = cli("--show-shapes", "model.py:9-13")
    assert both.exit_code == 0, both.output
    assert headers(both.output) == ["model.py:7 split_heads", "model.py:13 Attention.__init__"]
    one = cli("--show-shapes", "model.py:22")
    assert headers(one.output) == ["model.py:19 Attention.forward"]


def test_a_line_range_outside_every_function_or_backwards_is_an_error(
    cli: Cli, write: Write
) -> None:
    write("model.py", MODEL)
    between = cli("--show-shapes", "model.py:10-11")
    assert between.exit_code == 2
    assert "no function overlapping lines 10-11; functions: Attention.__init__" in between.output
    backwards = cli("--show-shapes", "model.py:13-9")
    assert backwards.exit_code == 2
    assert "1 <= FIRST <= LAST" in backwards.output


def test_a_return_line_notes_what_it_returns(cli: Cli, write: Write) -> None:
    write("model.py", MODEL)
    result = cli("--show-shapes", "model.py:Attention.forward")
    assert row(result.output, 26).endswith(
        f"# return[0]: {HEADS} · attention output (weights · values); "
        "return[1]: [batch, self.num_heads, seq, seq] · attention weights (a softmax of scores)"
    )
    helper = cli("--show-shapes", "model.py:split_heads")
    assert row(helper.output, 9).endswith("# return: [n, heads, s, d//heads]")


def test_leading_axes_of_unknown_number_keep_their_name(cli: Cli, write: Write) -> None:
    """jaxtyping's ``*batch`` and Hugging Face's ``*hidden_states.shape[:-1]`` stay in front
    of the axes that are known; none of those is lost."""
    write(
        "batched.py",
        textwrap.dedent(
            """\
            import torch.nn as nn
            from jaxtyping import Float
            from torch import Tensor


            def attend(q: Float[Tensor, "*batch seq d"], k: Float[Tensor, "*batch seq d"]):
                return q @ k.transpose(-2, -1)


            class Split(nn.Module):
                def __init__(self, d_model, num_heads):
                    super().__init__()
                    self.head_dim = d_model // num_heads
                    self.q_proj = nn.Linear(d_model, d_model)

                def forward(self, hidden_states):
                    hidden_shape = (*hidden_states.shape[:-1], -1, self.head_dim)
                    return self.q_proj(hidden_states).view(hidden_shape)
            """
        ),
    )
    result = cli("--show-shapes", "batched.py")
    assert "# q: [*batch, seq, d]; k: [*batch, seq, d]" in result.output
    assert "# return: [*batch, seq, seq]" in result.output
    assert "# return: [*hidden_states.shape[:-1], num_heads, self.head_dim]" in result.output


def test_the_listing_says_each_tensors_role(cli: Cli, write: Write) -> None:
    write("model.py", MODEL)
    result = cli("--show-shapes", "model.py:Attention.forward")
    assert row(result.output, 22).endswith(
        "# scores: [batch, self.num_heads, seq, seq] · attention scores, scaled by "
        "1/sqrt(self.head_dim)"
    )
    assert row(result.output, 23).endswith("# causal: [seq, seq] · boolean mask, True = attend")


def test_a_scaled_tensor_is_no_additive_mask(cli: Cli, write: Write) -> None:
    """A product with a number is a mask's fill only where the number masks: ``q *
    self.scale`` was listed as "additive mask"."""
    write(
        "fill.py",
        textwrap.dedent(
            """\
            import torch


            def forward(q: torch.Tensor, mask: torch.Tensor, scale: float):
                q = q * scale
                half = q * 0.5
                bias = (1.0 - mask) * -10000.0
                return q, half, bias
            """
        ),
    )
    result = cli("--show-shapes", "fill.py")
    assert row(result.output, 5).endswith("# q: ?")
    assert row(result.output, 6).endswith("# half: ?")
    assert row(result.output, 7).endswith("# bias: ? · additive mask (fill -10000)")


def test_a_helper_shows_its_callers_sizes_in_its_own_names(cli: Cli, write: Write) -> None:
    """The analysis gives ``split_heads`` the ``[batch, seq, d_model]`` its caller passes;
    ``batch`` and ``seq`` are not names of ``split_heads`` (before, the listing said
    ``t: [batch, seq, d_model]``)."""
    write("model.py", MODEL)
    result = cli("--show-shapes", "model.py:split_heads")
    assert row(result.output, 7).endswith("# t: [n, s, d]")
    assert "batch" not in result.output and "seq" not in result.output


def test_a_callers_listing_never_names_the_callees_sizes(cli: Cli, write: Write) -> None:
    """``square`` sizes its tensor by its own parameter; in ``attend`` that name means nothing
    (before, the listing said ``mask: [size, size]`` there)."""
    write(
        "model.py",
        "import torch\n\n\n"
        "def square(size):\n"
        "    return torch.ones(size, size)\n\n\n"
        "def attend(tokens):\n"
        "    mask = square(len(tokens))\n"
        "    return mask\n",
    )
    result = cli("--show-shapes", "model.py")
    assert result.exit_code == 0, result.output
    assert row(result.output, 5).endswith("# return: [size, size]")
    assert row(result.output, 9).endswith("# mask: [?, ?]")
    assert row(result.output, 10).endswith("# return: [?, ?]")


def test_json_lists_every_note_with_the_same_keys(cli: Cli, write: Write) -> None:
    write("model.py", MODEL)
    result = cli("--show-shapes", "--format", "json", "model.py:Attention.forward")
    assert result.exit_code == 0, result.output
    records = json.loads(result.output)
    keys = ["path", "function", "line", "column", "name", "kind", "shape", "value", "role"]
    keys += ["layout", "dtype", "caveats"]
    assert all(list(record) == keys for record in records)
    by_name = {record["name"]: record for record in records}
    tensors = ["q", "scores", "causal", "weights", "values", "return[0]", "return[1]"]
    assert [name for name in by_name if name in tensors] == tensors
    assert by_name["scores"] == {
        "path": "model.py",
        "function": "Attention.forward",
        "line": 22,
        "column": 9,
        "name": "scores",
        "kind": "tensor",
        "shape": ["batch", "self.num_heads", "seq", "seq"],
        "value": None,
        "role": "attention scores, scaled by 1/sqrt(self.head_dim)",
        "layout": "contiguous",
        "dtype": None,
        "caveats": [],
    }
    assert by_name["values"]["dtype"] == "float16"
    assert by_name["causal"]["dtype"] == "bool"
    assert by_name["q"]["layout"] == "not contiguous (`.transpose(1, 2)`, line 9)"


def test_json_covers_every_file_and_sizes(cli: Cli, write: Write) -> None:
    write("model.py", MODEL)
    write("other.py", "import torch\n\n\ndef f(x):\n    y = x.view(2, 3)\n    return y\n")
    result = cli("--show-shapes", "--format", "json", "model.py:Attention.__init__", "other.py")
    records = json.loads(result.output)
    assert [(r["path"], r["name"], r["kind"], r["value"]) for r in records[:1]] == [
        ("model.py", "self.head_dim", "size", "d_model//num_heads")
    ]
    assert [(r["path"], r["line"], r["name"], r["shape"]) for r in records[1:]] == [
        ("other.py", 4, "x", None),
        ("other.py", 5, "y", ["2", "3"]),
        ("other.py", 6, "return", ["2", "3"]),
    ]


def test_show_shapes_prints_text_or_json_only(cli: Cli, write: Write) -> None:
    write("model.py", MODEL)
    result = cli("--show-shapes", "--format", "sarif", "model.py")
    assert result.exit_code == 2
    assert "--show-shapes prints text or json" in result.output
