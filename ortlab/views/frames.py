"""A result's table as a person reads it in a notebook: every column formatted one way per unit
(``ortlab.styled(g.by_layer())``) — times in µs or ms with the unit, shares as percents, bytes
and rates with their units, whole counts with thousands separators — the index hidden, no
column cut. The frame itself keeps full precision (the numbers are the result's; only their
display changes)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.units import fmt_bandwidth, fmt_bytes, fmt_flops, fmt_ms, fmt_num

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

    from ortlab.core.result import Table

__all__ = ["column_format", "styled"]


def _guard(fmt: Callable[[float], str]) -> Callable[[object], str]:
    def show(v: object) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "—"
        if not isinstance(v, int | float | np.number):
            return str(v)  # pandas' NA, a text in a numeric column
        return fmt(float(v))

    return show


_RULES: list[tuple[Callable[[str], bool], Callable[[float], str]]] = [
    (lambda c: c in ("share", "fraction", "dram_fraction", "achieved_fraction"), "{:.1%}".format),
    (lambda c: c.endswith(("_share", "_pct")), "{:.1%}".format),
    (lambda c: c.startswith("us") or c.endswith("_us"), lambda v: f"{v:,.0f} µs"),
    (lambda c: c.endswith("_ms") or c == "ms", fmt_ms),
    (lambda c: c.endswith(("tokens_per_s", "_ts")), fmt_num),
    (lambda c: c in ("achieved_flops", "peak_flops"), lambda v: fmt_flops(v, "/s")),
    (lambda c: c in ("achieved_bytes", "bandwidth", "dram_bandwidth"), fmt_bandwidth),
    (lambda c: c == "flops", fmt_flops),
    (lambda c: c == "bytes" or c.endswith("_bytes"), fmt_bytes),
    (lambda c: c.startswith(("kld", "cosine")), "{:.4f}".format),
]


TEXT_WIDTH = "24em"
"""The widest a text column is drawn (longer text wraps)."""


def column_format(column: str) -> Callable[[object], str] | None:
    """How a column of this name is shown (None: as pandas shows it)."""
    for test, fmt in _RULES:
        if test(column):
            return _guard(fmt)
    return None


def styled(frame: Table) -> Styler:
    """``frame`` as a pandas Styler: each numeric column formatted by its name's unit
    (:func:`column_format`), the index hidden, text left-aligned and wrapped past
    :data:`TEXT_WIDTH` (a node's path would widen the table past a notebook's cell)."""
    import pandas as pd

    formats = {}
    for c in frame.columns:
        fmt = column_format(str(c))
        if fmt is not None and pd.api.types.is_numeric_dtype(frame[c]):
            formats[c] = fmt
        elif pd.api.types.is_float_dtype(frame[c]):
            formats[c] = _guard("{:,.3g}".format)
    style: Styler = frame.style.format(formats).hide(axis="index")
    text = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    wrap = {"text-align": "left", "max-width": TEXT_WIDTH, "overflow-wrap": "anywhere"}
    return style.set_properties(subset=text, **wrap)
