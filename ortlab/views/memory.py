"""The memory footprint's room: the resident memory a session adds, setting by setting, as text,
HTML and a figure. Pure functions, no UI library; model strings through
:func:`~ortlab.views.html.esc` and :func:`~ortlab.views.html.safe_text`; plotly imported inside
the figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.units import fmt_bytes
from ortlab.views.figure import layout
from ortlab.views.html import STYLE, esc, inputs_html, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.memory import FootprintResult


def _footprint_rows(r: FootprintResult) -> tuple[list[str], list[list[object]]]:
    headers = ["setting", "peak", "held after runs", "create ms", "against the reference"]
    rows: list[list[object]] = [
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


def _footprint_head(r: FootprintResult) -> str:
    return (
        f"{r.model}: resident memory the session adds ({fmt_bytes(r.weights_bytes)} of "
        f"weights), {r.repeats} fresh processes per setting, {r.runs} runs each"
    )


def footprint_text(r: FootprintResult) -> str:
    return "\n".join([safe_text(_footprint_head(r)), table_text(*_footprint_rows(r)), *r.notes])


def footprint_html(r: FootprintResult) -> str:
    return (
        f"{STYLE}<div><b>{esc(_footprint_head(r), 400)}</b></div>"
        + table_html(*_footprint_rows(r))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in r.notes)
        + inputs_html("Run with", r.feeds, r.synthetic)
    )


def footprint_figure(r: FootprintResult) -> go.Figure:
    """Peak and held resident memory per setting (medians; whiskers: min to max over the
    fresh processes)."""
    import plotly.graph_objects as go

    mib = 1024**2

    fig = go.Figure()
    for what, color in (("peak", "#4C78A8"), ("held", "#F58518")):
        vals = [getattr(row, f"{what}_bytes") for row in r.rows]
        med = [float(np.median(v)) / mib if v else float("nan") for v in vals]
        fig.add_trace(
            go.Bar(
                name=f"{what} (MB)",
                x=[esc(row.setting) for row in r.rows],
                y=med,
                marker_color=color,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [max(v) / mib - m if v else 0 for v, m in zip(vals, med, strict=True)],
                    "arrayminus": [
                        m - min(v) / mib if v else 0 for v, m in zip(vals, med, strict=True)
                    ],
                },
                text=[esc(row.verdict(), 300) for row in r.rows],
                textposition="none",
                hovertemplate="%{x}: %{y:.1f} MB<br>%{text}<extra></extra>",
            )
        )
    fig.add_hline(y=r.weights_bytes / mib, line_dash="dot", annotation_text="the model's weights")
    return layout(
        fig,
        f"{esc(r.model)}: resident memory the session adds, per setting",
        yaxis_title="MB (1024², as in the tables)",
        barmode="group",
        height=380,
    )
