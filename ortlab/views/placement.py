"""The placement's room: where each node runs (per provider, partitions, EP boundaries, why
nodes are not on the wanted EP) as text, HTML and a figure. Pure functions, no UI library;
model strings through :func:`~ortlab.views.html.esc` and :func:`~ortlab.views.html.safe_text`;
plotly imported inside the figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.core.units import fmt_bytes
from ortlab.views.colors import provider_color
from ortlab.views.figure import layout
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text
from ortlab.views.profile import conditions_html
from ortlab.views.session import report_lines, session_report_html

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.placement.result import PlacementResult

__all__ = ["placement_figure", "placement_html", "placement_text"]


def _placement_summary_rows(pl: PlacementResult) -> tuple[list[str], list[list[object]]]:
    headers = [
        "provider",
        "nodes",
        "node share",
        "partitions",
        "µs/run (median run)",
        "time share",
        "outputs/run",
    ]
    rows = [
        [
            r.provider,
            int(r.nodes),
            f"{r.node_share:.0%}",
            int(r.partitions),
            float(r.us_per_run),
            f"{r.time_share:.0%}",
            fmt_bytes(r.output_bytes),
        ]
        for r in pl.summary().itertuples()
    ]
    return headers, rows


def _partition_rows(pl: PlacementResult, limit: int = 30) -> tuple[list[str], list[list[object]]]:
    headers = ["#", "provider", "original nodes", "inputs", "outputs", "µs/run (median run)"]
    rows = [
        [
            p.partition,
            p.provider + (" (compiled)" if p.compiled else ""),
            len(p.original_nodes),
            ", ".join(p.inputs[:4]) + (" …" if len(p.inputs) > 4 else ""),
            ", ".join(p.outputs[:4]) + (" …" if len(p.outputs) > 4 else ""),
            float(p.us_per_run),
        ]
        for p in pl.partition_rows[:limit]
    ]
    return headers, rows


def _boundary_rows(pl: PlacementResult, limit: int = 30) -> tuple[list[str], list[list[object]]]:
    headers = ["tensor", "from", "to", "bytes"]
    rows = [
        [
            b.tensor,
            f"{b.producer} ({b.producer_provider.removesuffix('ExecutionProvider')})",
            f"{b.consumer} ({b.consumer_provider.removesuffix('ExecutionProvider')})",
            b.bytes,
        ]
        for b in pl.boundary_rows[:limit]
    ]
    return headers, rows


def _placement_reason_rows(
    pl: PlacementResult, limit: int = 12
) -> tuple[list[str], list[list[object]]]:
    headers = ["why", "nodes", "e.g.", "fix"]
    rows = [
        [r.reason, int(r.nodes), r.examples, r.fix] for r in pl.reasons().head(limit).itertuples()
    ]
    return headers, rows


def _why_title(pl: PlacementResult) -> str:
    return f"Why nodes are not on {pl.wanted.removesuffix('ExecutionProvider')}"


def _placement_times(pl: PlacementResult) -> str:
    if pl.profile is not None:
        return str(pl.profile.conditions)
    return f"each node's median of {pl.runs} run(s), ORT's profiler on"


def placement_text(pl: PlacementResult) -> str:
    parts = [
        f"Placement of {safe_text(pl.model)} (final graph from {pl.final_source})",
        f"Times: {_placement_times(pl)}",
        table_text(*_placement_summary_rows(pl)),
        "",
        f"Partitions ({len(pl.partition_rows)}):",
        table_text(*_partition_rows(pl)),
        "",
        f"EP boundaries ({len(pl.boundary_rows)}):",
        table_text(*_boundary_rows(pl)) if pl.boundary_rows else "  none: one EP runs it all",
        "",
        *(
            [f"{_why_title(pl)}:", table_text(*_placement_reason_rows(pl)), ""]
            if pl.wanted and len(pl.reasons())
            else []
        ),
        *report_lines(pl.report),
    ]
    return "\n".join(parts)


def placement_html(pl: PlacementResult) -> str:
    return (
        f"{STYLE}<div><b>{esc(pl.model)}</b> · placement</div>"
        + (
            conditions_html(pl.profile)
            if pl.profile is not None
            else f"<div>Times: {esc(_placement_times(pl))}</div>"
        )
        + table_html(*_placement_summary_rows(pl))
        + f"<div><b>Partitions</b> ({len(pl.partition_rows)})</div>"
        + table_html(*_partition_rows(pl))
        + f"<div><b>EP boundaries</b> ({len(pl.boundary_rows)})</div>"
        + (table_html(*_boundary_rows(pl)) if pl.boundary_rows else "<div>none</div>")
        + (
            f"<div><b>{esc(_why_title(pl))}</b></div>" + table_html(*_placement_reason_rows(pl))
            if pl.wanted and len(pl.reasons())
            else ""
        )
        + session_report_html(pl.report)
    )


def placement_figure(pl: PlacementResult) -> go.Figure:
    """Original nodes and measured time per execution provider."""
    from plotly.subplots import make_subplots

    t = pl.summary()
    fig = make_subplots(rows=1, cols=2, subplot_titles=("original nodes", "time per run (µs)"))
    import plotly.graph_objects as go

    colors = [provider_color(p) for p in t["provider"]]
    fig.add_trace(go.Bar(x=t["provider"], y=t["nodes"], marker_color=colors), 1, 1)
    fig.add_trace(go.Bar(x=t["provider"], y=t["us_per_run"], marker_color=colors), 1, 2)
    return layout(fig, f"{esc(pl.model)}: where each node runs", showlegend=False, height=380)
