"""The renderer registry: results are plain data, and the views layer says how each type is
shown.

A result's ``_repr_html_``, ``to_text`` and ``plot`` (and ``SessionConfig.snippet``) call
:func:`render`, which dispatches on the object's type (through its MRO) to the function the
views registered with :func:`register` — so the core and the analyses never import a renderer,
and adding a view of a result is one registered function in ``ortlab.views``. ``import ortlab``
imports ``ortlab.views.registry``, which registers every built-in renderer.

Why a registry and not ``functools.singledispatch`` per format: one table lists every
(type, format) pair, so a test can check that every result type has every format, and a
missing one gives a clear error instead of an AttributeError deep in a notebook.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any, Concatenate, TypeVar

__all__ = ["FORMATS", "LLAMA_BENCH_FORMATS", "Renderer", "has", "register", "render"]

R = TypeVar("R")

Renderer = Callable[Concatenate[R, ...], Any]
"""A renderer of ``R``: the result first, then its options (``top=20``); what it returns is
the format's (HTML or text ``str``, a plotly figure, a code snippet)."""

LLAMA_BENCH_FORMATS = ("md", "csv", "json", "jsonl", "sql")
"""llama-bench's output formats (its ``-o``), registered for the matrix it measures."""

FORMATS = ("html", "text", "plot", "snippet", *LLAMA_BENCH_FORMATS)
_RENDERERS: dict[tuple[type, str], Callable[..., Any]] = {}


def register(cls: type[R], fmt: str, fn: Renderer[R]) -> None:
    """Show instances of ``cls`` (and subclasses) in ``fmt`` with ``fn(obj, **options)``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    _RENDERERS[(cls, fmt)] = fn


def _find(obj: object, fmt: str) -> Callable[..., object] | None:
    for cls in type(obj).__mro__:
        fn = _RENDERERS.get((cls, fmt))
        if fn is not None:
            return fn
    return None


def has(obj_or_type: object, fmt: str) -> bool:
    cls = obj_or_type if isinstance(obj_or_type, type) else type(obj_or_type)
    return any((c, fmt) in _RENDERERS for c in cls.__mro__)


def render(obj: object, fmt: str, **options: object) -> Any:
    """``obj`` in ``fmt`` through its registered renderer. Without one, HTML and text fall
    back to the one-line repr; a plot or snippet raises, naming what exists."""
    fn = _find(obj, fmt)
    if fn is not None:
        return fn(obj, **options)
    if fmt == "html":
        return f"<pre>{html.escape(repr(obj))}</pre>"
    if fmt == "text":
        return repr(obj)
    kinds = sorted(f for f in FORMATS if _find(obj, f) is not None)
    raise TypeError(
        f"{type(obj).__name__} has no {fmt} renderer (it has: {', '.join(kinds) or 'none'}). "
        "Renderers are registered by ortlab.views on `import ortlab`."
    )
