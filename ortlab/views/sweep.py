"""Renderers of ``ortlab.sweep``: the per-shape table (measured latency with its interval,
placement, peak memory; predicted target shares) and the curve."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ortlab.core.units import fmt_bytes
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.sweep import SweepResult, SweepRow

__all__ = ["sweep_figure", "sweep_html", "sweep_text"]


def _interval(r: SweepRow) -> str:
    if r.error:
        return "failed"
    if math.isnan(r.low_ms):
        return f"{r.p50_ms:.3g} (no interval)"
    return f"{r.p50_ms:.3g} [{r.low_ms:.3g}, {r.high_ms:.3g}]"


def _rows(s: SweepResult) -> tuple[list[str], list[list[object]]]:
    eps = list(dict.fromkeys(ep for r in s.rows for ep in r.nodes_per_ep))
    head = [
        "shape",
        "p50 ms [95 % interval]",
        *(f"nodes on {e.removesuffix('ExecutionProvider')}" for e in eps),
        "fallbacks",
        "Memcpy",
        "peak memory",
        *(f"{t} would take (predicted)" for t in s.targets),
        "error",
    ]
    rows = []
    for r in s.rows:
        shares = [
            ("" if math.isnan(v) else f"{v:.0%}")
            for v in (r.predicted.get(t, math.nan) for t in s.targets)
        ]
        rows.append(
            [
                r.label,
                _interval(r),
                *(r.nodes_per_ep.get(e, 0) for e in eps),
                r.fallbacks,
                r.memcpy,
                fmt_bytes(r.peak_bytes) if r.peak_bytes >= 0 else "",
                *shares,
                r.error,
            ]
        )
    return head, rows


def _head(s: SweepResult) -> str:
    swept = "; ".join(f"{k} in {v}" for k, v in s.swept.items())
    return f"{s.model}: {len(s.rows)} shapes ({swept}); latency and memory measured"


def sweep_text(s: SweepResult) -> str:
    return "\n".join(
        [safe_text(_head(s), 400), table_text(*_rows(s)), *(safe_text(n, 400) for n in s.notes)]
    )


def sweep_html(s: SweepResult) -> str:
    return (
        f"{STYLE}<div><b>{esc(_head(s), 400)}</b></div>"
        + table_html(*_rows(s))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in s.notes)
    )


def sweep_figure(s: SweepResult) -> go.Figure:
    """Median latency per shape with its interval (error bars), peak memory on a second
    axis; dotted lines: each target's predicted share of nodes."""
    import plotly.graph_objects as go

    from ortlab.views.figure import layout

    ok = [r for r in s.rows if not r.error]
    x = [esc(r.label) for r in ok]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[r.p50_ms for r in ok],
            mode="lines+markers",
            name="p50 ms (measured)",
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [0 if math.isnan(r.high_ms) else r.high_ms - r.p50_ms for r in ok],
                "arrayminus": [0 if math.isnan(r.low_ms) else r.p50_ms - r.low_ms for r in ok],
            },
        )
    )
    fig.add_trace(
        go.Bar(
            x=x,
            y=[max(r.peak_bytes, 0) / 1e6 for r in ok],
            yaxis="y2",
            name="peak memory MB (measured)",
            opacity=0.35,
            marker_color="#F58518",
        )
    )
    for t in s.targets:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[100 * r.predicted.get(t, math.nan) for r in ok],
                yaxis="y3",
                mode="lines+markers",
                line={"dash": "dot"},
                name=f"{esc(t)}: % of nodes (predicted)",
            )
        )
    extra: dict[str, Any] = {}
    if s.targets:
        extra["yaxis3"] = {
            "overlaying": "y",
            "side": "right",
            "range": [0, 105],
            "showgrid": False,
            "visible": False,
        }
    return layout(
        fig,
        f"{esc(s.model)}: latency and memory per shape",
        yaxis={"title": "p50 latency, ms"},
        yaxis2={"title": "peak memory, MB", "overlaying": "y", "side": "right", "showgrid": False},
        legend={"orientation": "h", "y": -0.25},
        height=420,
        **extra,
    )
