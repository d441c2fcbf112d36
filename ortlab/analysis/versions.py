"""One model under two onnxruntime versions, per node: ``version_diff`` and its result.

Each version runs in a worker of its own, whose interpreter is a virtual environment holding
that onnxruntime (built once from PyPI: :mod:`ortlab.engine.venvs`). The model is profiled in
the two workers in turns, A B B A A B …, each turn a fresh session and a few profiled runs, so
a drift of the machine (load, clock) hits both alike; each session's median run per node is
one sample, and the sessions of each version are fed to the same per-node comparison as
``ortlab.diff`` (distribution-free intervals, here over sessions: a fresh session's layout or a
burst of load moves a whole session, and runs of one session are not independent of that).
Beside the times: the kernel that computed each node in each version, how it was fused (its
status and the other original nodes sharing its kernel), and the kernels ORT inserted
(reorders, copies) that only one version ran.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ortlab.analysis.diff import DiffResult, diff
from ortlab.analysis.placement.measure import from_reply
from ortlab.analysis.placement.result import PlacementResult
from ortlab.core.config import SessionConfig
from ortlab.core.machine import load_sentence
from ortlab.core.model import ModelLike
from ortlab.core.result import Result, Table, table
from ortlab.core.runtime import PROFILER_OVERHEAD
from ortlab.engine import tasks, venvs
from ortlab.engine.calls import Reach, Via, check_report, edge, run
from ortlab.engine.worker import Worker

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["InsertedKernel", "NodeFusion", "VersionDiffResult", "version_diff"]

DEFAULT_VERSIONS = ("1.31.1", "1.32.0")


@dataclass(frozen=True)
class NodeFusion:
    """How one original node was computed in each version."""

    node: str
    a_status: str
    """kept / rewritten / fused / folded / eliminated (the placement join's status)."""
    b_status: str
    a_group: str
    """The other original nodes its kernel(s) computed too, '+'-joined ('' when alone)."""
    b_group: str
    fusion_changed: bool
    a_domain: str = ""
    """The domain(s) of its kernel(s), '+'-joined, '' for ONNX's own (``com.microsoft.nchwc``:
    the CPU EP's NCHWc layout)."""
    b_domain: str = ""


@dataclass(frozen=True)
class InsertedKernel:
    """Kernels of one op type ORT inserted with no original node (reorders, copies, casts)."""

    op_type: str
    a_count: int
    b_count: int
    a_us: float
    """Their time per run in A (median over rounds of the round's median run)."""
    b_us: float


@dataclass(frozen=True)
class VersionDiffResult(Result):
    """One model under two onnxruntime versions. ``to_pandas()``: one row per original node;
    ``as_diff()``: the per-node ``DiffResult`` (``ortlab.graph(model, diff=...)`` colours
    it); ``summary()``; ``plot()`` (the largest shifts with their intervals)."""

    model: str
    versions: list[str]
    """Asked for, A then B."""
    loaded: list[str]
    """``onnxruntime.__version__`` as each worker reported it."""
    diff: DiffResult
    fusion: list[NodeFusion]
    inserted: list[InsertedKernel]
    rounds: int
    """Sessions per version, profiled in turns A B B A …"""
    runs_per_round: int
    config: SessionConfig = field(default_factory=SessionConfig)
    feeds: str = ""
    synthetic: bool | None = None
    notes: list[str] = field(default_factory=list)

    def as_diff(self) -> DiffResult:
        """The per-node comparison (times, intervals, kernels) as an ``ortlab.diff`` result."""
        return self.diff

    @table
    def nodes(self) -> Table:
        import pandas as pd

        fusion = pd.DataFrame([f.__dict__ for f in self.fusion])
        base = self.diff.nodes.drop(columns=["a_provider", "b_provider", "moved"])
        if fusion.empty:
            return base
        t = base.merge(fusion, on="node", how="left")
        t["kernel_changed"] |= t["a_domain"].fillna("") != t["b_domain"].fillna("")
        return t

    def to_pandas(self) -> Table:
        """node, op_type, a_us, b_us (µs per run in each version), delta_us (B - A), low,
        high (its 95 % interval), verdict, a_kernel, b_kernel (the final graph's op types that
        computed it), kernel_changed (op type or domain), vs_run, a_status, b_status, a_group,
        b_group, fusion_changed, a_domain, b_domain; largest |delta| first."""
        t = self.nodes
        order = t["delta_us"].abs().sort_values(ascending=False, na_position="last").index
        return t.reindex(order).reset_index(drop=True)

    def summary(self) -> dict[str, object]:
        s = self.diff.summary()
        return {
            "versions": list(self.loaded),
            **{k: v for k, v in s.items() if k not in ("moved_ep",)},
            "kernel_changed": int(self.nodes["kernel_changed"].sum()) if self.fusion else 0,
            "fusion_changed": sum(f.fusion_changed for f in self.fusion),
            "inserted_changed": sum(k.a_count != k.b_count for k in self.inserted),
        }

    def __repr__(self) -> str:
        s = self.summary()
        a, b = self.loaded
        return (
            f"<VersionDiffResult {self.model!r} onnxruntime {a} -> {b}: whole run "
            f"x{s['run_ratio']}; {s['slower']} nodes slower, {s['faster']} faster of "
            f"{s['timed_in_both']} timed in both; {s['kernel_changed']} changed kernel, "
            f"{s['fusion_changed']} changed fusion>"
        )


def _fusion(a: PlacementResult, b: PlacementResult) -> list[NodeFusion]:
    def groups(pl: PlacementResult) -> dict[str, tuple[str, tuple[str, ...], str]]:
        members = {r.node: r.fused_from for r in pl.optimized_rows}
        domains = {r.node: r.domain for r in pl.optimized_rows}
        out = {}
        for r in pl.node_rows:
            others = {m for o in r.optimized for m in members.get(o, ())} - {r.node}
            dom = "+".join(dict.fromkeys(d for o in r.optimized if (d := domains.get(o, ""))))
            out[r.node] = (r.status, tuple(sorted(others)), dom)
        return out

    ga, gb = groups(a), groups(b)
    rows = []
    for node in [*ga, *(n for n in gb if n not in ga)]:
        sa, oa, da = ga.get(node, ("", (), ""))
        sb, ob, db = gb.get(node, ("", (), ""))
        rows.append(
            NodeFusion(node, sa, sb, "+".join(oa), "+".join(ob), (sa, oa) != (sb, ob), da, db)
        )
    return rows


def _inserted(side_a: list[PlacementResult], side_b: list[PlacementResult]) -> list[InsertedKernel]:
    def per_op(side: list[PlacementResult]) -> dict[str, tuple[int, float]]:
        counts: dict[str, int] = defaultdict(int)
        times: dict[str, list[float]] = defaultdict(list)
        for k, pl in enumerate(side):
            per_round: dict[str, float] = defaultdict(float)
            for r in pl.optimized_rows:
                if not r.fused_from:
                    per_round[r.op_type] += r.us_per_run
                    if k == 0:
                        counts[r.op_type] += 1
            for op, us in per_round.items():
                times[op].append(us)
        return {op: (counts[op], float(np.median(times[op]))) for op in counts}

    pa, pb = per_op(side_a), per_op(side_b)
    rows = []
    for op in sorted({*pa, *pb}):
        (na, ua), (nb, ub) = pa.get(op, (0, 0.0)), pb.get(op, (0, 0.0))
        rows.append(InsertedKernel(op, na, nb, ua, ub))
    return rows


def version_diff(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    versions: Sequence[str] = DEFAULT_VERSIONS,
    rounds: int = 6,
    runs: int = 5,
    warmup: int = 2,
    **reach: Unpack[Reach],
) -> VersionDiffResult:
    """``model`` under two onnxruntime versions (CPU wheels from PyPI, each installed once in
    a virtual environment of ortlab's cache), per node: the time in each with the shift's
    interval and verdict, the kernel and fusion in each. ``rounds`` sessions per version are
    profiled in turns (A B B A …), ``runs`` profiled runs each after ``warmup``; a node's
    time in a session is its median run, and the interval is over the sessions (at least 4
    a side), so a change from one session to the next (a fresh session's memory layout, a
    burst of load on the machine) is not taken for the version's. Raises
    :class:`VersionInstallError` when a version cannot be installed here.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """
    versions = list(versions)
    if len(versions) != 2:
        raise ValueError(
            f"version_diff compares two versions, e.g. ['1.31.1', '1.32.0']; got {versions!r}."
        )
    if rounds < 1 or runs < 1 or warmup < 0:
        raise ValueError(
            f"rounds and runs must be >= 1 and warmup >= 0 (got {rounds}, {runs}, {warmup})."
        )
    at = edge(model, config, feeds, runs=runs, warmup=warmup, **reach)
    progress, timeout = at.progress, at.timeout
    m, cfg, f = at.model, at.config, at.inputs
    workers: list[Worker] = []
    try:
        for v in versions:
            workers.append(venvs.start_worker(v, progress=progress is True))
        loaded = [run(tasks.ort_version, Via(worker=w)) for w in workers]
        sides: list[list[PlacementResult]] = [[], []]
        order = [k for r in range(rounds) for k in ((0, 1) if r % 2 == 0 else (1, 0))]
        bar = _bar(progress, len(order), f"version_diff {m.name}")
        for done, k in enumerate(order):
            out = run(
                tasks.placement,
                Via(
                    worker=workers[k],
                    context=f"of {m.name!r} with onnxruntime {versions[k]}",
                    timeout=timeout,
                ),
                job=at.job,
                runs=runs,
                warmup=warmup,
            )
            if not sides[k]:
                check_report(out.report, cfg, m)
            sides[k].append(from_reply(at, out))
            bar(done + 1, len(order))
    finally:
        for w in workers:
            w.stop()
    labels = (f"onnxruntime {loaded[0]}", f"onnxruntime {loaded[1]}")
    if labels[0] == labels[1]:
        labels = (labels[0] + " (A)", labels[1] + " (B)")
    d = diff(sides[0], sides[1], labels=labels, per_session=True)
    loads = [
        load
        for pl in (*sides[0], *sides[1])
        if pl.profile is not None and (load := pl.profile.data.other_cores) is not None
    ]
    said_load = load_sentence(max(loads) if loads else None) + (
        f" (the busiest of its {len(loads)} sessions; the least {min(loads):.2f})" if loads else ""
    )
    return VersionDiffResult(
        model=m.name,
        versions=versions,
        loaded=loaded,
        diff=d,
        fusion=_fusion(sides[0][0], sides[1][0]),
        inserted=_inserted(sides[0], sides[1]),
        rounds=rounds,
        runs_per_round=runs,
        config=cfg,
        feeds=f.describe(),
        synthetic=f.synthetic,
        notes=[
            f"{rounds} sessions per version, profiled in turns "
            f"({' '.join('AB'[k] for k in order[:8])}{' …' if len(order) > 8 else ''}), "
            f"{runs} profiled runs each after {warmup} warm-up runs; a node's time is the "
            f"median of its sessions' median runs, profiled ({PROFILER_OVERHEAD}).",
            said_load,
            *d.notes,
        ],
    )


def _bar(
    progress: bool | Callable[[int, int], None], total: int, desc: str
) -> Callable[[int, int], None]:
    if callable(progress):
        return progress
    if not progress:
        return lambda _d, _t: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, leave=False)

    def update(done: int, total: int) -> None:
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return update
