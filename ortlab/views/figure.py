"""The figure kit every room shares: the template (validated once), the common layout, a plain
bar chart, time ratios with their intervals, and the per-node shift chart the run diff and the
version diff draw. Plotly is
imported inside the functions: importing this module loads no plotting library."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ortlab.analysis.diff import TIMED_VERDICTS
from ortlab.views.colors import verdict_color

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ortlab.core.result import Table

__all__ = [
    "Interval",
    "bars",
    "interval_error",
    "layout",
    "ratio_figure",
    "shift_figure",
    "template",
    "timed_shifts",
]

# A small template in the spirit of plotly_white: the named one costs ~40 ms per figure to copy
# and validate, which a Lab refresh (five figures) would feel.
_AXIS = {
    "gridcolor": "#EBF0F8",
    "linecolor": "#EBF0F8",
    "zerolinecolor": "#EBF0F8",
    "automargin": True,
}
_TEMPLATE = {
    "layout": {
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": {"color": "#2a3f5f"},
        "colorway": ["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3"],
        "xaxis": _AXIS,
        "yaxis": _AXIS,
        "hoverlabel": {"align": "left"},
        # text plotly would shrink to fit a bar or a sunburst sector is hidden below 10 px
        # (the hover still names it): no label a person cannot read
        "uniformtext": {"minsize": 10, "mode": "hide"},
    }
}


class Interval(Protocol):
    """A ratio with its interval (:class:`~ortlab.core.stats.Paired`, a Verdict, a row)."""

    @property
    def ratio(self) -> float: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...


@functools.cache
def template() -> go.layout.Template:
    """The figures' template, validated once (a dict would be re-validated per figure)."""
    import plotly.graph_objects as go

    return go.layout.Template(_TEMPLATE)


def layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
    """``fig`` with the figures' common layout: ``title`` at the top left, the template, narrow
    margins and the modebar down the right edge; ``kw`` goes to ``update_layout``."""
    fig.update_layout(
        title={"text": title, "x": 0.01},
        template=template(),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        modebar={"orientation": "v"},  # down the right edge: never over a long title
        **kw,
    )
    return fig


def bars(
    title: str, x: Sequence[object], y: list[float], xaxis: str, yaxis: str, **kw: Any
) -> go.Figure:
    """A bar chart of ``y`` over ``x`` with the common layout (``kw`` goes to ``go.Bar``)."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=x, y=y, **kw))
    return layout(fig, title, xaxis_title=xaxis, yaxis_title=yaxis, height=380)


def interval_error(paired: Sequence[Interval]) -> dict[str, object]:
    """Plotly error bars from each paired ratio (``ratio``, ``low``, ``high``) out to its
    interval's ends (never negative)."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [max(p.high - p.ratio, 0) for p in paired],
        "arrayminus": [max(p.ratio - p.low, 0) for p in paired],
    }


def ratio_figure(
    title: str, paired: Sequence[Interval], labels: list[str], hover: list[str], xaxis: str
) -> go.Figure:
    """Time ratios with their intervals, a row per label, against a dotted line at 1 (the
    config comparison's figure and the ablation's)."""
    import plotly.graph_objects as go

    fig = go.Figure(
        go.Scatter(
            x=[p.ratio for p in paired],
            y=labels,
            mode="markers",
            error_x=interval_error(paired),
            text=hover,
            hovertemplate="%{text}<extra></extra>",
        )
    )
    fig.add_vline(x=1.0, line_dash="dot")
    return layout(fig, title, xaxis_title=xaxis, height=120 + 40 * max(len(labels), 1))


def timed_shifts(t: Table, top: int) -> Table:
    """The ``top`` largest timed shifts of a per-node diff table, bottom up for a bar chart."""
    return t[t["verdict"].isin(TIMED_VERDICTS)].head(top)[::-1]


def shift_figure(t: Table, names: list[str], hover: list[str], title: str, axis: str) -> go.Figure:
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
