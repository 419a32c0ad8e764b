"""Which classes are ``nn.Module``s, as far as one file tells (the context SC7xx rules need)."""

from __future__ import annotations

import ast
import textwrap

from shapecheck.analysis import analyse

CLASSES = textwrap.dedent(
    """\
    import torch.nn as nn
    from torch import nn as tnn
    from transformers.modeling_layers import GradientCheckpointingLayer
    from ...modeling_layers import DecoderLayer

    class Plain(nn.Module):
        pass

    class Linear(tnn.Linear):
        pass

    class Child(Plain):
        pass

    class Grandchild(Child):
        pass

    class Layer(GradientCheckpointingLayer):
        def forward(self, x):
            return x

    class Relative(DecoderLayer):
        def forward(self, x):
            return x

    class Config(DecoderLayer):
        def to_dict(self):
            return {}

    class Error(Exception):
        def forward(self, x):
            return x

    class Loose:
        def forward(self, x):
            return x

    class First(Second):
        pass

    class Second(First):
        pass
    """
)


def test_module_classes_by_base_and_by_forward() -> None:
    analysis = analyse(ast.parse(CLASSES), CLASSES)
    verdicts = {
        node.name: analysis.is_module_class(node)
        for node in analysis.module.body
        if isinstance(node, ast.ClassDef)
    }
    assert verdicts == {
        "Plain": True,
        "Linear": True,
        "Child": True,
        "Grandchild": True,
        "Layer": True,  # from another file, with a forward
        "Relative": True,  # a relative import binds no name: still another file's
        "Config": False,  # another file's, but nothing marks it as a module
        "Error": False,
        "Loose": False,  # no base: no nn.Module
        "First": False,  # a cycle of bases ends, and is no module
        "Second": False,
    }
