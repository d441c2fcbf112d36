"""Where every node runs: the join of original graph, final graph, EP and profiled time.

Three sources, which disagree on purpose (see ARCHITECTURE.md):
1. ORT's assignment API (``session.record_ep_graph_assignment_info``): the graph at
   partitioning time, per EP subgraph;
2. the profile: one event per *executed* node of the final graph, with its provider (a compiled
   EP subgraph is one opaque event);
3. the verbose "Node placements" log, where the first two are silent.

The final graph comes from the same session (an EPContext dump when a compiling EP such as
OpenVINO or TensorRT is involved, else ORT's optimized model), so profile event names match its
nodes exactly. :mod:`ortlab.analysis.graph.mapping` maps it back to the original nodes by tensor
names, which expands compiled subgraphs into their member nodes. The result's types live in
:mod:`ortlab.analysis.placement.result`.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Unpack

import numpy as np
from onnx import TensorProto

from ortlab.analysis.graph.mapping import NodeMapping, OpNode, UnionFind
from ortlab.analysis.graph.scopes import branch_names, map_scoped
from ortlab.analysis.placement.reasons import node_reason
from ortlab.analysis.placement.result import (
    BoundaryRow,
    NodeRow,
    OptimizedRow,
    PartitionRow,
    PlacementResult,
)
from ortlab.analysis.profiling import ProfileData, profile_result
from ortlab.core.config import SessionConfig
from ortlab.core.eps import MEMCPY_OPS, label, split_device
from ortlab.core.model import ModelLike
from ortlab.core.onnx_util import elem_bits
from ortlab.core.run import Run
from ortlab.core.runtime import PROFILER_OVERHEAD
from ortlab.engine import tasks
from ortlab.engine.calls import Reach, edge, run_model_task
from ortlab.engine.replies import PlacementReply
from ortlab.engine.session import SessionReport
from ortlab.engine.trace import TensorTypes, node_us_per_run
from ortlab.engine.verdicts import parse_ort_fallbacks, parse_qnn_log

if TYPE_CHECKING:
    from ortlab.core.config import ConfigLike
    from ortlab.core.inputs import FeedsLike

__all__ = ["PlacementResult", "from_reply", "join_placement", "placement"]


# ---------------------------------------------------------------------- the join


def _tensor_bytes(types: TensorTypes, index: int) -> int:
    if index >= len(types):
        return -1
    dtype, dims = types[index]
    try:
        bits = elem_bits(int(TensorProto.DataType.Value(dtype.upper())))
    except ValueError:
        return -1
    return (int(np.prod(dims)) * bits + 7) // 8 if bits else -1


def _renamed(data: ProfileData, final: Sequence[OpNode]) -> dict[str, str]:
    """Profiled nodes missing from the final graph, paired with final nodes that never ran,
    by op type in graph order. ORT numbers the nodes it makes (an fp16 Softmax on the CPU EP
    becomes ReduceMax_43, Sub_44…) per session build: the profiled session's numbers differ
    from those of the graph it saved, and their time would be credited to nothing."""
    import re

    names = {n.name for n in final}
    ran = set(data.node)

    def order(name: str) -> tuple[int, str]:
        m = re.search(r"(\d+)$", name)
        return (int(m.group(1)) if m else -1, name)

    lost: dict[str, list[str]] = defaultdict(list)
    for name, op in zip(data.node, data.op_type, strict=True):
        if name not in names:
            lost[op].append(name)
    idle: dict[str, list[str]] = defaultdict(list)
    for n in final:
        if n.name not in ran and n.op_type in lost:
            idle[n.op_type].append(n.name)
    out: dict[str, str] = {}
    for op, missing in lost.items():
        spare = idle.get(op, [])
        if len(spare) == len(missing):  # else ambiguous: leave them unmatched
            out.update(zip(sorted(missing, key=order), sorted(spare, key=order), strict=True))
    return out


def _node_time(data: ProfileData) -> tuple[dict[str, float], dict[str, str], int]:
    """Per final node, its time (:func:`node_us_per_run`: the median run's own time, an
    If/Loop/Scan without its body, whose nodes have rows of their own); nothing is counted
    twice, so their sum is the median run's node time (the denominator of every share)."""
    runs = max(len(data.run_us), 1)
    median = node_us_per_run(data)
    ran = np.bincount(np.asarray(data.ev_node, dtype=np.int64), minlength=len(data.node)) > 0
    time = {name: float(median[i]) for i, name in enumerate(data.node) if ran[i]}
    return time, dict(zip(data.node, data.provider, strict=True)), runs


def _partitions(
    final: list[OpNode], provider: dict[str, str], compiled: set[str]
) -> dict[str, int]:
    """Connected same-EP regions of the final graph; every compiled node is its own."""

    uf = UnionFind(n.name for n in final)
    producer = {t: n.name for n in final for t in n.outputs if t}
    for n in final:
        if n.name in compiled:
            continue
        for t in n.inputs:
            p = producer.get(t)
            if p and p not in compiled and provider.get(p) == provider.get(n.name):
                uf.union(p, n.name)
    ids: dict[str, int] = {}
    out = {}
    for n in final:
        root = uf.find(n.name)
        out[n.name] = ids.setdefault(root, len(ids))
    return out


def join_placement(
    *,
    model: str,
    config: SessionConfig,
    original: Sequence[OpNode],
    initializers: list[str],
    graph_inputs: list[str],
    graph_outputs: list[str],
    final: list[OpNode],
    data: ProfileData,
    assignment: list[tuple[str, tuple[str, ...]]],
    placements: Mapping[str, str],
    report: SessionReport,
    final_source: str,
    probes: Mapping[str, str] | None = None,
) -> PlacementResult:
    """Pure: build the per-node join from the three sources (tested with stored fixtures).
    ``probes``: node → 'taken' / 'refused', whether the wanted EP claims a one-node model of
    it (:mod:`ortlab.engine.probe`), for nodes it left without a logged reason."""
    mapping = map_scoped(original, final, initializers, graph_inputs)
    time, prof_provider, runs = _node_time(data)
    branches = branch_names(final, data.node)  # the If branch that ran takes its nodes' time
    renamed = {**_renamed(data, final), **branches.renamed}
    time = {renamed.get(k, k): v for k, v in time.items()}
    prof_provider = {renamed.get(k, k): v for k, v in prof_provider.items()}
    assigned = {name: ep for ep, names in assignment for name in names}
    default_ep = report.active[-1] if report.active else "CPUExecutionProvider"
    provider = {
        n.name: prof_provider.get(n.name)
        or placements.get(n.name)
        or assigned.get(n.name)
        or default_ep
        for n in final
    }
    compiled = {n.name for n in final if n.op_type == "EPContext" or "EP-subgraph" in n.op_type}
    j = _Join(
        final=final,
        provider=provider,
        part=_partitions(final, provider, compiled),
        compiled=compiled,
        mapping=mapping,
        time=time,
        sizes={renamed.get(k, k): v for k, v in _final_sizes(data).items()},
        total=sum(time.values()) or 1.0,  # self times: the run's node time, once
        graph_outputs=set(graph_outputs),
        graph_inputs=set(graph_inputs),
        idle=branches.idle,
    )
    opt_rows = [
        OptimizedRow(
            node=n.name,
            op_type=n.op_type,
            domain=n.domain,
            provider=provider[n.name],
            partition=j.part[n.name],
            fused_from=tuple(mapping.optimized_to_original.get(n.name, ())),
            us_per_run=time.get(n.name, 0.0),
            share=time.get(n.name, 0.0) / j.total,
            compiled=n.name in compiled,
            executed=n.name in time,
            reason=_copy_reason(n, final, provider, graph_inputs),
        )
        for n in final
    ]
    wanted = report.wanted
    node_rows = _node_rows(original, j)
    if wanted:
        why = _FallbackWhy(wanted, report, probes or {})
        node_rows = [dataclasses.replace(r, reason=why(r)) for r in node_rows]
        opt_rows = [
            dataclasses.replace(r, reason=r.reason or why.final(r.node, r.provider))
            for r in opt_rows
        ]
    return PlacementResult(
        model=model,
        config=config,
        report=report,
        runs=runs,
        node_rows=node_rows,
        optimized_rows=opt_rows,
        partition_rows=_partition_rows(j),
        boundary_rows=_boundaries(final, provider, data),
        assignment=assignment,
        final_source=final_source,
        notes=[
            "Per-node times are the profiled time of the final node a node became part of, "
            "split evenly across its original nodes; a compiled EP subgraph is timed as a "
            f"whole. {PROFILER_OVERHEAD}.",
            *(
                f"{idle.rpartition('/')[0]!r} ran its {ran.rpartition('/')[2]} in these runs: "
                f"the {idle.rpartition('/')[2]}'s nodes did not run (no time; 'not run' rows)"
                for idle, ran in branches.idle.items()
            ),
        ],
    )


CPU = "CPUExecutionProvider"


class _FallbackWhy:
    """Reason per node for not being on ``wanted``, from the session report."""

    def __init__(self, wanted: str, report: SessionReport, probes: Mapping[str, str]) -> None:
        self.wanted = wanted
        self.probes = probes
        missing = next((m for m in report.missing if split_device(m.provider)[0] == wanted), None)
        self.missing = f"{label(wanted)} did not load: {missing.reason}" if missing else ""
        self.verdicts = {**parse_qnn_log(report.why_log), **parse_ort_fallbacks(report.why_log)}
        self.logged = bool(report.why_log)

    def final(self, name: str, provider: str) -> str:
        if not provider or provider == self.wanted:
            return ""
        return self.missing or self.verdicts.get(name, "")

    def __call__(self, row: NodeRow) -> str:
        if row.partition < 0 or not row.provider or row.provider == self.wanted:
            return ""
        return self.missing or node_reason(
            row.node,
            row.op_type,
            row.optimized,
            self.verdicts,
            self.wanted,
            probe=self.probes.get(row.node, ""),
            logged=self.logged,
        )


def _copy_reason(
    n: OpNode, final: list[OpNode], provider: Mapping[str, str], graph_inputs: list[str]
) -> str:
    """For a Memcpy node ORT inserted: which tensor it moves, from which EP to which."""
    if n.op_type not in MEMCPY_OPS:
        return ""
    tensor = next((t for t in n.inputs if t), "")
    src = next((provider[m.name] for m in final if tensor in m.outputs), "")
    if not src:
        src = "graph input" if tensor in graph_inputs else "initializer"
    dst = sorted({provider[m.name] for m in final if set(m.inputs) & set(n.outputs)})
    short = [p.removesuffix("ExecutionProvider") for p in [src, *dst]]
    return (
        f"inserted by ORT: copies {tensor} from {short[0]} to {', '.join(short[1:]) or '?'}"
        " (the tensor crosses EPs)"
    )


@dataclass
class _Join:
    final: list[OpNode]
    provider: dict[str, str]
    part: dict[str, int]
    compiled: set[str]
    mapping: NodeMapping
    time: dict[str, float]
    sizes: dict[str, tuple[int, int]]
    """Final node -> (output bytes, parameter bytes) from the profile."""
    total: float
    graph_outputs: set[str]
    graph_inputs: set[str]
    idle: dict[str, str] = dataclasses.field(default_factory=dict)
    """Scope (an If's branch) that did not run -> the branch that ran instead."""


def _final_sizes(data: ProfileData) -> dict[str, tuple[int, int]]:
    outs, params = data.output_bytes, data.parameter_bytes
    if len(outs) != len(data.node) or len(params) != len(data.node):
        return {}
    return {name: (outs[k], params[k]) for k, name in enumerate(data.node)}


def _group_sizes(opt: list[str], sizes: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    known = [sizes[o] for o in opt if o in sizes and sizes[o][0] >= 0]
    if not known:
        return -1, -1
    return sum(k[0] for k in known), sum(max(k[1], 0) for k in known)


def _credits(original: Sequence[OpNode], j: _Join) -> tuple[dict[str, float], dict[str, str]]:
    """Each kernel's time credited exactly once, to the original nodes it computes: all of it
    to the one member whose op the kernel computes (a Conv in FusedConv), else split evenly
    among its members that compute (never to a constant folded into it or an eliminated
    Identity). Per original node: its time and how it was credited."""
    ops = {n.name: n.op_type for n in original}
    final_ops = {n.name: n.op_type for n in j.final}
    time: dict[str, float] = defaultdict(float)
    how: dict[str, list[str]] = defaultdict(list)
    for kernel, names in j.mapping.optimized_to_original.items():
        members = list(dict.fromkeys(names))
        # constants folded into the kernel and nodes eliminated compute nothing in it
        computing = [m for m in members if j.mapping.status.get(m) not in ("folded", "eliminated")]
        members = computing or members
        if not members:
            continue
        t = j.time.get(kernel, 0.0)
        primary = _primary(members, ops, [final_ops.get(kernel, "")])
        if primary is not None:
            time[primary] += t
            how[primary].append(
                "measured" if len(members) == 1 else f"measured (kernel of {len(members)})"
            )
            for m in members:
                if m != primary:
                    how[m].append(f"fused into {primary}")
            continue
        for m in members:
            time[m] += t / len(members)
            how[m].append(f"group of {len(members)} (even split)")
    source = {}
    for name, said in how.items():
        kinds = list(dict.fromkeys(said))
        credited = [k for k in kinds if not k.startswith("fused into")]
        source[name] = (
            credited[0] if len(credited) == 1 else "; ".join(credited) if credited else kinds[0]
        )
    return dict(time), source


def _node_rows(original: Sequence[OpNode], j: _Join) -> list[NodeRow]:
    credit, how = _credits(original, j)
    rows = []
    for n in original:
        opt = j.mapping.original_to_optimized.get(n.name, [])
        group_time = sum(j.time.get(o, 0.0) for o in opt)
        share_time = credit.get(n.name, 0.0)
        source = how.get(n.name, "measured")
        if n.parent in j.idle:  # kept, and not run: the other branch of its If ran
            source = f"not run: {j.idle[n.parent].rpartition('/')[2]} of its If ran"
        out_bytes, param_bytes = _group_sizes(opt, j.sizes)
        rows.append(
            NodeRow(
                node=n.name,
                op_type=n.op_type,
                optimized=tuple(opt),
                status="compiled"
                if any(o in j.compiled for o in opt)
                else j.mapping.status[n.name],
                provider=j.provider[opt[0]] if opt else "",
                partition=j.part[opt[0]] if opt else -1,
                us_per_run=share_time,
                group_us_per_run=group_time,
                share=share_time / j.total,
                time_source=source if opt else "none (folded or eliminated)",
                output_bytes=out_bytes,
                parameter_bytes=param_bytes,
            )
        )
    return rows


def _primary(members: list[str], ops: Mapping[str, str], kernels: list[str]) -> str | None:
    """The one original node whose op the kernel computes (a Conv in FusedConv, an If kept as
    If while the Identity nodes after it were eliminated): it takes the group's time, the rest
    were folded into it. None when no single member matches (then the time is split evenly)."""
    if len(members) == 1:
        return members[0]
    for kernel in dict.fromkeys(kernels):
        hits = [m for m in members if ops.get(m) and ops[m] in kernel]
        if len(hits) == 1:
            return hits[0]
    return None


def _partition_rows(j: _Join) -> list[PartitionRow]:
    members: dict[int, list[OpNode]] = defaultdict(list)
    for n in j.final:
        members[j.part[n.name]].append(n)
    rows = []
    for pid, nodes in sorted(members.items()):
        produced = {t for n in nodes for t in n.outputs}
        consumed = {t for n in nodes for t in n.inputs}
        outside = {t for n in j.final if j.part[n.name] != pid for t in n.inputs}
        outside |= j.graph_outputs
        produced_elsewhere = {t for n in j.final if j.part[n.name] != pid for t in n.outputs}
        feeds = produced_elsewhere | j.graph_inputs  # not initializers: they are not data flow
        rows.append(
            PartitionRow(
                partition=pid,
                provider=j.provider[nodes[0].name],
                compiled=any(n.name in j.compiled for n in nodes),
                optimized_nodes=[n.name for n in nodes],
                original_nodes=list(
                    dict.fromkeys(
                        o for n in nodes for o in j.mapping.optimized_to_original.get(n.name, [])
                    )
                ),
                inputs=sorted(t for t in consumed - produced if t and t in feeds),
                outputs=sorted(t for t in produced & outside if t),
                us_per_run=sum(j.time.get(n.name, 0.0) for n in nodes),
            )
        )
    return rows


def _boundaries(
    final: list[OpNode], provider: dict[str, str], data: ProfileData
) -> list[BoundaryRow]:
    producer = {t: (n, i) for n in final for i, t in enumerate(n.outputs) if t}
    index = {name: k for k, name in enumerate(data.node)}
    rows = []
    for n in final:
        for t in n.inputs:
            if t not in producer:
                continue
            src, out_index = producer[t]
            if provider[src.name] == provider[n.name]:
                continue
            k = index.get(src.name)
            size = _tensor_bytes(data.output_types[k], out_index) if k is not None else -1
            rows.append(
                BoundaryRow(t, src.name, provider[src.name], n.name, provider[n.name], size)
            )
    return rows


def placement(
    model: ModelLike,
    config: ConfigLike | None = None,
    feeds: FeedsLike | None = None,
    *,
    runs: int = 5,
    warmup: int = 2,
    **reach: Unpack[Reach],
) -> PlacementResult:
    """Where each node of ``model`` runs under ``config``, with measured time per node.

    ``dims``, ``progress`` and ``timeout`` as every verb takes them (:class:`Reach`).
    """

    run = edge(model, config, feeds, runs=runs, warmup=warmup, **reach)
    return placement_run(run)


def placement_run(run: Run) -> PlacementResult:
    """:func:`placement`'s body, for a :class:`Run` resolved already."""
    return from_reply(run, run_model_task(tasks.placement, run, runs=run.runs, warmup=run.warmup))


def from_reply(run: Run, out: PlacementReply) -> PlacementResult:
    """The placement of ``run``'s model from the worker's reply to ``tasks.placement`` (any
    worker's: ``version_diff`` asks workers running other onnxruntime versions)."""
    m, f = run.model, run.inputs
    graph = m.proto.graph
    joined = join_placement(
        model=m.name,
        config=run.config,
        original=m.nodes,
        initializers=[t.name for t in graph.initializer],
        graph_inputs=[i.name for i in graph.input],
        graph_outputs=[o.name for o in graph.output],
        final=[OpNode(a, b, c, tuple(d), tuple(e), f) for a, b, c, d, e, f in out.final],
        data=out.data,
        assignment=[(ep, tuple(n[0] for n in nodes)) for ep, nodes in out.assignment],
        placements=out.placements,
        report=out.report,
        final_source=out.final_source,
        probes=out.probes,
    )
    shapes, synthetic = f.describe(), f.synthetic
    prof = profile_result(run, out.data, out.report)
    ran = {k: list(v) for k, v in f.shapes().items()}
    return dataclasses.replace(
        joined, profile=prof, feeds=shapes, synthetic=synthetic, ort_ms=out.ort_ms, input_shapes=ran
    )
