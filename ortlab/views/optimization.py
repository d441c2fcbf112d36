"""Graph optimization's room: the levels side by side, the ablation (one graph transformer off at
a time) and the transformer fusion, each as text, HTML and a figure. Pure functions, no UI
library; model strings through :func:`~ortlab.views.html.esc` and
:func:`~ortlab.views.html.safe_text`; plotly imported inside the figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.core.machine import load_sentence
from ortlab.core.stats import Paired, interval_text
from ortlab.views.figure import bars, interval_error, layout, ratio_figure
from ortlab.views.html import (
    STYLE,
    esc,
    inputs_html,
    load_html,
    safe_text,
    table_html,
    table_text,
)

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.optimizers.ablation import AblationResult
    from ortlab.analysis.optimizers.levels import OptimizationResult
    from ortlab.analysis.optimizers.transformers import TransformerOptResult


def _opt_rows(o: OptimizationResult) -> tuple[list[str], list[list[object]]]:
    lat = {r.level: r for r in o.latency_rows}
    headers = ["level", "nodes", "fusions", "p50 ms", "vs first level", "verdict"]
    rows = []
    for lv in o.levels:
        r = lat.get(lv.level)
        fusions = sum(1 for g in lv.groups if g.kind == "fused")
        rows.append(
            [
                lv.level,
                lv.nodes,
                fusions,
                float(r.p50_ms) if r else "—",
                interval_text(r.paired.ratio, r.paired.low, r.paired.high) if r else "—",
                _short_verdict(r.paired) if r else "not timed",
            ]
        )
    return headers, rows


def _short_verdict(p: Paired) -> str:
    """The verdict in a table cell, read from the comparison, not from its sentence: 'no
    measurable difference' or 'not enough rounds' from its interval, else the sentence before
    its colon ('all is 1.52x faster than disabled'); the reference and a failure as said."""
    v = p.as_verdict()
    if p.verdict == "baseline" or p.verdict.startswith("failed"):
        return p.verdict
    if not v.enough:
        return "not enough rounds for a verdict"
    if v.blind:
        return "could not tell"
    if v.holds_one:
        return "no measurable difference"
    return p.verdict.partition(":")[0]


def optimization_text(o: OptimizationResult) -> str:
    parts = [
        f"Graph optimization of {safe_text(o.model)}: {o.original_nodes} original nodes",
        table_text(*_opt_rows(o)),
    ]
    for lv in o.levels:
        if lv.fired:
            parts.append(f"{lv.level}: fired " + ", ".join(f"{k}" for k in lv.fired))
    parts += [f"BLOCKER: {safe_text(b, 2000)}" for b in o.blockers]
    if o.latency_rows:
        parts.append(load_sentence(o.other_cores))
    return "\n".join(parts)


def optimization_html(o: OptimizationResult) -> str:
    blockers = "".join(f'<div class="ortlab-warn">⚠ {esc(b, 2000)}</div>' for b in o.blockers)
    fired = "".join(
        f"<div><b>{esc(lv.level)}</b>: {esc(', '.join(lv.fired), 2000)}</div>"
        for lv in o.levels
        if lv.fired
    )
    return (
        f"{STYLE}<div><b>{esc(o.model)}</b> · {o.original_nodes} original nodes</div>"
        + blockers
        + table_html(*_opt_rows(o))
        + fired
        + (load_html(o.other_cores) if o.latency_rows else "")
    )


def _ablation_rows(a: AblationResult) -> tuple[list[str], list[list[object]]]:
    headers = [
        "switched off",
        "fired",
        "nodes (Δ)",
        "create ms",
        "its own ms",
        "p50 ms",
        "ratio [interval]",
        "verdict",
        "max |Δ output|",
    ]
    rows: list[list[object]] = [
        [
            r.off or "(none: baseline)",
            r.fired if r.off else "—",
            f"{r.nodes} ({r.node_change:+d})",
            f"{r.create_ms:.0f}",
            "—" if r.own_ms != r.own_ms else f"{r.own_ms:.1f}",
            r.p50_ms,
            "—" if not r.off else interval_text(r.paired.ratio, r.paired.low, r.paired.high),
            "—" if not r.off else r.paired.verdict,
            f"{r.max_abs:.3g}",
        ]
        for r in a.rows
    ]
    return headers, rows


def ablation_text(a: AblationResult) -> str:
    head = (
        f"{safe_text(a.model)}: graph transformers switched off one at a time at level "
        f"{a.level} ({a.rounds} interleaved rounds)"
    )
    return "\n".join([head, table_text(*_ablation_rows(a)), *a.notes])


def ablation_html(a: AblationResult) -> str:
    return (
        f"{STYLE}<div><b>{esc(a.model)}</b> · one transformer off at a time · level "
        f"{esc(a.level)} · {a.rounds} interleaved rounds</div>"
        + table_html(*_ablation_rows(a))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in a.notes)
        + inputs_html("Timed and compared", a.feeds, a.synthetic)
    )


def transformer_text(t: TransformerOptResult) -> str:
    lines = [repr(t)]
    lines += [f"  {k}: {v}" for k, v in t.found.items()]
    if t.reason:
        lines.append(f"  why attention did not fuse: {t.reason}")
    return "\n".join(lines)


def transformer_html(t: TransformerOptResult) -> str:
    return f"<pre>{esc(transformer_text(t), 20000)}</pre>"


def optimization_figure(o: OptimizationResult) -> go.Figure:
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
                error_y=interval_error([r.paired for r in rows]),
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


def ablation_figure(a: AblationResult) -> go.Figure:
    """Time ratio without each transformer / with all, with its interval (> 1: it helps)."""
    rows = [r for r in a.rows if r.off]
    return ratio_figure(
        f"{esc(a.model)}: time without each transformer / with all",
        [r.paired for r in rows],
        [f"−{r.off} ({r.node_change:+d} nodes)" for r in rows],
        [f"{r.paired.verdict}; max |Δ output| {r.max_abs:.3g}" for r in rows],
        "time ratio (> 1: the transformer helps)",
    )


def transformer_figure(t: TransformerOptResult) -> go.Figure:
    """Fused operators the transformers optimizer produced."""
    ops = [(k, v) for k, v in t.fused_operators.items() if v]
    return bars("fused operators", [k for k, _ in ops], [v for _, v in ops], "operator", "count")
