"""The graph view widget: an anywidget whose ES modules (graph/*.js) need no build step and no
server; selection and view state sync to Python traits both ways.

The browser side is split by concern into graph/data.js, layout.js, draw.js, interact.js and
overlays.js, wired by the entry graph/index.js. anywidget takes one module text (``_esm``: the
entry); the others travel as texts in the ``modules`` trait and the entry imports each from a
blob: URL (see the comment at the top of index.js). The standalone page (:func:`write_html`)
runs the very same texts the same way."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anywidget
import msgspec
import traitlets

from ortlab.analysis.graph.data import GraphData, overview
from ortlab.core.errors import OrtlabWarning
from ortlab.core.result import Table
from ortlab.views.graph.pack import pack
from ortlab.views.graph.page import (
    COLOR_MODES,
    MODULES,
    dagre_source,
    entry_source,
    module_sources,
    page_module,
    write_html,
)

__all__ = [
    "MODULES",
    "GraphView",
    "GraphWidget",
    "dagre_source",
    "module_sources",
    "page_module",
    "write_html",
]


def default_color(graph: GraphData) -> str:
    """The first colouring: by measured time when there is one and one EP ran everything
    (provider colours would paint it all one colour); by provider when nodes ran on two or
    more EPs (where it falls back is then the first question) or nothing was timed. A diff
    colours by B - A, else a roofline by each node's share of its bound."""
    if graph.has_diff:
        return "diff"
    if graph.has_roofline:
        return "roofline"
    return "time" if graph.has_time and len(graph.providers) <= 1 else "provider"


def error_options(first: str | None) -> dict[str, str | list[str]]:
    """A divergence's graph: coloured by each node's output error, its first node selected."""
    return {"color_by": "quant_error", **({"highlighted": [first]} if first else {})}


class GraphView(anywidget.AnyWidget):  # type: ignore[misc,unused-ignore]  # untyped base
    """The model as an interactive graph: pan, zoom, hover, click; coloured by EP, op type,
    measured time, quantization error, output memory, a diff or the roofline."""

    # The module's text, not its Path: anywidget watches a Path for hot reload through a
    # class-level signal that keeps every instance alive (a leak in a long Lab session).
    _esm = entry_source()
    data = traitlets.Dict().tag(sync=True)
    """The graph in its wire form (``pack(graph)``: columns of indices into one string
    table; the browser unpacks it). Read the graph from :attr:`graph_data`."""
    color_by = traitlets.Unicode("provider").tag(sync=True)
    """'provider', 'op_type', 'time', 'quant_error', 'memory', 'diff' or 'roofline'; by default
    :func:`default_color` of the graph."""
    selected = traitlets.Dict().tag(sync=True)
    """The node last clicked in the browser (its row of the join), or {}."""
    expanded = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """Scope groups shown open."""
    highlighted = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """Node names drawn with a highlight outline."""
    dagre_src = traitlets.Unicode().tag(sync=True)
    modules = traitlets.Dict(value_trait=traitlets.Unicode()).tag(sync=True)
    """The texts of graph/data.js, layout.js, … by name: the entry imports them (no build step)."""
    _layout_ms = traitlets.Int(-1).tag(sync=True)
    """Last layout time measured in the browser (ms), -1 before the first."""

    def __init__(self, graph: GraphData, **kwargs: Any) -> None:
        unknown = set(kwargs) - {"color_by", "expanded", "highlighted"}
        if unknown:
            raise TypeError(
                f"GraphView got unexpected arguments {sorted(unknown)}; it takes color_by, "
                "expanded and highlighted."
            )
        self.graph_data = graph
        """The GraphData drawn (nodes, edges, groups as objects; ``.to_pandas()``)."""
        kwargs.setdefault("color_by", default_color(graph))
        super().__init__(
            data=pack(graph),
            dagre_src=dagre_source(),
            modules=module_sources(),
            expanded=kwargs.pop("expanded", list(graph.expanded)),
            **kwargs,
        )

    @traitlets.validate("color_by")
    def _check_color(self, proposal: dict[str, Any]) -> str:
        value = str(proposal["value"])
        if value not in COLOR_MODES:
            raise traitlets.TraitError(
                f"color_by={value!r}: choose one of {', '.join(COLOR_MODES)}."
            )
        return value

    def select(self, name: str) -> None:
        """Select node ``name``: the view opens the groups around it, centres it and shows its
        details panel (op, attributes, inputs and outputs with shapes, EP and why, time)."""
        node = next((n for n in self.graph_data.nodes if n.name == name), None)
        if node is None:
            import difflib

            close = difflib.get_close_matches(name, [n.name for n in self.graph_data.nodes], 3)
            raise KeyError(
                f"{name!r} is not a node of this graph"
                + (f"; did you mean {close[:3]}?" if close else "")
            )
        self.selected = msgspec.to_builtins(node)

    def overview(self) -> Table:
        """The picture as drawn now (the groups in ``expanded`` open), one row per item:
        name, kind ('group'/'node'), nodes, time_share, providers (see GraphData.overview)."""
        return overview(self.graph_data, self.expanded)

    def highlight(self, nodes: Table | Iterable[str]) -> None:
        """Highlight nodes: names, or a table with a ``node`` column (``p.top_nodes(10)``)."""
        if isinstance(nodes, Iterable) and not hasattr(nodes, "columns"):
            names = [str(n) for n in nodes]
        else:  # a table with a node column
            names = [str(n) for n in nodes["node"]]
        known = {n.name for n in self.graph_data.nodes}
        missing = [n for n in names if n not in known]
        self.highlighted = [n for n in names if n in known]
        if missing and self.highlighted:
            import warnings

            warnings.warn(
                f"{len(missing)} of {len(names)} names are not nodes of this graph (e.g. "
                f"{missing[:3]}): profile tables name ORT's optimized nodes; the placement "
                "join (placement.nodes) has the original names.",
                OrtlabWarning,
                stacklevel=2,
            )
        if missing and not self.highlighted:
            raise KeyError(
                f"None of {missing[:5]} is a node of this graph (profile tables name the "
                "optimized graph's nodes; use the placement join's original names)."
            )

    def to_html(self, path: str | Path) -> Path:
        """A self-contained HTML file (data, layout code and renderer inline; no network)."""
        return write_html(self.data, self.color_by, self.expanded, path, self.selected)


GraphWidget = GraphView
"""The name before 0.2 (kept so saved notebooks keep working)."""
