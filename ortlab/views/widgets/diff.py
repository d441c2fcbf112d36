"""Two graph views side by side — a model at two optimization levels — linked through the
many-to-many node mapping: selecting a node on one side highlights what it became (or came
from) on the other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets

from ortlab.analysis.graph.data import graph_data
from ortlab.views.graph.widget import GraphView

if TYPE_CHECKING:
    from ortlab.analysis.optimizers.levels import LevelResult, OptimizationResult

__all__ = ["GraphDiff", "graph_diff"]


def _across(level: LevelResult, *, to_original: bool) -> dict[str, list[str]]:
    """Per node of ``level``'s optimized graph, the original nodes it came from
    (``to_original``); else per original node, the optimized nodes it became."""
    out: dict[str, list[str]] = {}
    for g in level.groups:
        keys, values = (g.optimized, g.original) if to_original else (g.original, g.optimized)
        for name in keys:
            out.setdefault(name, []).extend(values)
    return out


class GraphDiff(ipywidgets.VBox):  # type: ignore[misc,unused-ignore]  # untyped base
    """``left``/``right`` are GraphViews; their selections drive each other's highlight."""

    def __init__(self, opt: OptimizationResult, a: str, b: str) -> None:
        la, lb = opt.level(a), opt.level(b)
        self.left = GraphView(graph_data(la.path))
        self.right = GraphView(graph_data(lb.path))
        self.links = {
            "left": (_across(la, to_original=True), _across(lb, to_original=False)),
            "right": (_across(lb, to_original=True), _across(la, to_original=False)),
        }
        self.left.observe(lambda ch: self._follow(ch, "left", self.right), names="selected")
        self.right.observe(lambda ch: self._follow(ch, "right", self.left), names="selected")
        title = ipywidgets.HTML(
            f"<b>{la.level}</b> ({la.nodes} nodes) ↔ <b>{lb.level}</b> ({lb.nodes} nodes): "
            "select a node on one side to see what it became on the other"
        )
        halves = ipywidgets.HBox([self.left, self.right], layout=ipywidgets.Layout(width="100%"))
        self.left.layout.width = self.right.layout.width = "50%"
        super().__init__([title, halves])
        self.add_class("ortlab-graph-diff")

    def counterpart(self, name: str, side: str = "left") -> list[str]:
        """Nodes on the other side that share original nodes with ``name``."""
        to_orig, from_orig = self.links[side]
        return list(dict.fromkeys(x for o in to_orig.get(name, []) for x in from_orig.get(o, [])))

    def _follow(self, change: dict[str, Any], side: str, other: GraphView) -> None:
        name = (change.get("new") or {}).get("name")
        other.highlighted = self.counterpart(name, side) if name else []


def graph_diff(opt: OptimizationResult, a: str = "disabled", b: str = "all") -> GraphDiff:
    """Original vs optimized (any two measured levels of an OptimizationResult), linked."""
    return GraphDiff(opt, a, b)
