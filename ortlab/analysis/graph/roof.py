"""The roofline's ``achieved_fraction`` per original node, for the graph view's 'roofline' colours.

A roofline (:func:`ortlab.roofline`) has one row per kernel ORT ran; the graph draws the
model's own nodes. With a placement of the same settings, each node takes the fraction of the
kernel(s) it became part of (``NodeRow.optimized``): a node inside one kernel shows exactly that
kernel's ``achieved_fraction``; a node inside several shows their time-weighted mean (weights:
each kernel's ``us``). Without a placement the join is by name, right at level 'disabled' where
every kernel is a node of the model; a kernel whose name is no node of the model (ORT fused or
re-laid it out) maps to nothing, so its nodes show no fraction rather than a wrong one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ortlab.core.units import fmt_bytes, fmt_flops

if TYPE_CHECKING:
    from ortlab.analysis.limits.roofline import RooflineResult, RoofRow
    from ortlab.analysis.placement.result import PlacementResult

__all__ = ["RoofMark", "roof_marks"]


@dataclass(frozen=True)
class RoofMark:
    """What the graph shows of the roofline for one original node."""

    fraction: float
    """``RoofRow.achieved_fraction`` of its kernel (the time-weighted mean over several)."""
    bound: str
    """'compute' or 'memory' (the kernel's, or the one holding most of the time)."""
    ceiling: str
    """The kernel's attainable rate as text ('114 GFLOP/s', '20.1 GB/s' for a data-only
    kernel); '' when the fraction is a mean over several kernels."""
    kernels: int


def _mark(rows: list[RoofRow]) -> RoofMark | None:
    rows = [r for r in rows if not math.isnan(r.achieved_fraction)]
    if not rows:
        return None
    if len(rows) == 1:
        r = rows[0]
        rate = fmt_flops(r.attainable, "/s") if r.flops > 0 else f"{fmt_bytes(r.attainable)}/s"
        return RoofMark(r.achieved_fraction, r.bound, rate, 1)
    weight = sum(r.us for r in rows)
    fraction = (
        sum(r.achieved_fraction * r.us for r in rows) / weight
        if weight > 0
        else sum(r.achieved_fraction for r in rows) / len(rows)
    )
    return RoofMark(fraction, max(rows, key=lambda r: r.us).bound, "", len(rows))


def roof_marks(
    roofline: RooflineResult, placement: PlacementResult | None, names: Iterable[str]
) -> tuple[dict[str, RoofMark], list[str]]:
    """Node name -> its :class:`RoofMark` for the model nodes ``names`` (those with one only),
    and notes saying how many nodes got a fraction and why others did not."""
    kernels = {r.node: r for r in roofline.rows}
    names = list(names)
    marks: dict[str, RoofMark] = {}
    notes: list[str] = []
    if placement is not None:
        optimized = {r.node: r.optimized for r in placement.node_rows}
        for name in names:
            found = [kernels[k] for k in optimized.get(name, ()) if k in kernels]
            mark = _mark(found)
            if mark is not None:
                marks[name] = mark
        how = "the kernel(s) it became part of (the placement's join)"
        ran = {k for ks in optimized.values() for k in ks}
        if ran and not ran & set(kernels):
            notes.append(
                "None of the placement's kernels is in the roofline: the two ran with "
                "different settings? Pass a placement and a roofline of the same config."
            )
    else:
        for name in names:
            mark = _mark([kernels[name]] if name in kernels else [])
            if mark is not None:
                marks[name] = mark
        how = "the kernel of its own name"
    notes[:0] = [
        f"{len(marks)} of {len(names)} nodes show the roofline's achieved_fraction, from "
        f"{how}; a node in several kernels shows their time-weighted mean"
    ]
    if placement is None:
        unmatched = set(kernels) - set(names)
        if unmatched:
            notes.append(
                f"{len(unmatched)} of {len(kernels)} roofline kernels are not nodes of this model "
                f"(ORT fused or re-laid them out, e.g. {sorted(unmatched)[:2]}): their nodes show "
                "no fraction. Pass placement=ortlab.placement(model, config) of the same settings "
                "to map every kernel back to the nodes it came from."
            )
    return marks, notes
