"""The run diff's room: one run diffed against another node by node (``ortlab.diff``) as text,
HTML and a figure. Pure functions, no UI library; model strings through
:func:`~ortlab.views.html.esc` and :func:`~ortlab.views.html.safe_text`; plotly imported inside
the figure (:func:`~ortlab.views.figure.shift_figure`, which the version diff's figure shares).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ortlab.core.eps import label as ep_label
from ortlab.core.stats import interval_text
from ortlab.core.units import fmt_us
from ortlab.views.figure import shift_figure, timed_shifts
from ortlab.views.html import STYLE, esc, safe_text, table_html, table_text

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.analysis.diff import DiffResult

__all__ = ["ShiftRow", "diff_figure", "diff_html", "diff_text", "shift_cells", "shift_headers"]


def shift_headers(a: str, b: str) -> list[str]:
    """The columns of :func:`shift_cells`, the sides named ``a`` and ``b``."""
    return ["node", "op", f"{a} µs", f"{b} µs", "B − A µs [interval]", "verdict"]


class ShiftRow(Protocol):
    """A row of a node-by-node diff's table (``to_pandas().itertuples()``)."""

    node: str
    op_type: str
    a_us: float
    b_us: float
    delta_us: float
    low: float
    high: float
    verdict: str


def shift_cells(x: ShiftRow) -> list[object]:
    """A node's shift as every node-by-node diff shows it (this run diff, the version diff):
    node, op, each side's µs, B - A with its interval, the verdict."""
    return [
        x.node,
        x.op_type,
        fmt_us(x.a_us),
        fmt_us(x.b_us),
        interval_text(x.delta_us, x.low, x.high, 1, "+"),
        x.verdict,
    ]


def _diff_rows(d: DiffResult, top: int = 20) -> tuple[list[str], list[list[object]]]:
    headers = [*shift_headers("A", "B"), "vs run", "EP", "kernel"]
    t = d.to_pandas()
    t = t[t["verdict"].isin(["slower", "faster"]) | t["moved"] | t["kernel_changed"]]
    rows = [
        [
            *shift_cells(r),
            "—" if r.vs_run != r.vs_run else f"x{r.vs_run:.2f}",
            f"{ep_label(r.a_provider)} → {ep_label(r.b_provider)}" if r.moved else "",
            f"{r.a_kernel} → {r.b_kernel}" if r.kernel_changed else "",
        ]
        for r in t.head(top).itertuples()
    ]
    return headers, rows


def _diff_head(d: DiffResult) -> str:
    s = d.summary()
    return (
        f"{d.label_a} → {d.label_b}: whole run x{s['run_ratio']}; {s['slower']} nodes slower, "
        f"{s['faster']} faster of {s['timed_in_both']} timed in both (about "
        f"{s['by_chance_expected']} would be flagged by chance), {s['moved_ep']} moved EP, "
        f"{s['kernel_changed']} changed kernel, {s['only_in_a']} only in A, {s['only_in_b']} "
        "only in B"
    )


def diff_text(d: DiffResult, top: int = 20) -> str:
    return "\n".join([safe_text(_diff_head(d), 800), table_text(*_diff_rows(d, top)), *d.notes])


def diff_html(d: DiffResult, top: int = 20) -> str:
    return (
        f"{STYLE}<div><b>{esc(_diff_head(d), 800)}</b></div>"
        + table_html(*_diff_rows(d, top))
        + "".join(f"<div><i>{esc(n, 400)}</i></div>" for n in d.notes)
    )


def diff_figure(d: DiffResult, top: int = 25) -> go.Figure:
    """B - A per node with its interval, the largest changes (red slower, blue faster)."""
    t = timed_shifts(d.to_pandas(), top)
    names = [esc(f"{n} ({o})") for n, o in zip(t["node"], t["op_type"], strict=True)]
    title = f"{esc(d.label_a)} → {esc(d.label_b)}: per node, B − A"
    return shift_figure(t, names, list(t["verdict"]), title, "µs per run")
