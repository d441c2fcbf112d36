"""Renderers of the cost model (``ortlab.cost``): text, HTML and a figure of FLOPs and bytes per
node and per op type, every figure labelled as computed from shapes, not measured."""

from __future__ import annotations

import math
from typing import Any

from ortlab.core.units import fmt_bytes, fmt_flops
from ortlab.views.render import _STYLE, esc, inputs_html, safe_text, table_html, table_text

__all__ = ["cost_figure", "cost_html", "cost_text"]


def _head(c: Any) -> str:
    flops, moved = c.total_flops, c.total_bytes
    intensity = f"{flops / moved:.1f} FLOP/byte" if moved else "no bytes"
    return (f"{c.model}: {fmt_flops(flops)} and {fmt_bytes(moved)} moved per run "
            f"({intensity}) over {len(c.rows)} nodes; computed from shapes, "
            "not measured")  # fmt: skip


def _intensity(v: float) -> str:
    return "" if math.isnan(v) else f"{v:.1f}"


def _node_rows(c: Any, top: int) -> tuple[list[str], list[list[Any]]]:
    frame = c.nodes.head(top)
    head = ["node", "op", "FLOPs", "bytes", "FLOP/byte", "calls", "dtype", "note"]
    rows = [[r.node, r.op_type, fmt_flops(r.flops), fmt_bytes(r.bytes), _intensity(r.intensity),
             f"{r.calls:g}", r.dtype, r.note] for r in frame.itertuples()]  # fmt: skip
    return head, rows


def _op_rows(c: Any, top: int) -> tuple[list[str], list[list[Any]]]:
    frame = c.by_op_type.head(top)
    head = ["op type", "nodes", "FLOPs", "share of FLOPs", "bytes", "FLOP/byte"]
    rows = [[r.op_type, r.nodes, fmt_flops(r.flops),
             "" if math.isnan(r.flops_share) else f"{r.flops_share:.1%}", fmt_bytes(r.bytes),
             _intensity(r.intensity)] for r in frame.itertuples()]  # fmt: skip
    return head, rows


def cost_text(c: Any, top: int = 15) -> str:
    return "\n".join([
        safe_text(_head(c), 400), "", f"Nodes with the most FLOPs (top {top}):",
        table_text(*_node_rows(c, top)), "", "Per op type:", table_text(*_op_rows(c, top)),
        "", *(safe_text(n, 400) for n in c.notes),
        safe_text(f"Shapes: {c.feeds}" + (" (synthetic inputs)" if c.synthetic else ""), 1000),
    ])  # fmt: skip


def cost_html(c: Any, top: int = 15) -> str:
    return (
        f"{_STYLE}<div><b>{esc(_head(c), 400)}</b></div>"
        + f"<div>Nodes with the most FLOPs (top {top})</div>" + table_html(*_node_rows(c, top))
        + "<div>Per op type</div>" + table_html(*_op_rows(c, top))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in c.notes)
        + inputs_html("Shapes counted at", c.feeds, c.synthetic)
    )  # fmt: skip


def cost_figure(c: Any, top: int = 12) -> Any:
    """FLOPs and bytes per op type (two bars each; bytes on their own axis)."""
    import plotly.graph_objects as go

    from ortlab.views.plots import _layout

    frame = c.by_op_type.head(top)
    ops = [esc(o) for o in frame["op_type"]]
    fig = go.Figure()
    fig.add_trace(go.Bar(name="GFLOP", x=ops, y=frame["flops"] / 1e9, marker_color="#4C78A8",
                         offsetgroup=0,
                         hovertemplate="%{x}: %{y:.3g} GFLOP<extra>computed</extra>"))  # fmt: skip
    fig.add_trace(go.Bar(name="MB moved", x=ops, y=frame["bytes"] / 1e6, yaxis="y2",
                         marker_color="#F58518", offsetgroup=1,
                         hovertemplate="%{x}: %{y:.3g} MB<extra>computed</extra>"))  # fmt: skip
    return _layout(
        fig, f"{esc(c.model)}: work per op type per run (computed from shapes, not measured)",
        yaxis={"title": "GFLOP"},
        yaxis2={"title": "MB read + written", "overlaying": "y", "side": "right"},
        barmode="group", height=380, legend={"orientation": "h", "y": -0.2},
    )  # fmt: skip
