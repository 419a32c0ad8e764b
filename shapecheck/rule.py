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
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar

from shapecheck.record import record
from shapecheck.selection import COMMENT_FAMILY

if TYPE_CHECKING:
    import ast

    from shapecheck.analysis import ModuleAnalysis
    from shapecheck.diagnostics import FixEdits, Severity
    from shapecheck.fixes import FixOffer
    from shapecheck.suppression import Directive, Suppressions

CODE_PATTERN = re.compile(r"SC(?!000)[0-9]{3}")
"""SC000 is no rule: it reports input that could not be checked."""


@record
class Violation:
    """What a rule found: the node to point at, the message, (rarely) a severity other than
    the rule's own, and the fix it offers when there is one right rewrite."""

    node: ast.AST
    message: str
    severity: Severity | None = None
    fix: FixOffer | None = None


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


@record
class CommentViolation:
    """What a :class:`SuppressionRule` found: a suppression comment, the message, the fix."""

    directive: Directive
    message: str
    fix: FixEdits


class SuppressionRule(Rule):
    """A rule about shapecheck's own suppression comments: the SC0 family (ruff's RUF100 is one).

    It runs in the suppression pass, after every other rule, on the comments their findings
    did or did not use: :meth:`check_suppressions`, never :meth:`Rule.check`. Only a selector
    that names it turns it on, never the default ``ALL`` (``shapecheck.selection`` reads that
    from the code, so choosing rules imports none). It has no fixtures: what it reports is a
    comment, which PyTorch never runs.
    """

    def check_suppressions(
        self, suppressions: Suppressions, ran: frozenset[str]
    ) -> Iterator[CommentViolation]:
        """``ran``: the codes of the rules whose findings went through ``suppressions``."""
        raise NotImplementedError


def rules_folders() -> list[str]:
    """Where the rule modules are, found without importing them."""
    spec = importlib.util.find_spec("shapecheck.rules")
    if spec is not None and spec.submodule_search_locations is not None:
        return [str(Path(folder).resolve()) for folder in spec.submodule_search_locations]
    return [str(_checkout_rules())]


def _checkout_rules() -> Path:
    """The rules of the source checkout this package runs from, where no install maps them.

    ``python -m shapecheck`` in a checkout's root imports the checkout's ``shapecheck/`` (the
    current directory comes first on ``sys.path``) ahead of any install; its rules are the
    checkout's top-level ``rules/``, which only an install maps to ``shapecheck.rules``.
    """
    folder = Path(__file__).resolve().parents[1] / "rules"
    if not (folder / "__init__.py").is_file():
        from shapecheck.extras import DISTRIBUTION

        raise ModuleNotFoundError(
            f"shapecheck.rules is missing (not installed, and no {folder}): reinstall "
            f"{DISTRIBUTION}",
            name="shapecheck.rules",
        )
    return folder


def _rules_package() -> ModuleType:
    """``shapecheck.rules``, installed or (see :func:`_checkout_rules`) the checkout's."""
    if importlib.util.find_spec("shapecheck.rules") is not None:
        return importlib.import_module("shapecheck.rules")
    folder = _checkout_rules()
    spec = importlib.util.spec_from_file_location(
        "shapecheck.rules", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package  # its rule modules import as shapecheck.rules.scNNN_...
    spec.loader.exec_module(package)
    sys.modules["shapecheck"].rules = package  # type: ignore[attr-defined]
    return package


@cache
def rule_codes() -> tuple[str, ...]:
    """Every rule's code, read from its module's name (``sc101_...``) without importing it:
    validating ``--select`` must not cost the rules' import when every result is cached."""
    names = [info.name for info in pkgutil.iter_modules(rules_folders())]
    return tuple(sorted(name[:5].upper() for name in names if CODE_PATTERN.match(name.upper())))


@cache
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class in ``shapecheck.rules``, sorted by code."""
    package = _rules_package()
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
                if issubclass(value, SuppressionRule) != value.code.startswith(COMMENT_FAMILY):
                    raise RuntimeError(
                        f"{module.__name__}: {COMMENT_FAMILY} codes are for suppression rules"
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
