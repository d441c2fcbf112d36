"""Renderers of ``ortlab.kl_divergence``: each variant's KL divergence from the reference's
next-token distributions (mean, median, p99, max) and top-1 agreement; the distribution of
the per-position KL as a figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.generation.quality import KLDResult

__all__ = ["kld_figure", "kld_html", "kld_text"]

HEAD = ["variant", "KLD mean", "median", "p99", "max (nats)", "top-1 agreement", "positions"]


def _rows(r: KLDResult) -> list[list[str]]:
    return [
        [
            row.variant,
            f"{row.mean:.4f}",
            f"{row.median:.4f}",
            f"{row.p99:.4f}",
            f"{row.max:.4f}",
            f"{row.top1:.1%}",
            str(len(row.kl)),
        ]
        for row in r.rows
    ] + [[name, f"failed: {why}", "", "", "", "", ""] for name, why in r.failed.items()]


def _title(r: KLDResult) -> str:
    return f"{r.model} [{r.config.label()}]: next-token divergence of each variant from it"


def kld_text(r: KLDResult) -> str:
    out = [safe_text(_title(r), 400), "", table_text(HEAD, _rows(r)), ""]
    return "\n".join([*out, *(safe_text(n, 600) for n in r.notes)])


def kld_html(r: KLDResult) -> str:
    parts = [f"{STYLE}<div><b>{esc(_title(r), 400)}</b></div>", table_html(HEAD, _rows(r))]
    return "".join([*parts, *(f"<div><i>{esc(n, 600)}</i></div>" for n in r.notes)])


def kld_figure(r: KLDResult) -> go.Figure:
    """Each variant's per-position KL, sorted (a quantile plot): where the tail lies."""
    import plotly.graph_objects as go

    from ortlab.views.figure import layout

    fig = go.Figure()
    for row in r.rows:
        ys = sorted(row.kl)
        n = max(len(ys) - 1, 1)
        fig.add_trace(
            go.Scatter(x=[k / n for k in range(len(ys))], y=ys, mode="lines", name=esc(row.variant))
        )
    return layout(
        fig,
        f"{esc(r.model)}: KL(reference || variant) per position, sorted",
        xaxis_title="share of positions",
        yaxis_title="KL divergence (nats)",
    )
