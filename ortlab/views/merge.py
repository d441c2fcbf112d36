"""Renderers of ``ortlab.merge``: the comparison as a table (an item per row, a machine or
onnxruntime version per column, each cell the figure with its interval and, off the
baseline, the ratio and its verdict), and a figure of the ratios with their intervals."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ortlab.core.units import fmt_interval
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.fleet.merge import Cell, MergeResult, MergeRow

__all__ = ["merge_figure", "merge_html", "merge_text", "regression_lines"]


def _cell(row: MergeRow, c: Cell | None, baseline: bool) -> str:
    if c is None:
        return "—"
    if c.failed:
        return "failed: " + c.failed
    value = fmt_interval(c.value, c.low, c.high, row.unit)
    if baseline or not c.verdict:
        return value + (" (baseline)" if baseline else "")
    word = c.verdict.split(":", 1)[0]
    if math.isnan(c.ratio_low):
        return f"{value} · {c.verdict}"
    return f"{value} · {c.ratio:.2f}x [{c.ratio_low:.2f}, {c.ratio_high:.2f}] {word}"


def _table(r: MergeResult) -> tuple[list[str], list[list[str]]]:
    head = ["item", "figure", *r.columns]
    rows = [
        [row.item, row.figure]
        + [_cell(row, row.cells.get(col), col == r.baseline) for col in r.columns]
        for row in r.rows
    ]
    return head, rows


def _title(r: MergeResult) -> str:
    gate = ""
    if r.fail_on:
        beyond = r.failures()
        gate = f" · gate '{r.fail_on}': " + (f"{len(beyond)} beyond it" if beyond else "passes")
    return (
        f"{len(r.rows)} items x {len(r.columns)} columns (by {r.by}) from {r.records} records; "
        f"baseline {r.baseline}{gate}"
    )


def regression_lines(r: MergeResult) -> list[str]:
    """The ranked regressions in words: a heading, then one line each, surest first."""
    regs, nan = r.regressions(), math.nan  # a value alone: fmt_interval without its bounds
    if len(r.columns) < 2:
        return []
    if not regs:
        return [f"No regression against {r.baseline} beyond noise."]
    head = (
        f"Regressions against {r.baseline}, surest first ({len(regs)}; slowdown: a time's "
        "ratio, a rate's inverse, with its 95 % interval):"
    )
    return [head] + [
        f"{k}. {g.item} ({g.figure}) on {g.column}: {g.slowdown:.2f}x slower "
        f"[{g.low:.2f}, {g.high:.2f}]; {fmt_interval(g.baseline_value, nan, nan, g.unit)} → "
        f"{fmt_interval(g.value, nan, nan, g.unit)}"
        for k, g in enumerate(regs, 1)
    ]


def merge_text(r: MergeResult) -> str:
    head, rows = _table(r)
    out = [safe_text(_title(r), 600), "", table_text(head, rows)]
    out += [""] + [safe_text(line, 600) for line in regression_lines(r)]
    out += [""] + [f"beyond the gate: {safe_text(f, 600)}" for f in r.failures()]
    return "\n".join([*out, "", *(safe_text(n, 800) for n in r.notes)]).strip()


def merge_html(r: MergeResult) -> str:
    head, rows = _table(r)
    failures = "".join(f"<li>{esc(f, 600)}</li>" for f in r.failures())
    ranked = regression_lines(r)
    regressions = (
        f"<div>{esc(ranked[0], 600)}"
        + "".join(f"<div style='margin-left:1em'>{esc(x, 600)}</div>" for x in ranked[1:])
        + "</div>"
        if ranked
        else ""
    )
    return (
        f"{STYLE}<div><b>{esc(_title(r), 600)}</b></div>{table_html(head, rows)}{regressions}"
        + (f"<div style='color:#a40'>Beyond the gate:<ul>{failures}</ul></div>" if failures else "")
        + "".join(f"<div><i>{esc(n, 800)}</i></div>" for n in r.notes)
    )


def merge_figure(r: MergeResult) -> go.Figure:
    """Each item's ratio to the baseline per column, with its interval (log scale; 1 is the
    baseline; a time above 1 or a rate below it is worse)."""
    import plotly.graph_objects as go

    from ortlab.views.figure import layout

    fig = go.Figure()
    for col in r.columns:
        if col == r.baseline:
            continue
        rows = [row for row in r.rows if col in row.cells and not math.isnan(row.cells[col].ratio)]
        cells = [row.cells[col] for row in rows]
        fig.add_trace(
            go.Scatter(
                x=[c.ratio for c in cells],
                y=[esc(f"{row.item} ({row.figure})", 200) for row in rows],
                mode="markers",
                name=esc(col, 200),
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [c.ratio_high - c.ratio for c in cells],
                    "arrayminus": [c.ratio - c.ratio_low for c in cells],
                },
            )
        )
    fig.add_vline(x=1.0, line_dash="dash")
    return layout(
        fig,
        esc(f"against {r.baseline}: ratio and its 95 % interval (independent runs)", 300),
        xaxis_type="log",
        xaxis_title="ratio to the baseline",
        height=max(320, 40 + 28 * len(r.rows)),
    )
