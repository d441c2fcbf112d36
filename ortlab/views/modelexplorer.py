"""Any per-node figure of the graph view (time, share, EP, error, diff, roofline) as Google's
Model Explorer reads it: its node-data JSON (``{graph id: {"results": {node id: {"value": …}},
"gradient": …}}``; its ONNX adapter names a graph by the ONNX graph's name and a node by its
name). The values are the graph view's own (:class:`~ortlab.analysis.graph.data.GraphNode`), so
a node reads the same in Model Explorer, in ortlab's graph and in its tables.

Load it in Model Explorer beside the model (``model-explorer model.onnx
--node_data_paths=time.json``, with the ``model-explorer-onnx`` adapter) or with its "Add per-
node data" button."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortlab.analysis.graph.data import SQNR_CAP_DB, GraphData
from ortlab.analysis.graph.elements import GraphNode
from ortlab.core.errors import OptionError
from ortlab.views.colors import provider_color

__all__ = ["FIGURES", "NodeDataExport", "node_data", "save_node_data"]


@dataclass(frozen=True)
class _Figure:
    what: str
    value: Callable[[GraphNode], float | str | None]
    gradient: list[dict[str, Any]]
    needs: str


_LOW_GOOD = [{"stop": 0, "bgColor": "#f7fbff"}, {"stop": 1, "bgColor": "#d62728"}]
_HIGH_GOOD = [{"stop": 0, "bgColor": "#d62728"}, {"stop": 1, "bgColor": "#f7fbff"}]
_DIVERGING = [
    {"stop": 0, "bgColor": "#2166AC"},
    {"stop": 0.5, "bgColor": "#f7f7f7"},
    {"stop": 1, "bgColor": "#B2182B"},
]


def _timed(n: GraphNode) -> float | None:
    return n.us_per_run if n.provider and not n.predicted else None


FIGURES: dict[str, _Figure] = {
    "time": _Figure(
        "µs per run (the median run's self time, profiling on; a fused kernel's time split "
        "among its nodes, as ortlab's graph credits it)",
        _timed,
        _LOW_GOOD,
        "placement= or profile=",
    ),
    "share": _Figure(
        "share of the run's node time (0-1)",
        lambda n: n.share if _timed(n) is not None else None,
        _LOW_GOOD,
        "placement= or profile=",
    ),
    "provider": _Figure(
        "the execution provider that ran the node, in ortlab's colour for it",
        lambda n: n.provider or None,
        [],
        "placement=",
    ),
    "error": _Figure(
        "the node's output error as SQNR, dB, the lowest of its outputs; low is worse; "
        f"an identical output reads {SQNR_CAP_DB:g}, the scale's top",
        lambda n: n.sqnr_db,
        _HIGH_GOOD,
        "error= (ortlab.diverge or ortlab.quantization_error)",
    ),
    "diff": _Figure(
        "run B - run A, µs per run (ortlab.diff)",
        lambda n: n.delta_us,
        _DIVERGING,
        "diff=",
    ),
    "roofline": _Figure(
        "the node's kernel's share of its roof (achieved / ceiling, 0-1)",
        lambda n: n.achieved_fraction,
        _HIGH_GOOD,
        "roofline=",
    ),
}
"""Each figure the export can carry: what it is, how a node's value is read, and the colours."""


@dataclass(frozen=True)
class NodeDataExport:
    """What was written: the file, the figure and what it is, the nodes given a value, and the
    nodes without one (no value for the figure, no name Model Explorer can key, or inside a
    subgraph)."""

    path: Path
    figure: str
    what: str
    nodes: int
    skipped: int

    def __str__(self) -> str:
        return (
            f"{self.path}: Model Explorer node data for {self.nodes} nodes "
            f"({self.skipped} without a value). {self.figure}: {self.what}"
        )


def node_data(graph: GraphData, figure: str, graph_id: str, named: set[str]) -> dict[str, Any]:
    """The node-data JSON of ``figure`` for the graph named ``graph_id``: a value for each node
    of the main graph that has one and a name in ``named`` (the model's named nodes)."""
    spec = _figure(figure)
    results: dict[str, dict[str, Any]] = {}
    for n in graph.nodes:
        value = spec.value(n) if not n.body and n.name in named else None
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            continue
        if isinstance(value, str):
            results[n.name] = {"value": value, "bgColor": provider_color(value)}
        else:
            results[n.name] = {"value": value}
    if not results:
        raise OptionError(
            f"No node has a {figure!r} figure in this graph: pass {spec.needs} to "
            "ortlab.model_explorer_data."
        )
    data: dict[str, Any] = {"results": results}
    if spec.gradient:
        data["gradient"] = spec.gradient
    return {graph_id: data}


def _figure(figure: str) -> _Figure:
    if figure not in FIGURES:
        raise OptionError(f"figure={figure!r}: choose one of {', '.join(map(repr, FIGURES))}.")
    return FIGURES[figure]


def save_node_data(
    graph: GraphData, figure: str, graph_id: str, named: set[str], path: str | os.PathLike[str]
) -> NodeDataExport:
    """Write :func:`node_data` to ``path`` (a .json file; its folder must exist)."""
    data = node_data(graph, figure, graph_id, named)
    out = Path(path)
    if not out.parent.is_dir():
        raise OptionError(f"{out.parent} is not a folder: give a path in an existing one.")
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False), "utf-8")
    written = len(next(iter(data.values()))["results"])
    return NodeDataExport(out, figure, _figure(figure).what, written, len(graph.nodes) - written)
