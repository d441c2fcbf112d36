"""Plot layer: results to plotly figures. Figures are returned, never shown.

The same figures serve notebooks (a returned ``go.Figure`` renders inline), the Lab and the HTML
report. Model strings are HTML-escaped before they reach plotly, whose labels accept a subset of
HTML.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ortlab.analysis.diff import TIMED_VERDICTS
from ortlab.core.stats import NOISE_BAND
from ortlab.views.colors import VERDICT_COLORS, provider_color, verdict_color
from ortlab.views.figure import layout, template
from ortlab.views.html import esc

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.benchmark import BenchmarkResult

__all__ = ["benchmark_figure", "history_figure"]


def benchmark_figure(b: BenchmarkResult, kind: str = "distribution") -> go.Figure:
    import plotly.graph_objects as go

    ms = np.asarray(b.latencies_ns, dtype=np.float64) / 1e6
    s = b.stats
    label = esc(b.config.label())
    if kind == "runs":
        fig = go.Figure(go.Scatter(y=ms, mode="markers", marker={"size": 4}, name="run"))
        fig.add_hline(y=s.p50_ms, line_dash="dash", annotation_text=f"p50 {s.p50_ms:.3f} ms")
        return layout(
            fig,
            f"{esc(b.model)} [{label}]: latency per run",
            xaxis_title="run",
            yaxis_title="ms",
            height=320,
        )
    if kind != "distribution":
        raise ValueError(f"Unknown benchmark plot {kind!r}; choose 'distribution' or 'runs'.")
    fig = go.Figure(go.Histogram(x=ms, nbinsx=min(60, max(10, ms.size // 4)), name="runs"))
    marks = (("p50", s.p50_ms, "solid"), ("p90", s.p90_ms, "dash"), ("p99", s.p99_ms, "dot"))
    # shapes and annotations in one go: add_vline() costs ~25 ms per line
    fig.update_layout(
        shapes=[
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": v,
                "x1": v,
                "y0": 0,
                "y1": 1,
                "line": {"dash": dash, "color": "#444", "width": 1},
            }
            for _, v, dash in marks
        ],
        annotations=[
            {
                "x": v,
                "xref": "x",
                "y": 1 - 0.08 * i,
                "yref": "paper",
                "text": f"{name} {v:.3f} ms",
                "showarrow": False,
                "xanchor": "left",
            }
            for i, (name, v, _) in enumerate(marks)
        ],
    )
    return layout(
        fig,
        f"{esc(b.model)} [{label}]: latency over {s.count} runs",
        xaxis_title="ms",
        yaxis_title="runs",
        height=320,
        showlegend=False,
    )


def compare_figure(c: Any) -> go.Figure:
    """Latency ratio (x) vs output error (y, 1 - cosine, log) with marker size = file size."""
    import plotly.graph_objects as go

    t = c.to_pandas()
    err = [max(1 - (x if x is not None else 1.0), 1e-9) for x in t["cosine"]]
    fig = go.Figure(
        go.Scatter(
            x=t["ratio"],
            y=err,
            mode="markers+text",
            text=[esc(v) for v in t["variant"]],
            textposition="top center",
            marker={"size": [8 + 30 * s for s in t["size_ratio"]], "opacity": 0.7},
            customdata=np.stack([t["file_mb"], t["p50_ms"]], axis=-1),
            hovertemplate="%{text}<br>time ×%{x:.2f}<br>1 - cosine %{y:.2e}<br>"
            "%{customdata[0]:.1f} MB, p50 %{customdata[1]:.2f} ms<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line_dash="dot")
    title = f"{esc(c.model)}: time vs error vs size" + (
        " (synthetic inputs)" if c.synthetic else ""
    )
    return layout(
        fig,
        title,
        xaxis_title="time ratio to the original (< 1 is faster)",
        yaxis_title="1 - cosine (log)",
        yaxis_type="log",
        yaxis_dtick=1,
        height=420,
    )


def doctor_figure(d: Any, kind: str = "candidates") -> go.Figure:
    """'candidates': time ratio to the baseline with its interval (>= 95 %) per candidate;
    'threads': the intra-op threads / spinning sweep; 'pareto': time vs output error, marker
    area = size."""
    import plotly.graph_objects as go

    if kind not in ("candidates", "threads", "pareto"):
        raise ValueError(f"Unknown doctor plot {kind!r}; choose candidates, threads or pareto.")
    t = d.candidates() if kind != "threads" else d.threads()
    t = t[t["key"] != "baseline"] if kind != "threads" else t
    labels = [
        esc(f"{k} ({s})" if kind == "candidates" else k)
        for k, s in zip(t["key"], t.get("stage", t["key"]), strict=True)
    ]
    if kind == "pareto":
        err = [max(1 - (1.0 if np.isnan(c) else c), 1e-9) for c in t["cosine"]]
        fig = go.Figure(
            go.Scatter(
                x=t["ratio"],
                y=err,
                mode="markers+text",
                text=labels,
                textposition="top center",
                marker={
                    "size": [8 + 3 * np.sqrt(mb) for mb in t["file_mb"]],
                    "color": ["#E45756" if p else "#4C78A8" for p in t["pareto"]],
                },
                hovertemplate="%{text}<br>time ×%{x:.3f}<br>1 - cosine %{y:.2e}<extra></extra>",
            )
        )
        fig.add_vline(x=1.0, line_dash="dot")
        return layout(
            fig,
            f"{esc(d.model)}: time vs output error (red: Pareto set)",
            xaxis_title="time ratio to baseline (< 1 is faster)",
            yaxis_title="1 - cosine (log)",
            yaxis_type="log",
            yaxis_dtick=1,
            height=420,
        )  # decades only: minor labels are 9 px
    colors = [
        VERDICT_COLORS["faster"]
        if hi < 1 - NOISE_BAND
        else VERDICT_COLORS["slower"]
        if lo > 1 + NOISE_BAND
        else VERDICT_COLORS["neither"]
        for lo, hi in zip(t["ci_low"], t["ci_high"], strict=True)
    ]
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=t["ratio"],
            orientation="h",
            marker_color=colors,
            error_x={
                "type": "data",
                "symmetric": False,
                "array": t["ci_high"] - t["ratio"],
                "arrayminus": t["ratio"] - t["ci_low"],
            },
            hovertemplate="%{y}<br>time ratio %{x:.3f}<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line_dash="dot")
    if t.empty:
        fig.add_annotation(
            text="nothing measured within the budget (see the findings)",
            showarrow=False,
            x=1.0,
            y=0.5,
            yref="paper",
        )
    title = (
        "intra-op threads and spinning: time ratio to the baseline"
        if kind == "threads"
        else "each candidate: time ratio to the baseline, interval ≥ 95 % "
        "(blue faster, red slower, grey within noise)"
    )
    return layout(
        fig,
        f"{esc(d.model)}: {title}",
        xaxis_title="time ratio (< 1 is faster)",
        height=max(260, 28 * len(labels) + 90),
        yaxis={"autorange": "reversed"},
    )


def optimization_figure(o: Any) -> go.Figure:
    """Per optimization level: nodes left (bars) and time ratio to the first level with CI."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    titles = ("nodes after optimization", "time ratio to the first level (interval ≥ 95 %)")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles)
    fig.add_trace(
        go.Bar(
            x=[lv.level for lv in o.levels],
            y=[lv.nodes for lv in o.levels],
            marker_color="#4C78A8",
            name="nodes",
        ),
        row=1,
        col=1,
    )
    rows = o.latency_rows
    if rows:
        fig.add_trace(
            go.Scatter(
                x=[r.level for r in rows],
                y=[r.paired.ratio for r in rows],
                mode="markers",
                marker={"size": 10, "color": "#F58518"},
                name="time ratio",
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [r.paired.high - r.paired.ratio for r in rows],
                    "arrayminus": [r.paired.ratio - r.paired.low for r in rows],
                },
                customdata=[[esc(r.paired.verdict, 300)] for r in rows],
                hovertemplate="%{customdata[0]}<extra></extra>",
            ),
            row=1,
            col=2,
        )
        fig.add_hline(y=1.0, line_dash="dot", row=1, col=2)
    return layout(
        fig, f"{esc(o.model)}: what each optimization level does", height=340, showlegend=False
    )


def _bars(title: str, x: list[Any], y: list[float], xaxis: str, yaxis: str, **kw: Any) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=x, y=y, **kw))
    return layout(fig, title, xaxis_title=xaxis, yaxis_title=yaxis, height=380)


def model_figure(s: Any) -> Any:
    """The op-type histogram of a ModelSummary (subgraphs included)."""
    ops = list(s.op_types.items())[:30]
    return _bars(
        f"{esc(s.name)}: op types", [k for k, _ in ops], [v for _, v in ops], "op type", "nodes"
    )


def session_report_figure(r: Any) -> Any:
    """Requested providers: loaded (green) or not (red), with ORT's reason on hover."""
    why = {m.provider: m.reason for m in r.missing}
    colors = ["#E45756" if p in why else "#54A24B" for p in r.requested]
    return _bars(
        "requested execution providers",
        r.requested,
        [1] * len(r.requested),
        "provider",
        "",
        marker_color=colors,
        hovertext=[why.get(p, "loaded") for p in r.requested],
    )


def placement_figure(pl: Any) -> Any:
    """Original nodes and measured time per execution provider."""
    from plotly.subplots import make_subplots

    t = pl.summary()
    fig = make_subplots(rows=1, cols=2, subplot_titles=("original nodes", "time per run (µs)"))
    import plotly.graph_objects as go

    colors = [provider_color(p) for p in t["provider"]]
    fig.add_trace(go.Bar(x=t["provider"], y=t["nodes"], marker_color=colors), 1, 1)
    fig.add_trace(go.Bar(x=t["provider"], y=t["us_per_run"], marker_color=colors), 1, 2)
    return layout(fig, f"{esc(pl.model)}: where each node runs", showlegend=False, height=380)


def error_figure(e: Any) -> Any:
    """SQNR per tensor in graph order: where the quantization error grows."""
    import plotly.graph_objects as go

    fig = go.Figure(
        go.Scatter(
            x=list(range(len(e.tensors))),
            y=[t.sqnr_db for t in e.tensors],
            mode="lines+markers",
            text=[f"{t.node} ({t.op_type})" for t in e.tensors],
            hovertemplate="%{text}<br>%{y:.1f} dB<extra></extra>",
        )
    )
    title = f"{esc(e.model)} vs {esc(e.variant)}: SQNR per tensor"
    return layout(fig, title, xaxis_title="tensor (graph order)", yaxis_title="SQNR dB", height=380)


def config_comparison_figure(c: Any) -> Any:
    """Time ratio to the first config with its interval."""
    import plotly.graph_objects as go

    rows = c.rows
    fig = go.Figure(
        go.Scatter(
            x=[r.paired.ratio for r in rows],
            y=[r.label for r in rows],
            mode="markers",
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [max(r.paired.high - r.paired.ratio, 0) for r in rows],
                "arrayminus": [max(r.paired.ratio - r.paired.low, 0) for r in rows],
            },
            text=[r.paired.verdict for r in rows],
            hovertemplate="%{text}<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line_dash="dot")
    title = f"{esc(c.model)}: time ratio to the first config"
    return layout(fig, title, xaxis_title="time ratio (< 1 is faster)", height=120 + 40 * len(rows))


def diff_figure(d: Any, top: int = 25) -> Any:
    """B - A per node with its interval, the largest changes (red slower, blue faster)."""
    t = timed_shifts(d.to_pandas(), top)
    names = [esc(f"{n} ({o})") for n, o in zip(t["node"], t["op_type"], strict=True)]
    title = f"{esc(d.label_a)} → {esc(d.label_b)}: per node, B − A"
    return shift_figure(t, names, list(t["verdict"]), title, "µs per run")


def timed_shifts(t: Any, top: int) -> Any:
    """The ``top`` largest timed shifts of a per-node diff table, bottom up for a bar chart."""
    return t[t["verdict"].isin(TIMED_VERDICTS)].head(top)[::-1]


def shift_figure(t: Any, names: list[str], hover: list[str], title: str, axis: str) -> Any:
    """Each node's shift B - A (``t``: a per-node diff table, ``delta_us``/``low``/``high``/
    ``verdict``) as a bar with its interval, coloured by its verdict; ``hover`` says why (the
    words are hover-only, never drawn across the bars). The run diff's figure and the version
    diff's."""
    import plotly.graph_objects as go

    fig = go.Figure(
        go.Bar(
            x=t["delta_us"],
            y=names,
            orientation="h",
            marker_color=[verdict_color(v) for v in t["verdict"]],
            error_x={
                "type": "data",
                "symmetric": False,
                "array": (t["high"] - t["delta_us"]).clip(lower=0),
                "arrayminus": (t["delta_us"] - t["low"]).clip(lower=0),
            },
            text=hover,
            textposition="none",
            hovertemplate="%{y}: %{x:+,.0f} µs per run (%{text})<extra></extra>",
        )
    )
    return layout(
        fig,
        title,
        xaxis_title=f"{axis} (interval: distribution-free, 95 %+)",
        height=160 + 22 * max(len(t), 1),
    )


def ablation_figure(a: Any) -> Any:
    """Time ratio without each transformer / with all, with its interval (> 1: it helps)."""
    import plotly.graph_objects as go

    rows = [r for r in a.rows if r.off]
    fig = go.Figure(
        go.Scatter(
            x=[r.paired.ratio for r in rows],
            y=[f"−{r.off} ({r.node_change:+d} nodes)" for r in rows],
            mode="markers",
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [max(r.paired.high - r.paired.ratio, 0) for r in rows],
                "arrayminus": [max(r.paired.ratio - r.paired.low, 0) for r in rows],
            },
            text=[f"{r.paired.verdict}; max |Δ output| {r.max_abs:.3g}" for r in rows],
            hovertemplate="%{text}<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line_dash="dot")
    title = f"{esc(a.model)}: time without each transformer / with all"
    return layout(
        fig,
        title,
        xaxis_title="time ratio (> 1: the transformer helps)",
        height=120 + 40 * max(len(rows), 1),
    )


def footprint_figure(r: Any) -> Any:
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


def transformer_figure(t: Any) -> Any:
    """Fused operators the transformers optimizer produced."""
    ops = [(k, v) for k, v in t.fused_operators.items() if v]
    return _bars("fused operators", [k for k, _ in ops], [v for _, v in ops], "operator", "count")


def whatif_figure(w: Any) -> Any:
    """Predicted nodes on each target vs on the CPU (stacked bars); targets with no
    prediction (unknown, failed) are listed with an empty bar."""
    import plotly.graph_objects as go

    t = w.summary()
    labels = [f"{r.target} ({r.evidence})" for r in t.itertuples()]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=t["on_target"], name="on target", marker_color="#F58518"))
    fig.add_trace(
        go.Bar(
            x=labels, y=t["on_cpu"], name="CPU", marker_color=provider_color("CPUExecutionProvider")
        )
    )
    fig.add_trace(
        go.Bar(x=labels, y=t["removed"], name="removed before partitioning", marker_color="#BAB0AC")
    )
    fig.update_layout(barmode="stack")
    return layout(
        fig,
        f"{esc(w.model)}: where it would run (predicted)",
        yaxis_title="original nodes",
        height=380,
    )


def history_figure(t: Any) -> Any:
    """The Lab's History: p50 per run with the median's interval as error bars and the other
    processes' load in the hover (``t``: ``History.to_pandas()``)."""
    import plotly.graph_objects as go

    err = {
        "type": "data",
        "symmetric": False,
        "array": t["p50_high_ms"] - t["p50_ms"],
        "arrayminus": t["p50_ms"] - t["p50_low_ms"],
        "thickness": 1,
    }
    load = [
        f"{c:.2f}" if isinstance(c, float) and math.isfinite(c) else "not measured"
        for c in t["other_cores"]
    ]
    fig = go.Figure(
        go.Scatter(
            x=t["run"],
            y=t["p50_ms"],
            mode="lines+markers",
            error_y=err,
            text=[esc(x) for x in t["label"]],
            customdata=load,
            hovertemplate="run %{x}: p50 %{y:.3f} ms<br>%{text}<br>"
            "other processes: %{customdata} cores",
        )
    )
    fig.update_layout(
        title="p50 latency across runs (bars: the median's ≥95 % interval; "
        "runs are not interleaved)",
        xaxis_title="run",
        yaxis_title="ms",
        template=template(),
        height=300,
    )
    if len(t):  # whole run numbers only (never 1, 1.2 … 2)
        lo, hi = float(t["run"].min()) - 0.5, float(t["run"].max()) + 0.5
        fig.update_xaxes(tickmode="linear", tick0=1, dtick=max(1, len(t) // 10), range=[lo, hi])
    return fig
