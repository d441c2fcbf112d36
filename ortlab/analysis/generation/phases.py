"""The roofline per phase of a generation: each node's time per step in the prefill and in
decode (the profiled generation's, the one node time :meth:`GenerationResult.by_phase` shows)
against the work the phase's shapes imply and this machine's measured ceilings.

The two phases are different machines' problems. The prefill multiplies a whole prompt by each
weight (MatMulNBits at M = prompt: FLOP/s against the GEMM peak at its precision); a decode step
multiplies one token by each weight, so every weight byte is read for 2 FLOPs per row
(MatMulNBits at M = 1: bandwidth against DRAM's, or the cache's when the weights fit it).

Counts are made at one step's shapes: the prefill's (past 0), and a decode step at the mean
past length of the profiled decode steps (the attention's work grows linearly with the past, so
the mean step's count is the mean of the steps' counts; the weights' do not change).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ortlab.analysis.limits import ceilings
from ortlab.analysis.limits.ceilings import Peak
from ortlab.analysis.limits.cost import cost_rows
from ortlab.analysis.limits.roofline import (
    RooflineResult,
    RoofRow,
    raise_ceilings,
    raised_note,
)
from ortlab.core.config import SessionConfig
from ortlab.core.eps import compiling
from ortlab.core.machine import CacheLevel, cache_levels
from ortlab.core.result import Table
from ortlab.core.run import Run
from ortlab.engine import tasks_cost
from ortlab.engine.calls import run_model_task

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "WEIGHT_OPS",
    "PhaseRoof",
    "ceiling_lookup",
    "decode_past",
    "dram_fraction",
    "machine_peaks",
    "phase_roofs",
    "roofline_of",
    "step_roof",
    "weights_summary",
]

WEIGHT_OPS = frozenset(
    {"MatMulNBits", "MatMul", "Gemm", "FusedMatMul", "MatMulInteger", "MoE", "QMoE"}
)
"""The ops that multiply by a weight (when one of their inputs is an initializer): what a
decoder's time is mostly made of."""

PRECISIONS = ("fp32", "int8")
"""The GEMM peaks a decoder's nodes are set against (MatMulNBits computes in int8 at
accuracy_level 4, in fp32 otherwise on the CPU EP)."""


@dataclass(frozen=True)
class PhaseRoof:
    """One phase's nodes against the ceilings: the rows of a roofline whose ``us`` is the
    node's time per step of the phase (profiling on) and ``share`` its share of the phase."""

    phase: str
    past: int
    """The cache's length the counts were made at: 0 in the prefill; in decode, the mean past
    length of the profiled decode steps (rounded)."""
    rows: list[RoofRow]
    weighted: list[str] = field(default_factory=list)
    """The nodes that multiply by a weight: a WEIGHT_OPS node with an initializer input (an
    attention's Q·Kᵀ MatMul is not one)."""

    def weight_rows(self) -> list[RoofRow]:
        names = set(self.weighted)
        return [r for r in self.rows if r.node in names]


def decode_past(prompt: int, profiled_steps: int) -> int:
    """The middle past length of the profiled decode steps: step ``j`` (1 … steps - 1) runs
    with ``prompt + j - 1`` tokens cached."""
    return prompt + max(profiled_steps - 2, 0) // 2


def ceiling_lookup(
    config: SessionConfig, peaks: list[Peak], levels: tuple[CacheLevel, ...]
) -> RooflineResult:
    """A roofline with no rows over ``peaks``: the one place a node's ceilings are looked up
    (:meth:`RooflineResult.peak_flops`, :meth:`RooflineResult.ceiling_for`)."""
    return RooflineResult(model="", config=config, peaks=peaks, rows=[], runs=1, levels=levels)


COMPILED_NOTE = (
    "No roofline per phase: an EP compiles parts of the graph into kernels whose work ortlab "
    "cannot count."
)


def machine_peaks(cfg: SessionConfig, timeout: float | None) -> list[Peak] | None:
    """The ceilings a decoder's steps are set against under ``cfg`` (measured once, then
    known); None when an EP compiles parts of the graph (its kernels' work is not countable)."""
    if compiling(cfg.providers, cfg.policy):
        return None
    wanted = (*PRECISIONS, *ceilings.bandwidths())
    if ceilings.known(cfg, wanted) is None:
        ceilings.measure(cfg, PRECISIONS, timeout=timeout)
    return ceilings.known(cfg, wanted) or []


def step_roof(
    run: Run,
    times: pd.DataFrame,
    *,
    phase: str,
    dims: dict[str, int],
    lookup: RooflineResult,
) -> PhaseRoof | None:
    """One step's nodes (``times``: node, us_per_step, share) against the work counted at
    ``dims`` (one profiled run of ``run``'s model and config at those shapes, in the worker)
    and ``lookup``'s ceilings; ``phase`` says which ceiling its weights meet ('prefill': the
    GEMM peak; 'decode': the bandwidth). None when no node has time."""
    times = times[times["us_per_step"] > 0]
    if not len(times):
        return None
    at = run.derive(dims=dims, progress=False)
    reply = run_model_task(tasks_cost.shapes, at)
    costs, _ = cost_rows(reply)
    weighted = [
        n.name
        for n in reply.nodes
        if n.op_type in WEIGHT_OPS and any(i in reply.initializers for i in n.inputs)
    ]
    summed = times.groupby("node")[["us_per_step", "share"]].sum()
    us = {str(n): float(v) for n, v in zip(summed.index, summed["us_per_step"], strict=True)}
    share = {str(n): float(v) for n, v in zip(summed.index, summed["share"], strict=True)}
    rows = [
        RoofRow(
            c.node,
            c.op_type,
            c.provider,
            us[c.node],
            share[c.node],
            c.flops,
            c.bytes,
            c.dtype,
            c.kind,
            lookup.peak_flops(c.dtype),
            (ceiling := lookup.ceiling_for(c.bytes / max(c.calls, 1.0))).bandwidth,
            ceiling.level,
        )
        for c in costs
        if c.node in us
    ]
    return PhaseRoof(phase, dims["past"], rows, weighted)


def phase_roofs(
    run: Run,
    by_phase: Table,
    *,
    prompt: int,
    batch: int,
    profiled_steps: int,
) -> tuple[list[PhaseRoof], list[Peak], list[str]]:
    """Each phase of ``by_phase`` (the profiled generation's table) against the counts at that
    phase's shapes (one profiled run each, in the worker) and the measured ceilings; and notes.
    An EP that compiles parts of the graph hides its kernels' work: no rows, a note."""
    cfg = run.config
    peaks = machine_peaks(cfg, run.timeout)
    if peaks is None:
        return [], [], [COMPILED_NOTE]
    lookup = ceiling_lookup(cfg, peaks, cache_levels())
    roofs = []
    past = decode_past(prompt, profiled_steps)
    for phase, dims in (
        ("prefill", {"prompt": prompt, "past": 0, "batch": batch}),
        ("decode", {"prompt": 1, "past": past, "batch": batch}),
    ):
        roof = step_roof(
            run, by_phase[by_phase["phase"] == phase], phase=phase, dims=dims, lookup=lookup
        )
        if roof is not None:
            roofs.append(roof)
    roofs, peaks, raised = _roofs_under_ceilings(cfg, roofs, peaks, lookup)
    notes = [raised] if raised else []
    notes += [
        f"Roofline per phase: node times per step of each phase (profiling on) against the "
        f"work counted at one step's shapes (the prefill's, and a decode step with {past} "
        "tokens cached, the mean of the profiled decode steps) and this machine's ceilings "
        "measured with ORT under the same settings."
    ]
    return roofs, peaks, notes


def _roofs_under_ceilings(
    cfg: SessionConfig, roofs: list[PhaseRoof], peaks: list[Peak], lookup: RooflineResult
) -> tuple[list[PhaseRoof], list[Peak], str]:
    """A roof is a roof: each ceiling a node of a phase ran above raised to what it reached
    (:func:`raise_ceilings`, as the roofline does), every row set against the ceilings then,
    and the note that says so ('' where none was)."""
    raised = [s for roof in roofs for s in raise_ceilings(cfg, lookup, roof.rows)]
    if not raised:
        return roofs, peaks, ""
    peaks = ceilings.known(cfg, [p.dtype for p in peaks]) or peaks
    lookup = dataclasses.replace(lookup, peaks=peaks)
    roofs = [dataclasses.replace(r, rows=lookup.rebound(r.rows)) for r in roofs]
    return roofs, peaks, raised_note(raised)


def roofline_of(
    roof: PhaseRoof,
    *,
    model: str,
    config: SessionConfig,
    peaks: list[Peak],
    levels: tuple[CacheLevel, ...],
) -> RooflineResult:
    """One phase as a :class:`RooflineResult` (its table, plot and verdicts)."""
    return dataclasses.replace(
        ceiling_lookup(config, peaks, levels),
        model=f"{model} ({roof.phase})",
        rows=roof.rows,
        feeds=f"one {roof.phase} step, {roof.past} tokens cached",
        notes=[
            f"Node times: the profiled generation's time per {roof.phase} step (profiling on); "
            "FLOPs and bytes computed from that step's shapes; ceilings measured."
        ],
    )


def dram_fraction(row: RoofRow, dram: float) -> float:
    """A node's achieved bytes/s over DRAM's measured peak (NaN without bytes or a peak)."""
    got = row.achieved_bytes
    return got / dram if dram > 0 and not math.isnan(got) else math.nan


def weights_summary(roofs: list[PhaseRoof], lookup: RooflineResult) -> Table:
    """Per phase, weight op type and precision: nodes, us_per_step (their time per step,
    summed), flops and bytes per step, achieved_flops and achieved_bytes (summed work over
    summed time), dtype and peak_flops (the GEMM peak at that precision), dram_bandwidth,
    bandwidth and ceiling (the bytes/s their step's bytes meet, as ``lookup`` chooses it for a
    node: the nearest cache level they fit, labelled 'L3-resident: 8.4 MB of weights, L3 32
    MB', else 'DRAM'), ceiling (the roof ``fraction`` is against, in words: that level in
    decode, 'int8 GEMM peak' in the prefill), ``fraction`` (of that
    bandwidth in decode, where a step reads every weight once; of the GEMM peak in the
    prefill) and dram_fraction (achieved bytes/s over DRAM's)."""
    import pandas as pd

    dram = lookup.bandwidth
    out = []
    for roof in roofs:
        groups: dict[tuple[str, str], list[RoofRow]] = {}
        for r in roof.weight_rows():
            groups.setdefault((r.op_type, r.dtype), []).append(r)
        for (op, dtype), rows in groups.items():
            us = sum(r.us for r in rows)
            flops = sum(0.0 if math.isnan(r.flops) else r.flops for r in rows)
            moved = sum(r.bytes for r in rows)
            got_flops = flops / us * 1e6 if us > 0 else math.nan
            got_bytes = moved / us * 1e6 if us > 0 else math.nan
            ceiling = lookup.ceiling_for(moved)
            bandwidth = ceiling.bandwidth
            peak = rows[0].peak_flops
            out.append(
                {
                    "phase": roof.phase,
                    "op_type": op,
                    "nodes": len(rows),
                    "us_per_step": us,
                    "flops": flops,
                    "bytes": moved,
                    "achieved_flops": got_flops,
                    "dtype": dtype,
                    "peak_flops": peak,
                    "achieved_bytes": got_bytes,
                    "dram_bandwidth": dram,
                    "bandwidth": bandwidth,
                    "ceiling": ceiling.label(moved, "weights")
                    if roof.phase == "decode"
                    else f"{dtype} GEMM peak",
                    "fraction": got_bytes / bandwidth
                    if roof.phase == "decode"
                    else got_flops / peak,
                    "dram_fraction": got_bytes / dram,
                }
            )
    cols = ["phase", "op_type", "nodes", "us_per_step", "flops", "bytes", "achieved_flops"]
    cols += ["dtype", "peak_flops", "achieved_bytes", "dram_bandwidth", "bandwidth", "ceiling"]
    return pd.DataFrame(out, columns=[*cols, "fraction", "dram_fraction"])
