"""The doctor's roofline rule: whether the time is reasonable for this machine — nodes far under
their bound (and which fix applies: layout, fusion, threads, int8), or a session already near
the machine's limits, where settings have nothing left to gain."""

from __future__ import annotations

import math
import statistics

from ortlab.analysis.limits import ceilings
from ortlab.analysis.limits.roofline import FAR_UNDER, NEAR, RooflineResult, RoofRow
from ortlab.core.units import fmt_bandwidth, fmt_flops
from ortlab.diagnosis.counted import counted, measured_gain
from ortlab.diagnosis.facts import QUANTIZED, Facts, Finding, Gain, Kind, candidate_key

__all__ = ["FAR_SHARE", "machine_limits"]

FAR_SHARE = 0.25
"""The rule speaks when at least this share of node time is far under its bound."""
TINY_US = 20.0
"""Nodes this short are dominated by per-node overhead: fusion, not a faster kernel, helps."""


def _bound_text(r: RoofRow) -> str:
    if r.flops and not math.isnan(r.flops):
        return f"{r.achieved_fraction:.0%} of its {fmt_flops(r.attainable, '/s')} bound"
    return f"{r.achieved_fraction:.0%} of {fmt_bandwidth(r.attainable)}"


def _evidence(roof: RooflineResult, rows: list[RoofRow]) -> str:
    peaks = "; ".join(
        f"{p.what} {fmt_flops(p.best, '/s')}"
        if not ceilings.is_bandwidth(p.dtype)
        else f"{p.what} {fmt_bandwidth(p.best)}"
        for p in roof.peaks
        if not p.error
    )
    top = "; ".join(
        f"{r.node} ({r.op_type}, {r.share:.1%} of time) at {_bound_text(r)}" for r in rows[:3]
    )
    return (
        f"ceilings measured with ORT on this EP: {peaks}; node times measured (median run, "
        f"profiling on), FLOPs and bytes computed from shapes; {top}"
    )


def _fix(f: Facts, far: list[RoofRow]) -> tuple[str, str, Gain]:
    """(fix, code, measured gain) for the nodes far under their bound."""
    level = f.seen.requested.level
    convs = [r for r in far if r.op_type in ("Conv", "FusedConv") and "nchwc" not in r.node]
    if convs and level not in ("layout", "all"):
        return (
            "layout: at level 'all' ORT runs Convs in its blocked NCHWc layout, whose kernels "
            "come much closer to the machine's peak",
            "SessionConfig(level='all')",
            measured_gain(f.measured, candidate_key(Kind.LEVEL, "all"), f.baseline_ms),
        )
    if statistics.median(r.us for r in far) < TINY_US:
        at_all = candidate_key(Kind.LEVEL, "all")
        gain = (
            measured_gain(f.measured, at_all, f.baseline_ms)
            if level != "all"
            else {"gain": "not measured: the level is already 'all'"}
        )
        if f.seen.compute_in_bodies:  # the transformers optimizer cannot rewrite an If
            return (
                "fusion: these nodes are too short for their work to matter; per-node "
                "overhead dominates. Fewer, larger kernels help: level 'all' fuses elementwise "
                "chains; an unmerged export (or onnxruntime-genai's builder) fuses attention, "
                "which the transformers optimizer cannot do inside this model's If",
                "SessionConfig(level='all')",
                gain,
            )
        return (
            "fusion: these nodes are too short for their work to matter; per-node overhead "
            "dominates. Fewer, larger kernels help: level 'all' fuses elementwise chains, "
            "ortlab.transformer_optimize fuses attention and LayerNorm",
            "SessionConfig(level='all')  # and ortlab.transformer_optimize(model)",
            gain,
        )
    compute = [r for r in far if r.bound == "compute"]
    if compute and 0 < f.seen.requested.intra_op_threads < f.seen.cores:
        return (
            f"threads: compute-bound kernels run on {f.seen.requested.intra_op_threads} of "
            f"{f.seen.cores} cores",
            f"SessionConfig(intra_op_threads={f.seen.cores})",
            {"gain": "see the thread curve"},
        )
    quant = [c for q in QUANTIZED if (c := counted(f.measured, candidate_key(Kind.VARIANT, q)))]
    best = min(quant, key=lambda c: c.row.paired.ratio) if quant else None
    return (
        "int8: these kernels are far from the fp32 ceiling at their shapes (small matrices, "
        "batch 1); int8 kernels move a quarter of the bytes and use the integer units",
        "ortlab.quantize(model, mode='dynamic')  # then check accuracy: ortlab.compare",
        best.gain(f.baseline_ms) if best is not None else {"gain": "not measured"},
    )


def machine_limits(f: Facts) -> list[Finding]:
    roof = f.seen.roofline
    if roof is None or not roof.rows:
        return []
    rows = sorted(roof.rows, key=lambda r: r.share, reverse=True)
    near = roof.time_share(NEAR)
    if roof.near_limits:
        return [
            Finding(
                rule="machine_limits",
                title=f"Near this machine's limits: {near:.0%} of node time runs at half its "
                "bound or more",
                evidence=_evidence(roof, rows),
                fix="settings have little left to gain on this machine: only less work helps "
                "(int8, a smaller or pruned model) or a faster machine",
                code="ortlab.roofline(model, config).plot()",
                gain="nothing measurable expected from settings (the bound is computed from "
                "measured peaks)",
                severity="info",
                nodes=[r.node for r in rows[:5]],
            )
        ]
    far = [r for r in rows if r.achieved_fraction < FAR_UNDER]
    share = sum(r.share for r in far)
    if share < FAR_SHARE:
        return []
    fix, code, gain = _fix(f, far)
    return [
        Finding(
            rule="far_from_bound",
            title=f"{share:.0%} of node time is in nodes under a tenth of what this machine "
            "allows them",
            evidence=_evidence(roof, far),
            fix=fix,
            code=code,
            nodes=[r.node for r in far[:20]],
            **gain,
        )
    ]
