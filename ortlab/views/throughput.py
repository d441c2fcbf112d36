"""Renderers of ``ortlab.throughput``: the curve per mode as text, HTML and a figure, every
number labelled as measured, with its interval."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ortlab.core.units import fmt_ms, fmt_num
from ortlab.views.html import STYLE, esc, inputs_html, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.throughput import ThroughputResult
    from ortlab.core.stats import Paired

__all__ = ["throughput_figure", "throughput_html", "throughput_text"]

_MODE = {"shared": "threads share one session", "per_thread": "one session per thread"}


def _head(t: ThroughputResult) -> str:
    return (
        f"{t.model} [{t.config.label()}]: requests/s per concurrency level, "
        f"{t.rounds} rounds of {t.duration_s:g} s windows per level, interleaved (measured)"
    )


def _interval(low: float, high: float) -> str:
    return "" if math.isnan(low) or math.isnan(high) else f"[{fmt_num(low)}, {fmt_num(high)}]"


def _ratio(p: Paired) -> str:
    if p.verdict == "baseline":
        return "1 (baseline)"
    if math.isnan(p.low):
        return f"{p.ratio:.2f}x"
    return f"{p.ratio:.2f}x [{p.low:.2f}, {p.high:.2f}]"


def _rows(t: ThroughputResult, mode: str) -> tuple[list[str], list[list[object]]]:
    head = [
        "threads",
        "req/s",
        "interval",
        "vs first",
        "p50",
        "p90",
        "p99",
        "requests",
        "sessions",
        "",
    ]
    rows = []
    for r in t.rows:
        if r.mode != mode:
            continue
        mark = "knee" if t.knee.get(mode) == r.concurrency else ""
        rows.append(
            [
                r.concurrency,
                fmt_num(r.requests_per_s),
                _interval(r.low, r.high),
                _ratio(r.vs_first),
                fmt_ms(r.p50_ms),
                fmt_ms(r.p90_ms),
                fmt_ms(r.p99_ms),
                r.requests,
                r.sessions,
                mark,
            ]
        )
    return head, rows


def _modes(t: ThroughputResult) -> list[str]:
    return list(dict.fromkeys(r.mode for r in t.rows))


def throughput_text(t: ThroughputResult) -> str:
    out = [safe_text(_head(t), 400)]
    for mode in _modes(t):
        out += [
            "",
            f"{_MODE.get(mode, mode)}:",
            table_text(*_rows(t, mode)),
            safe_text(t.sentences.get(mode, ""), 600),
        ]
    out += ["", *(safe_text(n, 600) for n in t.notes)]
    out.append(
        safe_text(f"Inputs: {t.feeds}" + (" (synthetic inputs)" if t.synthetic else ""), 1000)
    )
    return "\n".join(out)


def throughput_html(t: ThroughputResult) -> str:
    parts = [f"{STYLE}<div><b>{esc(_head(t), 400)}</b></div>"]
    for mode in _modes(t):
        parts += [
            f"<div>{esc(_MODE.get(mode, mode))}</div>",
            table_html(*_rows(t, mode)),
            f"<div><b>{esc(t.sentences.get(mode, ''), 600)}</b></div>",
        ]
    parts += [f"<div><i>{esc(n, 600)}</i></div>" for n in t.notes]
    parts.append(inputs_html("Measured with", t.feeds, t.synthetic))
    return "".join(parts)


def throughput_figure(t: ThroughputResult, kind: str = "throughput") -> go.Figure:
    """``throughput``: median requests/s against concurrency with its interval, per mode;
    ``latency``: p50 and p99 against concurrency, per mode."""
    import plotly.graph_objects as go

    from ortlab.views.figure import layout

    if kind not in ("throughput", "latency"):
        raise ValueError(f"kind must be 'throughput' or 'latency', not {kind!r}")
    fig = go.Figure()
    for mode in _modes(t):
        rows = [r for r in t.rows if r.mode == mode]
        xs = [r.concurrency for r in rows]
        name = _MODE.get(mode, mode)
        if kind == "throughput":
            ys = [r.requests_per_s for r in rows]
            up = [0.0 if math.isnan(r.high) else r.high - r.requests_per_s for r in rows]
            down = [0.0 if math.isnan(r.low) else r.requests_per_s - r.low for r in rows]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines+markers",
                    name=esc(name),
                    error_y={"type": "data", "array": up, "arrayminus": down},
                )
            )
            knee = t.knee.get(mode)
            if knee is not None:
                at = next(r for r in rows if r.concurrency == knee)
                fig.add_trace(
                    go.Scatter(
                        x=[knee],
                        y=[at.requests_per_s],
                        mode="markers",
                        showlegend=False,
                        marker={"size": 14, "symbol": "circle-open"},
                        name=f"knee ({esc(name)})",
                    )
                )
        else:
            for label, attr in (("p50", "p50_ms"), ("p99", "p99_ms")):
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[getattr(r, attr) for r in rows],
                        mode="lines+markers",
                        name=f"{esc(name)} {label}",
                    )
                )
    ytitle = (
        "requests/s (median over rounds, measured)"
        if kind == "throughput"
        else ("latency ms (measured)")
    )
    return layout(
        fig,
        f"{esc(t.model)}: {kind} against concurrency",
        xaxis={"title": "concurrent requests (threads)", "type": "log", "dtick": math.log10(2)},
        yaxis={"title": ytitle},
        height=380,
    )
