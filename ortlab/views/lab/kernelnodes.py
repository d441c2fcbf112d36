"""Which of the model's nodes each kernel ORT ran computes, the one that carries its time first
(the Overview's top nodes, the Profile tab's picker and the snapshot name kernels by them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortlab.analysis.placement.result import PlacementResult
    from ortlab.analysis.profiling import ProfileResult

__all__ = ["carriers_first"]


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
