"""What to install: the distribution's name, and the one-line message when an extra is missing.

The import package, the command and the pre-commit hook are ``shapecheck``; the distribution
is not (``shapecheck`` on the package index is an unrelated project), so every hint names
:data:`DISTRIBUTION`.
"""

from __future__ import annotations

import importlib.util

DISTRIBUTION = "torch-shapecheck"
"""``[project] name`` in pyproject.toml (a test holds them equal)."""

TORCH_EXTRA_MODULES = ("torch", "numpy", "jaxtyping", "beartype", "einops")
"""What the ``torch`` extra installs, as the modules the runtime half imports (a test holds
them equal to pyproject.toml's list)."""


def install_hint(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_torch_extra() -> str | None:
    """The first module of the ``torch`` extra that is not installed, or ``None``. Found
    without importing any of them."""
    for name in TORCH_EXTRA_MODULES:
        if importlib.util.find_spec(name) is None:
            return name
    return None


def torch_extra_message(what: str, missing: str) -> str:
    return f"{what} needs the torch extra ({missing} is missing): {install_hint('torch')}"


def require_torch_extra(what: str) -> None:
    """Raise :class:`ModuleNotFoundError` with one line that says what to install, before an
    import deep inside ``what`` fails with a bare "No module named 'torch'"."""
    missing = missing_torch_extra()
    if missing is not None:
        raise ModuleNotFoundError(torch_extra_message(what, missing), name=missing)
