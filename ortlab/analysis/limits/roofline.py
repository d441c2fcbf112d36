"""``ortlab.roofline``: is each node near what this machine can do? Measured node times set
against the work the shapes imply (:mod:`ortlab.analysis.limits.cost`) and the machine's peaks
measured with ORT itself on this EP (:mod:`ortlab.engine.tasks_peaks`).

Per node: achieved FLOP/s and bytes/s (its FLOPs and bytes over its time: the median run's own
time with profiling on, the one node time ortlab shows everywhere), the attainable bound
``min(peak FLOP/s at its precision, intensity x peak bytes/s)`` and ``achieved_fraction`` of it,
where the bytes/s ceiling is that of the nearest cache level a call's bytes fit (L2, L3: what
the session's threads hold there, from the CPU's own cache sizes) and DRAM's otherwise (a
hierarchical roofline: small models never leave the cache). A node moving
data only (no FLOPs) is set against the bandwidth alone. The peak is the best of
the runs of the peak kernels (a ceiling); node times are medians, so fractions are conservative.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

from ortlab.analysis.limits import ceilings
from ortlab.analysis.limits.ceilings import Peak
from ortlab.analysis.limits.cost import COUNTED, CostRow, cost_rows
from ortlab.analysis.profiling import ProfileResult, profile_result, profile_run
from ortlab.core.config import SessionConfig
from ortlab.core.eps import compiling
from ortlab.core.hardware import PhysicalPeak, physical_peaks
from ortlab.core.machine import CacheLevel, cache_levels, physical_cores
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table, table
from ortlab.core.run import Run
from ortlab.core.runtime import PROFILER_OVERHEAD
from ortlab.core.units import fmt_bandwidth, fmt_bytes, fmt_flops
from ortlab.engine import tasks_cost
from ortlab.engine.calls import Reach, edge, run_model_task

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = [
    "FAR_UNDER",
    "NEAR",
    "BytesCeiling",
    "Peak",
    "RoofRow",
    "RooflineResult",
    "profile_with_roofline",
    "raise_ceilings",
    "raised_note",
    "roofline",
]

ABOVE = 1.05
"""A node above this fraction of its ceiling is above the roof: the ceilings are measured again
once, and what stays above is explained in a note."""
FAR_UNDER = 0.1
"""A node under a tenth of its bound is far from what the machine can do."""
NEAR = 0.5
"""Time in nodes at half their bound or more counts as near the machine's limits."""


@dataclass(frozen=True)
class BytesCeiling:
    """The bytes/s ceiling a call meets (:meth:`RooflineResult.ceiling_for`)."""

    level: str
    """'L2', 'L3'… (the nearest cache level the call's bytes fit) or 'DRAM'."""
    bandwidth: float
    capacity: int
    """What the session's threads hold in that level, bytes (0 for DRAM)."""

    def label(self, moved: float, what: str = "bytes") -> str:
        """'L3-resident: 8.4 MB of weights, L3 32 MB', or 'DRAM'."""
        if self.level == "DRAM":
            return "DRAM"
        held = f"{self.level} {fmt_bytes(self.capacity)}"
        return f"{self.level}-resident: {fmt_bytes(moved)} of {what}, {held}"


@dataclass(frozen=True)
class RoofRow:
    node: str
    op_type: str
    provider: str
    us: float
    """The node's time: the median run's own time, profiling on (ProfileResult.by_node)."""
    share: float
    flops: float
    bytes: float
    dtype: str
    kind: str
    peak_flops: float
    """The FLOP/s ceiling at this node's precision (fp32's where none was measured for it)."""
    bandwidth: float
    """The bytes/s ceiling for this node: the nearest cache level's when one call's bytes fit
    it, else DRAM's."""
    level: str = "DRAM"
    """Where that ceiling comes from: 'L2', 'L3'… or 'DRAM'."""

    # What follows is derived from the fields above, never stored: a row cannot contradict
    # itself (a stored fraction of 0.8 beside the times and counts of 2.0).

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes > 0 else math.nan

    @property
    def _seconds(self) -> float:
        return self.us / 1e6

    @property
    def achieved_flops(self) -> float:
        flops = 0.0 if math.isnan(self.flops) else self.flops
        return flops / self._seconds if self._seconds > 0 else math.nan

    @property
    def achieved_bytes(self) -> float:
        return self.bytes / self._seconds if self._seconds > 0 else math.nan

    @property
    def bound(self) -> str:
        """'compute', 'memory', 'unknown' (an op ortlab has no formula for: never set against
        a roof, never in a verdict) or '' (no FLOPs and no bytes: nothing to bound)."""
        if self.kind == "unknown":
            return "unknown"
        flops = 0.0 if math.isnan(self.flops) else self.flops
        if flops > 0 and self.bytes > 0:
            ridge = flops / self.bytes * self.bandwidth
            return "compute" if ridge >= self.peak_flops else "memory"
        return "memory" if self.bytes > 0 else ""

    @property
    def attainable(self) -> float:
        """FLOP/s the roofline allows at this node's intensity (bytes/s for a data-only node)."""
        if self.kind == "unknown":
            return math.nan
        flops = 0.0 if math.isnan(self.flops) else self.flops
        if flops > 0 and self.bytes > 0:
            return min(self.peak_flops, flops / self.bytes * self.bandwidth)
        return self.bandwidth if self.bytes > 0 else math.nan

    @property
    def achieved_fraction(self) -> float:
        """Achieved over attainable: FLOP/s for a node that computes, bytes/s for one that
        only moves data; NaN with nothing to bound or no formula."""
        if self.kind == "unknown":
            return math.nan
        flops = 0.0 if math.isnan(self.flops) else self.flops
        if flops > 0 and self.bytes > 0:
            return self.achieved_flops / self.attainable
        return self.achieved_bytes / self.bandwidth if self.bytes > 0 else math.nan


@dataclass(frozen=True)
class RooflineResult(Result):
    """Per node: measured time against the work the shapes imply and the machine's measured
    peaks. Times are **measured** (median run, profiling on); FLOPs and bytes are **computed**
    from shapes; peaks are **measured** with ORT on this EP.

    ``plot()``: the roofline (log-log: intensity vs achieved FLOP/s, one dot per node sized by
    its share of time, a roof per measured precision).
    """

    model: str
    config: SessionConfig
    peaks: list[Peak]
    rows: list[RoofRow]
    runs: int
    feeds: str = ""
    synthetic: bool | None = None
    notes: list[str] = field(default_factory=list)
    profile: ProfileResult | None = None
    """The profiled runs the node times come from (the session's report included)."""
    levels: tuple[CacheLevel, ...] = ()
    """The machine's cache levels, nearest first (empty: unknown, every call meets DRAM)."""
    physical: list[PhysicalPeak] = field(default_factory=list)
    """The peaks the machine's own description gives (predicted: cores × FMA width × clock,
    DRAM from its memory records), beside the measured ceilings; empty where an EP other than
    the CPU ran the nodes."""

    @property
    def bandwidth(self) -> float:
        """The measured DRAM ceiling, bytes/s."""
        return next((p.best for p in self.peaks if p.dtype == "memory"), math.nan)

    @property
    def cache_bytes(self) -> int:
        """What the session's threads hold in the outermost cache level (0: unknown)."""
        return self.capacity(self.levels[-1]) if self.levels else 0

    def capacity(self, level: CacheLevel) -> int:
        """What the session's threads (one per physical core by default) hold in ``level``."""
        return level.capacity(self.config.intra_op_threads or physical_cores())

    def level_bandwidth(self, name: str) -> float:
        """A cache level's measured ceiling, bytes/s (NaN when not measured)."""
        return next((p.best for p in self.peaks if p.dtype == name and not p.error), math.nan)

    def ceiling_for(self, call_bytes: float) -> BytesCeiling:
        """The bytes/s ceiling a call moving ``call_bytes`` meets: the nearest cache level
        they fit whose ceiling was measured, else DRAM's. A nearer level is never slower than
        one further out: a measurement below an outer level's (ORT's per-call cost on a small
        Add, a VM's slice of a shared cache) gives way to the outer one."""
        for level in self.levels:  # nearest first
            if 0 < call_bytes <= self.capacity(level) and self.level_bandwidth(level.name) > 0:
                return BytesCeiling(
                    level.name, self.level_ceiling(level.name), self.capacity(level)
                )
        return BytesCeiling("DRAM", self.bandwidth, 0)

    def level_ceiling(self, name: str) -> float:
        """The bytes/s ceiling of a call held in level ``name`` ('DRAM' for none): the best
        measured there or in any level further out (DRAM's included)."""
        names = [v.name for v in self.levels]
        outer = names[names.index(name) :] if name in names else []
        rates = [self.bandwidth, *(self.level_bandwidth(n) for n in outer)]
        return max((r for r in rates if not math.isnan(r)), default=math.nan)

    def rebound(self, rows: list[RoofRow]) -> list[RoofRow]:
        """``rows`` set against this result's ceilings again (after a ceiling was raised)."""
        return [
            dataclasses.replace(
                r, peak_flops=self.peak_flops(r.dtype), bandwidth=self.level_ceiling(r.level)
            )
            for r in rows
        ]

    def peak_bytes(self, call_bytes: float) -> float:
        """The bytes/s of :meth:`ceiling_for`."""
        return self.ceiling_for(call_bytes).bandwidth

    def ceiling_of(self, row: RoofRow) -> BytesCeiling:
        """The bytes/s ceiling ``row`` was set against (its level's capacity looked up)."""
        held = next((self.capacity(v) for v in self.levels if v.name == row.level), 0)
        return BytesCeiling(row.level, row.bandwidth, held)

    def peak_flops(self, dtype: str) -> float:
        """The FLOP/s ceiling for a precision (fp32's when that one was not measured)."""
        found = {
            p.dtype: p.best
            for p in self.peaks
            if not ceilings.is_bandwidth(p.dtype) and not p.error
        }
        return found.get(dtype, found.get("fp32", math.nan))

    def time_share(self, low: float, high: float = math.inf) -> float:
        """Share of node time in nodes whose achieved_fraction is in [low, high)."""
        return float(sum(r.share for r in self.rows if low <= r.achieved_fraction < high))

    @property
    def near_limits(self) -> bool:
        """Most node time (over 60 %) is in nodes at half their bound or more."""
        return self.time_share(NEAR) > 0.6

    def to_pandas(self) -> Table:
        """The per-node table (:attr:`nodes`): node, op_type, us, share, flops, bytes,
        intensity, achieved_flops, achieved_bytes, attainable, achieved_fraction, bound,
        bandwidth (the bytes/s ceiling used), level (where it comes from: L2, L3, DRAM), dtype,
        kind, provider; slowest first."""
        return self.nodes

    @table
    def nodes(self) -> Table:
        import pandas as pd

        cols = [
            "node",
            "op_type",
            "us",
            "share",
            "flops",
            "bytes",
            "intensity",
            "achieved_flops",
            "achieved_bytes",
            "attainable",
            "achieved_fraction",
            "bound",
            "bandwidth",
            "level",
            "dtype",
            "kind",
            "provider",
        ]
        frame = pd.DataFrame([[getattr(r, c) for c in cols] for r in self.rows], columns=cols)
        return frame.sort_values("us", ascending=False, kind="stable").reset_index(drop=True)

    def __repr__(self) -> str:
        return (
            f"<RooflineResult {self.model}: {self.time_share(NEAR):.0%} of node time at half "
            f"its bound or more, {self.time_share(0, FAR_UNDER):.0%} under a tenth; peak "
            f"{fmt_flops(self.peak_flops('fp32'), '/s')} fp32>"
        )


def _row(c: CostRow, us: float, share: float, peak: float, ceiling: BytesCeiling) -> RoofRow:
    return RoofRow(
        c.node,
        c.op_type,
        c.provider,
        us,
        share,
        c.flops,
        c.bytes,
        c.dtype,
        c.kind,
        peak,
        ceiling.bandwidth,
        ceiling.level,
    )


def roofline(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    runs: int = 20,
    warmup: int = 3,
    **reach: Unpack[Reach],
) -> RooflineResult:
    """Each node's measured time against the roofline of this machine under ``config``.

    One profiled session gives both the times (``runs`` runs after ``warmup``) and the shapes
    the work is computed from; the peak kernels (a 1024-square GEMM per precision, an Add
    streaming 192 MB, Adds inside each cache level), built with the same EP and thread settings
    (spinning off), run in the same worker just before the model's runs: in between them, the
    session's spinning thread pool would take the cores and halve the GEMM's FLOP/s.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    run = edge(model, config, feeds, runs=runs, warmup=warmup, **reach)
    return roofline_run(run)


def roofline_run(run: Run) -> RooflineResult:
    """:func:`roofline`'s body, for a :class:`Run` resolved already."""
    cfg, timeout = run.config, run.timeout
    reply = run_model_task(
        tasks_cost.shapes,
        run,
        runs=run.runs,
        warmup=run.warmup,
        peaks=() if ceilings.known(cfg) else ("fp32", "int8", "fp16"),
    )
    ceilings.record(cfg, reply.peaks)
    costs, notes = cost_rows(reply)
    prof = profile_result(run, reply.data, reply.report)
    result, rows = _against_ceilings(run, costs=costs, prof=prof)
    if any(r.achieved_fraction > ABOVE for r in rows):  # a busy moment, or a wrong count
        ceilings.measure(cfg, ("fp32", "int8", "fp16"), timeout=timeout)
        result, rows = _against_ceilings(run, costs=costs, prof=prof)
        notes.append(
            "Nodes ran above the ceilings first measured: the ceilings were measured "
            "again and the best of each kept (a busy moment slows a peak kernel)."
        )
    raised = raise_ceilings(cfg, result, rows)
    if raised:  # a roof is a roof: no node is left above it
        result, rows = _against_ceilings(run, costs=costs, prof=prof)
        notes.append(raised_note(raised))
    unknown = [r for r in rows if r.bound == "unknown"]
    if unknown:
        ops = ", ".join(sorted({r.op_type for r in unknown}))
        notes.append(
            f"{len(unknown)} node(s) ({sum(r.share for r in unknown):.0%} of node time: {ops}) "
            "have no cost formula in ortlab: bound 'unknown', left out of every verdict here "
            "(never counted as memory-bound)."
        )
    peaks = result.peaks
    for p in peaks:
        if p.error:
            notes.append(
                f"{p.what}: not measured ({p.error}); its nodes are set against the fp32 ceiling."
            )
    notes += [
        f"Times: {prof.conditions}.",
        f"Node times are measured (the median run's own time; {PROFILER_OVERHEAD}); FLOPs and "
        "bytes are "
        f"{COUNTED}; ceilings are measured with ORT on this EP and settings, before a model's "
        "runs, and each is the best measured in this Python session (" + _measured(peaks) + ").",
        *run.inputs.notes,
    ]
    return dataclasses.replace(result, rows=rows, notes=notes)


def raise_ceilings(cfg: SessionConfig, result: RooflineResult, rows: list[RoofRow]) -> list[str]:
    """Each ceiling a node ran above (after the re-measurement) raised to what the fastest such
    node reached (:func:`ceilings.raise_to`, so every view of these settings sees it); what was
    raised, in words."""
    flops_dtypes = _flops_dtypes(result)
    best: dict[str, tuple[float, RoofRow]] = {}
    for r in rows:
        if not r.achieved_fraction > 1.0:
            continue
        if r.bound == "compute":
            dtype = r.dtype if r.dtype in flops_dtypes else "fp32"
            rate = r.achieved_flops
        else:
            dtype = "memory" if r.level == "DRAM" else r.level
            rate = r.achieved_bytes
        if rate > best.get(dtype, (0.0, r))[0]:
            best[dtype] = (rate, r)
    out = []
    for dtype, (rate, r) in best.items():
        old = ceilings.raise_to(cfg, dtype, rate, r.node)
        if old is None:
            continue
        bytes_ = ceilings.is_bandwidth(dtype)
        was, now = (
            (fmt_bandwidth(old.best), fmt_bandwidth(rate))
            if bytes_
            else (fmt_flops(old.best, "/s"), fmt_flops(rate, "/s"))
        )
        out.append(f"{old.what} raised from {was} to {now}, what {r.node!r} ({r.op_type}) reached")
    return out


def raised_note(raised: list[str]) -> str:
    """What :func:`raise_ceilings` did, in a note."""
    return (
        "A ceiling is the most this machine was seen to do: "
        + "; ".join(raised)
        + ". ORT's kernels for them (NCHWc convolutions, fused softmax…) beat the plain "
        "1024-square GEMM and streaming Adds the ceilings are measured with."
    )


def _flops_dtypes(result: RooflineResult) -> set[str]:
    return {p.dtype for p in result.peaks if not ceilings.is_bandwidth(p.dtype) and not p.error}


def _measured(peaks: list[Peak]) -> str:
    """'the fp32 GEMM's best of 30 runs, measured twice' … in one phrase."""
    counts = sorted({p.measured for p in peaks})
    times = " or ".join("once" if n == 1 else f"{n} times" for n in counts)
    return f"measured {times} so far"


def _cpu_only(prof: ProfileResult) -> bool:
    report = prof.report
    return report is not None and list(report.active) == ["CPUExecutionProvider"]


def _against_ceilings(
    run: Run, *, costs: list[CostRow], prof: ProfileResult
) -> tuple[RooflineResult, list[RoofRow]]:
    """The result (its ceilings: this session's best for the run's settings) and its rows."""
    cfg, f = run.config, run.inputs
    used = {c.dtype for c in costs if c.kind == "compute"} | {"fp32", *ceilings.bandwidths()}
    peaks = [p for p in ceilings.known(cfg) or [] if p.dtype in used]
    times = prof.by_node().set_index("node")
    result = RooflineResult(
        model=run.model.name,
        config=cfg,
        peaks=peaks,
        rows=[],
        runs=run.runs,
        feeds=f.describe(),
        synthetic=f.synthetic,
        profile=prof,
        levels=cache_levels(),
        physical=physical_peaks() if _cpu_only(prof) else [],
    )
    rows = [  # the ceilings are the result's own: one lookup of a peak, the rows' and the table's
        _row(
            c,
            float(times.at[c.node, "us_per_run"]),
            float(times.at[c.node, "share"]),
            result.peak_flops(c.dtype),
            result.ceiling_for(c.bytes / max(c.calls, 1.0)),
        )
        for c in costs
        if c.node in times.index
    ]
    return result, rows


def profile_with_roofline(run: Run) -> tuple[ProfileResult, RooflineResult | None]:
    """A profile of ``run``'s runs and, where the EPs run ORT's own kernels, the roofline of
    the same runs (its profile is that profile); a plain profile where an EP compiles."""
    if compiling(run.config.providers, run.config.policy):  # its kernels' work is not counted
        return profile_run(run), None
    roof = roofline_run(run)
    assert roof.profile is not None  # roofline_run always keeps its profile
    return roof.profile, roof
