"""Runtime shape checks: jaxtyping annotations enforced by beartype, once per call signature.

Checking every call costs jaxtyping + beartype about 100-600 µs. Whether a call passes depends
only on the shapes and dtypes of its tensors and the types of its other arguments, so each
distinct signature is checked once and then trusted. :func:`set_runtime_checks` is the one
switch: turn checks off in production, or to run under ``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch
from beartype import beartype
from jaxtyping import jaxtyped

F = TypeVar("F", bound=Callable[..., Any])

_enabled = True
_MAX_SIGNATURES = 4096


def set_runtime_checks(enabled: bool) -> None:
    """Turn the reference modules' runtime shape checks on (the default) or off."""
    global _enabled
    _enabled = enabled


def runtime_checks_enabled() -> bool:
    return _enabled


def shape_checked(function: F) -> F:
    """Check ``function``'s jaxtyping annotations at run time, once per call signature."""
    typed = jaxtyped(typechecker=beartype)(function)
    passed: set[tuple[object, ...]] = set()

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if not _enabled:
            return function(*args, **kwargs)
        key = _signature(args, kwargs)
        if key in passed:
            return function(*args, **kwargs)
        result = typed(*args, **kwargs)
        if len(passed) < _MAX_SIGNATURES:
            passed.add(key)
        return result

    return cast(F, checked)


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[object, ...]:
    return (
        *(_describe(value) for value in args),
        *((name, _describe(value)) for name, value in kwargs.items()),
    )


def _describe(value: Any) -> object:
    if isinstance(value, torch.Tensor):
        return (value.shape, value.dtype)
    return type(value)
