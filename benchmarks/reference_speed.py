"""What the reference modules cost: runtime-check overhead, and the seed article's table.

    python benchmarks/reference_speed.py [--device cpu|cuda] [--batch 8] [--seq 128]

1. Per-call overhead at small sizes, where overhead shows: the reference
   ``scaled_dot_product_attention`` with checks on (steady state: once per signature),
   checks off, the same body without annotations, and jaxtyping + beartype on every call.
2. The seed article's table: inference forward time for num_heads in {4, 8} x d_model in
   {512, 1024}, for the reference ``MultiHeadAttention`` (checks off and on),
   ``nn.MultiheadAttention`` and a plain matmul-softmax-matmul module, measured side by side
   in one run, as ratios to ``nn.MultiheadAttention``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import torch
from beartype import beartype
from jaxtyping import jaxtyped
from torch import Tensor, nn

from shapecheck.reference import MultiHeadAttention, scaled_dot_product_attention
from shapecheck.reference import set_runtime_checks as set_checks
from shapecheck.reference.attention import scaled_dot_product_attention as annotated_sdpa

SDPA_BODY = annotated_sdpa.__wrapped__  # type: ignore[attr-defined]


def plain_sdpa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """The same computation without annotations or checks."""
    scores = (q * (1.0 / math.sqrt(q.size(-1)))) @ k.transpose(-2, -1)
    return scores.softmax(dim=-1) @ v


class NaiveAttention(nn.Module):
    """Straightforward multi-head attention: matmul, softmax, matmul."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.wq, self.wk = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.wv, self.fc_out = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        batch, seq, d_model = x.shape
        q = self.wq(x).view(batch, seq, self.num_heads, self.d_k).transpose(1, 2)
        k = self.wk(x).view(batch, seq, self.num_heads, self.d_k).transpose(1, 2)
        v = self.wv(x).view(batch, seq, self.num_heads, self.d_k).transpose(1, 2)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.d_k)).softmax(dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(batch, seq, d_model)
        projected: Tensor = self.fc_out(out)
        return projected


def timed(
    calls: dict[str, tuple[Callable[[], object], bool]], device: str, repeat: int, number: int
) -> dict[str, float]:
    """Median seconds per call of each contender, measured in interleaved rounds.

    Each round times every contender once (``number`` calls, checks switched as asked), so
    drift on a noisy machine hits all of them alike.
    """
    rounds: dict[str, list[float]] = {name: [] for name in calls}
    for warm_up in (True, False):
        for _ in range(2 if warm_up else repeat):
            for name, (call, checks) in calls.items():
                set_checks(checks)
                if device == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(number):
                    call()
                if device == "cuda":
                    torch.cuda.synchronize()
                if not warm_up:
                    rounds[name].append((time.perf_counter() - start) / number)
    set_checks(True)
    return {name: statistics.median(times) for name, times in rounds.items()}


def overhead(device: str) -> None:
    q, k, v = (torch.randn(2, 3, n, 4, device=device) for n in (5, 7, 7))
    every_call = jaxtyped(typechecker=beartype)(SDPA_BODY)
    seconds = timed(
        {
            "no annotations": (lambda: plain_sdpa(q, k, v), False),
            "checks off": (lambda: scaled_dot_product_attention(q, k, v), False),
            "checks on (once per signature)": (lambda: scaled_dot_product_attention(q, k, v), True),
            "jaxtyping + beartype every call": (lambda: every_call(q, k, v), False),
        },
        device,
        repeat=9,
        number=1000,
    )
    print(f"\nper-call cost, scaled_dot_product_attention on [2, 3, 5|7, 4] ({device})")
    baseline = seconds["no annotations"]
    for name, value in seconds.items():
        print(f"  {name:34s} {value * 1e6:8.1f} µs   +{(value - baseline) * 1e6:6.1f} µs")


def seed_table(device: str, batch: int, seq: int) -> None:
    print(f"\nforward time, batch {batch}, seq {seq}, inference ({device}); ratio to nn.MHA")
    columns = ["reference (off)", "reference (on)", "naive"]
    header = f"  {'heads':>5} {'d_model':>7} {'nn.MHA':>10}"
    print(header + "".join(f" {name:>16}" for name in columns))
    for d_model in (512, 1024):
        for heads in (4, 8):
            torch.manual_seed(0)
            x = torch.randn(batch, seq, d_model, device=device)
            reference = MultiHeadAttention(d_model, heads).to(device).eval()
            naive = NaiveAttention(d_model, heads).to(device).eval()
            torch_mha = nn.MultiheadAttention(d_model, heads, batch_first=True).to(device).eval()
            with torch.no_grad():
                seconds = timed(_contenders(x, reference, naive, torch_mha), device, 7, 5)
            base = seconds["nn.MHA"]
            row = f"  {heads:>5} {d_model:>7} {base * 1e3:8.2f}ms"
            print(row + "".join(f" {seconds[name] / base:15.2f}x" for name in columns))


def _contenders(
    x: Tensor, reference: nn.Module, naive: nn.Module, torch_mha: nn.MultiheadAttention
) -> dict[str, tuple[Callable[[], object], bool]]:
    return {
        "nn.MHA": (lambda: torch_mha(x, x, x, need_weights=False), False),
        "reference (off)": (lambda: reference(x, x, x), False),
        "reference (on)": (lambda: reference(x, x, x), True),
        "naive": (lambda: naive(x), False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    options = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    overhead(options.device)
    seed_table(options.device, options.batch, options.seq)


if __name__ == "__main__":
    main()
