"""The benchmark's room: a benchmark (the median run with its interval, the load line, the
stats) and a comparison of configs timed against the first (interleaved, paired:
``compare_configs``), each as text, HTML and a figure. Pure functions, no UI library; model
strings through :func:`~ortlab.views.html.esc` and :func:`~ortlab.views.html.safe_text`; plotly
imported inside the figures."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.machine import IDLE_WINDOW_S, load_sentence
from ortlab.core.stats import interval_text
from ortlab.core.units import fmt_interval, fmt_ms, fmt_rate
from ortlab.views.figure import layout, ratio_figure
from ortlab.views.html import STYLE, esc, load_html, safe_text, table_html, table_text
from ortlab.views.session import report_lines, session_report_html

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.benchmark import BenchmarkResult, ConfigComparison, ConfigRow

__all__ = [
    "benchmark_figure",
    "benchmark_html",
    "benchmark_text",
    "config_comparison_figure",
    "config_comparison_html",
    "config_comparison_text",
    "load_text",
    "p50_text",
]


# ---------------------------------------------------------------- benchmark


def _stats_rows(b: BenchmarkResult) -> list[tuple[str, float]]:
    s = b.stats
    return [
        ("p50", s.p50_ms),
        ("p90", s.p90_ms),
        ("p95", s.p95_ms),
        ("p99", s.p99_ms),
        ("mean", s.mean_ms),
        ("std", s.std_ms),
        ("min", s.min_ms),
        ("max", s.max_ms),
    ]


def p50_text(b: BenchmarkResult) -> str:
    """The median run with its interval: "p50 1.93 ms [1.70, 2.10] (96.9 % interval)"."""
    low, high, coverage = b.p50_interval
    if math.isnan(coverage):
        return f"p50 {fmt_ms(b.stats.p50_ms)} (too few runs for an interval: 6 or more)"
    return (
        f"p50 {fmt_interval(b.stats.p50_ms, low, high)} ({coverage:.1%} interval of the median "
        "run, distribution-free)"
    )


def load_text(b: BenchmarkResult) -> str:
    """The machine's load while ``b`` was timed, and what it means for the numbers."""
    return load_sentence(b.other_cores, b.environment.get("cpu_count"))


def cpu_text(b: BenchmarkResult) -> str:
    """What the runs cost in CPU beside their wall time, and what the idle session burns."""
    if math.isnan(b.cpu_ms_per_run):
        return ""
    idle = (
        f"; idle after its last run: {b.idle_cores:.2f} cores busy over {IDLE_WINDOW_S:g} s "
        "(its threads "
        + (
            "spinning for the next run: allow_spinning=False or spin_duration_us frees them)"
            if b.idle_cores >= 0.1
            else "asleep)"
        )
        if not math.isnan(b.idle_cores)
        else ""
    )
    return (
        f"CPU: {fmt_ms(b.cpu_ms_per_run)} of CPU per run over all threads "
        f"({b.cores_per_run:.2f} cores while running){idle}; {b.config.spinning()}"
    )


def benchmark_text(b: BenchmarkResult) -> str:
    s = b.stats
    lines = [
        f"Benchmark {safe_text(b.model)} [{b.config.label()}]: {s.count} runs after "
        f"{b.warmup} warm-up, profiling off",
        p50_text(b),
        *([cpu_text(b)] if cpu_text(b) else []),
        load_text(b),
        table_text(["stat", "ms"], _stats_rows(b)),
        f"{fmt_rate(s.runs_per_s, 'runs/s')} one after another (1000 / mean; requests/s under "
        "concurrency: ortlab.throughput)",
        f"feeds: {safe_text(b.feeds, 500)}",
        *report_lines(b.report),
    ]
    return "\n".join(lines)


def benchmark_html(b: BenchmarkResult) -> str:
    s = b.stats
    return (
        f"{STYLE}<div><b>{esc(b.model)}</b> · {esc(b.config.label())} · {s.count} "
        f"runs (+{b.warmup} warm-up) · {fmt_rate(s.runs_per_s, 'runs/s')} · profiling off</div>"
        f"<div><b>{esc(p50_text(b))}</b></div>"
        + (f"<div>{esc(cpu_text(b))}</div>" if cpu_text(b) else "")
        + f"<div{' class=ortlab-warn' if b.busy else ''}>{esc(load_text(b))}</div>"
        + table_html(["stat", "ms"], _stats_rows(b))
        + f"<div>feeds: {esc(b.feeds, 500)}</div>"
        + session_report_html(b.report)
    )


def benchmark_figure(b: BenchmarkResult, kind: str = "distribution") -> go.Figure:
    import plotly.graph_objects as go

    ms = np.asarray(b.latencies_ns, dtype=np.float64) / 1e6
    s = b.stats
    label = esc(b.config.label())
    if kind == "runs":
        fig = go.Figure(go.Scatter(y=ms, mode="markers", marker={"size": 4}, name="run"))
        fig.add_hline(y=s.p50_ms, line_dash="dash", annotation_text=f"p50 {fmt_ms(s.p50_ms)}")
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
                "text": f"{name} {fmt_ms(v)}",
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


# ---------------------------------------------------------------- config comparison


def _config_row(r: ConfigRow) -> list[object]:
    p = r.paired
    return [r.label, r.p50_ms, interval_text(p.ratio, p.low, p.high), p.verdict]


def config_comparison_text(c: ConfigComparison) -> str:
    rows = [_config_row(r) for r in c.rows]
    return (
        f"{safe_text(c.model)}\n"
        + table_text(["config", "p50 ms", "ratio", "verdict"], rows)
        + f"\n{load_sentence(c.other_cores)}"
        + "".join(f"\nnote: {safe_text(n, 600)}" for n in c.notes)
    )


def config_comparison_html(c: ConfigComparison) -> str:
    rows = [_config_row(r) for r in c.rows]
    return (
        f"<b>{esc(c.model)}</b>"
        + table_html(["config", "p50 ms", "ratio", "verdict"], rows)
        + load_html(c.other_cores)
        + "".join(f"<div><i>{esc(n, 600)}</i></div>" for n in c.notes)
    )


def config_comparison_figure(c: ConfigComparison) -> go.Figure:
    """Time ratio to the first config with its interval."""
    rows = c.rows
    return ratio_figure(
        f"{esc(c.model)}: time ratio to the first config",
        [r.paired for r in rows],
        [r.label for r in rows],
        [r.paired.verdict for r in rows],
        "time ratio (< 1 is faster)",
    )
