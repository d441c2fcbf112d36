"""Which of the model's nodes each kernel ORT ran computes, the one that carries its time first
(the Overview's top nodes, the Profile tab's picker and the snapshot name kernels by them), and
picking them in the graph view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ortlab.analysis.graph.data import in_branch

if TYPE_CHECKING:
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.profiling import ProfileResult
    from ortlab.views.graph.widget import GraphView

__all__ = ["carriers_first", "pick_in"]


def carriers_first(
    placement: PlacementResult | None, profile: ProfileResult | None
) -> dict[str, tuple[str, ...]]:
    """Per kernel, the original nodes it computes (:func:`fused_map`), the one that carries
    its time in the placement join first (``NodeRow.us_per_run``): the Conv of a Conv+Relu
    kernel, not the Relu "fused into" it with no time of its own."""
    from ortlab.views.profile import fused_map

    if placement is None or profile is None:
        return {}
    fused = fused_map(placement, profile)
    if not fused:
        return {}
    time = {r.node: r.us_per_run for r in placement.node_rows}
    return {k: tuple(sorted(v, key=lambda n: -time.get(n, 0.0))) for k, v in fused.items()}


def pick_in(view: GraphView, originals: list[str], branch: str | None = None) -> list[str]:
    """Highlight ``originals`` in the graph view and select the first (the carrier: the view
    opens its group and centres it); in ``branch`` of an If whose bodies repeat the names.
    Returns the nodes picked: none when none is in the original graph."""
    nodes = view.graph_data.nodes
    if branch:
        originals = [in_branch(nodes, n, branch) for n in originals]
    names = {n.name for n in nodes}
    picked = [n for n in originals if n in names]
    if picked:
        view.highlighted = picked
        view.select(picked[0])
    return picked
