"""Which node a divergence starts at: each suspect checked alone (its region — the node and the
producers of inputs the comparison did not see — run on the reference's inputs, as each side's
session builds it), and, when no suspect found with every tensor exposed diverges alone while
the sessions as they run do, the bisection: one tensor exposed at a time (ORT fuses everywhere
else as it does unexposed), halving the graph until the earliest tensor that diverges so; its
region then grows a node at a time back (a fusion needs its neighbours: a DequantizeLinear
before a MatMul) until it reproduces alone, or the result says it does not."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ortlab.analysis.diverge.repro import MAX_REGION, region_alone
from ortlab.analysis.diverge.types import (
    FirstDivergence,
    Probe,
    Producer,
    metric_error,
    relative_of,
)
from ortlab.engine import tasks_diverge
from ortlab.engine.calls import Via
from ortlab.engine.calls import run as run_task
from ortlab.engine.errorsums import Side
from ortlab.engine.replies import TensorStats

if TYPE_CHECKING:
    import numpy as np

    from ortlab.analysis.diverge.result import DivergenceResult
    from ortlab.analysis.diverge.types import TensorDivergence
    from ortlab.core.model import Model

__all__ = ["MAX_HOPS", "Checker", "bisect"]

MAX_HOPS = 3
"""How far back a bisected node's region grows (nodes beyond the first's own producers)."""


class Checker:
    """Runs a suspect's region alone (:meth:`alone`) and a tensor exposed alone
    (:meth:`probe`) for one result, counting the session runs."""

    def __init__(
        self,
        result: DivergenceResult,
        other: Model,
        feeds: Mapping[str, np.ndarray],
        *,
        timeout: float | None,
    ) -> None:
        self.result, self.other, self.feeds, self.timeout = result, other, feeds, timeout
        self.runs = result.session_runs
        self.saved: dict[str, np.ndarray] = {}
        """The inputs of the last region that reproduced (the repro's ``inputs.npz``)."""
        self.last = math.nan
        """The error the last :meth:`alone` measured (inf where it was not a number)."""
        self.compared = [t.tensor for t in result.tensors]
        self.reference = Side(result.reference_path, result.reference_config, "the reference")
        self.side = Side(result.other_path, result.other_config, "the other side")

    def alone(
        self, t: TensorDivergence, p: Producer, *, hops: int = 0, probed: Probe | None = None
    ) -> FirstDivergence | None:
        """``t``'s region (growing ``hops`` nodes back past compared tensors) run alone on
        both sides: its :class:`FirstDivergence` when the other side's error passes the
        threshold, else None. ``probed``: the bisection's probe of ``t`` (its error is then
        the one with only ``t`` exposed)."""
        r = self.result
        mine = region_alone(r.reference_path, t.tensor, self.compared, hops)
        theirs = region_alone(str(self.other.path), t.tensor, self.compared, hops)
        got = run_task(
            tasks_diverge.alone,
            Via(desc="diverge: one node", context=f"node {p.node!r}", timeout=self.timeout),
            reference=self.reference,
            other=self.side,
            node_inputs=list(dict.fromkeys([*mine.inputs, *theirs.inputs])),
            output=t.tensor,
            other_output=t.tensor,
            node=theirs.model,
            feeds=self.feeds,
            reference_node=mine.model,
            other_types=theirs.types,
            reference_types=mine.types,
        )
        self.runs += 2
        s = got.stats
        introduced = metric_error(r.metric, s.cosine, s.max_abs, relative_of(s.sqnr_db))
        self.last = math.inf if math.isnan(introduced) else introduced
        if self.last <= r.threshold:
            return None
        self.saved = got.inputs
        return FirstDivergence(
            p.node,
            p.op_type,
            t.tensor,
            t.index,
            probed.error if probed else r.error(t),
            self.last,
            p.inputs,
            t.tensor,
            region=mine.nodes,
            providers=(got.reference_provider, got.other_provider),
            kernels=(got.reference_kernels, got.other_kernels),
            found_by="bisect" if probed else "exposed",
        )

    def probe(self, t: TensorDivergence) -> Probe:
        """``t`` exposed alone on both sides (two session runs)."""
        r = self.result
        got = run_task(
            tasks_diverge.probe,
            Via(desc="diverge: bisect", context=f"tensor {t.tensor!r}", timeout=self.timeout),
            reference=self.reference,
            other=self.side,
            tensor=t.tensor,
            finals={f.output: f.output for f in r.finals},
            feeds=self.feeds,
        )
        self.runs += 2
        return Probe(t.tensor, t.index, _error(r.metric, got.stats), _worst(r.metric, got.finals))


def _error(metric: str, s: TensorStats | None) -> float:
    if s is None:
        return math.nan
    return metric_error(metric, s.cosine, s.max_abs, relative_of(s.sqnr_db))


def _worst(metric: str, finals: Mapping[str, TensorStats]) -> float:
    errors = [_error(metric, s) for s in finals.values()]
    return max((e for e in errors if not math.isnan(e)), default=math.nan)


def bisect(
    check: Checker, producers: Mapping[str, Producer]
) -> tuple[FirstDivergence | None, list[Probe], str]:
    """The earliest tensor (graph order) whose error passes the threshold with only it
    exposed, found by halving; its region run alone, grown up to :data:`MAX_HOPS` nodes back
    until it reproduces. Returns the first divergence (None when no region reproduces), the
    probes, and a note saying what was found."""
    r = check.result
    order = list(r.tensors)
    seen: dict[int, Probe] = {}

    def diverges(k: int) -> bool:
        if k not in seen:
            seen[k] = check.probe(order[k])
        return seen[k].error > r.threshold

    lo, hi = 0, len(order) - 1
    if not order or not diverges(hi):
        return (
            None,
            list(seen.values()),
            (
                "bisecting by exposing one tensor at a time: the last tensor both compute does "
                "not pass the threshold exposed alone, so no node is named"
            ),
        )
    while lo < hi:
        mid = (lo + hi) // 2
        if diverges(mid):
            hi = mid
        else:
            lo = mid + 1
    probes = [seen[k] for k in sorted(seen)]
    t = order[lo]
    where = (
        f"bisecting by exposing one tensor at a time ({len(probes)} probes): {t.tensor!r} "
        f"(node {t.node!r}, {t.op_type}) is the earliest that passes the threshold exposed "
        f"alone ({seen[lo].error:.4g})"
    )
    for hops in range(MAX_HOPS + 1):
        found = check.alone(t, producers[t.tensor], hops=hops, probed=seen[lo])
        if found is not None:
            return (
                found,
                probes,
                where + (f"; its region of {len(found.region)} nodes reproduces it alone"),
            )
        if len(region_alone(r.reference_path, t.tensor, check.compared, hops).nodes) >= MAX_REGION:
            break
    return (
        None,
        probes,
        where
        + (
            f"; its nodes, {MAX_HOPS} back, do not reproduce it alone: the divergence needs more "
            "of the graph around them (no repro is written)"
        ),
    )
