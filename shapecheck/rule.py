"""Rules: the base class every rule module in ``shapecheck.rules`` subclasses, and discovery.

A rule is a class with ``code``, ``name``, ``severity`` and ``summary``, whose docstring is its
documentation (sections *What it does*, *Why is this bad?*, *Example*, *Use instead*,
*Runtime evidence*), and whose :meth:`Rule.check` asks the module's analysis questions and
yields :class:`Violation` objects. The engine finds rules by scanning the package; adding a
rule is adding a module.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import ast

    from shapecheck.analysis import ModuleAnalysis
    from shapecheck.diagnostics import Severity
    from shapecheck.fixes import FixRecipe

CODE_PATTERN = re.compile(r"SC[1-9][0-9]{2}")


@dataclass(frozen=True)
class Violation:
    """What a rule found: the node to point at, the message, (rarely) a severity other than
    the rule's own, and how to write the fix when there is one right rewrite."""

    node: ast.AST
    message: str
    severity: Severity | None = None
    fix: FixRecipe | None = None


def assuming(guess: str | None) -> str:
    """What a message adds when the facts it rests on rest on a guess (see
    ``TensorFact.guess``)."""
    return f" (assuming {guess})" if guess else ""


class Rule:
    """Base class of all rules; see the module docstring."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    summary: ClassVar[str]

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        raise NotImplementedError

    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def fix_safety(cls) -> str | None:
        """``"safe"`` or ``"unsafe"`` as the documentation's Fix safety section opens; ``None``
        for a rule without fixes."""
        _, found, section = cls.documentation().partition("## Fix safety")
        return section.split()[0].rstrip(":,.").lower() if found else None


def rules_folders() -> list[str]:
    """Where the rule modules are, found without importing them."""
    spec = importlib.util.find_spec("shapecheck.rules")
    assert spec is not None and spec.submodule_search_locations is not None
    return [str(Path(folder).resolve()) for folder in spec.submodule_search_locations]


@cache
def rule_codes() -> tuple[str, ...]:
    """Every rule's code, read from its module's name (``sc101_...``) without importing it:
    validating ``--select`` must not cost the rules' import when every result is cached."""
    names = [info.name for info in pkgutil.iter_modules(rules_folders())]
    return tuple(sorted(name[:5].upper() for name in names if CODE_PATTERN.match(name.upper())))


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class in ``shapecheck.rules``, sorted by code."""
    package = importlib.import_module("shapecheck.rules")
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                if not CODE_PATTERN.fullmatch(value.code):
                    raise RuntimeError(f"{module.__name__}: bad rule code {value.code!r}")
                if not info.name.upper().startswith(value.code):
                    raise RuntimeError(
                        f"{module.__name__}: rule {value.code} in a module named otherwise"
                    )
                if value.code in found:
                    raise RuntimeError(f"two rules claim {value.code}")
                found[value.code] = value
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper():
            return rule
    return None
