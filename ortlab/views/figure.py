"""What every figure shares: the template (validated once) and the common layout. Plotly is
imported inside the functions: importing this module loads no plotting library."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["layout", "template"]

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


@functools.cache
def template() -> Any:
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
