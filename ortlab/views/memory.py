"""The memory room: the resident memory a session adds, setting by setting, and whether it
grows run after run (soak), as text, HTML and a figure. Pure functions, no UI library; model
strings through :func:`~ortlab.views.html.esc` and :func:`~ortlab.views.html.safe_text`;
plotly imported inside the figure.
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
    from ortlab.analysis.soak import SoakResult


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


def _page(
    head: str, table: tuple[list[str], list[list[object]]], r: FootprintResult | SoakResult
) -> str:
    """A memory result as HTML: its head, its table, its notes, the inputs it ran with."""
    return (
        f"{STYLE}<div><b>{esc(head, 600)}</b></div>"
        + table_html(*table)
        + "".join(f"<div><i>{esc(n, 600)}</i></div>" for n in r.notes)
        + inputs_html("Run with", r.feeds, r.synthetic)
    )


def footprint_html(r: FootprintResult) -> str:
    return _page(_footprint_head(r), _footprint_rows(r), r)


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


def _soak_rows(r: SoakResult) -> tuple[list[str], list[list[object]]]:
    headers = ["setting", "phase", "runs", "resident first → last", "growth per run", "arena"]
    rows: list[list[object]] = [
        [
            s.setting,
            s.phase,
            len(s.rss),
            f"{fmt_bytes(s.rss[0])} → {fmt_bytes(s.rss[-1])}" if s.rss else "—",
            s.verdict(),
            fmt_bytes(s.arena_grown) + " extended" if s.rss else "",
        ]
        for s in r.rows
    ]
    return headers, rows


def soak_text(r: SoakResult) -> str:
    return "\n".join([safe_text(r.sentence()), table_text(*_soak_rows(r)), *r.notes])


def soak_html(r: SoakResult) -> str:
    return _page(r.sentence(), _soak_rows(r), r)


def soak_figure(r: SoakResult) -> go.Figure:
    """The resident set after each run, one line per setting; the phases one after another
    on the x axis, a dotted line where each starts."""
    import plotly.graph_objects as go

    mib = 1024**2
    fig = go.Figure()
    phases = list(dict.fromkeys(s.phase for s in r.rows))
    width = max((len(s.rss) for s in r.rows), default=0)
    for setting in dict.fromkeys(s.setting for s in r.rows):
        xs: list[int] = []
        ys: list[float] = []
        for k, phase in enumerate(phases):
            s = next((x for x in r.rows if x.setting == setting and x.phase == phase), None)
            if s is None:
                continue
            xs += [k * width + i + 1 for i in range(len(s.rss))]
            ys += [v / mib for v in s.rss]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=esc(setting)))
    for k, phase in enumerate(phases):
        fig.add_vline(x=k * width + 0.5, line_dash="dot", annotation_text=esc(phase))
    return layout(
        fig,
        f"{esc(r.model)}: resident memory after each run, per setting",
        xaxis_title="run (the phases one after another)",
        yaxis_title="MB (1024², as in the tables)",
        height=400,
    )
