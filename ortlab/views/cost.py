"""Renderers of the cost model (``ortlab.cost``) and the roofline (``ortlab.roofline``): text,
HTML and figures, each figure labelled as computed (FLOPs, bytes) or measured (times, peaks)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ortlab.analysis.limits import ceilings
from ortlab.core.units import fmt_bandwidth, fmt_bytes, fmt_flops, fmt_us
from ortlab.views.html import STYLE, esc, inputs_html, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.limits.cost import CostResult
    from ortlab.analysis.limits.roofline import RooflineResult

__all__ = [
    "cost_figure",
    "cost_html",
    "cost_text",
    "roofline_figure",
    "roofline_html",
    "roofline_text",
]


def _head(c: CostResult) -> str:
    flops, moved = c.total_flops, c.total_bytes
    intensity = f"{flops / moved:.1f} FLOP/byte" if moved else "no bytes"
    return (
        f"{c.model}: {fmt_flops(flops)} and {fmt_bytes(moved)} moved per run "
        f"({intensity}) over {len(c.rows)} nodes; computed from shapes, "
        "not measured"
    )


def _intensity(v: float) -> str:
    return "" if math.isnan(v) else f"{v:.1f}"


def _node_rows(c: CostResult, top: int) -> tuple[list[str], list[list[object]]]:
    frame = c.nodes.head(top)
    head = ["node", "op", "FLOPs", "bytes", "FLOP/byte", "calls", "dtype", "note"]
    rows = [
        [
            r.node,
            r.op_type,
            fmt_flops(r.flops),
            fmt_bytes(r.bytes),
            _intensity(r.intensity),
            f"{r.calls:g}",
            r.dtype,
            r.note,
        ]
        for r in frame.itertuples()
    ]
    return head, rows


def _op_rows(c: CostResult, top: int) -> tuple[list[str], list[list[object]]]:
    frame = c.by_op_type.head(top)
    head = ["op type", "nodes", "FLOPs", "share of FLOPs", "bytes", "FLOP/byte"]
    rows = [
        [
            r.op_type,
            r.nodes,
            fmt_flops(r.flops),
            "" if math.isnan(r.flops_share) else f"{r.flops_share:.1%}",
            fmt_bytes(r.bytes),
            _intensity(r.intensity),
        ]
        for r in frame.itertuples()
    ]
    return head, rows


def _closing_text(r: CostResult | RooflineResult) -> list[str]:
    """The lines that close a cost or roofline text: the result's notes, then the shapes it was
    counted or measured at (marked when the inputs were synthetic)."""
    shapes = f"Shapes: {r.feeds}" + (" (synthetic inputs)" if r.synthetic else "")
    return [*(safe_text(n, 400) for n in r.notes), safe_text(shapes, 1000)]


def _closing_html(r: CostResult | RooflineResult, what: str) -> str:
    """The HTML that closes a cost or roofline view: the result's notes, then its inputs' line
    (``what`` the shapes were: counted at, measured with)."""
    notes = "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in r.notes)
    return notes + inputs_html(what, r.feeds, r.synthetic)


def cost_text(c: CostResult, top: int = 15) -> str:
    return "\n".join(
        [
            safe_text(_head(c), 400),
            "",
            f"Nodes with the most FLOPs (top {top}):",
            table_text(*_node_rows(c, top)),
            "",
            "Per op type:",
            table_text(*_op_rows(c, top)),
            "",
            *_closing_text(c),
        ]
    )


def cost_html(c: CostResult, top: int = 15) -> str:
    return (
        f"{STYLE}<div><b>{esc(_head(c), 400)}</b></div>"
        + f"<div>Nodes with the most FLOPs (top {top})</div>"
        + table_html(*_node_rows(c, top))
        + "<div>Per op type</div>"
        + table_html(*_op_rows(c, top))
        + _closing_html(c, "Shapes counted at")
    )


def cost_figure(c: CostResult, top: int = 12) -> go.Figure:
    """FLOPs and bytes per op type (two bars each; bytes on their own axis)."""
    import plotly.graph_objects as go

    from ortlab.views.figure import layout

    frame = c.by_op_type.head(top)
    ops = [esc(o) for o in frame["op_type"]]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name="GFLOP",
            x=ops,
            y=frame["flops"] / 1e9,
            marker_color="#4C78A8",
            offsetgroup=0,
            hovertemplate="%{x}: %{y:.3g} GFLOP<extra>computed</extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            name="MB moved",
            x=ops,
            y=frame["bytes"] / 1e6,
            yaxis="y2",
            marker_color="#F58518",
            offsetgroup=1,
            hovertemplate="%{x}: %{y:.3g} MB<extra>computed</extra>",
        )
    )
    return layout(
        fig,
        f"{esc(c.model)}: work per op type per run (computed from shapes, not measured)",
        yaxis={"title": "GFLOP"},
        yaxis2={"title": "MB read + written", "overlaying": "y", "side": "right"},
        barmode="group",
        height=380,
        legend={"orientation": "h", "y": -0.2},
    )


# ---------------------------------------------------------------- roofline


def _roof_head(r: RooflineResult) -> str:
    from ortlab.analysis.limits.roofline import FAR_UNDER, NEAR

    verdict = (
        "near this machine's limits: little left to gain here without less work (int8, a "
        "smaller model)"
        if r.near_limits
        else f"{r.time_share(0, FAR_UNDER):.0%} of node time is in nodes under a tenth of their "
        "bound"
    )
    return (
        f"{r.model}: {r.time_share(NEAR):.0%} of node time runs at half its bound or more; "
        f"{verdict}"
    )


def _rate(value: float, dtype: str) -> str:
    return fmt_bandwidth(value) if ceilings.is_bandwidth(dtype) else fmt_flops(value, "/s")


_FP32_KERNELS = "the faster of ORT's 1024² GEMM and a 256-channel 3×3 Conv"
"""What fp32's measured ceiling is the best of (engine.tasks_peaks)."""


def _peak_rows(r: RooflineResult) -> tuple[list[str], list[list[object]]]:
    head = ["ceiling", "best (used)", "median", "runs", "note", "physical (predicted)"]
    physical = {p.dtype: p for p in getattr(r, "physical", [])}
    rows = []
    for p in r.peaks:
        known = physical.get(p.dtype)
        said = "" if known is None or math.isnan(known.value) else _rate(known.value, p.dtype)
        if p.error:
            rows.append([p.what, "not measured", "", p.runs, p.error, said])
        else:
            note = (
                f"reached by node {p.reached_by} (above the measured kernels)"
                if p.reached_by
                else _FP32_KERNELS
                if p.dtype == "fp32"
                else ""
            )
            row = [p.what, _rate(p.best, p.dtype), _rate(p.median, p.dtype), p.runs, note, said]
            rows.append(row)
    return head, rows


_PHYSICAL_NAMES = {"fp32": "fp32 FLOP/s", "memory": "DRAM bandwidth"}


def physical_lines(r: RooflineResult) -> list[str]:
    """Each physical peak of ``r`` (predicted from the machine's description) with its
    formula and how the measured ceiling compares: the share it reaches, or what a measurement
    above it means."""
    measured = {p.dtype: p.best for p in r.peaks if not p.error}
    out = []
    for p in getattr(r, "physical", []):
        name = _PHYSICAL_NAMES.get(p.dtype, p.dtype)
        if math.isnan(p.value):
            out.append(f"{name}: {p.formula}")
            continue
        said = f"{name}: {_rate(p.value, p.dtype)} = {p.formula}"
        best = measured.get(p.dtype, math.nan)
        if math.isnan(best):
            out.append(said)
        elif best > p.value:
            out.append(
                f"{said}; the measured {_rate(best, p.dtype)} is {best / p.value:.2f}x above "
                "it: the description understates this machine (a clock above the one "
                "reported, or more units than assumed)"
            )
        else:
            out.append(f"{said}; the measured ceiling reaches {best / p.value:.0%} of it")
    return out


def _roof_rows(r: RooflineResult, top: int) -> tuple[list[str], list[list[object]]]:
    frame = r.nodes.head(top)
    head = [
        "node",
        "op",
        "time µs",
        "share",
        "FLOP/byte",
        "achieved",
        "bound at",
        "of bound",
        "bound",
    ]
    rows = []
    for x in frame.itertuples():
        memory_only = not x.flops or math.isnan(x.flops)
        achieved = (
            fmt_bandwidth(x.achieved_bytes) if memory_only else fmt_flops(x.achieved_flops, "/s")
        )
        bound_at = fmt_bandwidth(x.attainable) if memory_only else fmt_flops(x.attainable, "/s")
        fraction = "" if math.isnan(x.achieved_fraction) else f"{x.achieved_fraction:.0%}"
        rows.append(
            [
                x.node,
                x.op_type,
                fmt_us(x.us),
                f"{x.share:.1%}",
                _intensity(x.intensity),
                achieved,
                bound_at,
                fraction,
                x.bound,
            ]
        )
    return head, rows


def roofline_text(r: RooflineResult, top: int = 15) -> str:
    return "\n".join(
        [
            safe_text(_roof_head(r), 400),
            "",
            "Ceilings (measured with ORT on this EP; physical: predicted from the machine's "
            "own description):",
            table_text(*_peak_rows(r)),
            *(
                ["Physical peaks (predicted from the machine's description, not measured):"]
                + [f"  {line}" for line in physical_lines(r)]
                if physical_lines(r)
                else []
            ),
            "",
            f"Slowest nodes (top {top}):",
            table_text(*_roof_rows(r, top)),
            "",
            *_closing_text(r),
        ]
    )


def roofline_html(r: RooflineResult, top: int = 15) -> str:
    return (
        f"{STYLE}<div><b>{esc(_roof_head(r), 400)}</b></div>"
        + "<div>Ceilings (measured with ORT on this EP; physical: predicted from the "
        "machine's own description)</div>"
        + table_html(*_peak_rows(r))
        + "".join(
            f"<div><i>Physical (predicted, not measured): {esc(line, 400)}</i></div>"
            for line in physical_lines(r)
        )
        + f"<div>Slowest nodes (top {top})</div>"
        + table_html(*_roof_rows(r, top))
        + _closing_html(r, "Measured with")
    )


def roofline_figure(r: RooflineResult) -> go.Figure:
    """The roofline, log-log: a roof per measured precision (bandwidth slope, then the FLOP/s
    ceiling), one dot per node with FLOPs at (intensity, achieved FLOP/s), sized by its share
    of time and coloured by op type."""
    import plotly.graph_objects as go

    from ortlab.views.figure import layout

    frame = r.nodes
    frame = frame[(frame["flops"] > 0) & (frame["bytes"] > 0) & (frame["us"] > 0)]
    fig = go.Figure()
    lo = max(min(frame["intensity"].min() if len(frame) else 0.1, 0.1) / 2, 1e-3)
    hi = max(frame["intensity"].max() if len(frame) else 100, 1000) * 2
    slopes = [(r.bandwidth, "solid", "DRAM")]
    slopes += [(r.level_bandwidth(v.name), "dot", v.name) for v in reversed(r.levels)]
    for slope, dash, where in slopes:
        for p in r.peaks:
            if ceilings.is_bandwidth(p.dtype) or p.error or math.isnan(slope):
                continue
            ridge = p.best / slope
            fig.add_trace(
                go.Scatter(
                    x=[lo, ridge, hi],
                    y=[lo * slope, p.best, p.best],
                    mode="lines",
                    name=f"roof: {p.what}, {where} {fmt_bandwidth(slope)}",
                    line={"dash": dash, "color": "#444" if p.dtype == "fp32" else "#999"},
                    hovertemplate=(
                        f"{p.what}: {fmt_flops(p.best, '/s')}; {where} "
                        f"{fmt_bandwidth(slope)}<extra>measured</extra>"
                    ),
                )
            )
    for phys in getattr(r, "physical", []):
        if phys.dtype == "fp32" and not math.isnan(phys.value):
            fig.add_trace(
                go.Scatter(
                    x=[lo, hi],
                    y=[phys.value, phys.value],
                    mode="lines",
                    name=f"fp32 physical {fmt_flops(phys.value, '/s')} (predicted)",
                    line={"dash": "dashdot", "color": "#c0392b", "width": 1},
                    hovertemplate=esc(phys.formula) + "<extra>predicted, not measured</extra>",
                )
            )
    top = frame.groupby("op_type")["share"].sum().sort_values(ascending=False)
    keep = set(top.index[:8])  # more colours than this repeat: the rest are one grey group
    frame = frame.assign(group=[o if o in keep else "other ops" for o in frame["op_type"]])
    for op in [*(o for o in top.index if o in keep), "other ops"]:
        group = frame[frame["group"] == op]
        if group.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=group["intensity"],
                y=group["achieved_flops"],
                mode="markers",
                name=esc(op),
                marker={
                    "size": [6 + 40 * s**0.5 for s in group["share"]],
                    "opacity": 0.7,
                    **({"color": "#aaa"} if op == "other ops" else {}),
                },
                text=[
                    esc(f"{n} ({o})") for n, o in zip(group["node"], group["op_type"], strict=True)
                ],
                customdata=list(zip(group["share"], group["achieved_fraction"], strict=True)),
                hovertemplate=(
                    "%{text}<br>%{x:.1f} FLOP/byte, %{y:.3s}FLOP/s<br>"
                    "%{customdata[0]:.1%} of time, %{customdata[1]:.0%} of its bound"
                    "<extra></extra>"
                ),
            )
        )
    layout(
        fig,
        f"{esc(r.model)}: nodes against this machine's roofline (measured times and peaks; "
        "FLOPs computed)",
        xaxis={
            "type": "log",
            "title": "arithmetic intensity, FLOP/byte (computed)",
            "exponentformat": "SI",
            "dtick": 1,
        },  # decades only: no 9 px minor labels
        yaxis={
            "type": "log",
            "title": "achieved FLOP/s (measured)",
            "exponentformat": "SI",
            "dtick": 1,
        },
        height=460,
    )
    return fig.update_layout(margin={"l": 70})  # room for the log axis' title
