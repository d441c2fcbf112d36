"""Renderers of the memory footprint: the resident memory a session adds, setting by setting. Pure
functions, no UI library; model strings through :func:`~ortlab.views.html.esc` and
:func:`~ortlab.views.html.safe_text`, as in :mod:`ortlab.views.render`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ortlab.core.units import fmt_bytes
from ortlab.views.html import STYLE, esc, inputs_html, safe_text, table_html, table_text


def _footprint_rows(r: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["setting", "peak", "held after runs", "create ms", "against the reference"]
    rows = [
        [
            row.setting,
            fmt_bytes(row.peak),
            fmt_bytes(row.held),
            f"{float(np.median(row.create_ms)):.0f}" if row.create_ms else "—",
            row.verdict(),
        ]
        for row in r.rows
    ]
    return headers, rows


def _footprint_head(r: Any) -> str:
    return (
        f"{r.model}: resident memory the session adds ({fmt_bytes(r.weights_bytes)} of "
        f"weights), {r.repeats} fresh processes per setting, {r.runs} runs each"
    )


def footprint_text(r: Any) -> str:
    return "\n".join([safe_text(_footprint_head(r)), table_text(*_footprint_rows(r)), *r.notes])


def footprint_html(r: Any) -> str:
    return (
        f"{STYLE}<div><b>{esc(_footprint_head(r), 400)}</b></div>"
        + table_html(*_footprint_rows(r))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in r.notes)
        + inputs_html("Run with", r.feeds, r.synthetic)
    )
