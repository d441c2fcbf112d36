"""The profile's room: its text and HTML (time per op type, the slowest nodes, a kernel named by
the original nodes it computes) and its figures (time per op type, the provider → op type →
node hierarchy as sunburst and treemap, the slowest nodes, one run's timeline and memory over
one run), each from a :class:`~ortlab.analysis.profiling.ProfileResult`. Pure functions, no UI
library; model strings through :func:`~ortlab.views.html.esc` and
:func:`~ortlab.views.html.safe_text`; figures are returned, never shown, plotly imported inside
the functions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ortlab.core.eps import label as ep_label
from ortlab.views.colors import provider_color
from ortlab.views.figure import layout
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text
from ortlab.views.session import report_lines, session_report_html

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.profiling import ProfileResult

__all__ = [
    "conditions_html",
    "fused_map",
    "kernel_label",
    "profile_figure",
    "profile_html",
    "profile_node_rows",
    "profile_text",
]


# ---------------------------------------------------------------- text and HTML


def kernel_label(kernel: str, originals: Sequence[str]) -> str:
    """A kernel of ORT's final graph named by the original nodes it computes (what the graph
    view and Netron show): ``p2o.Conv.12 + 2 more (kernel r169_nchwc)``; a kernel that is
    an original node of its own keeps its name."""
    rest = [n for n in originals if n != kernel]
    if not rest:
        return kernel
    if kernel in originals:
        return f"{kernel} (+{len(rest)} fused)"
    more = f" + {len(rest) - 1} more" if len(rest) > 1 else ""
    return f"{rest[0]}{more} (kernel {kernel})"


def fused_map(
    placement: PlacementResult | None, profile: ProfileResult
) -> dict[str, tuple[str, ...]]:
    """Per kernel of ``profile``, the original nodes it computes, from a placement join of the
    same session settings (empty when there is none, or its settings differ: kernel names
    depend on the optimization level)."""
    if placement is None or getattr(placement, "config", None) != profile.config:
        return {}
    return {r.node: r.fused_from for r in placement.optimized_rows}


def profile_node_rows(
    p: ProfileResult, top: int, fused: Mapping[str, Sequence[str]] | None = None
) -> tuple[list[str], list[list[object]]]:
    """The table of the slowest nodes (the Profile tab's, the Lab snapshot's, the report's
    and the CLI's): a kernel is named by the original nodes it computes when ``fused``
    (:func:`fused_map`) knows them."""
    t = p.by_node().head(top)
    fused = fused or {}
    headers = ["node", "op_type", "provider", "µs/run (median run)", "share", "total µs"]
    rows = [
        [
            kernel_label(r.node, fused.get(r.node, ())),
            r.op_type,
            r.provider,
            float(r.us_per_run),
            f"{r.share:.1%}",
            float(r.total_us),
        ]
        for r in t.itertuples()
    ]
    return headers, rows


def _op_rows(p: ProfileResult) -> tuple[list[str], list[list[object]]]:
    t = p.by_op_type()
    headers = ["op_type", "provider", "nodes", "µs/run (median run)", "share"]
    rows = [
        [r.op_type, r.provider, int(r.nodes), float(r.us_per_run), f"{r.share:.1%}"]
        for r in t.itertuples()
    ]
    return headers, rows


def profile_text(
    p: ProfileResult, top: int = 15, fused: Mapping[str, Sequence[str]] | None = None
) -> str:
    parts = [
        f"Profile {safe_text(p.model)}: {len(p.data.node)} nodes, session init "
        f"{p.data.session_init_us / 1e3:.1f} ms",
        f"Times: {p.conditions}",
        "",
        "By op type:",
        table_text(*_op_rows(p)),
        "",
        f"Top {top} nodes:",
        table_text(*profile_node_rows(p, top, fused)),
    ]
    if p.report is not None:
        parts += ["", *report_lines(p.report)]
    parts += ["", *(f"note: {n}" for n in p.notes[:1])]
    return "\n".join(parts)


def profile_html(
    p: ProfileResult, top: int = 15, fused: Mapping[str, Sequence[str]] | None = None
) -> str:
    return (
        f"{STYLE}<div><b>{esc(p.model)}</b> · {len(p.data.node)} nodes · "
        f"session init {p.data.session_init_us / 1e3:.1f} ms</div>"
        + conditions_html(p)
        + table_html(*_op_rows(p))
        + table_html(*profile_node_rows(p, top, fused))
        + (session_report_html(p.report) if p.report else "")
        + "".join(f"<div><i>{esc(n, 500)}</i></div>" for n in p.notes[:1])
    )


def conditions_html(p: ProfileResult) -> str:
    """The profile's conditions line (``ProfileResult.conditions``), in the warning colour when
    the machine was busy."""
    cls = ' class="ortlab-warn"' if p.busy else ""
    return f"<div{cls}>Times: {esc(p.conditions, 600)}</div>"


# ---------------------------------------------------------------- figures


def profile_figure(p: ProfileResult, kind: str = "op_type", **kwargs: Any) -> go.Figure:
    builders = {
        "op_type": _op_type_bar,
        "provider": _sunburst,
        "sunburst": _sunburst,
        "treemap": _treemap,
        "top": _top_nodes,
        "timeline": _timeline,
        "memory": _memory,
    }
    if kind not in builders:
        raise ValueError(f"Unknown profile plot {kind!r}; choose from {', '.join(builders)}.")
    return builders[kind](p, **kwargs)


def _memory(p: ProfileResult) -> go.Figure:
    """Memory over one run, node by node in execution order: what the EP's allocator had
    allocated when each node ran, its peak so far, and what its arena held (MB)."""
    import plotly.graph_objects as go

    t = p.memory()
    t = t[t["in_use_bytes"] >= 0]
    fig = go.Figure()
    # numpy arrays, not lists: plotly checks a list item by item (~5x slower for 700 nodes)
    names = _texts(f"{o} {n}" for o, n in zip(t["op_type"], t["node"], strict=True))
    x = np.arange(len(t))
    for col, label, dash in (
        ("in_use_bytes", "allocated", None),
        ("peak_bytes", "peak so far", "dot"),
        ("arena_bytes", "arena held", "dash"),
    ):
        hover = "%{text}<br>%{y:.2f} MB<extra>" + label + "</extra>"
        fig.add_scatter(
            x=x,
            y=t[col].to_numpy() / 1e6,
            mode="lines",
            name=label,
            line={"dash": dash, "shape": "hv"},
            text=names,
            hovertemplate=hover,
        )
    fig.add_bar(
        x=x,
        y=t["output_bytes"].clip(lower=0).to_numpy() / 1e6,
        name="node's outputs",
        marker_color="#bbb",
        opacity=0.6,
        text=names,
        textposition="none",
        hovertemplate="%{text}<br>outputs %{y:.3f} MB<extra></extra>",
    )
    return layout(
        fig,
        f"{esc(p.model)}: memory over one run (CPU allocator, as ORT recorded it)",
        xaxis_title="nodes in execution order",
        yaxis_title="MB",
    )


def _texts(items: Iterable[object], limit: int = 200) -> np.ndarray:
    """Escaped strings as a numpy array: plotly copies an array in one go where it checks a
    list item by item."""
    return np.array([esc(x, limit) for x in items], dtype=str)


def _op_type_bar(p: ProfileResult, top: int = 25) -> go.Figure:
    import plotly.graph_objects as go

    t = p.by_op_type().head(top).iloc[::-1]
    fig = go.Figure()
    for provider in dict.fromkeys(t["provider"]):
        sub = t[t["provider"] == provider]
        fig.add_bar(
            y=[esc(x) for x in sub["op_type"]],
            x=sub["us_per_run"],
            orientation="h",
            name=esc(ep_label(provider)),
            marker_color=provider_color(provider),
            customdata=np.stack([sub["nodes"], sub["share"] * 100], axis=-1),
            hovertemplate="%{y}: %{x:,.0f} µs in the median run<br>%{customdata[0]} nodes, "
            "%{customdata[1]:.1f}% of the median run's node time<extra>%{fullData.name}</extra>",
        )
    return layout(
        fig,
        f"{esc(p.model)}: time per op type (µs in the median run, profiling on)",
        barmode="stack",
        height=max(300, 22 * len(t) + 120),
        xaxis_title="µs per run",
        legend_title="provider",
    )


def _hierarchy(p: ProfileResult) -> tuple[list[str], list[str], list[str], list[float]]:
    """Provider -> op type -> node sectors, in order of first appearance. A parent's value is
    the sum of its children's, added in the order the browser adds them ("total" branch
    values: a parent even one rounding step short of its children drops them)."""
    nodes = p.by_node()
    tree: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for provider, op, node, us in zip(
        nodes["provider"].tolist(),
        nodes["op_type"].tolist(),
        nodes["node"].tolist(),
        nodes["us_per_run"].tolist(),
        strict=True,
    ):
        tree.setdefault(str(provider), {}).setdefault(op, []).append((node, float(us)))
    ids, labels, parents, values = [], [], [], []

    def add(key: str, text: str, parent: str, value: float) -> int:
        ids.append(key)
        labels.append(text)
        parents.append(parent)
        values.append(value)
        return len(values) - 1

    for provider, by_op in tree.items():
        pid = f"p:{provider}"
        at_p = add(pid, esc(ep_label(provider)), "", 0.0)
        for op_type, rows in by_op.items():
            oid = f"{pid}/o:{op_type}"
            at_o = add(oid, esc(op_type), pid, 0.0)
            for node, us in rows:
                add(f"{oid}/n:{node}", esc(node, 80), oid, us)
                values[at_o] += us
            values[at_p] += values[at_o]
    return ids, labels, parents, values


def _sunburst(p: ProfileResult) -> go.Figure:
    import plotly.graph_objects as go

    ids, labels, parents, values = _hierarchy(p)
    fig = go.Figure(
        go.Sunburst(
            ids=np.array(ids, dtype=str),
            labels=np.array(labels, dtype=str),
            parents=np.array(parents, dtype=str),
            values=np.array(values),
            branchvalues="total",
            maxdepth=2,
            hovertemplate="%{label}<br>%{value:,.0f} µs total<br>%{percentRoot:.1%} of node "
            "time<extra></extra>",
        )
    )
    return layout(fig, f"{esc(p.model)}: provider → op type → node (click to zoom)", height=520)


def _treemap(p: ProfileResult) -> go.Figure:
    import plotly.graph_objects as go

    ids, labels, parents, values = _hierarchy(p)
    fig = go.Figure(
        go.Treemap(
            ids=ids,
            labels=labels,
            parents=parents,
            values=values,
            branchvalues="total",
            maxdepth=3,
            hovertemplate="%{label}<br>%{value:,.0f} µs total<br>%{percentRoot:.1%}<extra></extra>",
        )
    )
    return layout(fig, f"{esc(p.model)}: provider → op type → node", height=520)


def _top_nodes(p: ProfileResult, n: int = 20) -> go.Figure:
    import plotly.graph_objects as go

    t = p.top_nodes(n).iloc[::-1]
    fig = go.Figure(
        go.Bar(
            y=[esc(x, 60) for x in t["node"]],
            x=t["us_per_run"],
            orientation="h",
            marker_color=[provider_color(x) for x in t["provider"]],
            customdata=np.stack(
                [[esc(x) for x in t["op_type"]], t["share"] * 100, t["provider"]], axis=-1
            ),
            hovertemplate="%{y} (%{customdata[0]}, %{customdata[2]})<br>%{x:,.0f} µs in the "
            "median run, %{customdata[1]:.1f}% of its node time<extra></extra>",
        )
    )
    return layout(
        fig,
        f"{esc(p.model)}: slowest {len(t)} nodes (median µs per call)",
        height=max(300, 22 * len(t) + 120),
        xaxis_title="µs",
    )


def _timeline(p: ProfileResult, run: int = 0) -> go.Figure:
    import plotly.graph_objects as go

    t = p.timeline(run)
    fig = go.Figure()
    for op_type in dict.fromkeys(t["op_type"]):
        sub = t[t["op_type"] == op_type]
        fig.add_bar(
            base=sub["start_us"].to_numpy(),
            x=sub["dur_us"].to_numpy(),
            y=_texts(ep_label(x) for x in sub["provider"]),
            orientation="h",
            name=esc(op_type),
            customdata=_texts(sub["node"], 80),
            hovertemplate="%{customdata}<br>start %{base:.0f} µs, %{x:,.0f} µs"
            "<extra>%{fullData.name}</extra>",
        )
    return layout(
        fig,
        f"{esc(p.model)}: timeline of run {run} (µs from run start, profiling on)",
        barmode="overlay",
        height=300,
        xaxis_title="µs",
        legend_title="op type",
    )
