from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.facts import TensorFact
from shapecheck.rule import Rule, Violation


class SoftmaxBeforeCrossEntropy(Rule):
    """
    ## What it does
    Finds softmax probabilities passed to `F.cross_entropy` or `nn.CrossEntropyLoss` —
    including through a model of the same file whose `forward` returns a softmax, like the
    seed article's output layer.

    ## Why is this bad?
    Cross-entropy applies log-softmax itself. Given probabilities it computes
    `log_softmax(softmax(x))`: the loss is squashed towards `log(vocab)`, gradients nearly
    vanish, and training crawls while looking fine.

    ## Example
    ```python
    probs = F.softmax(self.proj(h), dim=-1)
    loss = F.cross_entropy(probs.view(-1, vocab), targets.view(-1))
    ```

    ## Use instead
    ```python
    logits = self.proj(h)
    loss = F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
    ```

    ## Runtime evidence
    No error: the loss differs from the reference (cross-entropy of the logits)
    (fixtures/SC602_*.py).
    """

    code = "SC602"
    name = "softmax-before-cross-entropy"
    severity = "error"
    summary = "softmax probabilities passed to a cross-entropy loss"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        functional = analysis.calls_to("torch.nn.functional.cross_entropy")
        modules = analysis.module_calls("torch.nn.CrossEntropyLoss")
        for call in [*functional, *modules]:
            inputs = argument(call, 0, "input")
            if inputs is None:
                continue
            fact = analysis.fact(inputs)
            if isinstance(fact, TensorFact) and fact.probabilities:
                yield Violation(
                    inputs,
                    "cross-entropy applies log-softmax itself: these are softmax probabilities, "
                    "pass the logits",
                )
