"""The Lab's warm-up: what its first run would otherwise do cold, done while the worker starts."""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING

import numpy as np

from ortlab.views.lab.outputs import mime_bundle

if TYPE_CHECKING:
    from ortlab.core.model import Model

__all__ = ["warm_up"]


def warm_up(model: Model) -> None:
    """What the first run would otherwise do cold, done while the worker process starts
    (its interpreter and onnxruntime's import take ~0.45 s, and the first run waits for them):
    build and serialise one small figure of every kind the Lab shows, so that plotly's lazy
    imports (trace classes, their validators) happen now; type the model's tensors; read the
    graph view's scripts. Then a full garbage collection: the objects the imports and the
    widgets made (tens of thousands) would otherwise set one off (~0.08 s with pandas and plotly
    loaded) inside the first run; it belongs to the construction, whose time includes it.

    Done here, before the first run, not on a thread during it: nothing of ortlab's may take
    a core while ORT's runs are being timed. Only a head start: a failure here changes
    nothing (each step is done again, and reports its error, where it is needed)."""
    from ortlab.analysis.graph.data import tensor_types
    from ortlab.views.graph.page import dagre_source, module_sources

    for step in (_warm_figure, lambda: tensor_types(model), dagre_source, module_sources):
        with contextlib.suppress(Exception):  # an optimisation must never surface
            step()
    gc.collect()


def _warm_figure() -> None:
    """One figure with the traces and the properties the Lab's figures set: plotly builds a
    validator per property on first use."""
    import pandas as pd
    import plotly.graph_objects as go

    from ortlab.views.figure import template

    one, text = np.ones(1), np.array(["a"])
    fig = go.Figure()
    fig.add_bar(
        x=pd.Series(one),
        y=text,
        base=one,
        orientation="h",
        name="a",
        customdata=text,
        text=text,
        marker_color="#bbb",
        opacity=0.6,
        hovertemplate="%{x}",
    )
    fig.add_scatter(
        x=one,
        y=one,
        mode="lines+markers",
        name="a",
        text=text,
        line={"dash": "dot", "shape": "hv"},
        marker={"size": 4},
        error_x={"type": "data", "array": [0.1]},
        hovertemplate="%{y}",
    )
    fig.add_trace(go.Histogram(x=one, nbinsx=10, name="a"))
    fig.add_trace(
        go.Sunburst(
            ids=text,
            labels=text,
            parents=np.array([""]),
            values=one,
            branchvalues="total",
            maxdepth=2,
            hovertemplate="%{label}",
        )
    )
    fig.add_trace(go.Treemap(ids=["a"], labels=["a"], parents=[""], values=[1]))
    fig.update_layout(
        title={"text": "warm-up", "x": 0.01},
        template=template(),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        barmode="overlay",
        height=300,
        xaxis_title="x",
        yaxis_title="y",
        legend_title="l",
        showlegend=False,
        shapes=[{"type": "line", "x0": 1, "x1": 1, "y0": 0, "y1": 1}],
        annotations=[{"x": 1, "y": 1, "text": "a", "showarrow": False}],
    )
    fig.add_vline(x=1.0, line_dash="dot")
    mime_bundle(fig)
