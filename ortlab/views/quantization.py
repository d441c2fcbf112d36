"""Quantization's room: the variants compared (size, time, accuracy, kernels, and why a variant
disappoints) and the quantization error tensor by tensor, each as text, HTML and a figure.
Pure functions, no UI library; model strings through :func:`~ortlab.views.html.esc` and
:func:`~ortlab.views.html.safe_text`; plotly imported inside the figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ortlab.core.stats import interval_text
from ortlab.views.figure import layout
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.quantization.compare import CompareResult
    from ortlab.analysis.quantization.error import ErrorResult


def _compare_rows(c: CompareResult) -> tuple[list[str], list[list[object]]]:
    headers = [
        "variant",
        "MB",
        "size",
        "p50 ms",
        "time vs original",
        "cosine",
        "SQNR dB",
        "top-1",
        "labels equal",
        "quantized kernels",
    ]
    rows = []
    for r in c.to_pandas().itertuples():
        labels = r.labels_equal
        rows.append(
            [
                r.variant,
                float(r.file_mb),
                f"{r.size_ratio:.2f}x",
                float(r.p50_ms),
                interval_text(r.ratio, r.ratio_low, r.ratio_high, 2),
                "—" if r.cosine is None else f"{r.cosine:.5f}",
                "—" if r.sqnr_db is None else f"{r.sqnr_db:.1f}",
                "—" if r.top1 is None or r.top1 != r.top1 else f"{r.top1:.0%}",
                "—" if labels is None or np.isnan(labels) else f"{labels:.1%}",
                r.quantized_kernels or "none",
            ]
        )
    return headers, rows


METRICS_LEGEND = (
    "cosine: how well the variant's output points the same way as the original's (1 = "
    "identical direction; the doctor asks ≥ 0.999) — blind to scale. SQNR dB: signal over error "
    "energy, 10·log10(‖original‖² / ‖original − variant‖²): 20 dB is an error 10 % the size of "
    "the output, 40 dB 1 %, 0 dB as large as the output. A high cosine beside a low SQNR means "
    "the direction survived but the scale did not. top-1: share of samples whose highest score "
    "is the same class (outputs shaped [batch, classes], 2 classes or more); — where the output "
    "is not class scores. labels equal: integer outputs compared exactly. All on the first "
    "float output, over the evaluation samples."
)
"""What the comparison's accuracy columns mean and when they do not apply (one text: the
table, the report and the CLI)."""


def compare_text(c: CompareResult) -> str:
    mark = "  ACCURACY FROM SYNTHETIC INPUTS (random data): " if c.synthetic else "  "
    parts = [
        f"Variants of {safe_text(c.model)}; errors on {safe_text(c.eval_data)}",
        table_text(*_compare_rows(c)),
        mark + "time ratios are paired over interleaved rounds, 95 % CI in brackets",
        "  " + METRICS_LEGEND,
    ]
    parts += [f"  {r.variant}: {r.paired.verdict}" for r in c.rows[1:]]
    parts += [f"  note: {n}" for n in c.notes]
    parts += [f"WHY {s.variant}: {s.signal} — {s.evidence}. Fix: {s.fix}" for s in c.signals]
    return "\n".join(safe_text(p, 5000) for p in parts)


def compare_html(c: CompareResult) -> str:
    warn = (
        '<div class="ortlab-warn">Accuracy figures come from synthetic (random) inputs.</div>'
        if c.synthetic
        else ""
    )
    signals = "".join(
        f"<li><b>{esc(s.variant)}</b>: {esc(s.signal)} — {esc(s.evidence, 1000)}. "
        f"<i>Fix:</i> {esc(s.fix, 1000)}</li>"
        for s in c.signals
    )
    notes = "".join(f"<li>{esc(n, 1000)}</li>" for n in c.notes)
    return (
        f"{STYLE}<div><b>{esc(c.model)}</b> · variants · errors on {esc(c.eval_data)}</div>"
        + warn
        + table_html(*_compare_rows(c))
        + f"<div style='font-size:11px;color:#555;max-width:900px'>{esc(METRICS_LEGEND)}</div>"
        + (f"<ul>{signals}</ul>" if signals else "")
        + (f"<details><summary>notes</summary><ul>{notes}</ul></details>" if notes else "")
    )


def _error_rows(e: ErrorResult, n: int) -> tuple[list[str], list[list[object]]]:
    worst = sorted(e.tensors, key=lambda t: t.sqnr_db)[:n]
    head = ["tensor", "node", "op", "SQNR dB", "cosine", "max |err|"]
    return head, [[t.tensor, t.node, t.op_type, t.sqnr_db, t.cosine, t.max_abs] for t in worst]


def error_text(e: ErrorResult, top: int = 15) -> str:
    head, rows = _error_rows(e, top)
    mark = " (SYNTHETIC inputs)" if e.synthetic else ""
    notes = "".join(f"\nnote: {safe_text(n, 400)}" for n in e.notes)
    return (
        f"{safe_text(e.model)} vs {safe_text(e.variant)}: {len(e.tensors)} tensors on "
        f"{safe_text(e.samples)}{mark}; worst first\n" + table_text(head, rows) + notes
    )


def error_html(e: ErrorResult, top: int = 15) -> str:
    head, rows = _error_rows(e, top)
    mark = " <b>(synthetic inputs)</b>" if e.synthetic else ""
    return (
        f"<b>{esc(e.model)}</b> vs <b>{esc(e.variant)}</b>: {len(e.tensors)} tensors on "
        f"{esc(e.samples)}{mark}; worst first"
        + table_html(head, rows)
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in e.notes)
    )


def compare_figure(c: CompareResult) -> go.Figure:
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


def error_figure(e: ErrorResult) -> go.Figure:
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
